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

std::vector<int> SpreadAssignment(std::span<const int32_t> predicted,
                                  std::span<const int32_t> experts, int group_size, int k) {
  const std::vector<int32_t> hinted = HintedAssignment(predicted);
  const int positions_hinted = std::max(k, static_cast<int>(hinted.size()));
  const int with_positions = std::max(1, std::min(group_size, positions_hinted));
  std::vector<int> load(static_cast<size_t>(with_positions), 0);
  std::vector<int> positions(experts.size(), -1);
  for (size_t i = 0; i < experts.size(); ++i) {
    for (size_t p = 0; p < hinted.size(); ++p) {
      if (hinted[p] != experts[i]) continue;
      positions[i] = static_cast<int>(p);
      ++load[static_cast<size_t>(WorkerOfPosition(static_cast<int>(p), group_size))];
      break;
    }
  }
  for (size_t i = 0; i < experts.size(); ++i) {
    if (positions[i] >= 0) continue;
    const int w = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    positions[i] = w;
    ++load[static_cast<size_t>(w)];
  }
  return positions;
}

int CountCorrect(std::span<const int32_t> predicted, std::span<const int32_t> actual) {
  int c = 0;
  for (int32_t e : predicted) c += Contains(actual, e) ? 1 : 0;
  return c;
}

}  // namespace odmoe
