#include "bench/request_runner.h"

#include "cluster/main_client.h"

namespace odmoe::bench {
namespace {

double WorkerBytesLoaded(const std::vector<NodeCounters>& nodes) {
  double sum = 0;
  for (const NodeCounters& n : nodes) {
    if (n.worker) sum += static_cast<double>(n.worker->bytes_loaded());
  }
  return sum;
}

double CpuSeconds(const std::vector<NodeCounters>& nodes, const std::string& role) {
  double sum = 0;
  for (const NodeCounters& n : nodes) {
    if (n.role == role) sum += n.process.cpu_seconds();
  }
  return sum;
}

}  // namespace

absl::StatusOr<RequestMetrics> RunRequest(const ClusterProcess& cluster, const RequestSpec& spec) {
  absl::StatusOr<std::vector<NodeCounters>> before = cluster.Snapshot();
  if (!before.ok()) return before.status();
  v1::GenerateRequest req;
  for (int32_t id : spec.prompt_ids) req.add_prompt_ids(id);
  req.set_max_tokens(static_cast<uint32_t>(spec.max_tokens));
  req.set_temperature(0);
  req.set_ignore_eos(true);
  *req.mutable_experiment() = spec.experiment;
  absl::StatusOr<v1::GenerateStats> s = GenerateOnMain(cluster.main_address(), req, nullptr);
  if (!s.ok()) return s.status();
  absl::StatusOr<std::vector<NodeCounters>> after = cluster.Snapshot();
  if (!after.ok()) return after.status();

  RequestMetrics m;
  m.prompt_tokens = static_cast<int>(s->prompt_tokens());
  m.output_tokens = static_cast<int>(s->generated_tokens());
  const double n = std::max(1, m.output_tokens);
  m.ttft_s = s->ttft_seconds();
  m.decode_tps = s->decode_tokens_per_second();
  const double total = s->prefill_seconds() + s->decode_seconds();
  m.output_tps = total > 0 ? m.output_tokens / total : 0;
  m.recall = s->recall();
  m.recall_per_token.assign(s->recall_per_token().begin(), s->recall_per_token().end());
  m.recall_layer_correct.assign(s->recall_layer_correct().begin(),
                                s->recall_layer_correct().end());
  m.recall_layer_slots.assign(s->recall_layer_slots().begin(), s->recall_layer_slots().end());
  m.predictions_missing = s->predictions_missing();
  m.hits = s->expert_hits();
  m.misses = s->expert_misses();
  m.host_computes = s->expert_host_computes();
  m.substitutions = s->expert_substitutions();
  m.low_precision = s->expert_low_precision();
  m.reloads = s->expert_reloads();
  m.stall_per_token_s = s->load_stall_seconds() / n;
  m.bytes_loaded_per_token = (WorkerBytesLoaded(*after) - WorkerBytesLoaded(*before)) / n;
  m.network_bytes_per_token = static_cast<double>(s->bytes_to_workers() + s->bytes_from_workers() +
                                                  s->bytes_to_shadow() + s->bytes_from_shadow()) /
                              n;
  m.alignment_bytes_per_token = static_cast<double>(s->bytes_to_shadow()) / n;
  auto cpu_ms = [&](const std::string& role) {
    return (CpuSeconds(*after, role) - CpuSeconds(*before, role)) * 1e3 / n;
  };
  m.cpu_ms_per_token_main = cpu_ms("main");
  m.cpu_ms_per_token_shadow = cpu_ms("shadow");
  m.cpu_ms_per_token_workers = cpu_ms("worker");
  m.prediction = s->prediction();
  m.token_period = static_cast<int>(s->token_period());
  m.kv_period = static_cast<int>(s->kv_period());
  m.draft_tokens = static_cast<int>(s->draft_tokens());
  m.drafted = s->drafted_tokens();
  m.accepted = s->accepted_tokens();
  m.decode_iterations = s->decode_iterations();
  m.iteration_tokens = s->decode_iteration_tokens();
  m.output_ids.assign(s->output_ids().begin(), s->output_ids().end());
  return m;
}

}  // namespace odmoe::bench
