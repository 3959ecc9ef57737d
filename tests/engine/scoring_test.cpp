// Scoring (engine/scoring.h) gives, at every position, exactly the
// log-softmax of the logits generation computes there: the prefill's last
// row for a prompt ending at that position, or a decode step's row. Checked
// bit for bit on the shipped tiny model, with several batch sizes.
#include "engine/scoring.h"

#include <catch2/catch.hpp>

#include "backend_registry.h"
#include "engine/local_expert_executor.h"
#include "engine/reference_engine.h"
#include "engine/sampler.h"
#include "engine/transformer.h"
#include "test_paths.h"

namespace odmoe {
namespace {

std::string Model() { return test::SourcePath("models/tiny-mixtral-f16.gguf"); }

// 30 token ids spread over the vocabulary (2048 in the tiny model), BOS first.
const std::vector<int32_t> kTokens = {1,    415, 1210, 302, 264, 1215, 349, 264, 1263, 298,
                                      3,    17,  900,  12,  44,  1500, 7,   8,   9,    10,
                                      2000, 250, 251,  30,  31,  1024, 77,  78,  600,  601};

struct Stack {
  std::unique_ptr<ModelFile> model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> tf;
  std::unique_ptr<LocalExpertExecutor> experts;
};

Stack MakeStack(int n_batch, int n_seq = 1, int64_t logit_buffer_bytes = int64_t{256} << 20) {
  Stack s;
  s.model = ModelFile::Open(Model()).value();
  s.backend = CreateBackend("cpu").value();
  Transformer::Options opt;
  opt.n_batch = n_batch;
  opt.n_ctx = 64;
  opt.n_seq = n_seq;
  opt.logit_buffer_bytes = logit_buffer_bytes;
  s.tf = Transformer::Create(*s.model, *s.backend, opt).value();
  s.experts = LocalExpertExecutor::Create(*s.model, *s.backend, n_batch).value();
  return s;
}

// The logits generation sees after tokens [0, i] for every i: a prefill of
// the first `prompt` tokens, then one decode step per token.
std::vector<std::vector<float>> GenerationLogits(const std::vector<int32_t>& tokens, int prompt) {
  Stack s = MakeStack(64);
  std::vector<std::vector<float>> out(tokens.size());
  // Positions before the prompt's end: what a shorter prompt's prefill gives.
  for (int i = 0; i + 1 < prompt; ++i) {
    std::span<const int32_t> head(tokens.data(), static_cast<size_t>(i + 1));
    REQUIRE(s.tf->Forward(head, 0, *s.experts, &out[static_cast<size_t>(i)], nullptr).ok());
  }
  std::span<const int32_t> head(tokens.data(), static_cast<size_t>(prompt));
  REQUIRE(s.tf->Forward(head, 0, *s.experts, &out[static_cast<size_t>(prompt - 1)], nullptr).ok());
  for (size_t i = static_cast<size_t>(prompt); i < tokens.size(); ++i) {
    const int32_t one[1] = {tokens[i]};
    REQUIRE(s.tf->Forward(one, static_cast<int>(i), *s.experts, &out[i], nullptr).ok());
  }
  return out;
}

}  // namespace

TEST_CASE("scoring: the log-softmax of generation's logits, bit for bit", "[engine][scoring]") {
  const std::vector<std::vector<float>> gen = GenerationLogits(kTokens, 12);
  for (int n_batch : {64, 7, 1}) {
    for (int first : {0, 9, 29}) {
      INFO("n_batch " << n_batch << " first " << first);
      Stack s = MakeStack(n_batch);
      auto r = ScoreTokens(*s.tf, *s.experts, kTokens, {.first = first, .top_n = 3});
      REQUIRE(r.ok());
      CHECK(r->first == first);
      REQUIRE(r->next_logprobs.size() == kTokens.size() - 1 - static_cast<size_t>(first));
      REQUIRE(r->top1.size() == kTokens.size() - static_cast<size_t>(first));
      REQUIRE(r->top.size() == r->top1.size());
      int mismatches = 0;
      for (size_t i = static_cast<size_t>(first); i < kTokens.size(); ++i) {
        const size_t k = i - static_cast<size_t>(first);
        const int32_t next = i + 1 < kTokens.size() ? kTokens[i + 1] : -1;
        const RowScore want = ScoreLogitsRow(gen[i], next, 3);
        if (next >= 0 && r->next_logprobs[k] != want.target_logprob) ++mismatches;
        if (r->top1[k] != want.top1 || r->top1[k] != Argmax(gen[i])) ++mismatches;
        if (r->top[k] != want.top) ++mismatches;
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("scoring: teacher forcing a greedy generation reproduces its tokens",
          "[engine][scoring]") {
  auto engine = ReferenceEngine::Create(Model(), {}).value();
  GenerateRequest req;
  req.prompt = "Once upon a time, in a small village";
  req.max_tokens = 16;
  req.ignore_eos = true;
  const GenerateResult g = engine->Generate(req).value();
  std::vector<int32_t> all = g.prompt_ids;
  all.insert(all.end(), g.output_ids.begin(), g.output_ids.end());
  const int p = static_cast<int>(g.prompt_ids.size());
  auto r = engine->Score(all, {.first = p - 1});
  REQUIRE(r.ok());
  REQUIRE(r->top1.size() == g.output_ids.size() + 1);
  for (size_t i = 0; i < g.output_ids.size(); ++i) {
    INFO("generated token " << i);
    CHECK(r->top1[i] == g.output_ids[i]);
    CHECK(r->next_logprobs[i] <= 0.0);
  }
}

TEST_CASE("scoring: several sequences in one batch score as each alone, bit for bit",
          "[engine][scoring]") {
  // Three sequences of other lengths and contents (the third a prefix of
  // the first, in another slot), scored alone and side by side.
  const std::vector<int32_t> a = kTokens;
  const std::vector<int32_t> b(kTokens.rbegin(), kTokens.rbegin() + 17);
  const std::vector<int32_t> c(kTokens.begin(), kTokens.begin() + 9);
  const std::vector<std::span<const int32_t>> seqs = {a, b, c};
  for (int first : {0, 5}) {
    Stack alone = MakeStack(64);
    std::vector<ScoreResult> want;
    for (std::span<const int32_t> seq : seqs) {
      want.push_back(
          ScoreTokens(*alone.tf, *alone.experts, seq, {.first = first, .top_n = 2}).value());
    }
    // A head of 7 rows per pass (a logit buffer of 7 rows): pieces too.
    for (int64_t buffer : {int64_t{256} << 20, int64_t{7} * 2048 * 4 + 5}) {
      INFO("first " << first << " logit buffer " << buffer);
      Stack s = MakeStack(64, 3, buffer);
      CHECK(s.tf->max_logit_rows() == (buffer < 1000000 ? 7 : 64));
      auto r = ScoreSequences(*s.tf, *s.experts, seqs, {.first = first, .top_n = 2});
      REQUIRE(r.ok());
      REQUIRE(r->size() == 3);
      for (size_t i = 0; i < 3; ++i) {
        INFO("sequence " << i);
        CHECK((*r)[i].first == first);
        CHECK((*r)[i].next_logprobs == want[i].next_logprobs);
        CHECK((*r)[i].top1 == want[i].top1);
        CHECK((*r)[i].top == want[i].top);
      }
    }
  }
}

TEST_CASE("scoring: several sequences that do not fit one batch are refused",
          "[engine][scoring]") {
  Stack s = MakeStack(32, 2);
  const std::vector<int32_t> ten(10, 5), twenty(20, 6), bad = {1, 2, 5000};
  auto refused = [&](std::vector<std::span<const int32_t>> seqs, const std::string& why) {
    const absl::Status st = ScoreSequences(*s.tf, *s.experts, seqs, {}).status();
    INFO(st.ToString());
    CHECK(absl::IsInvalidArgument(st));
    CHECK(st.message().find(why) != std::string::npos);
  };
  refused({}, "no sequences");
  refused({ten, ten, ten}, "3 sequences to score at once, but the transformer has 2 KV slots");
  refused({twenty, twenty}, "40 tokens in all do not fit one batch of 32 rows");
  refused({ten, bad}, "token id 5000 outside the vocabulary");
  // The stack still works after the refusals.
  CHECK(ScoreSequences(*s.tf, *s.experts, std::vector<std::span<const int32_t>>{ten, twenty}, {})
            .ok());
}

TEST_CASE("scoring: requests that do not fit are refused", "[engine][scoring]") {
  const std::vector<int32_t> ok = {1, 2, 3, 4};
  CHECK(ValidateScoreRequest(ok, {}, 100, 8).ok());
  CHECK(ValidateScoreRequest(ok, {.first = 3, .top_n = kMaxScoreTopN}, 100, 8).ok());
  auto invalid = [](std::span<const int32_t> t, ScoreOptions o, int ctx, const std::string& why) {
    const absl::Status s = ValidateScoreRequest(t, o, 100, ctx);
    INFO(s.ToString());
    CHECK(absl::IsInvalidArgument(s));
    CHECK(s.message().find(why) != std::string::npos);
  };
  invalid({}, {}, 8, "empty");
  invalid(ok, {}, 3, "do not fit the context of 3");
  invalid(std::vector<int32_t>{1, 100}, {}, 8, "token id 100 outside the vocabulary");
  invalid(std::vector<int32_t>{-1, 2}, {}, 8, "token id -1");
  invalid(ok, {.top_n = kMaxScoreTopN + 1}, 8, "top_n must be in [0, 20]");
  invalid(ok, {.first = 4}, 8, "first scored position 4");
  invalid(ok, {.first = -1}, 8, "first scored position -1");
  const std::vector<int32_t> big(kMaxScoreEntries / 10, 1);
  invalid(big, {.top_n = 10}, kMaxScoreTokens, "exceed the limit");

  Stack s = MakeStack(8);
  const std::vector<int32_t> too_long(65, 1);  // the stack's context is 64
  CHECK(absl::IsInvalidArgument(ScoreTokens(*s.tf, *s.experts, too_long, {}).status()));
}

}  // namespace odmoe
