#include "main_node/main_service.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "cluster/request_proto.h"
#include "main_node/main_call_limits.h"
#include "main_node/main_node.h"
#include "util/clip_for_message.h"
#include "util/logging.h"

namespace odmoe {
namespace {

absl::StatusOr<Experiment> ExperimentFromProto(const v1::Experiment& in) {
  Experiment e;
  const std::string& p = in.prediction();
  if (p == "shadow") {
    e.prediction = PredictionMode::kShadow;
  } else if (p == "random") {
    e.prediction = PredictionMode::kRandom;
  } else if (p == "none") {
    e.prediction = PredictionMode::kNone;
  } else if (p == "lookahead") {
    e.prediction = PredictionMode::kLookahead;
  } else if (!p.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("experiment.prediction '", ClipForMessage(p),
                                                   "' is not valid (expected shadow | random | "
                                                   "none | lookahead)"));
  }
  // Only mapped here: the bounds are MainEngine::Generate's (one check for
  // every caller). A value past int's range reads as the largest int, which
  // those bounds refuse.
  auto to_int = [](uint32_t v) {
    return static_cast<int>(std::min<uint32_t>(v, std::numeric_limits<int>::max()));
  };
  if (in.set_alignment()) {
    e.token_period = to_int(in.token_period());
    e.kv_period = to_int(in.kv_period());
  }
  if (in.set_draft_tokens()) {
    e.draft_tokens = to_int(in.draft_tokens());
    e.draft_wait_us = static_cast<int64_t>(in.draft_wait_us());
  }
  if (in.set_lookahead()) {
    e.lookahead = LookaheadSpec{to_int(in.lookahead_layers()), to_int(in.lookahead_candidates()),
                                to_int(in.lookahead_from_layer())};
  }
  return e;
}

void FillStats(const ClusterGenerateResult& r, v1::GenerateStats* s) {
  const GenerateStats& g = r.result.stats;
  s->set_request_id(r.request_id);
  s->set_prompt_tokens(static_cast<uint32_t>(g.prompt_tokens));
  s->set_generated_tokens(static_cast<uint32_t>(g.generated_tokens));
  s->set_ttft_seconds(g.ttft_seconds);
  s->set_prefill_seconds(g.prefill_seconds);
  s->set_decode_seconds(g.decode_seconds);
  s->set_decode_tokens_per_second(g.decode_tokens_per_second());
  s->set_stop_reason(StopReasonName(r.result.stop_reason));
  s->set_prediction(std::string(PredictionModeName(r.prediction)));
  s->set_recall(r.recall.overall);
  for (double x : r.recall.per_token) s->add_recall_per_token(x);
  s->set_predictions_missing(r.recall.predictions_missing);
  for (uint64_t x : r.recall.layer_correct) s->add_recall_layer_correct(x);
  for (uint64_t x : r.recall.layer_slots) s->add_recall_layer_slots(x);
  s->set_expert_hits(r.experts.hits);
  s->set_expert_misses(r.experts.misses);
  s->set_expert_host_computes(r.experts.host_computes);
  s->set_expert_substitutions(r.experts.substitutions);
  s->set_expert_low_precision(r.experts.low_precision);
  s->set_expert_reloads(r.experts.reloads);
  s->set_load_stall_seconds(r.experts.stall_seconds);
  s->set_alignment_seconds(r.alignment_seconds);
  for (int32_t id : r.result.prompt_ids) s->add_prompt_ids(id);
  for (int32_t id : r.result.output_ids) s->add_output_ids(id);
  s->set_bytes_to_workers(r.bytes.to_workers);
  s->set_bytes_from_workers(r.bytes.from_workers);
  s->set_bytes_to_shadow(r.bytes.to_shadow);
  s->set_bytes_from_shadow(r.bytes.from_shadow);
  s->set_token_period(static_cast<uint32_t>(r.token_period));
  s->set_kv_period(static_cast<uint32_t>(r.kv_period));
  const SpeculationStats& spec = r.speculation;
  s->set_draft_tokens(static_cast<uint32_t>(spec.draft_tokens));
  s->set_drafted_tokens(spec.drafted);
  s->set_accepted_tokens(spec.accepted);
  s->set_decode_iterations(spec.iterations);
  s->set_decode_iteration_tokens(spec.tokens);
}

// Size checks of a Score request before anything is copied; the engine then
// checks ids against the vocabulary and the length against the context.
constexpr size_t kMaxScoreTextBytes = 1u << 20;

absl::Status CheckScoreRequest(const v1::ScoreRequest& in) {
  if (in.token_ids_size() > kMaxScoreTokens) {
    return absl::InvalidArgumentError(absl::StrCat(in.token_ids_size(),
                                                   " tokens exceed the limit of ",
                                                   kMaxScoreTokens, " per Score request"));
  }
  if (in.text().size() > kMaxScoreTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the text of ", in.text().size(),
                                                   " bytes exceeds the limit of ",
                                                   kMaxScoreTextBytes, " per Score request"));
  }
  if (in.token_ids_size() > 0 && !in.text().empty()) {
    return absl::InvalidArgumentError("give token_ids or text, not both");
  }
  if (in.top_n() > static_cast<uint32_t>(kMaxScoreTopN)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_n must be in [0, ", kMaxScoreTopN, "], got ", in.top_n()));
  }
  if (in.first() > static_cast<uint32_t>(kMaxScoreTokens)) {
    return absl::InvalidArgumentError(absl::StrCat("first ", in.first(), " is out of range"));
  }
  return absl::OkStatus();
}

