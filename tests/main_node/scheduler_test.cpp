// The main node's Scheduler without a cluster or a model: admission to KV
// slots, cancellation, the iteration's row budgets, fairness of prompt
// chunks and drafts, the plans' kinds and keys, and speculative decoding's
// drafts accepted and rejected, driven by made-up progress (FakeRun below).
#include "main_node/scheduler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <vector>

namespace odmoe {
namespace {

SchedulerBudgets Budgets(int slots, int64_t rows, int task_rows = 64, int n_ctx = 512) {
  return {.slots = slots,
          .first_slot = 1,
          .max_rows = rows,
          .prefill_chunk = rows,
          .max_task_rows = task_rows,
          .n_ctx = n_ctx};
}

// A request's progress as the engine would keep it, with a fake model: the
// token after t is t + 1, and a draft is right when it says so.
struct FakeSeq {
  uint64_t handle = 0, request = 0;
  int slot = 0;
  std::vector<int32_t> prompt;
  size_t prefilled = 0;
  int pos = 0, forwards = 0, emitted = 0, max_tokens = 8, draft = 0;
  int32_t next = -1;
  SeqState State() const {
    SeqState s;
    s.handle = handle;
    s.request = request;
    s.slot = slot;
    s.pos = pos;
    s.prefilling = prefilled < prompt.size();
    s.pending = s.prefilling ? std::span<const int32_t>(prompt).subspan(prefilled)
                             : std::span<const int32_t>(&next, 1);
    s.n = forwards + 1;
    s.draft = draft;
    s.tokens_left = max_tokens - emitted;
    return s;
  }
  bool done() const { return emitted >= max_tokens; }
  // Applies the segment; `right` of its drafts are accepted.
  void Apply(const PlannedSegment& seg, int right) {
    if (!seg.decode) {
      prefilled += seg.tokens.size();
      pos += static_cast<int>(seg.tokens.size());
      if (prefilled == prompt.size()) {
        next = 1000;  // the first sampled token
        ++emitted;
      }
      return;
    }
    const int accepted = std::min(right, seg.drafts());
    forwards = seg.n + accepted;
    pos += accepted + 1;
    emitted += accepted + 1;
    next = seg.tokens[static_cast<size_t>(accepted)] + 1;
  }
};

FakeSeq Seq(uint64_t handle, uint64_t request, int prompt_len, int max_tokens, int draft = 0) {
  FakeSeq s;
  s.handle = handle;
  s.request = request;
  s.prompt.assign(static_cast<size_t>(prompt_len), 7);
  s.max_tokens = max_tokens;
  s.draft = draft;
  return s;
}

std::vector<SeqState> States(const std::vector<FakeSeq>& seqs) {
  std::vector<SeqState> out;
  for (const FakeSeq& s : seqs) out.push_back(s.State());
  return out;
}

TEST_CASE("scheduler: requests take free slots in arrival order and the rest wait",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(2, 16));
  for (uint64_t h = 1; h <= 4; ++h) s.Submit(h);
  Scheduler::Boundary b = s.AtBoundary({});
  REQUIRE(b.admitted.size() == 2);
  CHECK(b.admitted[0] == std::pair<uint64_t, int>{1, 1});  // slot 0 is not the scheduler's
  CHECK(b.admitted[1] == std::pair<uint64_t, int>{2, 2});
  CHECK(s.running() == 2);
  CHECK(s.waiting() == 2);
  CHECK(s.AtBoundary({}).admitted.empty());  // no slot is free
  s.Finished(1);
  b = s.AtBoundary({});
  REQUIRE(b.admitted.size() == 1);
  CHECK(b.admitted[0] == std::pair<uint64_t, int>{3, 1});  // the freed slot, the oldest waiting
  CHECK(s.SlotOf(3) == 1);
  CHECK(s.SlotOf(1) == -1);
}

TEST_CASE("scheduler: cancelled requests leave the queue or their slots at the boundary",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(1, 16));
  for (uint64_t h = 1; h <= 3; ++h) s.Submit(h);
  REQUIRE(s.AtBoundary({}).admitted.size() == 1);  // 1 runs, 2 and 3 wait
  const std::vector<uint64_t> gone = {1, 3};
  const Scheduler::Boundary b = s.AtBoundary(gone);
  CHECK(b.cancelled_running == std::vector<uint64_t>{1});
  CHECK(b.cancelled_waiting == std::vector<uint64_t>{3});
  // 1's slot went to 2 in the same boundary.
  REQUIRE(b.admitted.size() == 1);
  CHECK(b.admitted[0].first == 2);
  CHECK(s.waiting() == 0);
  CHECK(s.Drain() == std::vector<uint64_t>{2});
  CHECK(s.running() == 0);
}

