// The gate look-ahead's variants (topology `lookahead:`, LookaheadSpec):
// which layer is predicted while a layer's experts compute, which layers'
// MoE inputs vote for it, and how their candidate sets combine (FIRM-MoE's
// Meeting-of-Layers: the experts every voter names; DAOP: no prediction
// below a first layer).
//
//   LookaheadSpec spec{.layers = 3, .candidates = 4};
//   int target = LookaheadTarget(spec, /*layer=*/5, n_layer, has_experts);   // 6
//   std::vector<int> voters = VotingLayers(spec, 5, has_experts);            // {5, 4, 3}
//   // each voter's MoE input through layer 6's router: its 4 best experts
//   std::vector<int32_t> predicted = IntersectCandidates(sets);
//   // MainEngine hints at most k of them (a worker holds one per position).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "topology/topology.h"

namespace odmoe {

/// The layer predicted while `layer`'s experts compute: layer + 1, or -1 when
/// there is none to predict (past the last layer, a layer without experts,
/// or below spec.from_layer).
int LookaheadTarget(const LookaheadSpec& spec, int layer, int n_layer,
                    const std::function<bool(int)>& has_experts);

/// The layers whose MoE inputs vote for the prediction made at `layer`:
/// `layer` and the MoE layers before it, at most spec.layers in all, latest
/// first.
std::vector<int> VotingLayers(const LookaheadSpec& spec, int layer,
                              const std::function<bool(int)>& has_experts);

/// The experts each voter names: spec.candidates, or the model's top-k when
/// 0, at most n_expert.
int CandidatesPerVoter(const LookaheadSpec& spec, int n_expert_used, int n_expert);

/// The experts that every set names, in the first set's order (empty when
/// `sets` is empty or they share none).
std::vector<int32_t> IntersectCandidates(std::span<const std::vector<int32_t>> sets);

}  // namespace odmoe
