// The merge loop shared by both tokenizers: start from a list of adjacent
// symbols (byte ranges of one string) and repeatedly join the adjacent pair
// with the highest priority until no pair is mergeable. Ties go to the
// leftmost pair. A priority queue of candidate pairs keeps this O(n log n).
//
//   // Priority of joining two adjacent symbols, or nullopt if they never merge.
//   auto priority = [&](std::string_view left, std::string_view right)
//       -> std::optional<double> { ... };
//   std::vector<size_t> starts = {0, 1, 2};            // one symbol per byte of "abc"
//   BpeMergeResult r = BpeMerge("abc", starts, priority);
//   for (int32_t s : r.final_symbols) use(r.nodes[s].text);
//
// SentencePiece uses the piece score as priority, GPT-2 uses minus the merge
// rank. `nodes` also records how each final symbol was built (its two halves),
// which SentencePiece needs to split merges into unused pieces again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"

namespace odmoe {

struct BpeNode {
  std::string_view text;
  int32_t left = -1;  // child nodes of a merged symbol; -1 for an initial symbol
  int32_t right = -1;
};

struct BpeMergeResult {
  std::vector<BpeNode> nodes;          // initial symbols first, then one per merge
  std::vector<int32_t> final_symbols;  // indices into `nodes`, in text order
};

using BpePairPriority =
    absl::FunctionRef<std::optional<double>(std::string_view left, std::string_view right)>;

/// `starts`: strictly increasing byte offsets of the initial symbols, the
/// first one 0 (each symbol runs to the next start or the end of `text`).
BpeMergeResult BpeMerge(std::string_view text, const std::vector<size_t>& starts,
                        BpePairPriority priority);

/// Ranked merges ("left right", highest priority first: tokenizer.ggml.merges)
/// and the merge loop over them, as byte-level and SentencePiece-style BPE
/// use them (the first occurrence of a pair keeps its rank).
///
///   BpeMergeRanks ranks(vocab.merges);
///   BpeMergeResult r = ranks.Merge(word, starts);
class BpeMergeRanks {
 public:
  explicit BpeMergeRanks(const std::vector<std::string>& merges);
  BpeMergeResult Merge(std::string_view text, const std::vector<size_t>& starts) const;

 private:
  absl::flat_hash_map<std::string, int32_t> rank_;
};

}  // namespace odmoe
