// Speculative decoding keeps the output distribution exact with every
// sampling parameter (engine/sequence.h, engine/sampler.h): sequences driven
// through Sequence::ConsumedDrafts, with drafts that are often right and
// sometimes not, produce each output (a few tokens, or an early end) with the
// probability the chain assigns it token by token, computed exactly here by
// the reference (sampling_reference.h) over every possible output. Row i of a
// speculative step must see the history (penalties) and the constraint state
// after drafts[0, i): the negative case below shows that the bound catches a
// rule that processes every row before any draft is taken.
//
// The bound: Pearson's chi-square over the outputs (those expected fewer than
// 5 times pooled), at most df + 6 sqrt(2 df) (a p-value near 1e-8 for a right
// rule); the seeds are fixed, so the test cannot flake.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "engine/sequence.h"
#include "sampling_reference.h"

namespace odmoe {
namespace {

constexpr float kOff = -std::numeric_limits<float>::infinity();

const Tokenizer& Tok() { return test::EightTokenTokenizer(); }

// The "model": the same logits after every token (the history changes what
// the chain makes of them). EOS is likely, <unk> and <s> never.
const std::vector<float> kRow = {kOff, kOff, 0.9f, 1.2f, 0.8f, 0.3f, -0.2f, 0.6f};
const std::vector<int32_t> kPrompt = {1, 3, 5, 3};
constexpr int kMaxTokens = 3;
constexpr int32_t kEnd = -1;  // an output that ended (EOS or a stop token)

// A token may not repeat the last one accepted (the state a grammar has).
struct NoRepeat : TokenConstraint {
  void MaskLogits(std::span<float> logits) override {
    if (last >= 0) logits[static_cast<size_t>(last)] = kOff;
  }
  absl::Status Accept(int32_t token) override {
    if (token == last) return absl::FailedPreconditionError("repeated");
    last = token;
    return absl::OkStatus();
  }
  bool Complete() const override { return true; }
  int32_t last = -1;
};

struct Setup {
  const char* name;
  GenerateRequest request;
  bool no_repeat = false;
};

GenerateRequest Request(SamplingParams p, int min_tokens = 0, std::vector<int32_t> stop = {}) {
  GenerateRequest r;
  r.sampling = std::move(p);
  r.max_tokens = kMaxTokens;
  r.min_tokens = min_tokens;
  r.stop_token_ids = std::move(stop);
  return r;
}

using Output = std::vector<int32_t>;

// Every output and its exact probability, token by token through the reference.
void Enumerate(const Setup& s, Output emitted, double prob, std::map<Output, double>* out) {
  const GenerateRequest& r = s.request;
  if (static_cast<int>(emitted.size()) == r.max_tokens) {
    (*out)[emitted] += prob;
    return;
  }
  std::vector<int32_t> history = kPrompt;
  history.insert(history.end(), emitted.begin(), emitted.end());
  std::vector<int32_t> banned;
  if (static_cast<int>(emitted.size()) < r.min_tokens) {
    banned = r.stop_token_ids;
    banned.push_back(Tok().eos_id());
  }
  test::AllowedToken allowed;
  if (s.no_repeat && !emitted.empty()) {
    allowed = [last = emitted.back()](int32_t t) { return t != last; };
  }
  const std::vector<double> p =
      test::ReferenceProbabilities(kRow, history, r.sampling, banned, allowed);
  for (int32_t t = 0; t < static_cast<int32_t>(p.size()); ++t) {
    if (p[static_cast<size_t>(t)] == 0) continue;
    const double q = prob * p[static_cast<size_t>(t)];
    const bool ends =
        t == Tok().eos_id() ||
        std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), t) != r.stop_token_ids.end();
    Output next = emitted;
    next.push_back(ends ? kEnd : t);
    if (ends) {
      (*out)[next] += q;
    } else {
      Enumerate(s, next, q, out);
    }
  }
}

// Drafts for one step: two tokens from a small generator, mostly likely ones.
std::vector<int32_t> Drafts(uint64_t* state) {
  std::vector<int32_t> d;
  for (int i = 0; i < 2; ++i) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    d.push_back(static_cast<int32_t>(2 + (*state >> 33) % 6));  // 2..7: EOS too
  }
  return d;
}

// One output through Sequence: the prompt, then speculative steps.
Output Speculate(const Setup& s, uint64_t seed) {
  GenerateRequest r = s.request;
  r.sampling.seed = seed;
  Sequence seq(Tok(), r, kPrompt);
  if (s.no_repeat) seq.SetConstraint(std::make_unique<NoRepeat>());
  seq.Consumed(static_cast<int64_t>(kPrompt.size()), kRow);
  uint64_t state = seed * 31 + 7;
  std::vector<float> rows;
  while (!seq.done()) {
    const std::vector<int32_t> drafts = Drafts(&state);
    rows.clear();
    for (size_t i = 0; i <= drafts.size(); ++i) rows.insert(rows.end(), kRow.begin(), kRow.end());
    seq.ConsumedDrafts(drafts, rows);
  }
  Output out = seq.result().output_ids;
  const auto reason = seq.result().stop_reason;
  if (reason == GenerateResult::StopReason::kEos ||
      reason == GenerateResult::StopReason::kStopToken) {
    out.push_back(kEnd);
  }
  return out;
}

struct Fit {
  double chi2 = 0;
  int df = 0;
  double bound() const { return df + 6 * std::sqrt(2.0 * df); }
};

