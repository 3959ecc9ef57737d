#include "cluster/assignment.h"

#include <algorithm>

namespace odmoe {
namespace {
bool Contains(std::span<const int32_t> v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

std::vector<int32_t> HintedAssignment(std::span<const int32_t> predicted) {
  std::vector<int32_t> slots(predicted.begin(), predicted.end());
  std::sort(slots.begin(), slots.end());
  return slots;
}

std::vector<int32_t> FinalAssignment(std::span<const int32_t> predicted,
                                     std::span<const int32_t> actual) {
  if (predicted.size() != actual.size()) return HintedAssignment(actual);
  std::vector<int32_t> slots = HintedAssignment(predicted);
  std::vector<int32_t> unplaced;
  for (int32_t e : HintedAssignment(actual)) {
    if (!Contains(slots, e)) unplaced.push_back(e);  // ascending
  }
  size_t next = 0;
  for (int32_t& s : slots) {
    if (!Contains(actual, s)) s = unplaced[next++];
  }
  return slots;
}

int CountCorrect(std::span<const int32_t> predicted, std::span<const int32_t> actual) {
  int c = 0;
  for (int32_t e : predicted) c += Contains(actual, e) ? 1 : 0;
  return c;
}

}  // namespace odmoe
