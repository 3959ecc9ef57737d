// Which worker of a group computes which expert (paper §3.1, worker-node
// grouping), for any top-k k and any group size G. Shared by the main node
// (who decides), the workers (who prefetch from hints) and the shadow (who
// hints), so every side arrives at the same placement.
//
// An assignment lists the k experts of one decode step in k *positions*.
// Worker i of a group computes the positions i, i + G, i + 2G, ... (< k):
// ceil(k / G) or floor(k / G) experts, one after another; with G > k the
// workers i >= k compute nothing for that layer. With G = k (the paper's
// Mixtral testbed) every worker computes exactly position i.
//   HintedAssignment: from a prediction, position i holds the i-th smallest
//     predicted expert (the order of the predictor's list does not matter),
//     so worker i prefetches the predicted experts at its positions, in
//     position order.
//   FinalAssignment: once the gate has decided, an expert that was predicted
//     stays at its hinted position (on the worker that prefetched it); the
//     other chosen experts go, in ascending id order, to the positions
//     (ascending) whose predicted expert was not chosen. The workers owning
//     those positions reload: the paper's fallback. Without a prediction the
//     final assignment is the hinted assignment of the gate's own choice, so
//     a correct but late prediction still matches. Positions do not depend on
//     G, so the placement is the same function for every group size.
//
//   std::vector<int32_t> pre = HintedAssignment(std::vector<int32_t>{5, 2});  // {2, 5}
//   std::vector<int32_t> fin = FinalAssignment(pre, std::vector<int32_t>{2, 7});  // {2, 7}
//   // Top-4 on a group of 2: worker 0 computes positions {0, 2}, worker 1 {1, 3}.
//   std::vector<int> mine = PositionsOfWorker(/*index=*/1, /*group_size=*/2, /*k=*/4);
//   std::vector<int32_t> experts =
//       ExpertsOfWorker(FinalAssignment(std::vector<int32_t>{1, 3, 5, 7},
//                                       std::vector<int32_t>{7, 1, 4, 3}),
//                       1, 2);                                       // {3, 7}
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace odmoe {

/// Position i = the expert loaded for position i. Sorted copy of `predicted`.
std::vector<int32_t> HintedAssignment(std::span<const int32_t> predicted);

/// Position i = the expert computed at position i. `actual` holds the gate's
/// k distinct experts; `predicted` is empty (no prediction) or k distinct
/// experts.
std::vector<int32_t> FinalAssignment(std::span<const int32_t> predicted,
                                     std::span<const int32_t> actual);

/// The index (in its group of `group_size`) of the worker computing
/// `position`: position mod G.
int WorkerOfPosition(int position, int group_size);

/// The positions worker `index` of a group of `group_size` computes when a
/// layer routes to `k` experts: index, index + G, ... below k (ascending;
/// empty when index >= k).
std::vector<int> PositionsOfWorker(int index, int group_size, int k);

/// The experts of `assignment` at PositionsOfWorker(index, group_size,
/// assignment.size()), in position order.
std::vector<int32_t> ExpertsOfWorker(std::span<const int32_t> assignment, int index,
                                     int group_size);

/// A decode step of several rows (speculative decoding's verification, or
/// rows of several requests): the layer needs `experts` (distinct, any
/// number). An expert of the hinted assignment of `predicted` (k experts, or
/// a union of several rows' predictions) keeps its hinted position (on the
/// worker that prefetched it); each other one goes to the worker with
/// positions (of max(k, |predicted|)) that has the fewest experts so far
/// (ties: the lowest index), at that worker's first position. Returns each expert's position, in the order of `experts`; its
/// worker is WorkerOfPosition(position, group_size).
///
///   SpreadAssignment(std::vector<int32_t>{2, 5}, std::vector<int32_t>{5, 1, 2, 6}, 2, 2)
///       // {1, 0, 0, 1}: 5 and 2 where hinted, then 1 on worker 0, 6 on worker 1
std::vector<int> SpreadAssignment(std::span<const int32_t> predicted,
                                  std::span<const int32_t> experts, int group_size, int k);

/// |predicted ∩ actual|: c(q, n, l) of the paper's Eq. 2.
int CountCorrect(std::span<const int32_t> predicted, std::span<const int32_t> actual);

}  // namespace odmoe
