// Where a match of a grammar (grammar.h) stands after some bytes: a pushdown
// state, advanced one byte at a time, with every state interned and every
// transition cached, so a byte costs a table lookup once seen (per-token work
// does not grow with the length generated) and the token masks
// (grammar_constraint.h) walk a vocabulary trie over cached transitions.
//
//   GrammarMatcher m(grammar);
//   int32_t s = m.state();
//   s = m.Step(s, '{');                  // GrammarMatcher::kDead when not allowed
//   if (m.AcceptBytes("{\"a\": 1}")) ... // all or nothing: the state moves only on success
//   bool done = m.Complete();            // the bytes so far are a whole match
//
// A state is a set of stacks of grammar positions (llama.cpp's design): each
// stack's top is a byte set to match next, an empty stack a finished match.
// Bounds keep a hostile grammar from using unbounded time or memory: a stack
// deeper than kMaxStackDepth, or a state of more than kMaxStacks stacks, is
// not followed (the byte is refused, so the grammar only gets stricter), and
// the table of states is trimmed back to the current state by Accept* once it
// holds more than kMaxStates (the caches are then rebuilt as needed); within
// one mask's walk it stops growing at twice that (refusing the byte).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "grammar/grammar.h"

namespace odmoe {

class GrammarMatcher {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr size_t kMaxStackDepth = 2048;
  static constexpr size_t kMaxStacks = 1 << 16;  // e.g. a 60k-word alternation
  static constexpr size_t kMaxStates = 1 << 14;

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  /// The current state (an id into this matcher's table).
  int32_t state() const { return state_; }
  /// The state after `byte` from `state`, or kDead. Cached.
  int32_t Step(int32_t state, uint8_t byte) {
    if (state >= 0) {
      const int32_t* next = states_[state].next.get();
      if (next != nullptr && next[byte] != kUnknown) return next[byte];
    }
    return StepSlow(state, byte);
  }
  /// Whether `state` is a finished match / can take more bytes.
  bool IsComplete(int32_t state) const { return states_[state].complete; }
  bool CanContinue(int32_t state) const { return states_[state].can_continue; }
  /// The bytes that lead from `state` back to itself (the inside of a
  /// string: every plain character). Computed once per state.
  const ByteSet& SelfLoops(int32_t state);

  /// Moves the current state past `bytes` if the grammar allows all of them
  /// (returns false and leaves the state alone otherwise).
  bool AcceptBytes(std::string_view bytes);
  bool Complete() const { return IsComplete(state_); }
  /// Bumped whenever state ids are renumbered (a trim): caches keyed by
  /// state id must be dropped.
  uint64_t generation() const { return generation_; }
  size_t state_count() const { return states_.size(); }
  /// Transitions refused because the table was full (2 * kMaxStates states
  /// within one mask's walk): results since then depend on this matcher's
  /// history and must not go to shared caches.
  uint64_t full_refusals() const { return full_refusals_; }
  /// The stacks of `state`, serialized: equal for equal states of equal
  /// grammars in any matcher (a key for shared caches).
  const std::string& StateKey(int32_t state) const { return states_[state].key; }
  /// Makes the state with this key (from StateKey, of this matcher's grammar,
  /// possibly before a trim renumbered the states) the current one.
  void RestoreState(const std::string& key);

 private:
  using Stack = std::vector<uint32_t>;  // grammar positions, top at the back
  struct State {
    std::vector<Stack> stacks;
    std::string key;
    bool complete = false;
    bool can_continue = false;
    std::unique_ptr<int32_t[]> next;  // 256 transitions, kUnknown until computed
    std::unique_ptr<ByteSet> self_loops;
  };
  static constexpr int32_t kUnknown = -2;

  /// Follows rule references at the tops of `stack` until every stack in
  /// `out` tops on bytes (or is empty). False when a bound was hit.
  int32_t StepSlow(int32_t state, uint8_t byte);
  bool Expand(Stack stack, std::vector<Stack>* out) const;
  int32_t Intern(std::vector<Stack> stacks);
  void TrimIfLarge();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<State> states_;
  absl::flat_hash_map<std::string, int32_t> ids_;  // serialized stacks -> state
  int32_t state_ = kDead;
  uint64_t generation_ = 0;
  uint64_t full_refusals_ = 0;
};

}  // namespace odmoe
