// Choosing the next token from logits: the sampling chain of llama-server and
// vLLM, in one fixed order.
//
// The chain, on one row of the model's logits:
//   Process (the logits themselves; Sequence passes the bans and the rule):
//     1. logit_bias      l[t] += bias[t]; a bias of -100 bans t (-infinity)
//     2. penalties       on the tokens of the penalty window (the last
//                        repeat_last_n tokens of prompt + generated; -1 = the
//                        whole context, 0 = none), each with its count c:
//                        repetition_penalty r (llama.cpp / HF: l > 0 ? l / r
//                        : l * r), then l -= c * frequency_penalty +
//                        presence_penalty (llama.cpp's order)
//     3. bans            `banned` tokens to -infinity (min_tokens: EOS and
//                        stop_token_ids until min_tokens are out)
//     4. the constraint  TokenConstraint::MaskLogits (a grammar)
//   Sample / SampleDraft (a distribution over the processed logits):
//     greedy (temperature 0): the processed argmax, nothing else
//     5. temperature     p = softmax(l / T)
//     6. top_k           the K most likely (0 or -1 = all)
//     7. typical_p       locally typical sampling (1 = off): by |-log p - H|,
//                        the smallest set reaching typical_p
//     8. top_p           the smallest most likely set reaching top_p (1 = off)
//     9. min_p           those with p >= min_p * p_max (0 = off)
//    10. draw            from what is left, renormalized
// Bias and penalties before everything (both references); temperature before
// the cuts as vLLM and Hugging Face apply it (llama.cpp's default chain puts it
// last); the cuts in llama.cpp's order. Each cut renormalizes what it keeps
// and keeps at least one token. Greedy sees steps 1-4 (bias, penalties and
// bans change the argmax, as in llama-server). Log-probabilities stay the
// model's: Sequence scores the raw row, not the processed one. SampleDraft
// draws from the same processed distribution as Sample, so speculative
// decoding is exact with every parameter as long as each row is processed
// after the tokens before it were accepted (Sequence::ConsumedDrafts).
//
// Sampling is reproducible across machines: the random stream is
// std::mt19937_64 seeded with `seed`, turned into uniforms by our own
// conversion (not std::uniform_real_distribution, whose output differs
// between standard libraries); the draw walks the tokens in id order.
//
// Cost: Process returns its input untouched (no copy) when no step applies;
// the penalties touch only the window's distinct tokens, whose counts are kept
// as tokens come and go (O(window) state, nothing rescanned per token).
// Sampling with no cut is one pass (exp) and a walk over the vocabulary;
// top_p and typical_p sort only as many tokens as their mass needs.
//
// The parameters' bounds are declared with the request's other fields
// (request_fields.h), where every transport and PreparePrompt check them; a
// Sampler takes parameters already checked.
//
//   SamplingParams p{.temperature = 0.8f, .top_p = 0.95f, .seed = 42,
//                    .presence_penalty = 0.5f, .logit_bias = {{13, -100.0f}}};
//   ODMOE_RETURN_IF_ERROR(ValidateRequestFields(GenerateRequest{.sampling = p}));
//   Sampler s(p);
//   s.Accept(prompt_ids);                                   // the penalty window's history
//   std::span<const float> row = s.Process(logits);         // steps 1-4
//   int32_t next = s.Sample(row);                           // steps 5-10
//   s.Accept(next);
//   bool took = false;
//   int32_t verified = s.SampleDraft(row, drafted_token, &took);   // speculative decoding
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/token_constraint.h"

namespace odmoe {

/// Defaults here (each one "off"); bounds, names and help in
/// request_fields.cpp (one row each).
struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;        // 1 = off
  int top_k = 0;             // 0 (or -1) = all
  uint64_t seed = 0;
  float min_p = 0.0f;               // 0 = off
  float typical_p = 1.0f;           // 1 = off
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  float repetition_penalty = 1.0f;  // 1 = off
  int repeat_last_n = 64;           // the penalties' window; -1 = whole context, 0 = none
  /// Token id -> bias in [-100, 100] added to its logit; -100 bans it.
  std::map<int32_t, float> logit_bias = {};

