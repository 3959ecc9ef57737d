// The paper's Fig. 2 from our own cluster: spans recorded by every node
// (main M_l, shadow S_l, each worker's expert load EL_l and compute EC_l),
// collected over Node.Trace with each node's clock offset, written as
// Chrome / Perfetto trace JSON (open in ui.perfetto.dev or chrome://tracing),
// and the timing model of Eq. 1 measured from them:
//   t^maxload = G t^M + (G - 1) t^W
// t^M: the main node's work per layer (M spans); t^W: one layer's expert
// round trip as the main node sees it (send, worker compute, results back:
// the "experts" spans); G: worker groups. A load longer than t^maxload
// cannot be hidden even with perfect prediction: the cluster is I/O-bound.
//
//   ODMOE_ASSIGN_OR_RETURN(auto op, cluster->OperatorAuth());   // Node.Trace is an operator's
//   ODMOE_RETURN_IF_ERROR(StartTracing(addresses, op.get()));
//   ... one request ...
//   ODMOE_ASSIGN_OR_RETURN(ClusterTrace t, CollectClusterTrace(addresses, op.get()));
//   nlohmann::json perfetto = ToPerfetto(t, /*first_token=*/2, /*last_token=*/4);
//   TimingModel m = MeasureTimingModel(t, groups);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/peer_auth.h"
#include "cluster/protocol.h"
#include "nlohmann/json.hpp"

namespace odmoe::bench {

struct NodeSpans {
  std::string node_id;
  std::string role;
  int64_t offset_us = 0;  // node clock - collector clock
  int64_t rtt_us = 0;
  std::vector<v1::TraceEvent> events;  // start_us already on the collector's clock
  uint64_t dropped = 0;
};

struct ClusterTrace {
  std::vector<NodeSpans> nodes;
};

/// `auth`: an operator's credentials (PeerAuth::ForOperator).
absl::Status StartTracing(const std::vector<std::string>& addresses, const PeerAuth* auth);
absl::StatusOr<ClusterTrace> CollectClusterTrace(const std::vector<std::string>& addresses,
                                                 const PeerAuth* auth);

/// Decode iterations [first_token, last_token] of the last traced request.
nlohmann::json ToPerfetto(const ClusterTrace& trace, uint32_t first_token, uint32_t last_token);

struct TimingModel {
  int groups = 0;
  int layers = 0;            // (token, layer) steps measured
  double t_main_us = 0;      // t^M: mean M span
  double t_worker_us = 0;    // t^W: mean expert round trip of a layer, less any load it waited for
  double t_load_us = 0;      // mean expert load (EL) on the workers
  double t_compute_us = 0;   // mean expert compute (EC)
  double t_head_us = 0;      // per token: final norm, LM head, sampling, alignment
  double t_maxload_us = 0;   // Eq. 1
  bool io_bound = false;     // t_load > t_maxload
  std::string verdict;       // one sentence
};

/// From the decode iterations of the last traced request (the first token
/// skipped: it carries the prefill's loads).
TimingModel MeasureTimingModel(const ClusterTrace& trace, int groups);

}  // namespace odmoe::bench
