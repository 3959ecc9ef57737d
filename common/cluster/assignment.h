// Which worker of a group computes which expert (paper §3.1, worker-node
// grouping). Shared by the main node (who decides) and the workers (who
// prefetch from hints), so both sides arrive at the same placement.
//
// A group has G = top-k workers; for a decode step every worker computes one
// of the k experts the gate chose.
//   HintedAssignment: from a prediction, worker i loads the i-th smallest
//     predicted expert (the order of the predictor's list does not matter).
//   FinalAssignment: once the gate has decided, an expert that was predicted
//     stays on the worker that loaded it; the other chosen experts go, in
//     ascending id order, to the workers (ascending index) whose predicted
//     expert was not chosen. Those workers reload: the paper's fallback.
//     Without a prediction the final assignment is the hinted assignment of
//     the gate's own choice, so a correct but late prediction still matches.
//
//   std::vector<int32_t> pre = HintedAssignment({5, 2});        // {2, 5}
//   std::vector<int32_t> fin = FinalAssignment({5, 2}, {2, 7});  // {2, 7}
//   fin = FinalAssignment({5, 2}, {7, 5});                       // {7, 5}
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace odmoe {

/// Slot i = the expert worker i of the group loads. Sorted copy of `predicted`.
std::vector<int32_t> HintedAssignment(std::span<const int32_t> predicted);

/// Slot i = the expert worker i computes. `actual` holds the gate's k distinct
/// experts; `predicted` is empty (no prediction) or k distinct experts.
std::vector<int32_t> FinalAssignment(std::span<const int32_t> predicted,
                                     std::span<const int32_t> actual);

/// |predicted ∩ actual|: c(q, n, l) of the paper's Eq. 2.
int CountCorrect(std::span<const int32_t> predicted, std::span<const int32_t> actual);

}  // namespace odmoe
