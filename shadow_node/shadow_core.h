// The heart of the shadow node (paper §3.2): a quantized copy of the whole
// model that runs ahead of the main node and, for every decode iteration and
// layer, announces the experts its gate chose as soon as that gate has run.
//
// It follows every request the main node runs (ShadowBegin), each in its own
// KV slot (as many as the main node runs at once, main.max_running); a begin
// past that is answered with a ShadowDone carrying RESOURCE_EXHAUSTED. Per
// request: prefill the prompt with its own model (no predictions: §3.3), then
// decode iterations n = 1, 2, ... (speculative run-ahead: it never waits for
// an alignment, so its hints are an iteration early):
//     - the input token of iteration n is the main node's when that token
//       alignment has arrived, else its own greedy guess from iteration n-1;
//       when the main node's token later shows the guess was wrong, iteration
//       n is computed again with the real token (corrected hints follow);
//     - KV rows from the main node overwrite its own as soon as they arrive;
//     - with alignment on it stays at most one iteration ahead of the main
//       node (the iteration whose token it can still check), without
//       alignment at most max_run_ahead;
//     - when it has fallen behind (the main node already started a later
//       iteration) and both alignments are due every iteration, skip the
//       iteration: the main node's next alignment brings its token and KV
//       row anyway, and a late prediction would be of no use to the workers;
//     - after each layer's gate: a prediction (to the main node) and, unless
//       the request runs in iterations shared with others (ShadowBegin /
//       ShadowAlign `batched`: the main node then hints the workers with the
//       shared iteration's union), a hint (to the group that computes that
//       layer: each of its workers with positions of the layer,
//       cluster/assignment.h, takes its own experts from it); with drafting on
//       (ShadowBegin.draft_tokens), after the iteration its greedy next token
//       as a Draft (to the main node).
//   A request ends after max_tokens iterations, at ShadowEnd, or when the main
//   node's stream goes (AbortAll); a ShadowDone follows.
// Each round, the requests that may run their next iteration run it together:
// one row each, one forward of several segments (engine/transformer.h), so
// following R requests costs one pass over the weights, not R.
//
//   ShadowCore::Options opt{.n_groups = 4, .max_run_ahead = 4};
//   topt.n_seq = 4;   // requests followed at once
//   ODMOE_ASSIGN_OR_RETURN(auto core, ShadowCore::Create(*qmodel, *backend, topt, opt));
//   core->Attach(1, reply_sink, hint_sink);
//   core->Submit(request);   // from the main node's Follow stream
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cluster/protocol.h"
#include "cluster/trace.h"
#include "engine/local_expert_executor.h"
#include "engine/transformer.h"
#include "model/model_file.h"

namespace odmoe {

struct ShadowStats {
  uint64_t requests = 0;
  uint64_t requests_finished = 0;  // ended (done, failed or aborted): in flight = requests - this
  uint64_t iterations = 0;
  uint64_t predictions = 0;
  uint64_t drafts = 0;  // drafted tokens sent (speculative decoding)
  uint64_t token_alignments = 0;
  uint64_t kv_alignments = 0;
  uint64_t kv_rows_aligned = 0;
  uint64_t iterations_skipped = 0;  // caught up with the main node
  uint64_t speculation_misses = 0;  // own token guess was wrong: iteration computed again
  // Recurrent layers (Gated DeltaNet): their state cannot go back to any
  // position; a recompute from further back than the last forward runs the
  // sequence's tokens again from the nearest state it has (Resync).
  uint64_t recurrent_resyncs = 0;
  uint64_t recurrent_rows_replayed = 0;
  uint64_t rejected_messages = 0;
  double alignment_seconds = 0;  // applying KV rows
  double forward_seconds = 0;
  double wait_seconds = 0;       // waiting for the main node (alignment, run-ahead limit)
};

class ShadowCore {
 public:
  struct Options {
    int n_groups = 1;
    int max_run_ahead = 4;
    TraceRecorder* trace = nullptr;  // S_l spans when recording (may be null)
  };
  using ReplySink = std::function<void(const v1::ShadowReply&)>;
  /// Sends a hint to every worker of `group`.
  using HintSink = std::function<void(int group, const v1::Hint&)>;

  static absl::StatusOr<std::unique_ptr<ShadowCore>> Create(const ModelFile& model,
                                                            Backend& backend,
                                                            Transformer::Options transformer,
                                                            const Options& options);
  ~ShadowCore();

  void Attach(uint64_t id, ReplySink replies, HintSink hints);
  /// True when `id` was the attached stream (and is now detached).
  bool Detach(uint64_t id);

  /// Validates and queues a request from the main node. INVALID_ARGUMENT
  /// (nothing queued) for a malformed one.
  absl::Status Submit(const v1::ShadowRequest& request);

  /// Ends every request being followed (their main node went away).
  void AbortAll();

  ShadowStats stats() const;
  void Stop();

 private:
  struct Seq;  // one request followed (shadow_core.cpp)
  ShadowCore(const ModelFile& model, Backend& backend, const Options& options);
  void Loop();
  // Moves the inbox into the sequences (mu_ held): begins start one (or are
  // refused when every slot is taken), aligns and ends go to theirs.
  void TakeInboxLocked();
  void Begin(const v1::ShadowBegin& begin);
  // Applies seq's alignments up to its next iteration and decides its input
  // token. True when that iteration may run now.
  bool Ready(Seq& seq);
  absl::Status Prefill(Seq& seq);
  // One iteration of every sequence in `rows`, as one forward.
  absl::Status Decode(const std::vector<Seq*>& rows);
  // Brings the recurrent state of seq's slot to its next row's position when
  // it cannot continue there: the prompt and the tokens its iterations ran
  // with, again from the slot's checkpoint (or from position 0).
  absl::Status Resync(Seq& seq);
  // ShadowDone for `request`, its slot freed (FinishLocked: mu_ held).
  void Finish(uint64_t request);
  void FinishLocked(uint64_t request);
  absl::Status ApplyKv(int slot, const v1::KvRows& kv);
  void Reply(const v1::ShadowReply& reply);
  absl::Status ValidateAlign(const v1::ShadowAlign& a) const;
  absl::Status ValidateGroups(const google::protobuf::RepeatedField<int32_t>& groups) const;
  void SetGroups(const google::protobuf::RepeatedField<int32_t>& groups);

  const ModelFile& model_;
  Backend& backend_;
  const Options options_;
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<LocalExpertExecutor> experts_;
  std::vector<float> kv_host_;
  std::vector<int> live_groups_;  // the main node's schedule (compute thread)
  // The compute thread's own: requests followed, by id, and free KV slots.
  std::map<uint64_t, std::unique_ptr<Seq>> seqs_;
  std::vector<bool> slot_free_;
  std::vector<float> logits_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::ShadowRequest> inbox_;  // begins, aligns and ends, in arrival order
  bool abort_ = false;                   // AbortAll: end every request
  bool stop_ = false;
  ShadowStats stats_;

  std::mutex sink_mu_;
  uint64_t sink_id_ = 0;
  ReplySink replies_;
  HintSink hints_;

  std::thread thread_;
};

}  // namespace odmoe
