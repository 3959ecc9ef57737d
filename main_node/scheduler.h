// The main node's scheduling, decided apart from doing (CONVENTIONS.md,
// "Deciding apart from doing"). From the requests the engine holds, their
// progress, the drafts on the prediction board and the budgets, the
// Scheduler decides which requests start (one KV slot each), which leave, and
// what one iteration runs, as data: an IterationPlan. The engine
// (main_engine.h) carries a plan out (the shadow's alignment, the hints, the
// forward on the workers, the sequences' sampling) and tells the scheduler
// when a request ends. The scheduler holds no model, no link and no clock:
// tests drive it with made-up progress in microseconds
// (tests/main_node/scheduler_test.cpp).
//
// One iteration, whatever runs:
//   - every running request past its prompt gets a decode row (its last
//     sampled token), followed by the drafts it may verify (speculative
//     decoding) when every row of the iteration decodes;
//   - prompt rows of the others follow in arrival order, at most
//     `prefill_chunk` rows each, while the iteration has rows left;
//   - the plan's kind says how the workers are asked (cluster_executor.h):
//     one decode row (kDecode: the layer's group, the board's prediction),
//     one request verifying drafts (kVerify: keyed by its last row), rows of
//     several requests that all decode (kShared: the experts spread over the
//     live workers against the union of the rows' predictions), or prompt
//     rows among them (kPrefill: expert e on worker e mod N_W, unpredicted).
//
// Drafts in a shared iteration: each decoding request may add up to its own
// room (DraftAsks); when the sum does not fit the iteration's rows
// (min(max_rows, max_task_rows): one expert task carries at most
// max_task_rows rows), they are handed out one at a time, oldest request
// first, round after round (fair: no request takes them all).
//
//   Scheduler s({.slots = 4, .max_rows = 64, .prefill_chunk = 64, .max_task_rows = 64,
//                .n_ctx = 2048});
//   s.Submit(7);                                          // handle 7 waits for a slot
//   Scheduler::Boundary b = s.AtBoundary(cancelled_ids);  // b.admitted = {{7, 1}}: slot 1
//   std::vector<SeqState> running = ...;                  // each running request, in order
//   for (const DraftAsk& a : s.DraftAsks(running)) ...    // read drafts off the board
//   IterationPlan plan = s.Plan(running);                 // rows, segments, kind, key
//   ... run it; when handle 7 is done: s.Finished(7);
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

namespace odmoe {

/// The limits a plan keeps.
struct SchedulerBudgets {
  int slots = 1;              // KV slots for requests (requests running at once)
  int first_slot = 0;         // they are first_slot, first_slot + 1, ...
  int64_t max_rows = 1;       // rows of one iteration (main.batch)
  int64_t prefill_chunk = 1;  // prompt rows one request adds to an iteration
  int max_task_rows = 1;      // rows one expert task carries (Topology::max_task_rows)
  int n_ctx = 1;              // positions of a KV slot
};

/// What the scheduler sees of one running request.
struct SeqState {
  uint64_t handle = 0;   // the engine's name for it (Submit's)
  uint64_t request = 0;  // its request id on the wire (orders the keys)
  int slot = 0;
  int pos = 0;  // the position of its first pending row
  bool prefilling = false;
  /// Prompt rows not run yet, or (decoding) the one token to run.
  std::span<const int32_t> pending;
  int n = 0;                // decoding: the iteration its decode row is
  int draft = 0;            // drafts it asks for per iteration (0: no speculation)
  int tokens_left = 0;      // tokens it may still emit (max_tokens - emitted)
  bool draft_wait = false;  // it may wait for its drafts (draft_wait on and paying)
  /// Its drafts read off the board (DraftAsks), the token after pending first.
  std::vector<int32_t> drafts;
};

/// Read up to `room` drafts of running request `index` off the board, waiting
/// for them (up to the request's draft_wait) when `wait`.
struct DraftAsk {
  size_t index = 0;
  int room = 0;
  bool wait = false;
};

/// One request's rows in an iteration.
struct PlannedSegment {
  size_t seq = 0;  // index into the SeqStates given to Plan
  int slot = 0;
  int pos0 = 0;
  std::vector<int32_t> tokens;  // prompt rows; or the decode token, then its drafts
  bool decode = false;
  int n = 0;  // decode: the iteration of its first row
  int drafts() const { return decode ? static_cast<int>(tokens.size()) - 1 : 0; }
};

struct IterationPlan {
  enum class Kind {
    kIdle,     // nothing runs
    kDecode,   // one request, one decode row
    kVerify,   // one request, its decode row and drafts
    kShared,   // several requests, decode rows (and drafts) only
    kPrefill,  // prompt rows (with decode rows of others, if any)
  };
  Kind kind = Kind::kIdle;
  std::vector<PlannedSegment> segments;  // decode segments first, then prompt chunks
  /// The step's key on the wire (request, token): the workers take hints
  /// below the current key as stale, so keys only grow.
  uint64_t key_request = 0;
  uint32_t key_token = 0;
  int64_t rows() const;
  /// The tokens of every segment, in order (Transformer::ForwardSegments).
  std::vector<int32_t> tokens() const;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerBudgets budgets);

  const SchedulerBudgets& budgets() const { return budgets_; }
  /// `handle` waits for a slot (first come, first served).
  void Submit(uint64_t handle);

  /// What changes at an iteration's boundary.
  struct Boundary {
    std::vector<uint64_t> cancelled_waiting;         // leave the queue
    std::vector<uint64_t> cancelled_running;         // leave their slots
    std::vector<std::pair<uint64_t, int>> admitted;  // (handle, slot), in arrival order
  };
  /// The requests in `cancelled` leave (waiting or running: their slots are
  /// free at once), then waiting requests take the free slots, lowest slot
  /// first, in arrival order.
  Boundary AtBoundary(std::span<const uint64_t> cancelled);
  /// `handle` ended (or failed): its slot is free from the next boundary.
  void Finished(uint64_t handle);
  /// Everything leaves (shutting down): the handles, running then waiting.
  std::vector<uint64_t> Drain();

  int running() const { return static_cast<int>(running_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  /// The slot of a running request; -1 when it is not running.
  int SlotOf(uint64_t handle) const;

  /// The drafts each decoding request may verify this iteration: up to what
  /// it asks for, within its tokens left, its context and the iteration's
  /// rows. Waiting for drafts pays only for a request running alone (a wait
  /// would hold up the others).
  std::vector<DraftAsk> DraftAsks(std::span<const SeqState> running) const;
  /// The iteration for `running` (in arrival order, drafts read).
  IterationPlan Plan(std::span<const SeqState> running) const;

 private:
  // The most drafts `s` may verify by itself: within its tokens left and its
  // context (the iteration's rows are the caller's to add).
  int64_t DraftLimit(const SeqState& s) const;

  SchedulerBudgets budgets_;
  std::deque<uint64_t> waiting_;
  std::vector<std::pair<uint64_t, int>> running_;  // (handle, slot), in arrival order
  std::vector<bool> slot_free_;                    // slot first_slot + i is free
};

}  // namespace odmoe
