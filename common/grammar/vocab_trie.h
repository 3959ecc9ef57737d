// The vocabulary as a byte trie, for grammar token masks
// (grammar_constraint.h): a mask walks the trie once with the grammar's
// state, and a byte the grammar refuses prunes every token under it.
//
//   std::shared_ptr<const VocabTrie> trie = VocabTrie::ForTokenizer(tokenizer);  // cached
//   for (size_t i = 0; i < trie->nodes.size();) {    // preorder
//     const VocabTrie::Node& n = trie->nodes[i];
//     i = refused(n.byte) ? n.end : i + 1;            // skip the subtree, or go down
//   }
//
// A token's bytes are the tokenizer's own (Tokenizer::TokenToPiece: byte-level
// BPE's code points mapped back to bytes, SentencePiece's U+2581 as a space
// and <0xNN> as the byte). A control token is kTokenMark + its text +
// kTokenMark (grammar.h): a grammar allows it only where it names it
// (`<|call|>`). Unknown and unused tokens, tokens whose bytes are empty, and
// tokens holding the byte 0xFF (never UTF-8 text, so no grammar text matches
// them; they could only spell a kTokenMark) are in no node: a grammar never allows them (the end of sequence is the
// constraint's business). User-defined tokens (added
// tokens such as "<tool_call>") count as their text, as in llama.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace odmoe {

class Tokenizer;

struct VocabTrie {
  struct Node {
    uint32_t end;                // one past the last node of this node's subtree (preorder)
    uint32_t depth;              // bytes from the root (the root itself is not stored)
    uint32_t tok_begin;          // tokens spelled exactly by the path to here:
    uint32_t tok_end;            //   token_ids[tok_begin, tok_end)
    uint32_t subtree_tok_begin;  // the tokens of the whole subtree:
    uint32_t subtree_tok_end;    //   token_ids[subtree_tok_begin, subtree_tok_end)
    uint8_t byte;
  };
  std::vector<Node> nodes;           // preorder
  std::vector<ByteSet> bytes_below;  // node -> the bytes of its descendants
  std::vector<int32_t> token_ids;    // grouped by node
  std::vector<std::string> pieces;   // id -> bytes ("" = never allowed)
  uint32_t max_depth = 0;
  /// Unique in the process (shared caches key on it, mask_cache.h).
  uint64_t id = 0;
  int32_t n_vocab() const { return static_cast<int32_t>(pieces.size()); }

  /// From each token's bytes ("" for a token never allowed).
  static std::shared_ptr<const VocabTrie> FromPieces(std::vector<std::string> pieces);
  /// From a tokenizer (see the top of this file).
  static std::shared_ptr<const VocabTrie> Build(const Tokenizer& tokenizer);
  /// Build, cached per tokenizer (keyed by Tokenizer::instance_id(): a lookup
  /// costs nothing per request; the four most recently used are kept).
  /// Thread-safe.
  static std::shared_ptr<const VocabTrie> ForTokenizer(const Tokenizer& tokenizer);
};

}  // namespace odmoe
