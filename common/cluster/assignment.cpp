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

int WorkerOfPosition(int position, int group_size) { return position % group_size; }

std::vector<int> PositionsOfWorker(int index, int group_size, int k) {
  std::vector<int> positions;
  if (index < 0 || group_size < 1) return positions;
  for (int p = index; p < k; p += group_size) positions.push_back(p);
  return positions;
}

std::vector<int32_t> ExpertsOfWorker(std::span<const int32_t> assignment, int index,
                                     int group_size) {
  std::vector<int32_t> experts;
  for (int p : PositionsOfWorker(index, group_size, static_cast<int>(assignment.size()))) {
    experts.push_back(assignment[static_cast<size_t>(p)]);
  }
  return experts;
}

int CountCorrect(std::span<const int32_t> predicted, std::span<const int32_t> actual) {
  int c = 0;
  for (int32_t e : predicted) c += Contains(actual, e) ? 1 : 0;
  return c;
}

}  // namespace odmoe
