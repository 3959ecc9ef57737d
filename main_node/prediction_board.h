// Where the main node keeps the expert predictions of the running request:
// written by the shadow link's reader thread (or by the main node itself in
// `random` mode), read when a layer is dispatched (for the assignment) and at
// the end of the request (for recall).
//
//   board.Reset(request);
//   board.Put(request, token, layer, {3, 5});
//   std::vector<int32_t> p = board.Get(request, token, layer);   // {} if none yet
//   board.MarkDone(request);  board.WaitDone(request, absl::Seconds(2));
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "absl/time/time.h"

namespace odmoe {

class PredictionBoard {
 public:
  /// Forgets everything; predictions for other requests are dropped from now on.
  void Reset(uint64_t request);
  void Put(uint64_t request, uint32_t token, uint32_t layer, std::vector<int32_t> experts);
  std::vector<int32_t> Get(uint64_t request, uint32_t token, uint32_t layer) const;
  /// All predictions of the current request: (token, layer) -> experts.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<int32_t>> Snapshot() const;
  void MarkDone(uint64_t request);
  /// True when the predictor said it is done with `request` within `timeout`.
  bool WaitDone(uint64_t request, absl::Duration timeout);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t request_ = 0;
  uint64_t done_ = 0;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<int32_t>> predictions_;
};

}  // namespace odmoe
