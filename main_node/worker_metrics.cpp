#include "main_node/worker_metrics.h"

#include <iterator>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cluster/node_probe.h"
#include "main_node/main_metrics.h"
#include "util/logging.h"

namespace odmoe {
namespace {

// Per-worker series from each worker's typed stats (v1::WorkerStats): a
// counter is a field, so a series can not silently read 0 after a rename.
using W = v1::WorkerStats;
struct WorkerSeries {
  const char* name;
  const char* type;
  const char* help;
  uint64_t (*count)(const W&);  // integer series, or
  double (*seconds)(const W&);  // a time
};
const WorkerSeries kSeries[] = {
    {"odmoe_worker_bytes_loaded_total", "counter",
     "Bytes of expert weights the worker loaded into its device memory.",
     [](const W& w) { return w.bytes_loaded(); }, nullptr},
    {"odmoe_worker_loads_total", "counter", "Expert loads by the worker.",
     [](const W& w) { return w.loads(); }, nullptr},
    {"odmoe_worker_experts_held", "gauge", "Experts the worker holds in device memory now.",
     [](const W& w) { return static_cast<uint64_t>(w.experts_held()); }, nullptr},
    {"odmoe_worker_memory_peak_bytes", "gauge", "Peak device memory used by the worker's experts.",
     [](const W& w) { return w.memory_peak_bytes(); }, nullptr},
    {"odmoe_worker_memory_budget_bytes", "gauge", "The worker's device-memory budget for experts.",
     [](const W& w) { return w.memory_budget_bytes(); }, nullptr},
    {"odmoe_worker_hits_total", "counter",
     "Expert tasks whose expert the worker had already loaded (prefetched).",
     [](const W& w) { return w.hits(); }, nullptr},
    {"odmoe_worker_misses_total", "counter",
     "Expert tasks for which the worker had to load the expert first.",
     [](const W& w) { return w.misses(); }, nullptr},
    {"odmoe_worker_host_computes_total", "counter",
     "Expert tasks the worker computed on its host instead of loading the expert "
     "(workers.host_compute).",
     [](const W& w) { return w.host_computes(); }, nullptr},
    {"odmoe_worker_substitutions_total", "counter",
     "Decode tasks a worker computed with a substitute expert (workers.degrade, lossy).",
     [](const W& w) { return w.substitutions(); }, nullptr},
    {"odmoe_worker_admissions_total", "counter",
     "Hot experts a utility-cache worker loaded while idle (workers.mode utility_cache).",
     [](const W& w) { return w.admissions(); }, nullptr},
    {"odmoe_worker_reloads_total", "counter",
     "Prefetched experts the worker replaced after the gate disagreed.",
     [](const W& w) { return w.reloads(); }, nullptr},
    {"odmoe_worker_load_stall_seconds_total", "counter",
     "Time the worker's expert tasks waited for their expert to load.", nullptr,
     [](const W& w) { return w.stall_seconds(); }}};

// The families from each worker's answer (nullptr: it did not answer) and
// its last stats (nullptr: never seen).
std::string RenderFamilies(const std::vector<WorkerSpec>& workers, const std::vector<bool>& up,
                           const std::map<std::string, W>& last) {
  std::string up_samples, in_use;
  std::vector<std::string> samples(std::size(kSeries));
  for (size_t k = 0; k < workers.size(); ++k) {
    const std::string& id = workers[k].id;
    absl::StrAppendFormat(&up_samples, "odmoe_worker_up{worker=\"%s\"} %d\n", id, up[k] ? 1 : 0);
    auto it = last.find(id);
    if (it == last.end()) continue;  // never seen
    const W& stats = it->second;
    absl::StrAppendFormat(&in_use, "odmoe_worker_memory_in_use_bytes{worker=\"%s\"} %d\n", id,
                          stats.expert_bytes() * static_cast<uint64_t>(stats.experts_held()));
    for (size_t i = 0; i < std::size(kSeries); ++i) {
      if (kSeries[i].count != nullptr) {
        absl::StrAppendFormat(&samples[i], "%s{worker=\"%s\"} %d\n", kSeries[i].name, id,
                              kSeries[i].count(stats));
      } else {
        absl::StrAppendFormat(&samples[i], "%s{worker=\"%s\"} %.9g\n", kSeries[i].name, id,
                              kSeries[i].seconds(stats));
      }
    }
  }
  std::string out;
  AppendMetricFamily(&out, "odmoe_worker_up", "gauge",
                     "Whether the worker answers its status call (1) or not (0).", up_samples);
  AppendMetricFamily(&out, "odmoe_worker_memory_in_use_bytes", "gauge",
                     "Device memory the worker's loaded experts take now.", in_use);
  for (size_t i = 0; i < std::size(kSeries); ++i) {
    AppendMetricFamily(&out, kSeries[i].name, kSeries[i].type, kSeries[i].help, samples[i]);
  }
  return out;
}

}  // namespace

WorkerMetricsPoller::WorkerMetricsPoller(std::vector<WorkerSpec> workers, absl::Duration period,
                                         absl::Duration probe_timeout)
    : workers_(std::move(workers)),
      period_(period),
      probe_timeout_(probe_timeout),
      refreshed_at_(absl::InfinitePast()) {
  // Before the first refresh: every family described, no worker sampled
  // but as down.
  text_ = RenderFamilies(workers_, std::vector<bool>(workers_.size(), false), {});
}

WorkerMetricsPoller::~WorkerMetricsPoller() { Stop(); }

void WorkerMetricsPoller::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      refresh_requested_ = false;
      lock.unlock();
      Refresh();
      lock.lock();
      wake_.wait_for(lock, absl::ToChronoMilliseconds(period_),
                     [this] { return stop_ || refresh_requested_; });
    }
  });
}

void WorkerMetricsPoller::RefreshNow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    refresh_requested_ = true;
  }
  wake_.notify_all();
}

void WorkerMetricsPoller::Refresh() {
  std::lock_guard<std::mutex> one_at_a_time(refresh_mu_);
  std::vector<bool> up(workers_.size(), false);
  std::map<std::string, W> answered;
  for (size_t k = 0; k < workers_.size(); ++k) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    absl::StatusOr<NodeProbe> p = ProbeNode(workers_[k].address, probe_timeout_);
    if (!p.ok() && p.status().code() != absl::StatusCode::kUnavailable) {
      ODMOE_LOG_WARN("metrics: worker {}: {}", workers_[k].id, p.status().message());
    }
    up[k] = p.ok() && p->worker.has_value();
    if (up[k]) answered[workers_[k].id] = *p->worker;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, stats] : answered) last_stats_[id] = std::move(stats);
  text_ = RenderFamilies(workers_, up, last_stats_);
  refreshed_at_ = absl::Now();
}

void WorkerMetricsPoller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string WorkerMetricsPoller::Text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = text_;
  const double age = refreshed_at_ == absl::InfinitePast()
                         ? -1
                         : absl::ToDoubleSeconds(absl::Now() - refreshed_at_);
  AppendMetricFamily(&out, "odmoe_worker_metrics_age_seconds", "gauge",
                     "Seconds since the per-worker series were probed (-1: not yet).",
                     absl::StrFormat("odmoe_worker_metrics_age_seconds %.3f\n", age));
  return out;
}

}  // namespace odmoe
