#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

constexpr size_t kMaskCacheBytes = 16 << 20;  // per constraint: ~860 masks of 152k tokens

void SetBit(std::vector<uint64_t>& bits, int32_t i) { bits[i >> 6] |= uint64_t{1} << (i & 63); }

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const VocabTrie> trie, int32_t eos_id)
    : matcher_(grammar),
      trie_(std::move(trie)),
      eos_id_(eos_id),
      grammar_fingerprint_(grammar->fingerprint) {
  at_depth_.resize(trie_->max_depth + 1);
  const size_t words = (std::max(trie_->n_vocab(), eos_id_ + 1) + 63) / 64;
  eos_only_.assign(words, 0);
  if (eos_id_ >= 0) SetBit(eos_only_, eos_id_);
}

std::vector<uint64_t> GrammarConstraint::ComputeMask(int32_t state) {
  std::vector<uint64_t> mask(eos_only_.size(), 0);
  const auto& nodes = trie_->nodes;
  at_depth_[0] = state;
  for (size_t i = 0; i < nodes.size();) {
    const VocabTrie::Node& n = nodes[i];
    const int32_t next = matcher_.Step(at_depth_[n.depth - 1], n.byte);
    if (next == GrammarMatcher::kDead) {
      i = n.end;
      continue;
    }
    at_depth_[n.depth] = next;
    // A byte that kept the state (a string's plain character): when every
    // byte below keeps it too, the whole subtree is allowed without a walk.
    if (next == at_depth_[n.depth - 1] && trie_->bytes_below[i].bits != ByteSet{}.bits) {
      const ByteSet& loops = matcher_.SelfLoops(next);
      const ByteSet& below = trie_->bytes_below[i];
      bool inside = true;
      for (int w = 0; w < 4; ++w) inside = inside && (below.bits[w] & ~loops.bits[w]) == 0;
      if (inside) {
        for (uint32_t t = n.subtree_tok_begin; t < n.subtree_tok_end; ++t)
          SetBit(mask, trie_->token_ids[t]);
        i = n.end;
        continue;
      }
    }
    for (uint32_t t = n.tok_begin; t < n.tok_end; ++t) SetBit(mask, trie_->token_ids[t]);
    ++i;
  }
  if (eos_id_ >= 0 && eos_id_ < trie_->n_vocab())
    mask[eos_id_ >> 6] &= ~(uint64_t{1} << (eos_id_ & 63));
  const bool any = std::any_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; });
  if (eos_id_ >= 0 && (matcher_.IsComplete(state) || !any)) SetBit(mask, eos_id_);
  return mask;
}

const std::vector<uint64_t>& GrammarConstraint::AllowedTokens() {
  if (finished_) return eos_only_;
  if (masks_generation_ != matcher_.generation()) {
    masks_.clear();
    mask_order_.clear();
    masks_generation_ = matcher_.generation();
  }
  const int32_t state = matcher_.state();
  if (const auto it = masks_.find(state); it != masks_.end()) return *it->second;
  const std::string key =
      MaskCache::Key(grammar_fingerprint_, trie_->id, eos_id_, matcher_.StateKey(state));
  MaskCache::Mask mask = MaskCache::Shared().Find(key);
  if (!mask) {
    const uint64_t refusals = matcher_.full_refusals();
    mask = std::make_shared<const std::vector<uint64_t>>(ComputeMask(state));
    if (matcher_.full_refusals() == refusals) MaskCache::Shared().Insert(key, mask);
  }
  const size_t limit = std::max<size_t>(1, kMaskCacheBytes / (mask->size() * 8 + 1));
  while (mask_order_.size() >= limit) {
    masks_.erase(mask_order_.front());
    mask_order_.pop_front();
  }
  mask_order_.push_back(state);
  return *masks_.emplace(state, std::move(mask)).first->second;
}

bool GrammarConstraint::Allows(int32_t token) {
  if (token == eos_id_ && token >= 0) return Complete();
  if (finished_ || token < 0 || token >= trie_->n_vocab() || trie_->pieces[token].empty())
    return false;
  int32_t s = matcher_.state();
  for (const char c : trie_->pieces[token]) {
    s = matcher_.Step(s, static_cast<uint8_t>(c));
    if (s == GrammarMatcher::kDead) return false;
  }
  return true;
}

void GrammarConstraint::MaskLogits(std::span<float> logits) {
  const std::vector<uint64_t>& mask = AllowedTokens();
  if (eos_id_ < 0 && std::all_of(mask.begin(), mask.end(), [](uint64_t w) { return w == 0; }))
    return;
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = w < mask.size() ? mask[w] : 0;
    const size_t end = std::min(n, w * 64 + 64);
    if (bits == ~uint64_t{0}) continue;
    if (bits == 0) {
      std::fill(logits.begin() + w * 64, logits.begin() + end, kOff);
      continue;
    }
    for (size_t i = w * 64; i < end; ++i) {
      if (!((bits >> (i - w * 64)) & 1)) logits[i] = kOff;
    }
  }
}

absl::Status GrammarConstraint::Accept(int32_t token) {
  if (token == eos_id_ && token >= 0) {
    if (!Complete()) {
      return absl::FailedPreconditionError(
          "grammar: end of sequence before the grammar is complete");
    }
    finished_ = true;
    return absl::OkStatus();
  }
  if (finished_) return absl::FailedPreconditionError("grammar: a token after the end of sequence");
  if (token < 0 || token >= trie_->n_vocab() || trie_->pieces[token].empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("grammar: token ", token, " is never allowed"));
  }
  const std::string& piece = trie_->pieces[token];
  if (!matcher_.AcceptBytes(piece)) {
    return absl::FailedPreconditionError(absl::StrCat("grammar: token ", token, " (\"",
                                                      absl::CHexEscape(piece.substr(0, 64)),
                                                      "\") is not allowed here"));
  }
  return absl::OkStatus();
}

std::unique_ptr<GrammarConstraint> MakeGrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                                         const Tokenizer& tokenizer,
                                                         int32_t eos_id) {
  return std::make_unique<GrammarConstraint>(std::move(grammar), VocabTrie::ForTokenizer(tokenizer),
                                             eos_id);
}

}  // namespace odmoe