  bool penalties_on() const {
    return repeat_last_n != 0 &&
           (presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1);
  }
};

/// A logit_bias of this value bans the token (OpenAI's documented meaning).
inline constexpr float kLogitBiasBan = -100.0f;

/// Index of the largest logit (ties: the lowest index).
int32_t Argmax(std::span<const float> logits);

/// The penalties' history: the last `last_n` tokens (-1: all; 0: none) and
/// how often each occurs among them, kept as tokens come and go.
class PenaltyWindow {
 public:
  explicit PenaltyWindow(int last_n);
  void Push(int32_t token);
  /// Token -> count (> 0) over the window.
  const std::unordered_map<int32_t, int>& counts() const { return counts_; }

 private:
  int last_n_;
  std::vector<int32_t> ring_;  // last_n > 0: the window, oldest at head_
  size_t head_ = 0;
  std::unordered_map<int32_t, int> counts_;
};

class Sampler {
 public:
  /// The value Sample and SampleDraft return when the processed row allows
  /// no token at all (every logit -infinity: biases or bans left none).
  static constexpr int32_t kNoToken = -1;

  explicit Sampler(const SamplingParams& params);

  /// Tokens into the penalty window, in order (the prompt, then each
  /// emitted token). Nothing is kept when no penalty is on.
  void Accept(int32_t token);
  void Accept(std::span<const int32_t> tokens);

  /// Steps 1-4 on one row of `logits`. Returns `logits` itself when none of
  /// them applies, else the processed copy (valid until the next call).
  std::span<const float> Process(std::span<const float> logits,
                                 std::span<const int32_t> banned = {},
                                 TokenConstraint* constraint = nullptr);

  /// Steps 5-10 on processed logits (greedy: their argmax). kNoToken when
  /// every logit is -infinity.
  int32_t Sample(std::span<const float> logits);
  /// Speculative decoding: the next token where a drafter proposed `draft`
  /// (deterministically, so its distribution q is all on `draft`). Greedy:
  /// the argmax, accepted when it is the draft. Sampling: the standard
  /// rejection rule with that q: accept the draft with probability p(draft)
  /// (p: the distribution Sample draws from), else draw from p without the
  /// draft, renormalized. The result is distributed exactly as Sample's.
  /// *accepted says whether the draft was taken.
  int32_t SampleDraft(std::span<const float> logits, int32_t draft, bool* accepted);

  /// The distribution Sample draws from on processed `logits`, one
  /// probability per token id (greedy: 1 on the argmax). For tests and tools.
  std::vector<double> Probabilities(std::span<const float> logits);

 private:
  struct Candidate {
    float logit;
    int32_t id;
    float weight;  // exp((logit - max) / T)
    float key;     // typical_p: the distance from the entropy
  };
  // Steps 5-9: the unnormalized probability of each token left, in
  // weights_ (one per token, 0: cut) when dense_, else in candidates_ sorted
  // by id; returns their sum (0: no token left).
  double Weigh(std::span<const float> logits);
  // A token's weight after Weigh (0: cut).
  double WeightOf(int32_t token) const;
  // Keeps the smallest prefix of candidates_ in `before`'s order whose weight
  // reaches `target` (sorting only as far as it needs); returns its weight.
  template <typename Before>
  double KeepPrefix(Before before, double target);
  // The token at `target` of the cumulative weights in id order, skipping
  // `skip` (kNoToken: none); kNoToken when none is left.
  int32_t Walk(double target, int32_t skip) const;
  double Uniform();  // [0, 1)

  SamplingParams params_;
  std::mt19937_64 rng_;
  PenaltyWindow window_;
  std::vector<Candidate> candidates_;  // reused across calls
  std::vector<float> weights_;         // one per token, when dense_
  bool dense_ = true;
  std::vector<float> processed_;
};

}  // namespace odmoe