void FillScore(const ClusterScoreResult& r, const std::vector<int32_t>& tokens,
               v1::ScoreReply* out) {
  const ScoreResult& s = r.score;
  out->set_request_id(r.request_id);
  out->mutable_token_ids()->Add(tokens.begin(), tokens.end());
  out->set_first(static_cast<uint32_t>(s.first));
  out->mutable_next_logprobs()->Add(s.next_logprobs.begin(), s.next_logprobs.end());
  out->mutable_top1_ids()->Add(s.top1.begin(), s.top1.end());
  for (const std::vector<TokenLogprob>& row : s.top) {
    v1::TopLogprobs* t = out->add_top();
    for (const TokenLogprob& e : row) {
      v1::TokenLogprob* p = t->add_tokens();
      p->set_id(e.id);
      p->set_logprob(e.logprob);
    }
  }
  out->set_seconds(s.seconds);
}

}  // namespace

struct MainService::Impl final : public v1::Main::Service {
  explicit Impl(MainNode& n)
      : node(n), limits(n.topology().main.max_running, n.topology().main.max_queue) {}

  // The gRPC share of the request queue (main_call_limits.h), where HTTP
  // clients share the queue; nullopt (no share needed) without an HTTP API.
  absl::StatusOr<std::optional<Budget::Share>> AdmitQueued(std::string_view call,
                                                           const std::string& api) {
    if (node.http_port() == 0) return std::optional<Budget::Share>();
    absl::StatusOr<Budget::Share> share = limits.AdmitGrpcQueued(call);
    if (!share.ok()) {
      node.CountRejected(api, share.status());
      return share.status();
    }
    return std::optional<Budget::Share>(std::move(*share));
  }

  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* in,
                        grpc::ServerWriter<v1::GenerateReply>* writer) override {
    // Every check of the request, once, as the HTTP API makes them
    // (request_fields.h, MainNode::Validate); the prompt tokenized once.
    absl::StatusOr<GenerateRequest> req = GenerateRequestFromProto(*in);
    absl::StatusOr<std::vector<int32_t>> ids =
        req.ok() ? node.Validate(*req) : absl::StatusOr<std::vector<int32_t>>(req.status());
    if (!ids.ok()) {
      node.CountRejected("grpc", ids.status());
      return ToGrpcStatus(ids.status());
    }
    req->prompt_ids = std::move(*ids);
    absl::StatusOr<Experiment> experiment = ExperimentFromProto(in->experiment());
    if (!experiment.ok()) return ToGrpcStatus(experiment.status());
    absl::StatusOr<std::optional<Budget::Share>> place = AdmitQueued("Main.Generate", "grpc");
    if (!place.ok()) return ToGrpcStatus(place.status());
    v1::GenerateReply reply;
    auto on_token = [&](int32_t id, std::string_view text) {
      v1::GeneratedToken* t = reply.mutable_token();
      t->set_id(id);
      t->set_text(std::string(text));
      writer->Write(reply);
    };
    absl::StatusOr<ClusterGenerateResult> r =
        node.Generate(*req, on_token, [ctx] { return ctx->IsCancelled(); }, "grpc", *experiment);
    if (!r.ok()) {
      ODMOE_LOG_WARN("generate failed: {}", r.status().message());
      return ToGrpcStatus(r.status());
    }
    FillStats(*r, reply.mutable_stats());
    writer->Write(reply);
    return grpc::Status::OK;
  }

  grpc::Status Scale(grpc::ServerContext* ctx, const v1::ScaleRequest* in,
                     v1::ScaleReply* out) override {
    // An operator's call only (cluster/peer_auth.h); a refused one changes nothing.
    if (grpc::Status auth =
            AuthorizeCall(*ctx, node.peer_auth(), {PeerRole::kOperator}, "Main.Scale");
        !auth.ok()) {
      return auth;
    }
    absl::Status s = node.SetActiveWorkers(static_cast<int>(in->workers()));
    if (!s.ok()) return ToGrpcStatus(s);
    const Schedule schedule = node.engine().schedule();
    out->set_workers(in->workers());
    out->set_schedule_version(schedule.version);
    for (int g : schedule.groups) out->add_live_groups(g);
    return grpc::Status::OK;
  }

  grpc::Status Score(grpc::ServerContext* ctx, const v1::ScoreRequest* in,
                     v1::ScoreReply* out) override {
    if (absl::Status s = CheckScoreRequest(*in); !s.ok()) {
      node.CountRejected("score", s);
      return ToGrpcStatus(s);
    }
    absl::StatusOr<std::optional<Budget::Share>> place = AdmitQueued("Main.Score", "score");
    if (!place.ok()) return ToGrpcStatus(place.status());
    std::vector<int32_t> tokens(in->token_ids().begin(), in->token_ids().end());
    if (tokens.empty() && !in->text().empty()) {
      // Its tokenization counts against the same budget as Tokenize's.
      absl::StatusOr<MainCallLimits::TokenizeTurn> turn =
          limits.AdmitTokenize("Main.Score", in->text().size());
      if (!turn.ok()) {
        node.CountRejected("score", turn.status());
        return ToGrpcStatus(turn.status());
      }
      absl::StatusOr<std::vector<int32_t>> ids = node.tokenizer().Encode(in->text());
      if (!ids.ok()) {
        node.CountRejected("score", ids.status());
        return ToGrpcStatus(absl::InvalidArgumentError(ids.status().message()));
      }
      tokens = std::move(*ids);
    }
    ScoreOptions options;
    options.first = static_cast<int>(in->first());
    options.top_n = static_cast<int>(in->top_n());
    absl::StatusOr<ClusterScoreResult> r =
        node.Score(tokens, options, [ctx] { return ctx->IsCancelled(); });
    if (!r.ok()) {
      if (!absl::IsInvalidArgument(r.status())) {
        ODMOE_LOG_WARN("score failed: {}", r.status().message());
      }
      return ToGrpcStatus(r.status());
    }
    FillScore(*r, tokens, out);
    return grpc::Status::OK;
  }

  grpc::Status Tokenize(grpc::ServerContext*, const v1::TokenizeRequest* in,
                        v1::TokenizeReply* out) override {
    absl::StatusOr<MainCallLimits::TokenizeTurn> turn =
        limits.AdmitTokenize("Main.Tokenize", in->text().size());
    if (!turn.ok()) return ToGrpcStatus(turn.status());
    const Tokenizer& tok = node.tokenizer();
    absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(in->text());
    if (!ids.ok()) return ToGrpcStatus(absl::InvalidArgumentError(ids.status().message()));
    out->mutable_token_ids()->Add(ids->begin(), ids->end());
    out->set_bos_id(tok.bos_id());
    out->set_add_bos(tok.vocab().add_bos && tok.bos_id() >= 0);
    out->set_n_vocab(static_cast<uint32_t>(tok.n_vocab()));
    out->set_context(static_cast<uint32_t>(node.n_ctx()));
    return grpc::Status::OK;
  }

  MainNode& node;
  MainCallLimits limits;
};

MainService::MainService(MainNode& node) : impl_(std::make_unique<Impl>(node)) {}
MainService::~MainService() = default;
grpc::Service* MainService::grpc_service() { return impl_.get(); }

}  // namespace odmoe