TEST_CASE("scheduler: one request's prompt runs in chunks of the row budget, then decodes",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(4, 16));
  std::vector<FakeSeq> seqs = {Seq(1, 100, 40, 3)};
  std::vector<int64_t> rows;
  while (!seqs[0].done()) {
    const IterationPlan plan = s.Plan(States(seqs));
    REQUIRE(plan.segments.size() == 1);
    rows.push_back(plan.rows());
    if (seqs[0].State().prefilling) {
      CHECK(plan.kind == IterationPlan::Kind::kPrefill);
      CHECK(plan.key_token == 0);
    } else {
      CHECK(plan.kind == IterationPlan::Kind::kDecode);
      CHECK(plan.key_token == static_cast<uint32_t>(seqs[0].forwards + 1));
    }
    CHECK(plan.key_request == 100);
    seqs[0].Apply(plan.segments[0], 0);
  }
  CHECK(rows == std::vector<int64_t>{16, 16, 8, 1, 1});  // 40 prompt rows, then 2 decode
}

TEST_CASE("scheduler: decode rows go first, prompt chunks share what is left in arrival order",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(4, 16));
  std::vector<FakeSeq> seqs = {Seq(1, 100, 3, 50), Seq(2, 101, 30, 5), Seq(3, 102, 30, 5)};
  seqs[0].Apply(PlannedSegment{0, 1, 0, {7, 7, 7}, false, 0}, 0);  // 1 is decoding
  const IterationPlan plan = s.Plan(States(seqs));
  CHECK(plan.kind == IterationPlan::Kind::kPrefill);
  REQUIRE(plan.segments.size() == 2);
  CHECK(plan.segments[0].seq == 0);
  CHECK(plan.segments[0].decode);
  CHECK(plan.segments[0].tokens == std::vector<int32_t>{1000});
  CHECK(plan.segments[1].seq == 1);  // the older prompt first
  CHECK(plan.segments[1].tokens.size() == 15);
  CHECK(plan.rows() == 16);
  // The oldest running request's prefill key: below its later decode keys.
  CHECK(plan.key_request == 100);
  CHECK(plan.key_token == 0);
}

TEST_CASE("scheduler: prompts go in arrival order and a decoding request never waits for them",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(3, 8));
  std::vector<FakeSeq> seqs = {Seq(1, 100, 60, 6), Seq(2, 101, 5, 6), Seq(3, 102, 5, 6)};
  int iterations = 0;
  std::map<uint64_t, int> first_token_at;
  while (std::any_of(seqs.begin(), seqs.end(), [](const FakeSeq& f) { return !f.done(); }) &&
         iterations < 200) {
    std::vector<FakeSeq*> live;
    std::vector<SeqState> states;
    for (FakeSeq& f : seqs) {
      if (f.done()) continue;
      live.push_back(&f);
      states.push_back(f.State());
    }
    const IterationPlan plan = s.Plan(states);
    CHECK(plan.rows() <= 8);
    // Every request past its prompt has its decode row in every iteration.
    for (size_t i = 0; i < live.size(); ++i) {
      if (states[i].prefilling) continue;
      CHECK(std::any_of(plan.segments.begin(), plan.segments.end(),
                        [&](const PlannedSegment& g) { return g.seq == i && g.decode; }));
    }
    for (const PlannedSegment& seg : plan.segments) {
      FakeSeq& f = *live[seg.seq];
      const bool had = f.emitted > 0;
      f.Apply(seg, 0);
      if (!had && f.emitted > 0) first_token_at[f.handle] = iterations;
    }
    ++iterations;
  }
  CHECK(iterations < 200);
  // First come, first served: the long prompt's 60 rows take 8 iterations of
  // 8 rows (the last shared with the next prompt), then the short ones follow
  // at once, next to its decode rows.
  CHECK(first_token_at.at(1) == 7);
  CHECK(first_token_at.at(2) == 8);
  CHECK(first_token_at.at(3) == 8);
}

