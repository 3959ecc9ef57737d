// Several sequences in one batch (Transformer::BeginSegments, continuous
// batching): every sequence's logits, step by step, have exactly the bits it
// gets alone, whatever else shares its batches: prefill chunks of other
// sequences, decode rows, sequences that end and give their KV slot to a new
// one. Run on every architecture family's tiny model (grouped-query, shared
// experts, multi-head latent attention, sinks and sliding windows).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <deque>

#include "backend_registry.h"
#include "engine/local_expert_executor.h"
#include "engine/transformer.h"
#include "test_paths.h"

namespace odmoe {
namespace {

using Segment = Transformer::Segment;

struct Case {
  std::vector<int32_t> prompt;
  int arrives = 0;  // the iteration at which it may start
  int new_tokens = 0;
};

int32_t Argmax(const float* row, int n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Each sequence alone: the prompt as one forward, then greedy decode; the
// logits of every step.
std::vector<std::vector<float>> Alone(const ModelFile& model, Backend& backend, const Case& c) {
  Transformer::Options opt;
  opt.n_ctx = 64;
  opt.n_batch = 16;
  auto tf = Transformer::Create(model, backend, opt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create(model, backend, 16);
  REQUIRE(experts.ok());
  std::vector<std::vector<float>> steps;
  std::vector<float> logits;
  REQUIRE((*tf)->Forward(c.prompt, 0, **experts, &logits, nullptr).ok());
  steps.push_back(logits);
  int pos = static_cast<int>(c.prompt.size());
  for (int i = 1; i < c.new_tokens; ++i) {
    const int32_t next = Argmax(logits.data(), static_cast<int>(logits.size()));
    REQUIRE((*tf)->Forward(std::vector<int32_t>{next}, pos++, **experts, &logits, nullptr).ok());
    steps.push_back(logits);
  }
  return steps;
}

struct Running {
  size_t index = 0;    // into the cases
  int slot = 0;
  size_t prefilled = 0;  // prompt rows already in its KV
  int pos = 0;
  int32_t last = -1;   // the token to decode next
  std::vector<std::vector<float>> steps;
};

// All cases through one Transformer with `slots` KV slots: each iteration
// takes every running sequence's next rows (a prefill chunk of at most
// `chunk` rows, or one decode row) under a budget of n_batch rows; queued
// sequences start when a slot is free.
std::vector<std::vector<std::vector<float>>> Batched(const ModelFile& model, Backend& backend,
                                                     const std::vector<Case>& cases, int slots,
                                                     int chunk) {
  Transformer::Options opt;
  opt.n_ctx = 64;
  opt.n_batch = 16;
  opt.n_seq = slots;
  auto tf = Transformer::Create(model, backend, opt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create(model, backend, 16);
  REQUIRE(experts.ok());
  const int n_vocab = model.config().n_vocab;
  std::vector<std::vector<std::vector<float>>> out(cases.size());
  std::deque<size_t> queue;
  std::vector<Running> running;
  std::vector<bool> slot_free(static_cast<size_t>(slots), true);
  size_t next_case = 0, done = 0;
  for (int iteration = 0; done < cases.size(); ++iteration) {
    REQUIRE(iteration < 1000);
    while (next_case < cases.size() && cases[next_case].arrives <= iteration) {
      queue.push_back(next_case++);
    }
    for (int s = 0; s < slots && !queue.empty(); ++s) {
      if (!slot_free[static_cast<size_t>(s)]) continue;
      slot_free[static_cast<size_t>(s)] = false;
      Running run;
      run.index = queue.front();
      run.slot = s;
      running.push_back(std::move(run));
      queue.pop_front();
    }
    if (running.empty()) continue;
    std::vector<int32_t> tokens;
    std::vector<Segment> segments;
    std::vector<size_t> owner;  // running index of each segment
    for (size_t r = 0; r < running.size(); ++r) {
      Running& run = running[r];
      const Case& c = cases[run.index];
      const int64_t budget = 16 - static_cast<int64_t>(tokens.size());
      if (budget <= 0) break;
      int64_t n = 1;
      if (run.prefilled < c.prompt.size()) {
        n = std::min<int64_t>({chunk, budget, static_cast<int64_t>(c.prompt.size() - run.prefilled)});
        tokens.insert(tokens.end(), c.prompt.begin() + static_cast<ptrdiff_t>(run.prefilled),
                      c.prompt.begin() + static_cast<ptrdiff_t>(run.prefilled + n));
      } else {
        tokens.push_back(run.last);
      }
      segments.push_back(Segment{run.slot, run.pos, n});
      owner.push_back(r);
    }
    const absl::Status st = (*tf)->ForwardSegments(tokens, segments, **experts);
    INFO(st);
    REQUIRE(st.ok());
    std::vector<float> logits;
    REQUIRE((*tf)->SegmentLogits(&logits).ok());
    REQUIRE(logits.size() == segments.size() * static_cast<size_t>(n_vocab));
    for (size_t i = 0; i < segments.size(); ++i) {
      Running& run = running[owner[i]];
      const Case& c = cases[run.index];
      run.pos += static_cast<int>(segments[i].n);
      if (run.prefilled < c.prompt.size()) {
        run.prefilled += static_cast<size_t>(segments[i].n);
        if (run.prefilled < c.prompt.size()) continue;  // a middle chunk: no token yet
      }
      const float* row = logits.data() + i * static_cast<size_t>(n_vocab);
      run.steps.emplace_back(row, row + n_vocab);
      run.last = Argmax(row, n_vocab);
    }
    for (size_t r = 0; r < running.size();) {
      if (static_cast<int>(running[r].steps.size()) == cases[running[r].index].new_tokens) {
        out[running[r].index] = std::move(running[r].steps);
        slot_free[static_cast<size_t>(running[r].slot)] = true;
        running.erase(running.begin() + static_cast<ptrdiff_t>(r));
        ++done;
      } else {
        ++r;
      }
    }
  }
  return out;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("transformer: a sequence batched with others has the logits it has alone",
          "[engine][batching]") {
  const std::string path = GENERATE(std::string("models/tiny-mixtral-f16.gguf"),
                                    std::string("tests/data/arch/tiny-qwen2moe.gguf"),
                                    std::string("tests/data/arch/tiny-deepseek2.gguf"),
                                    std::string("tests/data/arch/tiny-gpt-oss.gguf"));
  INFO(path);
  auto model = ModelFile::Open(test::SourcePath(path));
  REQUIRE(model.ok());
  auto backend = CreateBackend("cpu");
  REQUIRE(backend.ok());
  const int n_vocab = (*model)->config().n_vocab;
  auto ids = [&](std::initializer_list<int> raw) {
    std::vector<int32_t> v;
    for (int x : raw) v.push_back(static_cast<int32_t>(x % n_vocab));
    return v;
  };
  // Mixed prompt lengths, late arrivals, more sequences than slots (a
  // finished sequence's slot is reused), one that needs several chunks.
  const std::vector<Case> cases = {
      {ids({11, 250, 37, 900, 4, 18, 77}), 0, 9},
      {ids({5, 6, 7}), 0, 4},
      {ids({301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317,
            318, 319, 320, 321}),
       1, 6},
      {ids({42}), 2, 7},
      {ids({9, 99, 999, 1999}), 3, 5},
  };
  std::vector<std::vector<std::vector<float>>> alone;
  for (const Case& c : cases) alone.push_back(Alone(**model, **backend, c));
  for (int chunk : {16, 5}) {
    INFO("prefill chunk " << chunk);
    const auto batched = Batched(**model, **backend, cases, 3, chunk);
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO("sequence " << i);
      REQUIRE(batched[i].size() == alone[i].size());
      for (size_t s = 0; s < alone[i].size(); ++s) {
        INFO("step " << s);
        CHECK(BitEqual(batched[i][s], alone[i][s]));
      }
    }
  }
}

TEST_CASE("transformer: segments are checked", "[engine][batching]") {
  auto model = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  auto backend = CreateBackend("cpu");
  REQUIRE(backend.ok());
  Transformer::Options opt;
  opt.n_ctx = 32;
  opt.n_batch = 8;
  opt.n_seq = 2;
  auto tf = Transformer::Create(**model, **backend, opt);
  REQUIRE(tf.ok());
  CHECK((*tf)->n_seq() == 2);
  const std::vector<int32_t> three = {1, 2, 3};
  auto begin = [&](std::vector<Segment> segs) { return (*tf)->BeginSegments(three, segs); };
  CHECK(begin({{0, 0, 2}, {1, 4, 1}}).ok());
  CHECK(absl::IsInvalidArgument(begin({})));
  CHECK(absl::IsInvalidArgument(begin({{0, 0, 2}, {0, 4, 1}})));  // one slot twice
  CHECK(absl::IsInvalidArgument(begin({{0, 0, 2}, {2, 4, 1}})));  // no slot 2
  CHECK(absl::IsInvalidArgument(begin({{0, 0, 2}, {1, 4, 2}})));  // 4 rows for 3 tokens
  CHECK(absl::IsInvalidArgument(begin({{0, 0, 3}, {1, 4, 0}})));  // an empty segment
  CHECK(begin({{0, 0, 2}, {1, 31, 1}}).ok());                     // position 31: the last
  CHECK(absl::IsOutOfRange(begin({{0, 0, 1}, {1, 31, 2}})));       // position 32: past it
  opt.n_seq = 0;
  CHECK(absl::IsInvalidArgument(Transformer::Create(**model, **backend, opt).status()));
}

}  // namespace odmoe
