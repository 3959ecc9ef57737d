#include "cluster/trace_client.h"

#include <limits>

#include "cluster/grpc_util.h"
#include "cluster/trace.h"

namespace odmoe {

absl::StatusOr<v1::TraceReply> TraceNode(const std::string& address,
                                         v1::TraceRequest::Action action, const PeerAuth* auth,
                                         absl::Duration timeout) {
  auto stub = v1::Node::NewStub(MakeChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  AttachCredential(ctx, auth);
  v1::TraceRequest request;
  request.set_action(action);
  v1::TraceReply reply;
  grpc::Status s = stub->Trace(&ctx, request, &reply);
  if (!s.ok()) return FromGrpcStatus(s, address + " (trace)");
  return reply;
}

absl::StatusOr<NodeTrace> CollectTrace(const std::string& address, const PeerAuth* auth) {
  NodeTrace out;
  out.rtt_us = std::numeric_limits<int64_t>::max();
  auto stub = v1::Node::NewStub(MakeChannel(address));
  for (int i = 0; i < 8; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(5)));
    AttachCredential(ctx, auth);
    v1::TraceRequest request;
    request.set_action(v1::TraceRequest::QUERY);
    v1::TraceReply reply;
    const int64_t t0 = TraceRecorder::NowUs();
    grpc::Status s = stub->Trace(&ctx, request, &reply);
    const int64_t t1 = TraceRecorder::NowUs();
    if (!s.ok()) return FromGrpcStatus(s, address + " (trace)");
    if (t1 - t0 < out.rtt_us) {
      out.rtt_us = t1 - t0;
      out.offset_us = reply.clock_us() - (t0 + t1) / 2;
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(30)));
  AttachCredential(ctx, auth);
  v1::TraceRequest request;
  request.set_action(v1::TraceRequest::STOP);
  grpc::Status s = stub->Trace(&ctx, request, &out.reply);
  if (!s.ok()) return FromGrpcStatus(s, address + " (trace)");
  return out;
}

}  // namespace odmoe
