// A grammar (grammar.h) as the TokenConstraint that Sequence applies before
// every sampled token (engine/token_constraint.h): structured output
// (response_format json_object / json_schema, llama-server's `grammar` and
// `json_schema` fields) and tool calls a request requires.
//
//   ODMOE_ASSIGN_OR_RETURN(std::string gbnf, JsonSchemaToGbnf(schema));  // json_schema.h
//   ODMOE_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> g, ParseGbnf(gbnf));
//   std::unique_ptr<TokenConstraint> rule =
//       MakeGrammarConstraint(g, tokenizer, tokenizer.eos_id());
//   rule->MaskLogits(row);                 // tokens the grammar refuses -> -infinity
//   int32_t next = sampler.Sample(row);
//   ODMOE_RETURN_IF_ERROR(rule->Accept(next));
//
// A mask is one walk of the vocabulary's byte trie (vocab_trie.h, built once
// per tokenizer) over the matcher's cached byte transitions, pruning a whole
// subtree at the first byte the grammar refuses; masks are cached per grammar
// state (a string's content, a number's digits: the same state token after
// token), so most tokens cost the copy of a cached bit mask onto the row;
// the masks are shared by every constraint with the same grammar and
// vocabulary in the process (mask_cache.h): a schema sent again is cheap.
// Tokens never allowed: control/unknown/unused tokens and tokens with no
// bytes; the end-of-sequence token `eos_id` only when the text so far is a
// complete match. When nothing else is allowed (the match is complete and
// cannot grow, or a bound of the matcher refused every byte) only EOS stays.
// Ids past the trie's vocabulary (a padded logits row) are masked. One
// constraint per request, used from one thread at a time (the trie and the
// shared masks are thread-safe).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/token_constraint.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/mask_cache.h"
#include "grammar/vocab_trie.h"

namespace odmoe {

class Tokenizer;

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabTrie> trie,
                    int32_t eos_id);

  void MaskLogits(std::span<float> logits) override;
  /// FAILED_PRECONDITION naming the token when the grammar does not allow it
  /// here (the state is then unchanged).
  absl::Status Accept(int32_t token) override;
  bool Complete() const override { return finished_ || matcher_.Complete(); }

  /// The tokens allowed next, one bit per id (bit i of word i / 64).
  const std::vector<uint64_t>& AllowedTokens();
  /// Whether `token` may come next (no mask needed: checks a draft token).
  bool Allows(int32_t token);

  /// Where the constraint stands, to come back to: speculative decoding
  /// accepts draft tokens to mask the rows after them, then restores the
  /// snapshot and accepts the tokens it kept.
  ///   GrammarConstraint::Snapshot before = rule.Save();
  ///   for (int32_t t : draft) { rule.MaskLogits(row_for(t)); rule.Accept(t); }
  ///   rule.Restore(before);
  struct Snapshot {
    std::string state_key;
    bool finished = false;
  };
  Snapshot Save() const { return Snapshot{matcher_.StateKey(matcher_.state()), finished_}; }
  void Restore(const Snapshot& snapshot) {
    matcher_.RestoreState(snapshot.state_key);
    finished_ = snapshot.finished;
  }

 private:
  std::vector<uint64_t> ComputeMask(int32_t state);

  GrammarMatcher matcher_;
  std::shared_ptr<const VocabTrie> trie_;
  int32_t eos_id_;
  bool finished_ = false;  // EOS accepted
  std::vector<int32_t> at_depth_;
  uint64_t grammar_fingerprint_;
  // Masks by state id (first in, first out; dropped when the matcher
  // renumbers), taken from MaskCache::Shared() or computed and put there.
  absl::flat_hash_map<int32_t, MaskCache::Mask> masks_;
  std::deque<int32_t> mask_order_;
  uint64_t masks_generation_ = 0;
  std::vector<uint64_t> eos_only_;
};

/// The constraint for `grammar` over `tokenizer`'s vocabulary (the trie comes
/// from VocabTrie::ForTokenizer's cache). `eos_id` < 0: no end token (a
/// complete match then leaves the row unmasked where nothing else fits).
std::unique_ptr<GrammarConstraint> MakeGrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                                         const Tokenizer& tokenizer,
                                                         int32_t eos_id);

}  // namespace odmoe
