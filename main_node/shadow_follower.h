// The main node's side of the shadow following a request (paper §3.2): the
// ShadowBegin that starts it, the alignment before each decode iteration
// (the input token when the token period is due, the KV rows written since
// the last KV alignment when the KV period is due, chunked below
// kKvChunkBytes per message, the live groups when the schedule changed, and
// in any case the progress marker), and the ShadowEnd that stops it. A broken
// link ends the following, never the request. A shadow that answers neither
// predictions nor an end for kSilentShadowRequests requests in a row has lost
// its channel: its stream is reopened (a fresh stream re-aligns it).
// Engine thread only.
//
//   ShadowFollower shadow(config, links, transformer, &schedule);
//   ShadowFollow follow{.token_period = 1, .kv_period = 1};
//   if (!shadow.Begin(follow, request, prompt_ids, max_tokens, /*drafts_only=*/false,
//                     /*batched=*/false)) { ... runs without it ... }
//   bool sent_token = shadow.Align(follow, request, n, token, pos, slot, /*batched=*/false);
//   shadow.End(follow, request, /*decoded=*/true);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "cluster/schedule.h"
#include "cluster/trace.h"
#include "engine/transformer.h"
#include "main_node/cluster_links.h"
#include "model/model_config.h"

namespace odmoe {

/// The shadow following one request, as the main node keeps it.
struct ShadowFollow {
  bool on = false;  // the shadow follows it (Begin went out, no link broke since)
  int token_period = 0, kv_period = 0;
  int draft = 0;                  // drafted tokens asked for per iteration
  uint64_t schedule_version = 0;  // the schedule it was last told
  int kv_sent = 0;                // KV rows sent so far
  int aligned_n = 0;              // the last decode iteration aligned
  double alignment_seconds = 0;   // reading KV rows and sending alignments
};

class ShadowFollower {
 public:
  ShadowFollower(const ModelConfig& config, ClusterLinks& links, Transformer& transformer,
                 const Schedule* schedule)
      : config_(config), links_(links), transformer_(transformer), schedule_(schedule) {}

  /// Sends ShadowBegin (prompt, periods, drafts, `drafts_only`: no hints or
  /// predictions; `batched`: the request shares iterations). Sets follow.on;
  /// false when the link failed (logged).
  bool Begin(ShadowFollow& follow, uint64_t request, std::span<const int32_t> prompt_ids,
             int max_tokens, bool drafts_only, bool batched);
  /// The alignment before decode iteration n (input `token` at `pos`, KV in
  /// `slot`). Returns whether the token went out; a failed link turns the
  /// following off (logged) and returns false.
  bool Align(ShadowFollow& follow, uint64_t request, int n, int32_t token, int pos, int slot,
             bool batched, TraceRecorder* trace);
  /// ShadowEnd, then waits (briefly) for the shadow to finish; `decoded`:
  /// the request ran decode iterations (a silent shadow is one that sent no
  /// prediction for them).
  void End(const ShadowFollow& follow, uint64_t request, bool decoded);

 private:
  absl::Status SendAlignment(uint64_t request, int n, int32_t token, int pos, bool send_token,
                             bool send_kv, bool send_schedule, int* kv_sent, int slot,
                             bool batched);
  void FillSchedule(google::protobuf::RepeatedField<int32_t>* groups, uint64_t* version) const;

  const ModelConfig& config_;
  ClusterLinks& links_;
  Transformer& transformer_;
  const Schedule* schedule_;
  // Requests in a row for which the shadow sent neither a prediction nor an
  // end: at kSilentShadowRequests its stream is reopened.
  int silent_requests_ = 0;
  std::vector<float> kv_k_, kv_v_;
};

}  // namespace odmoe
