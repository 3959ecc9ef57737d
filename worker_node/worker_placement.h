// Where a worker sits in the cluster, and the experts it is normally asked
// for there.
//
//   WorkerPlacement p{.worker_index = 3, .n_workers = 8, .group_size = 4};
//   p.group();          // 0
//   p.positions(2);     // {} : worker 3 of a group of 4 computes none of a layer's 2
//   std::vector<std::pair<int, int>> set = UsualExperts(config, p);   // (layer, expert)
#pragma once

#include <utility>
#include <vector>

#include "cluster/assignment.h"
#include "model/model_config.h"

namespace odmoe {

/// Where a worker sits in the cluster.
struct WorkerPlacement {
  int worker_index = 0;  // position in the topology's worker list
  int n_workers = 1;
  int group_size = 1;  // G (the model's top-k by default)
  int group() const { return worker_index / group_size; }
  int index_in_group() const { return worker_index % group_size; }
  int n_groups() const { return n_workers / group_size; }
  /// The positions of a layer's k experts this worker computes.
  std::vector<int> positions(int k) const {
    return PositionsOfWorker(index_in_group(), group_size, k);
  }
};

/// The experts a worker at `p` is normally asked for, as (layer, expert):
/// every expert of its decode layers (none when it has no position of a
/// layer's k: G > k), and its prefill expert(s) of every layer (expert
/// e = worker index mod N_W). A resident worker holds them; on a device the
/// others keep them packed in pinned host memory.
inline std::vector<std::pair<int, int>> UsualExperts(const ModelConfig& c,
                                                     const WorkerPlacement& p) {
  std::vector<std::pair<int, int>> set;
  const bool decodes = !p.positions(c.n_expert_used).empty();
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    if (!c.has_experts(l)) continue;  // interleaved dense layers (Llama 4)
    const bool decode_layer = decodes && l % p.n_groups() == p.group();
    for (int e = 0; e < c.n_expert; ++e) {
      if (decode_layer || e % p.n_workers == p.worker_index) set.emplace_back(l, e);
    }
  }
  return set;
}

}  // namespace odmoe
