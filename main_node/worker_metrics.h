// The per-worker part of the main node's /metrics (odmoe_worker_up and each
// worker's counters), probed on a thread of its own and served from the last
// snapshot. A scrape never asks a worker anything: probing every worker per
// scrape took a handler thread for up to 0.5 s per stopped worker, and 40
// scrape loops then starved completions (issue 32, finding 6). The main
// node's own counters are rendered live at each scrape (MainMetrics); only
// these series are as old as the last refresh, which
// odmoe_worker_metrics_age_seconds says.
//
// A worker that does not answer keeps its series at their last values (with
// odmoe_worker_up 0), so its counters do not vanish; a worker never seen has
// no series yet.
//
//   WorkerMetricsPoller poller(topology.workers, absl::Seconds(1));
//   poller.Start();                  // refreshes now, then every second
//   std::string text = poller.Text();  // whole families (AppendMetricFamily)
//   poller.RefreshNow();             // wakes the thread (e.g. once the cluster is ready)
//   poller.Stop();
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "odmoe.pb.h"
#include "topology/topology.h"

namespace odmoe {

class WorkerMetricsPoller {
 public:
  /// `period`: between refreshes; `probe_timeout`: per worker.
  WorkerMetricsPoller(std::vector<WorkerSpec> workers, absl::Duration period,
                      absl::Duration probe_timeout = absl::Milliseconds(500));
  ~WorkerMetricsPoller();
  WorkerMetricsPoller(const WorkerMetricsPoller&) = delete;
  WorkerMetricsPoller& operator=(const WorkerMetricsPoller&) = delete;

  /// Starts the thread: a refresh at once, then one every period.
  void Start();
  /// Wakes the thread for a refresh now (returns at once).
  void RefreshNow();
  /// Probes every worker on the caller's thread and replaces the snapshot
  /// (the thread calls it; so can a test that needs the workers' counters as
  /// they are now).
  void Refresh();
  /// Stops and joins the thread (idempotent).
  void Stop();

  /// The snapshot's families: every family described (HELP, TYPE) even
  /// before the first refresh, then odmoe_worker_metrics_age_seconds.
  std::string Text() const;

 private:
  const std::vector<WorkerSpec> workers_;
  const absl::Duration period_;
  const absl::Duration probe_timeout_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool refresh_requested_ = false;
  std::string text_;                                   // the families, from the last refresh
  absl::Time refreshed_at_;                            // absl::InfinitePast() before the first
  std::map<std::string, v1::WorkerStats> last_stats_;  // by worker id
  std::mutex refresh_mu_;                              // one Refresh at a time
  std::thread thread_;
};

}  // namespace odmoe
