#include "main_node/main_service.h"

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "main_node/main_node.h"
#include "util/logging.h"

namespace odmoe {
namespace {

absl::StatusOr<GenerateRequest> FromProto(const v1::GenerateRequest& in) {
  GenerateRequest r;
  r.prompt = in.prompt();
  r.prompt_ids.assign(in.prompt_ids().begin(), in.prompt_ids().end());
  if (in.max_tokens() > static_cast<uint32_t>(1 << 30)) {
    return absl::InvalidArgumentError("max_tokens is absurdly large");
  }
  r.max_tokens = static_cast<int>(in.max_tokens());
  r.sampling.temperature = in.temperature();
  r.sampling.top_p = in.top_p() == 0.0f ? 1.0f : in.top_p();
  r.sampling.top_k = in.top_k();
  r.sampling.seed = in.seed();
  r.ignore_eos = in.ignore_eos();
  return r;
}

absl::StatusOr<Experiment> ExperimentFromProto(const v1::Experiment& in) {
  Experiment e;
  const std::string& p = in.prediction();
  if (p == "shadow") {
    e.prediction = PredictionMode::kShadow;
  } else if (p == "random") {
    e.prediction = PredictionMode::kRandom;
  } else if (p == "none") {
    e.prediction = PredictionMode::kNone;
  } else if (!p.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "experiment.prediction '", p, "' is not valid (expected shadow | random | none)"));
  }
  if (in.set_alignment()) {
    if (in.token_period() > (1u << 20) || in.kv_period() > (1u << 20)) {
      return absl::InvalidArgumentError("experiment alignment periods must be <= 1048576");
    }
    e.token_period = static_cast<int>(in.token_period());
    e.kv_period = static_cast<int>(in.kv_period());
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
  s->set_expert_hits(r.experts.hits);
  s->set_expert_misses(r.experts.misses);
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
}

}  // namespace

struct MainService::Impl final : public v1::Main::Service {
  explicit Impl(MainNode& n) : node(n) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* in,
                        grpc::ServerWriter<v1::GenerateReply>* writer) override {
    absl::StatusOr<GenerateRequest> req = FromProto(*in);
    if (!req.ok()) return ToGrpcStatus(req.status());
    absl::StatusOr<Experiment> experiment = ExperimentFromProto(in->experiment());
    if (!experiment.ok()) return ToGrpcStatus(experiment.status());
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

  grpc::Status Scale(grpc::ServerContext*, const v1::ScaleRequest* in,
                     v1::ScaleReply* out) override {
    absl::Status s = node.SetActiveWorkers(static_cast<int>(in->workers()));
    if (!s.ok()) return ToGrpcStatus(s);
    const Schedule schedule = node.engine().schedule();
    out->set_workers(in->workers());
    out->set_schedule_version(schedule.version);
    for (int g : schedule.groups) out->add_live_groups(g);
    return grpc::Status::OK;
  }

  MainNode& node;
};

MainService::MainService(MainNode& node) : impl_(std::make_unique<Impl>(node)) {}
MainService::~MainService() = default;
grpc::Service* MainService::grpc_service() { return impl_.get(); }

}  // namespace odmoe
