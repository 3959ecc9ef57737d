#include "cluster/main_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"

namespace odmoe {

absl::StatusOr<v1::GenerateStats> GenerateOnMain(
    const std::string& address, const v1::GenerateRequest& request,
    const std::function<void(int32_t id, std::string_view text)>& on_token,
    absl::Duration timeout) {
  auto channel = MakeChannel(address);
  auto stub = v1::Main::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  std::unique_ptr<grpc::ClientReader<v1::GenerateReply>> reader = stub->Generate(&ctx, request);
  v1::GenerateReply reply;
  v1::GenerateStats stats;
  bool have_stats = false;
  while (reader->Read(&reply)) {
    if (reply.has_token()) {
      if (on_token) on_token(reply.token().id(), reply.token().text());
    } else if (reply.has_stats()) {
      stats = reply.stats();
      have_stats = true;
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return FromGrpcStatus(s, "main node at " + address);
  if (!have_stats) {
    return absl::DataLossError("main node at " + address + " ended the stream without statistics");
  }
  return stats;
}

absl::StatusOr<v1::ScaleReply> ScaleOnMain(const std::string& address, int workers,
                                           const PeerAuth* auth, absl::Duration timeout) {
  auto stub = v1::Main::NewStub(MakeChannel(address, kSmallReplyBytes));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  AttachCredential(ctx, auth);
  v1::ScaleRequest req;
  req.set_workers(static_cast<uint32_t>(std::max(0, workers)));
  v1::ScaleReply reply;
  grpc::Status s = stub->Scale(&ctx, req, &reply);
  if (!s.ok()) return FromGrpcStatus(s, "main node at " + address);
  return reply;
}

}  // namespace odmoe
