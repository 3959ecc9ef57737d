#include "main_node/main_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/string_view.h"

namespace odmoe {

void AppendMetricFamily(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help, std::string_view samples) {
  absl::StrAppend(out, "# HELP ", ToAbsl(name), " ", ToAbsl(help), "\n# TYPE ", ToAbsl(name), " ",
                  ToAbsl(type), "\n", ToAbsl(samples));
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    absl::StrAppendFormat(out, "%s_bucket{le=\"%g\"} %d\n", name, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  absl::StrAppendFormat(out, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %.9g\n%s_count %d\n", name,
                        cumulative, name, sum_, name, count_);
}

MainMetrics::MainMetrics(int n_layer)
    : stall_per_layer_(static_cast<size_t>(n_layer), 0.0),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      inter_token_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void MainMetrics::RequestDone(const std::string& api, const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{api, outcome}];
}

void MainMetrics::Generation(const ClusterGenerateResult& r) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(r.result.stats.prompt_tokens);
  generation_tokens_ += r.result.output_ids.size();
  hits_ += r.experts.hits;
  misses_ += r.experts.misses;
  reloads_ += r.experts.reloads;
  recall_correct_ += r.recall.correct;
  recall_slots_ += r.recall.slots;
  if (CountsForRecall(r)) last_recall_ = r.recall.overall;
  alignment_seconds_ += r.alignment_seconds;
  drafted_ += r.speculation.drafted;
  accepted_ += r.speculation.accepted;
  iterations_ += r.speculation.iterations;
  iteration_tokens_ += r.speculation.tokens;
  for (size_t l = 0; l < r.experts.stall_per_layer.size() && l < stall_per_layer_.size(); ++l) {
    stall_per_layer_[l] += r.experts.stall_per_layer[l];
  }
  ttft_.Observe(r.result.stats.ttft_seconds);
}

void MainMetrics::ObserveInterToken(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  inter_token_.Observe(seconds);
}

std::string MainMetrics::Render(int running, int waiting, const std::string& extra) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o;
  auto head = [&o](const char* name, const char* type, const char* help) {
    AppendMetricFamily(&o, name, type, help, "");
  };
  head("odmoe_requests_total", "counter", "Requests (completions, scores) by API and outcome.");
  for (const auto& [key, n] : requests_) {
    absl::StrAppendFormat(&o, "odmoe_requests_total{api=\"%s\",outcome=\"%s\"} %d\n", key.first,
                          key.second, n);
  }
  head("odmoe_request_failures_total", "counter", "Requests that did not complete.");
  uint64_t failures = 0;
  for (const auto& [key, n] : requests_) failures += key.second == "ok" ? 0 : n;
  absl::StrAppendFormat(&o, "odmoe_request_failures_total %d\n", failures);
  head("odmoe_prompt_tokens_total", "counter", "Prompt tokens processed.");
  absl::StrAppendFormat(&o, "odmoe_prompt_tokens_total %d\n", prompt_tokens_);
  head("odmoe_generation_tokens_total", "counter", "Tokens generated.");
  absl::StrAppendFormat(&o, "odmoe_generation_tokens_total %d\n", generation_tokens_);
  head("odmoe_time_to_first_token_seconds", "histogram", "Request start to first token.");
  ttft_.Render("odmoe_time_to_first_token_seconds", &o);
  head("odmoe_inter_token_latency_seconds", "histogram", "Time between streamed tokens.");
  inter_token_.Render("odmoe_inter_token_latency_seconds", &o);
  head("odmoe_requests_running", "gauge", "Requests generating now.");
  absl::StrAppendFormat(&o, "odmoe_requests_running %d\n", running);
  head("odmoe_requests_queued", "gauge", "Requests waiting for their turn.");
  absl::StrAppendFormat(&o, "odmoe_requests_queued %d\n", waiting);
  head("odmoe_prediction_recall", "gauge",
       "Expert-prediction recall (OD-MoE Eq. 3) over all requests so far.");
  absl::StrAppendFormat(&o, "odmoe_prediction_recall %.6f\n",
                        recall_slots_ ? static_cast<double>(recall_correct_) / recall_slots_ : 0.0);
  head("odmoe_prediction_recall_last", "gauge",
       "Recall of the last request run with a predictor (0 when it predicted nothing).");
  absl::StrAppendFormat(&o, "odmoe_prediction_recall_last %.6f\n", last_recall_);
  head("odmoe_expert_tasks_total", "counter",
       "Decode expert tasks by how the worker had the expert: hit (prefetched), miss.");
  absl::StrAppendFormat(&o, "odmoe_expert_tasks_total{result=\"hit\"} %d\n", hits_);
  absl::StrAppendFormat(&o, "odmoe_expert_tasks_total{result=\"miss\"} %d\n", misses_);
  head("odmoe_expert_reloads_total", "counter",
       "Prefetched experts replaced after the gate disagreed (fallback reloads).");
  absl::StrAppendFormat(&o, "odmoe_expert_reloads_total %d\n", reloads_);
  head("odmoe_load_stall_seconds_total", "counter",
       "Time expert tasks waited for their expert to load, per layer.");
  for (size_t l = 0; l < stall_per_layer_.size(); ++l) {
    absl::StrAppendFormat(&o, "odmoe_load_stall_seconds_total{layer=\"%d\"} %.9g\n", l,
                          stall_per_layer_[l]);
  }
  head("odmoe_alignment_seconds_total", "counter",
       "Main-node time spent reading and sending token / KV alignment to the shadow.");
  absl::StrAppendFormat(&o, "odmoe_alignment_seconds_total %.9g\n", alignment_seconds_);
  head("odmoe_draft_tokens_total", "counter",
       "Speculative decoding: tokens the shadow drafted that the main node verified, by "
       "outcome (accepted, rejected).");
  absl::StrAppendFormat(&o, "odmoe_draft_tokens_total{outcome=\"accepted\"} %d\n", accepted_);
  absl::StrAppendFormat(&o, "odmoe_draft_tokens_total{outcome=\"rejected\"} %d\n",
                        drafted_ - accepted_);
  head("odmoe_draft_acceptance", "gauge",
       "Speculative decoding: accepted / drafted tokens over all requests so far.");
  absl::StrAppendFormat(&o, "odmoe_draft_acceptance %.6f\n",
                        drafted_ ? static_cast<double>(accepted_) / drafted_ : 0.0);
  head("odmoe_decode_iterations_total", "counter",
       "Decode iterations of each request, alone or shared (with or without drafts).");
  absl::StrAppendFormat(&o, "odmoe_decode_iterations_total %d\n", iterations_);
  head("odmoe_decode_iteration_tokens_total", "counter",
       "Tokens those iterations produced (over odmoe_decode_iterations_total: tokens per "
       "iteration).");
  absl::StrAppendFormat(&o, "odmoe_decode_iteration_tokens_total %d\n", iteration_tokens_);
  o += extra;
  return o;
}

}  // namespace odmoe
