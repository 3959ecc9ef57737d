#include "main_node/lookahead_vote.h"

#include <algorithm>

namespace odmoe {

int LookaheadTarget(const LookaheadSpec& spec, int layer, int n_layer,
                    const std::function<bool(int)>& has_experts) {
  const int target = layer + 1;
  if (target >= n_layer || target < spec.from_layer || !has_experts(target)) return -1;
  return target;
}

std::vector<int> VotingLayers(const LookaheadSpec& spec, int layer,
                              const std::function<bool(int)>& has_experts) {
  std::vector<int> voters;
  for (int m = layer; m >= 0 && static_cast<int>(voters.size()) < spec.layers; --m) {
    if (has_experts(m)) voters.push_back(m);
  }
  return voters;
}

int CandidatesPerVoter(const LookaheadSpec& spec, int n_expert_used, int n_expert) {
  return std::min(spec.candidates > 0 ? spec.candidates : n_expert_used, n_expert);
}

std::vector<int32_t> IntersectCandidates(std::span<const std::vector<int32_t>> sets) {
  if (sets.empty()) return {};
  std::vector<int32_t> out;
  for (int32_t e : sets.front()) {
    const bool everywhere = std::all_of(sets.begin() + 1, sets.end(), [e](const auto& s) {
      return std::find(s.begin(), s.end(), e) != s.end();
    });
    if (everywhere && std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
  return out;
}

}  // namespace odmoe
