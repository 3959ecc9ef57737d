// The paper's benchmark workload (§4.1): batch 1, greedy, prompts of 16 and
// 128 tokens and 64 and 256 output tokens (the four configurations of its
// Table 2), prompts cut from held-out text that ships with the repository
// (tests/data/heldout.txt: fortunes the shipped model never trained on).
//
//   ODMOE_ASSIGN_OR_RETURN(auto prompts, HeldoutPrompts(tokenizer, path, 16, 3));
//   for (const BenchConfig& c : Table2Configs()) ... c.name()  // "16x64"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace odmoe::bench {

struct BenchConfig {
  int prompt_tokens = 16;
  int output_tokens = 64;
  std::string name() const;  // "16x64"
};

/// (16, 64), (16, 256), (128, 64), (128, 256).
std::vector<BenchConfig> Table2Configs();

/// `count` prompts of exactly `n_tokens` tokens (BOS included when the
/// tokenizer adds one), each starting at another fortune of the text
/// (fortunes are separated by lines holding only "%"), spread over the file.
/// INVALID_ARGUMENT when the text is too short or `n_tokens` < 2.
absl::StatusOr<std::vector<std::vector<int32_t>>> HeldoutPrompts(const Tokenizer& tokenizer,
                                                                 const std::string& path,
                                                                 int n_tokens, int count);

}  // namespace odmoe::bench