TEST_CASE("scheduler: a request alone verifies its drafts within max_tokens and the context",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(4, 16, 64, 64));
  std::vector<FakeSeq> seqs = {Seq(1, 100, 4, 10, /*draft=*/4)};
  seqs[0].Apply(PlannedSegment{0, 1, 0, {7, 7, 7, 7}, false, 0}, 0);
  std::vector<SeqState> st = States(seqs);
  std::vector<DraftAsk> asks = s.DraftAsks(st);
  REQUIRE(asks.size() == 1);
  CHECK(asks[0].room == 4);
  CHECK_FALSE(asks[0].wait);  // no draft_wait asked for
  st[0].draft_wait = true;
  CHECK(s.DraftAsks(st)[0].wait);  // alone: waiting for drafts may pay
  st[0].drafts = {1001, 1002, 1003, 1004};
  IterationPlan plan = s.Plan(st);
  CHECK(plan.kind == IterationPlan::Kind::kVerify);
  REQUIRE(plan.segments.size() == 1);
  CHECK(plan.segments[0].tokens == std::vector<int32_t>{1000, 1001, 1002, 1003, 1004});
  CHECK(plan.key_token == 1 + 4);  // keyed by the last row's iteration
  // Two drafts right: the correction follows them.
  seqs[0].Apply(plan.segments[0], 2);
  CHECK(seqs[0].forwards == 3);
  CHECK(seqs[0].emitted == 4);
  CHECK(seqs[0].next == 1003);
  // A wrong draft chain (none accepted) costs the iteration nothing but rows.
  st = States(seqs);
  st[0].drafts = {5, 6, 7, 8};
  plan = s.Plan(st);
  seqs[0].Apply(plan.segments[0], 0);
  CHECK(seqs[0].forwards == 4);
  CHECK(seqs[0].emitted == 5);
  CHECK(seqs[0].next == 1004);
  // Near max_tokens: never a draft past the last token.
  seqs[0].emitted = 8;
  st = States(seqs);
  asks = s.DraftAsks(st);
  REQUIRE(asks.size() == 1);
  CHECK(asks[0].room == 1);  // 2 tokens left: one draft and the token after it
  st[0].drafts = {1, 2, 3, 4};
  CHECK(s.Plan(st).segments[0].tokens.size() == 2);
  // Near the end of the context: the same.
  seqs[0].emitted = 0;
  seqs[0].pos = 62;
  st = States(seqs);
  CHECK(s.DraftAsks(st)[0].room == 1);
  st[0].drafts = {1, 2, 3, 4};
  CHECK(s.Plan(st).segments[0].tokens.size() == 2);
}

TEST_CASE("scheduler: requests decoding together each verify their drafts in one iteration",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(8, 64, /*task_rows=*/16));
  std::vector<FakeSeq> seqs;
  for (uint64_t h = 1; h <= 3; ++h) {
    seqs.push_back(Seq(h, 200 - h, 2, 40, /*draft=*/4));
    seqs.back().Apply(PlannedSegment{0, 1, 0, {7, 7}, false, 0}, 0);
  }
  std::vector<SeqState> st = States(seqs);
  const std::vector<DraftAsk> asks = s.DraftAsks(st);
  REQUIRE(asks.size() == 3);
  for (const DraftAsk& a : asks) {
    CHECK(a.room == 4);
    CHECK_FALSE(a.wait);  // never a wait that holds up the others
  }
  for (SeqState& x : st) x.drafts = {1001, 1002, 1003, 1004};
  const IterationPlan plan = s.Plan(st);
  CHECK(plan.kind == IterationPlan::Kind::kShared);
  CHECK(plan.rows() == 15);  // 3 x (1 + 4) rows fit a task of 16
  // Keyed by the oldest request (the smallest id) at its decode row.
  CHECK(plan.key_request == 197);
  CHECK(plan.key_token == 1);
  // Each applies its own verdict.
  seqs[0].Apply(plan.segments[0], 4);
  seqs[1].Apply(plan.segments[1], 0);
  seqs[2].Apply(plan.segments[2], 2);
  CHECK(seqs[0].emitted == 1 + 5);
  CHECK(seqs[1].emitted == 1 + 1);
  CHECK(seqs[2].emitted == 1 + 3);
  CHECK(seqs[1].next == 1001);  // its correction
}

