// Several generations at once on one Transformer (continuous batching): each
// iteration runs one batch made of a decode row of every running sequence and
// prefill chunks of the others, under a row budget; a sequence starts as soon
// as a KV slot is free and gives its slot back the moment it ends. Each
// sequence samples, stops and streams as it would alone (engine/sequence.h),
// and its logits have the same bits alone or batched (Transformer's segments;
// tests/engine/batch_invariance_test.cpp), so its tokens are the same too.
//
//   Transformer::Options topt;  topt.n_seq = 8;                     // 8 KV slots
//   ODMOE_ASSIGN_OR_RETURN(auto tf, Transformer::Create(model, backend, topt));
//   BatchGenerator gen(*tf, *experts);
//   auto a = std::make_shared<Sequence>(tok, req_a, ids_a, on_token_a);
//   ODMOE_RETURN_IF_ERROR(gen.Add(a));   // ... more, at any time between steps
//   while (gen.busy()) ODMOE_RETURN_IF_ERROR(gen.Step().status());
//   GenerateResult ra = a->TakeResult();
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/expert_executor.h"
#include "engine/sequence.h"
#include "engine/transformer.h"

namespace odmoe {

/// What PlanBatch sees of one sequence: its KV slot, the position of its
/// first pending row, whether it is still in its prompt, and its pending rows
/// (all prompt rows not run yet, or the one token to decode).
struct BatchCandidate {
  int slot = 0;
  int pos = 0;
  bool prefilling = false;
  std::span<const int32_t> pending;
};
/// What PlanBatch sees of `seq` in `slot` (Sequence::Pending of every row).
BatchCandidate CandidateOf(const Sequence& seq, int slot);

/// One iteration's rows for several sequences: one decode row of every
/// sequence past its prompt, then prompt chunks (at most `prefill_chunk`
/// rows each) in the order given, up to `max_rows` rows in all. owners[j] is
/// the index of segment j's sequence in `seqs`. The one way batches are
/// formed (BatchGenerator, the main node's Scheduler).
struct BatchPlan {
  std::vector<int32_t> tokens;
  std::vector<Transformer::Segment> segments;
  std::vector<size_t> owners;
};
BatchPlan PlanBatch(std::span<const BatchCandidate> seqs, int64_t max_rows,
                    int64_t prefill_chunk);

class BatchGenerator {
 public:
  struct Options {
    /// Rows per iteration; 0 = the transformer's n_batch (also the most).
    int64_t max_rows = 0;
    /// Prompt rows one sequence may add to an iteration; 0 = max_rows.
    int64_t prefill_chunk = 0;
  };

  BatchGenerator(Transformer& transformer, ExpertExecutor& experts);
  BatchGenerator(Transformer& transformer, ExpertExecutor& experts, Options options);

  /// Queues `seq` (first come, first served). INVALID_ARGUMENT when it is done
  /// already, asks for routing records (RunGeneration's only), or its prompt
  /// and max_tokens do not fit the context.
  absl::Status Add(std::shared_ptr<Sequence> seq);
  /// Drops `seq`, waiting or running (its client went away): its KV slot is
  /// free for the next iteration. Nothing when it is not here.
  void Remove(const Sequence* seq);
  /// One iteration: waiting sequences take free slots; the batch gets one
  /// decode row of every running sequence past its prompt, then prompt
  /// chunks in arrival order while rows remain; each sequence advances by
  /// its rows (a finished one leaves and frees its slot). Returns the rows
  /// run (0 when there was nothing to run). When the forward fails, the
  /// sequences of that batch cannot go on (their KV rows are half written):
  /// they are dropped (running() no longer counts them) and the error is
  /// returned, for the caller to fail those requests.
  absl::StatusOr<int64_t> Step();

  bool busy() const { return !running_.empty() || !waiting_.empty(); }
  size_t running() const { return running_.size(); }
  size_t waiting() const { return waiting_.size(); }
  /// Iterations run and rows they carried, since construction.
  uint64_t iterations() const { return iterations_; }
  uint64_t rows() const { return rows_; }

 private:
  struct Slot {
    std::shared_ptr<Sequence> seq;
    int slot = 0;
  };

  Transformer& transformer_;
  ExpertExecutor& experts_;
  const int64_t max_rows_;
  const int64_t prefill_chunk_;
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::vector<Slot> running_;  // in arrival order
  std::vector<bool> slot_free_;
  uint64_t iterations_ = 0, rows_ = 0;
};

}  // namespace odmoe
