#include "main_node/scheduler.h"

#include <algorithm>

#include "engine/batch_generator.h"

namespace odmoe {

int64_t IterationPlan::rows() const {
  int64_t n = 0;
  for (const PlannedSegment& s : segments) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

std::vector<int32_t> IterationPlan::tokens() const {
  std::vector<int32_t> out;
  for (const PlannedSegment& s : segments) out.insert(out.end(), s.tokens.begin(), s.tokens.end());
  return out;
}

int64_t Scheduler::DraftLimit(const SeqState& s) const {
  // Never past max_tokens (the token after the last draft is one more) or the
  // context.
  return std::min<int64_t>(s.tokens_left - 1, budgets_.n_ctx - s.pos - 1);
}

Scheduler::Scheduler(SchedulerBudgets budgets)
    : budgets_(budgets), slot_free_(static_cast<size_t>(std::max(budgets.slots, 0)), true) {}

void Scheduler::Submit(uint64_t handle) { waiting_.push_back(handle); }

Scheduler::Boundary Scheduler::AtBoundary(std::span<const uint64_t> cancelled) {
  Boundary b;
  auto is_cancelled = [&](uint64_t h) {
    return std::find(cancelled.begin(), cancelled.end(), h) != cancelled.end();
  };
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (is_cancelled(*it)) {
      b.cancelled_waiting.push_back(*it);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [handle, slot] : running_) {
    if (is_cancelled(handle)) b.cancelled_running.push_back(handle);
  }
  for (uint64_t h : b.cancelled_running) Finished(h);
  for (size_t s = 0; s < slot_free_.size() && !waiting_.empty(); ++s) {
    if (!slot_free_[s]) continue;
    slot_free_[s] = false;
    const int slot = budgets_.first_slot + static_cast<int>(s);
    running_.emplace_back(waiting_.front(), slot);
    b.admitted.emplace_back(waiting_.front(), slot);
    waiting_.pop_front();
  }
  return b;
}

void Scheduler::Finished(uint64_t handle) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->first != handle) continue;
    slot_free_[static_cast<size_t>(it->second - budgets_.first_slot)] = true;
    running_.erase(it);
    return;
  }
  const auto w = std::find(waiting_.begin(), waiting_.end(), handle);
  if (w != waiting_.end()) waiting_.erase(w);
}

std::vector<uint64_t> Scheduler::Drain() {
  std::vector<uint64_t> out;
  for (const auto& [handle, slot] : running_) out.push_back(handle);
  out.insert(out.end(), waiting_.begin(), waiting_.end());
  running_.clear();
  waiting_.clear();
  slot_free_.assign(slot_free_.size(), true);
  return out;
}

int Scheduler::SlotOf(uint64_t handle) const {
  for (const auto& [h, slot] : running_) {
    if (h == handle) return slot;
  }
  return -1;
}

std::vector<DraftAsk> Scheduler::DraftAsks(std::span<const SeqState> running) const {
  std::vector<DraftAsk> asks;
  const bool all_decode =
      std::none_of(running.begin(), running.end(), [](const SeqState& s) { return s.prefilling; });
  if (!all_decode) return asks;  // drafts ride on iterations of decode rows only
  // One row each is the least an iteration of these requests carries.
  const int64_t rows = std::min<int64_t>(budgets_.max_rows, budgets_.max_task_rows);
  const int64_t spare = rows - static_cast<int64_t>(running.size());
  for (size_t i = 0; i < running.size(); ++i) {
    const SeqState& s = running[i];
    if (s.draft <= 0) continue;
    // Within its own limit and the iteration's rows.
    const int64_t room = std::min<int64_t>(
        {s.draft, DraftLimit(s), running.size() == 1 ? budgets_.max_rows - 1 : spare});
    if (room <= 0) continue;
    asks.push_back({i, static_cast<int>(room), s.draft_wait && running.size() == 1});
  }
  return asks;
}

