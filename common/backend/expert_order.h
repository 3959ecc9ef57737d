// The order in which a row's selected experts are summed (ExpertExecutor's
// canonical combination, Backend::CombineExperts): ascending expert id, equal
// ids in the order of their routing slots. One definition for the host and
// the device (the CUDA backend's kernels include this header), so every
// backend adds a row's terms in the same order.
//
//   // ids: one row's k routing slots (RouterTopK's order: by weight)
//   for (int j = NextExpertSlot(ids, k, -1); j >= 0; j = NextExpertSlot(ids, k, j)) {
//     acc = acc + weights[j] * y[j][c];
//   }
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ODMOE_EXPERT_ORDER_HD __host__ __device__ __forceinline__
#else
#define ODMOE_EXPERT_ORDER_HD inline
#endif

namespace odmoe {

/// The routing slot (index into ids[0, k)) that comes after slot `prev` in
/// the combination order (prev = -1: the first slot), or -1 after the last.
/// O(k) per call: k is a handful (a model's experts per token).
ODMOE_EXPERT_ORDER_HD int NextExpertSlot(const int32_t* ids, int k, int prev) {
  int best = -1;
  for (int j = 0; j < k; ++j) {
    const bool after =
        prev < 0 || ids[j] > ids[prev] || (ids[j] == ids[prev] && j > prev);
    // Strictly smaller: of equal ids the lowest slot after `prev` wins.
    if (after && (best < 0 || ids[j] < ids[best])) best = j;
  }
  return best;
}

}  // namespace odmoe