TEST_CASE("scheduler: drafts that do not all fit are shared out, oldest first, round by round",
          "[main_node][scheduler]") {
  Scheduler s(Budgets(8, 64, /*task_rows=*/8));
  std::vector<SeqState> st;
  std::vector<int32_t> tok = {1000};
  for (int i = 0; i < 3; ++i) {
    SeqState x;
    x.request = static_cast<uint64_t>(10 + i);
    x.slot = i + 1;
    x.pos = 5;
    x.pending = tok;
    x.n = 1;
    x.draft = 4;
    x.tokens_left = 50;
    x.drafts = {1, 2, 3, 4};
    st.push_back(x);
  }
  const IterationPlan plan = s.Plan(st);
  CHECK(plan.kind == IterationPlan::Kind::kShared);
  CHECK(plan.rows() == 8);  // the task's rows, no more
  REQUIRE(plan.segments.size() == 3);
  // 3 decode rows + 5 drafts: 2, 2, 1.
  CHECK(plan.segments[0].drafts() == 2);
  CHECK(plan.segments[1].drafts() == 2);
  CHECK(plan.segments[2].drafts() == 1);
  // More decode rows than a task carries: one row each, no drafts, run as a
  // prefill-style (unpredicted) step.
  Scheduler tight(Budgets(8, 64, /*task_rows=*/2));
  const IterationPlan wide = tight.Plan(st);
  CHECK(wide.kind == IterationPlan::Kind::kPrefill);
  CHECK(wide.rows() == 3);
  CHECK(tight.DraftAsks(st).empty());
}

TEST_CASE("scheduler: no drafts ride on an iteration with prompt rows", "[main_node][scheduler]") {
  Scheduler s(Budgets(4, 32));
  std::vector<FakeSeq> seqs = {Seq(1, 100, 2, 40, 4), Seq(2, 101, 20, 5, 4)};
  seqs[0].Apply(PlannedSegment{0, 1, 0, {7, 7}, false, 0}, 0);
  std::vector<SeqState> st = States(seqs);
  CHECK(s.DraftAsks(st).empty());
  st[0].drafts = {1, 2};  // even if some were read
  const IterationPlan plan = s.Plan(st);
  CHECK(plan.kind == IterationPlan::Kind::kPrefill);
  CHECK(plan.segments[0].tokens == std::vector<int32_t>{1000});
  CHECK(plan.segments[1].tokens.size() == 20);
}

TEST_CASE("scheduler: a fake run keeps every budget and every key grows",
          "[main_node][scheduler]") {
  // Six requests through four slots with drafts half right: each finishes
  // with exactly its max_tokens, no iteration exceeds its rows, and the
  // shared steps' keys grow.
  Scheduler s(Budgets(4, 24, /*task_rows=*/12));
  std::map<uint64_t, FakeSeq> all;
  for (uint64_t h = 1; h <= 6; ++h) {
    all[h] = Seq(h, 100 + h, static_cast<int>(3 + 7 * h), static_cast<int>(5 + 3 * h), 3);
    s.Submit(h);
  }
  std::vector<uint64_t> running;
  std::pair<uint64_t, uint32_t> last_shared{0, 0};
  int iterations = 0;
  while ((s.running() > 0 || s.waiting() > 0) && iterations < 1000) {
    for (const auto& [h, slot] : s.AtBoundary({}).admitted) {
      all[h].slot = slot;
      running.push_back(h);
    }
    std::vector<SeqState> st;
    for (uint64_t h : running) st.push_back(all[h].State());
    for (const DraftAsk& a : s.DraftAsks(st)) {
      for (int i = 0; i < a.room; ++i) {
        st[a.index].drafts.push_back(st[a.index].pending.front() + 1 + i);
      }
    }
    const IterationPlan plan = s.Plan(st);
    CHECK(plan.rows() <= 24);
    if (plan.kind == IterationPlan::Kind::kShared) {
      CHECK(plan.rows() <= 12);
      const std::pair<uint64_t, uint32_t> key{plan.key_request, plan.key_token};
      // The oldest running request's iteration: it only grows while that
      // request runs (a newer oldest one has a larger id).
      if (key.first == last_shared.first) CHECK(key.second > last_shared.second);
      last_shared = key;
    }
    for (const PlannedSegment& seg : plan.segments) {
      FakeSeq& f = all[running[seg.seq]];
      f.Apply(seg, (iterations % 2 == 0) ? seg.drafts() : 0);
      CHECK(f.emitted <= f.max_tokens);
      CHECK(f.pos <= 512);
    }
    for (auto it = running.begin(); it != running.end();) {
      if (all[*it].done()) {
        s.Finished(*it);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    ++iterations;
  }
  CHECK(iterations < 1000);
  for (const auto& [h, f] : all) CHECK(f.emitted == f.max_tokens);
}

}  // namespace
}  // namespace odmoe
