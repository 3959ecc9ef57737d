// Which worker group computes which layer, and which worker which prefill
// expert: the round-robin of the paper over the groups that are up.
//
// The main node owns the schedule and changes it only at token boundaries (a
// group whose worker fails leaves at once: its layer is recomputed by the
// next group). Each change bumps `version`; the shadow gets the schedule with
// every request and alignment, so its hints follow it. With every group up it
// is exactly the topology's: layer l -> group l mod (N_W / G), expert e ->
// worker e mod N_W.
//
//   Schedule s = Schedule::AllGroups(topology);
//   s.Remove(2);                 // group 2 lost a worker
//   int g = s.GroupOfLayer(5);   // among groups {0, 1, 3}
#pragma once

#include <cstdint>
#include <vector>

#include "topology/topology.h"

namespace odmoe {

struct Schedule {
  uint64_t version = 0;
  int group_size = 1;
  std::vector<int> groups;  // groups that take layers, ascending

  static Schedule AllGroups(const Topology& topology);

  bool empty() const { return groups.empty(); }
  int GroupOfLayer(int layer) const { return groups[static_cast<size_t>(layer) % groups.size()]; }
  std::vector<int> Members(int group) const;
  /// Workers of the live groups, ascending.
  std::vector<int> LiveWorkers() const;
  /// Prefill: expert e goes to live worker e mod |live workers|.
  int PrefillWorkerOfExpert(int expert) const;
  bool Has(int group) const;
  /// Returns false when nothing changed.
  bool Remove(int group);
  bool Add(int group);
};

}  // namespace odmoe