IterationPlan Scheduler::Plan(std::span<const SeqState> running) const {
  IterationPlan plan;
  if (running.empty()) return plan;
  const bool all_decode =
      std::none_of(running.begin(), running.end(), [](const SeqState& s) { return s.prefilling; });
  const int64_t task_rows = std::min<int64_t>(budgets_.max_rows, budgets_.max_task_rows);
  if (running.size() == 1 && all_decode) {
    // One request decoding: its row and the drafts that fit.
    const SeqState& s = running[0];
    PlannedSegment seg{0, s.slot, s.pos, {s.pending.begin(), s.pending.end()}, true, s.n};
    const size_t take = static_cast<size_t>(
        std::clamp<int64_t>(std::min<int64_t>(DraftLimit(s), budgets_.max_rows - 1), 0,
                            static_cast<int64_t>(s.drafts.size())));
    seg.tokens.insert(seg.tokens.end(), s.drafts.begin(), s.drafts.begin() + take);
    plan.kind = take > 0 ? IterationPlan::Kind::kVerify : IterationPlan::Kind::kDecode;
    // Keyed by the last row's iteration: the workers' hints for the rows
    // before it are passed with this step.
    plan.key_request = s.request;
    plan.key_token = static_cast<uint32_t>(s.n + static_cast<int>(take));
    plan.segments.push_back(std::move(seg));
    return plan;
  }
  if (all_decode && static_cast<int64_t>(running.size()) <= task_rows) {
    // Decode rows of several requests: one row each, then their drafts one
    // at a time, oldest first, round after round, while rows remain.
    std::vector<size_t> take(running.size(), 0);
    int64_t rows = static_cast<int64_t>(running.size());
    for (bool more = true; more && rows < task_rows;) {
      more = false;
      for (size_t i = 0; i < running.size() && rows < task_rows; ++i) {
        const SeqState& s = running[i];
        if (take[i] < s.drafts.size() && static_cast<int64_t>(take[i]) < DraftLimit(s)) {
          ++take[i];
          ++rows;
          more = true;
        }
      }
    }
    plan.kind = IterationPlan::Kind::kShared;
    for (size_t i = 0; i < running.size(); ++i) {
      const SeqState& s = running[i];
      PlannedSegment seg{i, s.slot, s.pos, {s.pending.begin(), s.pending.end()}, true, s.n};
      seg.tokens.insert(seg.tokens.end(), s.drafts.begin(),
                        s.drafts.begin() + static_cast<ptrdiff_t>(take[i]));
      // Keyed by the oldest request's iteration: above every earlier key of
      // the running requests, so the workers take the step's hints as current.
      if (plan.key_request == 0 || s.request < plan.key_request) {
        plan.key_request = s.request;
        plan.key_token = static_cast<uint32_t>(s.n);
      }
      plan.segments.push_back(std::move(seg));
    }
    return plan;
  }
  // Prompt rows in it (or more decode rows than a task carries): one decode
  // row of each decoding request, prompt chunks of the others.
  std::vector<BatchCandidate> candidates;
  for (const SeqState& s : running) candidates.push_back({s.slot, s.pos, s.prefilling, s.pending});
  const BatchPlan batch = PlanBatch(candidates, budgets_.max_rows, budgets_.prefill_chunk);
  size_t row = 0;
  for (size_t j = 0; j < batch.segments.size(); ++j) {
    const SeqState& s = running[batch.owners[j]];
    const auto first = batch.tokens.begin() + static_cast<ptrdiff_t>(row);
    row += static_cast<size_t>(batch.segments[j].n);
    plan.segments.push_back(
        {batch.owners[j], s.slot, s.pos,
         std::vector<int32_t>(first, batch.tokens.begin() + static_cast<ptrdiff_t>(row)),
         !s.prefilling, s.n});
  }
  plan.kind = IterationPlan::Kind::kPrefill;
  // The oldest running request's prefill key: below every later decode key of
  // the running requests, so none of their hints is taken as stale.
  for (const SeqState& s : running) {
    if (plan.key_request == 0 || s.request < plan.key_request) plan.key_request = s.request;
  }
  plan.key_token = 0;
  return plan;
}

}  // namespace odmoe
