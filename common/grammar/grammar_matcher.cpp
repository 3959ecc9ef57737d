#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>

namespace odmoe {

using Kind = Grammar::Kind;

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)) {
  std::vector<Stack> start;
  bool ok = true;
  for (const uint32_t alt : grammar_->rule_alternatives[grammar_->root]) {
    Stack s;
    if (grammar_->elements[alt].kind != Kind::kEnd) s.push_back(alt);
    ok = ok && Expand(std::move(s), &start);
  }
  state_ = ok ? Intern(std::move(start)) : Intern({});
}

bool GrammarMatcher::Expand(Stack stack, std::vector<Stack>* out) const {
  const auto& el = grammar_->elements;
  std::vector<Stack> work{std::move(stack)};
  size_t steps = 0;
  while (!work.empty()) {
    Stack s = std::move(work.back());
    work.pop_back();
    if (++steps > 4 * kMaxStacks || s.size() > kMaxStackDepth) return false;
    if (s.empty() || el[s.back()].kind == Kind::kBytes) {
      out->push_back(std::move(s));
      if (out->size() > kMaxStacks) return false;
      continue;
    }
    // A rule on top: replace it by what follows it, then each alternative.
    const uint32_t pos = s.back();
    s.pop_back();
    if (el[pos + 1].kind != Kind::kEnd) s.push_back(pos + 1);
    for (const uint32_t alt : grammar_->rule_alternatives[el[pos].value]) {
      Stack t = s;
      if (el[alt].kind != Kind::kEnd) t.push_back(alt);
      work.push_back(std::move(t));
    }
  }
  return true;
}

int32_t GrammarMatcher::Intern(std::vector<Stack> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key;
  for (const Stack& s : stacks) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof(n));
    key.append(reinterpret_cast<const char*>(s.data()), n * sizeof(uint32_t));
  }
  const auto [it, added] = ids_.emplace(key, static_cast<int32_t>(states_.size()));
  if (!added) return it->second;
  State st;
  st.key = std::move(key);
  for (const Stack& s : stacks) (s.empty() ? st.complete : st.can_continue) = true;
  st.stacks = std::move(stacks);
  states_.push_back(std::move(st));
  return it->second;
}

int32_t GrammarMatcher::StepSlow(int32_t state, uint8_t byte) {
  if (state < 0) return kDead;
  if (!states_[state].next) {
    states_[state].next = std::make_unique<int32_t[]>(256);
    std::fill_n(states_[state].next.get(), 256, kUnknown);
  }
  if (const int32_t known = states_[state].next[byte]; known != kUnknown) return known;
  const auto& el = grammar_->elements;
  std::vector<Stack> out;
  bool ok = true;
  for (const Stack& s : states_[state].stacks) {
    if (s.empty()) continue;
    const Grammar::Element& top = el[s.back()];
    if (!grammar_->byte_sets[top.value].Has(byte)) continue;
    Stack t = s;
    t.pop_back();
    if (el[s.back() + 1].kind != Kind::kEnd) t.push_back(s.back() + 1);
    if (!Expand(std::move(t), &out)) {
      ok = false;
      break;
    }
  }
  // Past the hard bound the table stops growing: the byte is refused.
  const bool full = states_.size() >= 2 * kMaxStates;
  full_refusals_ += full;
  const int32_t next = (!ok || out.empty() || full) ? kDead : Intern(std::move(out));
  states_[state].next[byte] = next;
  return next;
}

const ByteSet& GrammarMatcher::SelfLoops(int32_t state) {
  if (!states_[state].self_loops) {
    ByteSet loops;
    for (int b = 0; b < 256; ++b) {
      if (Step(state, static_cast<uint8_t>(b)) == state) loops.Add(static_cast<uint8_t>(b));
    }
    states_[state].self_loops = std::make_unique<ByteSet>(loops);
  }
  return *states_[state].self_loops;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  int32_t s = state_;
  for (const char c : bytes) {
    s = Step(s, static_cast<uint8_t>(c));
    if (s == kDead) return false;
  }
  state_ = s;
  TrimIfLarge();
  return true;
}

void GrammarMatcher::RestoreState(const std::string& key) {
  if (const auto it = ids_.find(key); it != ids_.end()) {
    state_ = it->second;
    return;
  }
  std::vector<Stack> stacks;
  for (size_t pos = 0; pos + sizeof(uint32_t) <= key.size();) {
    uint32_t n = 0;
    std::memcpy(&n, key.data() + pos, sizeof(n));
    pos += sizeof(n);
    Stack s(n);
    std::memcpy(s.data(), key.data() + pos, n * sizeof(uint32_t));
    pos += n * sizeof(uint32_t);
    stacks.push_back(std::move(s));
  }
  state_ = Intern(std::move(stacks));
}

void GrammarMatcher::TrimIfLarge() {
  if (states_.size() <= kMaxStates) return;
  std::vector<Stack> current = std::move(states_[state_].stacks);
  states_.clear();
  ids_.clear();
  state_ = Intern(std::move(current));
  ++generation_;
}

}  // namespace odmoe
