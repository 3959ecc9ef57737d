#include "cluster/score_client.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "cluster/grpc_util.h"

namespace odmoe {

absl::StatusOr<RemoteTokens> TokenizeOnMain(const std::string& address, std::string_view text,
                                            absl::Duration timeout) {
  auto stub = v1::Main::NewStub(MakeChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  v1::TokenizeRequest req;
  req.set_text(std::string(text));
  v1::TokenizeReply reply;
  grpc::Status s = stub->Tokenize(&ctx, req, &reply);
  if (!s.ok()) return FromGrpcStatus(s, "main node at " + address);
  RemoteTokens out;
  out.ids.assign(reply.token_ids().begin(), reply.token_ids().end());
  out.bos_id = reply.bos_id();
  out.add_bos = reply.add_bos();
  out.n_vocab = static_cast<int>(reply.n_vocab());
  out.context = static_cast<int>(reply.context());
  if (out.n_vocab < 1 || out.context < 1 || out.bos_id >= out.n_vocab ||
      (out.add_bos && out.bos_id < 0)) {
    return absl::DataLossError("main node at " + address + " sent an inconsistent tokenization");
  }
  for (int32_t id : out.ids) {
    if (id < 0 || id >= out.n_vocab) {
      return absl::DataLossError(
          absl::StrFormat("main node at %s sent token id %d outside its vocabulary of %d", address,
                          id, out.n_vocab));
    }
  }
  return out;
}

absl::StatusOr<RemoteScore> ScoreOnMain(const std::string& address, std::span<const int32_t> tokens,
                                        const ScoreOptions& options, absl::Duration timeout) {
  auto stub = v1::Main::NewStub(MakeChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  v1::ScoreRequest req;
  req.mutable_token_ids()->Add(tokens.begin(), tokens.end());
  req.set_first(static_cast<uint32_t>(std::max(0, options.first)));
  req.set_top_n(static_cast<uint32_t>(std::max(0, options.top_n)));
  v1::ScoreReply reply;
  grpc::Status s = stub->Score(&ctx, req, &reply);
  if (!s.ok()) return FromGrpcStatus(s, "main node at " + address);
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t scored = n - options.first;
  const bool echo_ok = reply.token_ids_size() == n &&
                       std::equal(tokens.begin(), tokens.end(), reply.token_ids().begin());
  if (!echo_ok || reply.first() != static_cast<uint32_t>(options.first) ||
      reply.top1_ids_size() != scored || reply.next_logprobs_size() != scored - 1 ||
      reply.top_size() != (options.top_n > 0 ? scored : 0)) {
    return absl::DataLossError(absl::StrFormat(
        "main node at %s answered a Score request of %d tokens with a reply of another shape",
        address, n));
  }
  RemoteScore out;
  out.request_id = reply.request_id();
  ScoreResult& r = out.score;
  r.first = options.first;
  r.next_logprobs.assign(reply.next_logprobs().begin(), reply.next_logprobs().end());
  r.top1.assign(reply.top1_ids().begin(), reply.top1_ids().end());
  for (const v1::TopLogprobs& row : reply.top()) {
    std::vector<TokenLogprob>& dst = r.top.emplace_back();
    for (const v1::TokenLogprob& e : row.tokens()) dst.push_back({e.id(), e.logprob()});
  }
  r.seconds = reply.seconds();
  return out;
}

}  // namespace odmoe
