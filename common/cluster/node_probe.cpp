#include "cluster/node_probe.h"

#include "cluster/grpc_util.h"
#include "cluster/node_stats.h"

namespace odmoe {

absl::StatusOr<NodeProbe> ProbeNode(const std::string& address, absl::Duration timeout) {
  auto channel = MakeChannel(address);
  auto stub = v1::Node::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  v1::NodeStatus status;
  grpc::Status s = stub->Status(&ctx, v1::StatusRequest(), &status);
  if (!s.ok()) {
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::UnavailableError(address + ": no answer");
    }
    return FromGrpcStatus(s, address);
  }
  if (absl::Status valid = ValidateNodeStatus(status, address); !valid.ok()) return valid;
  NodeProbe p;
  p.node_id = status.node_id();
  p.role = RoleName(status.role());
  p.state = NodeStateName(status.state());
  p.pid = status.pid();
  p.uptime_seconds = status.uptime_seconds();
  p.detail = status.detail();
  for (const v1::StatusEntry& e : status.entries()) p.entries.emplace_back(e.key(), e.value());
  if (status.has_worker()) {
    p.worker = status.worker();
    for (auto& e : WorkerStatsEntries(*p.worker)) p.entries.push_back(std::move(e));
  }
  p.process = status.process();
  for (auto& e : ProcessStatsEntries(p.process)) p.entries.push_back(std::move(e));
  return p;
}

}  // namespace odmoe
