#include "bench/workload.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe::bench {

std::string BenchConfig::name() const { return absl::StrCat(prompt_tokens, "x", output_tokens); }

std::vector<BenchConfig> Table2Configs() { return {{16, 64}, {16, 256}, {128, 64}, {128, 256}}; }

absl::StatusOr<std::vector<std::vector<int32_t>>> HeldoutPrompts(const Tokenizer& tokenizer,
                                                                 const std::string& path,
                                                                 int n_tokens, int count) {
  if (n_tokens < 2 || count < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("prompts need >= 2 tokens and a count >= 1 (got %d, %d)", n_tokens, count));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the held-out text"));
  std::vector<std::string> fortunes(1);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "%") {
      if (!fortunes.back().empty()) fortunes.emplace_back();
      continue;
    }
    absl::StrAppend(&fortunes.back(), line, "\n");
  }
  if (fortunes.back().empty()) fortunes.pop_back();
  if (fortunes.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no text"));
  std::vector<std::vector<int32_t>> prompts;
  const size_t stride = std::max<size_t>(1, fortunes.size() / static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    std::string text;
    std::vector<int32_t> ids;
    for (size_t f = static_cast<size_t>(i) * stride % fortunes.size(), used = 0;
         used < fortunes.size(); f = (f + 1) % fortunes.size(), ++used) {
      text += fortunes[f];
      ODMOE_ASSIGN_OR_RETURN(ids, tokenizer.Encode(text));
      if (static_cast<int>(ids.size()) >= n_tokens) break;
    }
    if (static_cast<int>(ids.size()) < n_tokens) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the whole text is %d tokens; a prompt of %d cannot be cut from it", path,
          ids.size(), n_tokens));
    }
    ids.resize(static_cast<size_t>(n_tokens));
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

}  // namespace odmoe::bench
