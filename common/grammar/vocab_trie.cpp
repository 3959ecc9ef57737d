#include "grammar/vocab_trie.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace odmoe {

std::shared_ptr<const VocabTrie> VocabTrie::FromPieces(std::vector<std::string> pieces) {
  static std::atomic<uint64_t> next_id{1};
  auto trie = std::make_shared<VocabTrie>();
  trie->id = next_id++;
  std::vector<int32_t> order;
  for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
    if (!pieces[id].empty()) order.push_back(id);
  }
  // std::string compares bytes as unsigned char: the order of a preorder walk.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return pieces[a] < pieces[b]; });
  std::vector<uint32_t> path;  // node index per depth - 1
  auto& nodes = trie->nodes;
  auto& below = trie->bytes_below;
  // A node is done when the walk leaves it: its subtree ends here, and its
  // bytes join its parent's.
  auto close = [&]() {
    const uint32_t n = path.back();
    path.pop_back();
    nodes[n].end = static_cast<uint32_t>(nodes.size());
    nodes[n].subtree_tok_end = static_cast<uint32_t>(trie->token_ids.size());
    if (!path.empty()) {
      ByteSet& parent = below[path.back()];
      for (int w = 0; w < 4; ++w) parent.bits[w] |= below[n].bits[w];
      parent.Add(nodes[n].byte);
    }
  };
  std::string_view prev;
  for (const int32_t id : order) {
    const std::string& p = pieces[id];
    size_t common = 0;
    while (common < prev.size() && common < p.size() && prev[common] == p[common]) ++common;
    common = std::min(common, path.size());
    while (path.size() > common) close();
    for (size_t k = common; k < p.size(); ++k) {
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back(Node{.end = 0,
                           .depth = static_cast<uint32_t>(k + 1),
                           .tok_begin = 0,
                           .tok_end = 0,
                           .subtree_tok_begin = static_cast<uint32_t>(trie->token_ids.size()),
                           .subtree_tok_end = 0,
                           .byte = static_cast<uint8_t>(p[k])});
      below.emplace_back();
    }
    Node& at = nodes[path.back()];
    if (at.tok_begin == at.tok_end)
      at.tok_begin = at.tok_end = static_cast<uint32_t>(trie->token_ids.size());
    trie->token_ids.push_back(id);
    ++at.tok_end;
    trie->max_depth = std::max<uint32_t>(trie->max_depth, static_cast<uint32_t>(p.size()));
    prev = p;
  }
  while (!path.empty()) close();
  trie->pieces = std::move(pieces);
  return trie;
}

std::shared_ptr<const VocabTrie> VocabTrie::Build(const Tokenizer& tokenizer) {
  const TokenizerVocab& vocab = tokenizer.vocab();
  std::vector<std::string> pieces(tokenizer.n_vocab());
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    const TokenType type = vocab.token_types.empty() ? TokenType::kNormal : vocab.token_types[id];
    if (type == TokenType::kUnknown || type == TokenType::kUnused) continue;
    if (type == TokenType::kControl) {
      // Allowed only where a grammar names it (<text>: grammar.h kTokenMark).
      const std::string& text = vocab.tokens[id];
      if (!text.empty() && text.size() <= kMaxTokenRefBytes) {
        pieces[id] = std::string(1, kTokenMark) + text + kTokenMark;
      }
      continue;
    }
    std::string piece = tokenizer.TokenToPiece(id);
    // A byte 0xFF (a byte-fallback or byte-level token of that byte) is never
    // UTF-8 text, so no grammar text matches it; it could only spell a token
    // reference's kTokenMark, which is the control token's alone.
    if (piece.find(kTokenMark) != std::string::npos) continue;
    pieces[id] = std::move(piece);
  }
  return FromPieces(std::move(pieces));
}

std::shared_ptr<const VocabTrie> VocabTrie::ForTokenizer(const Tokenizer& tokenizer) {
  constexpr size_t kCachedTries = 4;
  struct Entry {
    uint64_t tokenizer;  // Tokenizer::instance_id(): never reused, unlike an address
    std::shared_ptr<const VocabTrie> trie;
  };
  static std::mutex mu;
  static std::vector<Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->tokenizer == tokenizer.instance_id()) {
      std::rotate(cache.begin(), it, it + 1);  // most recent first
      return cache.front().trie;
    }
  }
  std::shared_ptr<const VocabTrie> trie = Build(tokenizer);
  cache.insert(cache.begin(), Entry{tokenizer.instance_id(), trie});
  if (cache.size() > kCachedTries) cache.pop_back();
  return trie;
}

}  // namespace odmoe
