// Where the main node keeps the expert predictions (and, with speculative
// decoding, the drafted tokens) of the running requests, each request on its
// own page: written by the shadow link's reader thread (or by the main node
// itself in `random` and `lookahead` mode), read when a layer is dispatched
// (for the assignment) and at the end of a request (for recall). Several
// requests are tracked at once (continuous batching: the shadow follows every
// running request); what arrives for a request that is not tracked is dropped.
//
//   board.Track(request);
//   board.Put(request, token, layer, {3, 5});
//   std::vector<int32_t> p = board.Get(request, token, layer);   // {} if none yet
//   board.PutDraft(request, 7, /*input=*/42, /*output=*/17);   // speculative decoding
//   std::vector<int32_t> d = board.DraftChain(request, 7, 42, 4);   // {17, ...}
//   board.MarkDone(request);  board.WaitDone(request, absl::Seconds(2));
//   board.Forget(request);   // the request has ended
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
  using Page = std::map<std::pair<uint32_t, uint32_t>, std::vector<int32_t>>;
  /// Starts keeping what arrives for `request` (an empty page: anything
  /// already kept for it is dropped). Other requests' pages stay.
  void Track(uint64_t request);
  /// Drops `request`'s page; later arrivals for it are dropped.
  void Forget(uint64_t request);
  void Put(uint64_t request, uint32_t token, uint32_t layer, std::vector<int32_t> experts);
  std::vector<int32_t> Get(uint64_t request, uint32_t token, uint32_t layer) const;
  /// All predictions of `request`: (token, layer) -> experts.
  Page Snapshot(uint64_t request) const;
  /// Speculative decoding: decode iteration `token` of `request` ran on the
  /// drafter with input `input`, and its next token is `output`. A newer
  /// draft for the same iteration replaces the older.
  void PutDraft(uint64_t request, uint32_t token, int32_t input, int32_t output);
  /// The drafted inputs of iterations token + 1, token + 2, ...: the output
  /// of `token`'s draft if that ran with `input`, then the output of each
  /// next iteration's draft whose input is the previous output; at most
  /// `max` (fewer where the chain breaks or the drafter is not there yet).
  std::vector<int32_t> DraftChain(uint64_t request, uint32_t token, int32_t input,
                                  int max) const;
  /// DraftChain, waiting up to `timeout` for it to reach `max`. Returns
  /// earlier when the drafter is done with the request, or when it drafted
  /// `token` from another input and `realigned` is false (it was not sent
  /// `input`, so it will not draft from it).
  std::vector<int32_t> WaitDraftChain(uint64_t request, uint32_t token, int32_t input, int max,
                                      bool realigned, absl::Duration timeout);
  /// The predictor is done with `request` (tracked ones only).
  void MarkDone(uint64_t request);
  /// True when the predictor said it is done with `request` within `timeout`.
  bool WaitDone(uint64_t request, absl::Duration timeout);
  /// Requests tracked now.
  size_t tracked() const;

 private:
  struct Pages {
    Page predictions;
    std::map<uint32_t, std::pair<int32_t, int32_t>> drafts;  // token -> (input, output)
    bool done = false;
  };
  static std::vector<int32_t> ChainLocked(const Pages& p, uint32_t token, int32_t input, int max);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Pages> pages_;
};

}  // namespace odmoe
