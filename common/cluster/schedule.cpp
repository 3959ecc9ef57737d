#include "cluster/schedule.h"

#include <algorithm>

namespace odmoe {

Schedule Schedule::AllGroups(const Topology& topology) {
  Schedule s;
  s.group_size = std::max(1, topology.group_size);
  for (int g = 0; g < topology.n_groups(); ++g) s.groups.push_back(g);
  return s;
}

std::vector<int> Schedule::Members(int group) const {
  std::vector<int> m;
  for (int i = 0; i < group_size; ++i) m.push_back(group * group_size + i);
  return m;
}

std::vector<int> Schedule::LiveWorkers() const {
  std::vector<int> w;
  for (int g : groups) {
    for (int m : Members(g)) w.push_back(m);
  }
  return w;
}

int Schedule::PrefillWorkerOfExpert(int expert) const {
  const std::vector<int> live = LiveWorkers();
  return live[static_cast<size_t>(expert) % live.size()];
}

bool Schedule::Has(int group) const {
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

bool Schedule::Remove(int group) {
  auto it = std::find(groups.begin(), groups.end(), group);
  if (it == groups.end()) return false;
  groups.erase(it);
  ++version;
  return true;
}

bool Schedule::Add(int group) {
  if (Has(group)) return false;
  groups.insert(std::upper_bound(groups.begin(), groups.end(), group), group);
  ++version;
  return true;
}

}  // namespace odmoe
