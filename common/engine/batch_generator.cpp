#include "engine/batch_generator.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"

namespace odmoe {

BatchCandidate CandidateOf(const Sequence& seq, int slot) {
  return {slot, seq.pos(), seq.prefilling(), seq.Pending(std::numeric_limits<int64_t>::max())};
}

BatchPlan PlanBatch(std::span<const BatchCandidate> seqs, int64_t max_rows,
                    int64_t prefill_chunk) {
  BatchPlan plan;
  // Decode rows first (each costs one row and keeps a stream going), then
  // prompt chunks in order while rows remain.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      const BatchCandidate& seq = seqs[i];
      if (seq.prefilling != (pass == 1)) continue;
      const int64_t room = max_rows - static_cast<int64_t>(plan.tokens.size());
      if (room <= 0) break;
      const std::span<const int32_t> rows =
          seq.pending.first(static_cast<size_t>(std::min<int64_t>(
              {room, prefill_chunk, static_cast<int64_t>(seq.pending.size())})));
      if (rows.empty()) continue;
      plan.tokens.insert(plan.tokens.end(), rows.begin(), rows.end());
      plan.segments.push_back({seq.slot, seq.pos, static_cast<int64_t>(rows.size())});
      plan.owners.push_back(i);
    }
  }
  return plan;
}

BatchGenerator::BatchGenerator(Transformer& transformer, ExpertExecutor& experts)
    : BatchGenerator(transformer, experts, Options()) {}

BatchGenerator::BatchGenerator(Transformer& transformer, ExpertExecutor& experts,
                               Options options)
    : transformer_(transformer),
      experts_(experts),
      max_rows_(options.max_rows > 0 ? std::min<int64_t>(options.max_rows, transformer.n_batch())
                                     : transformer.n_batch()),
      prefill_chunk_(options.prefill_chunk > 0 ? std::min(options.prefill_chunk, max_rows_)
                                               : max_rows_),
      slot_free_(static_cast<size_t>(transformer.n_seq()), true) {}

absl::Status BatchGenerator::Add(std::shared_ptr<Sequence> seq) {
  if (seq == nullptr || seq->done()) {
    return absl::InvalidArgumentError("a finished sequence cannot be generated");
  }
  if (seq->routing() != nullptr) {
    return absl::InvalidArgumentError(
        "routing records are kept for one sequence at a time (RunGeneration), not in a batch");
  }
  const GenerateResult& r = seq->result();
  const int64_t need = static_cast<int64_t>(r.prompt_ids.size()) + seq->max_tokens();
  if (need > transformer_.n_ctx()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("prompt (%d tokens) + max_tokens (%d) exceed the context of %d tokens",
                        r.prompt_ids.size(), seq->max_tokens(), transformer_.n_ctx()));
  }
  waiting_.push_back(std::move(seq));
  return absl::OkStatus();
}

void BatchGenerator::Remove(const Sequence* seq) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->get() == seq) {
      waiting_.erase(it);
      return;
    }
  }
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->seq.get() == seq) {
      slot_free_[static_cast<size_t>(it->slot)] = true;
      running_.erase(it);
      return;
    }
  }
}

absl::StatusOr<int64_t> BatchGenerator::Step() {
  for (size_t s = 0; s < slot_free_.size() && !waiting_.empty(); ++s) {
    if (!slot_free_[s]) continue;
    slot_free_[s] = false;
    running_.push_back(Slot{std::move(waiting_.front()), static_cast<int>(s)});
    waiting_.pop_front();
  }
  if (running_.empty()) return 0;
  std::vector<BatchCandidate> seqs;
  for (const Slot& r : running_) seqs.push_back(CandidateOf(*r.seq, r.slot));
  const BatchPlan plan = PlanBatch(seqs, max_rows_, prefill_chunk_);
  const std::vector<int32_t>& tokens = plan.tokens;
  const std::vector<Transformer::Segment>& segments = plan.segments;
  const std::vector<size_t>& owner = plan.owners;
  if (segments.empty()) return 0;
  std::vector<float> logits;
  absl::Status st = transformer_.ForwardSegments(tokens, segments, experts_);
  if (st.ok()) st = transformer_.SegmentLogits(&logits);
  if (!st.ok()) {
    for (size_t i : owner) slot_free_[static_cast<size_t>(running_[i].slot)] = true;
    std::vector<Slot> kept;
    for (size_t i = 0; i < running_.size(); ++i) {
      if (std::find(owner.begin(), owner.end(), i) == owner.end()) kept.push_back(running_[i]);
    }
    running_ = std::move(kept);
    return st;
  }
  const size_t n_vocab = logits.size() / segments.size();
  for (size_t j = 0; j < segments.size(); ++j) {
    running_[owner[j]].seq->Consumed(
        segments[j].n, std::span<const float>(logits).subspan(j * n_vocab, n_vocab));
  }
  for (size_t i = 0; i < running_.size();) {
    if (running_[i].seq->done()) {
      slot_free_[static_cast<size_t>(running_[i].slot)] = true;
      running_.erase(running_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  ++iterations_;
  rows_ += tokens.size();
  return static_cast<int64_t>(tokens.size());
}

}  // namespace odmoe