Fit ChiSquare(const std::map<Output, double>& exact, const std::map<Output, int>& seen, int n) {
  Fit f;
  double pooled_expected = 0, pooled_seen = 0;
  int bins = 0;
  for (const auto& [out, p] : exact) {
    const auto it = seen.find(out);
    const double o = it == seen.end() ? 0 : it->second;
    if (n * p < 5) {
      pooled_expected += n * p;
      pooled_seen += o;
      continue;
    }
    f.chi2 += (o - n * p) * (o - n * p) / (n * p);
    ++bins;
  }
  for (const auto& [out, count] : seen) {
    if (!exact.count(out)) {  // an output the chain cannot produce
      f.chi2 += std::numeric_limits<double>::infinity();
      (void)count;
    }
  }
  if (pooled_expected > 0) {
    f.chi2 += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected;
    ++bins;
  }
  f.df = bins - 1;
  return f;
}

}  // namespace

TEST_CASE("sampling speculative: drafts keep every parameter's distribution exact",
          "[sampler][speculative]") {
  const std::vector<Setup> setups = {
      {"penalties over the whole context", Request({.temperature = 1.0f,
                                                    .presence_penalty = 1.2f,
                                                    .frequency_penalty = 0.7f,
                                                    .repetition_penalty = 1.4f,
                                                    .repeat_last_n = -1})},
      {"penalties in a window of 2",
       Request({.temperature = 1.0f, .presence_penalty = 2.0f, .repeat_last_n = 2})},
      {"min_p with a penalty",
       Request({.temperature = 1.3f, .min_p = 0.5f, .presence_penalty = 1.0f})},
      {"typical_p with a penalty",
       Request({.temperature = 1.0f, .typical_p = 0.6f, .frequency_penalty = 1.0f})},
      {"logit_bias with a penalty",
       Request({.temperature = 1.0f,
                .presence_penalty = 1.0f,
                .logit_bias = {{4, 1.0f}, {3, kLogitBiasBan}, {6, 2.0f}}})},
      {"top_k and top_p with a penalty",
       Request({.temperature = 0.8f, .top_p = 0.8f, .top_k = 4, .frequency_penalty = 1.5f})},
      {"a constraint's mask", Request({.temperature = 1.0f}), true},
      {"min_tokens and stop_token_ids",
       Request({.temperature = 1.0f, .presence_penalty = 0.5f}, 2, {6})},
  };
  const int n = 20000;
  for (const Setup& s : setups) {
    INFO(s.name);
    std::map<Output, double> exact;
    Enumerate(s, {}, 1.0, &exact);
    double total = 0;
    for (const auto& [out, p] : exact) total += p;
    REQUIRE(total == Approx(1.0).margin(1e-9));
    std::map<Output, int> seen;
    for (int i = 0; i < n; ++i) ++seen[Speculate(s, 1000 + static_cast<uint64_t>(i))];
    const Fit fit = ChiSquare(exact, seen, n);
    INFO("chi-square " << fit.chi2 << " over " << fit.df << " degrees of freedom");
    CHECK(fit.df >= 5);
    CHECK(fit.chi2 < fit.bound());
  }
}

TEST_CASE("sampling speculative: the bound catches rows processed before the drafts are taken",
          "[sampler][speculative]") {
  // The wrong rule: every row of a step processed (penalties) with the
  // history as it was before the step, then the drafts verified. Emulated on
  // the Sampler directly (Sequence does it right); the right rule, emulated
  // the same way, passes.
  const Setup s{"penalties", Request({.temperature = 1.0f,
                                      .presence_penalty = 2.0f,
                                      .frequency_penalty = 1.0f,
                                      .repeat_last_n = -1})};
  std::map<Output, double> exact;
  Enumerate(s, {}, 1.0, &exact);
  auto run = [&](bool stale, uint64_t seed) {
    SamplingParams p = s.request.sampling;
    p.seed = seed;
    Sampler sampler(p);
    sampler.Accept(kPrompt);
    Output out;
    auto emit = [&](int32_t t) {
      if (t == Tok().eos_id()) {
        out.push_back(kEnd);
        return false;
      }
      out.push_back(t);
      sampler.Accept(t);
      return static_cast<int>(out.size()) < kMaxTokens;
    };
    if (!emit(sampler.Sample(sampler.Process(kRow)))) return out;
    uint64_t state = seed * 31 + 7;
    while (true) {
      const std::vector<int32_t> drafts = Drafts(&state);
      std::vector<std::vector<float>> processed;  // the wrong rule's rows, all at once
      if (stale) {
        for (size_t i = 0; i <= drafts.size(); ++i) {
          const std::span<const float> row = sampler.Process(kRow);
          processed.emplace_back(row.begin(), row.end());
        }
      }
      for (size_t i = 0; i <= drafts.size(); ++i) {
        std::vector<float> row = stale ? processed[i] : std::vector<float>();
        if (!stale) {
          const std::span<const float> fresh = sampler.Process(kRow);
          row.assign(fresh.begin(), fresh.end());
        }
        bool took = false;
        const int32_t t =
            i < drafts.size() ? sampler.SampleDraft(row, drafts[i], &took) : sampler.Sample(row);
        if (!emit(t)) return out;
        if (!took) break;
      }
    }
  };
  const int n = 20000;
  for (const bool stale : {false, true}) {
    std::map<Output, int> seen;
    for (int i = 0; i < n; ++i) ++seen[run(stale, 5000 + static_cast<uint64_t>(i))];
    const Fit fit = ChiSquare(exact, seen, n);
    INFO((stale ? "stale" : "right") << " rows: chi-square " << fit.chi2 << " over " << fit.df);
    if (stale) {
      CHECK(fit.chi2 > 3 * fit.bound());
    } else {
      CHECK(fit.chi2 < fit.bound());
    }
  }
}

}  // namespace odmoe
