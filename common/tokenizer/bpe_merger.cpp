#include "tokenizer/bpe_merger.h"

#include <queue>
#include <string>

namespace odmoe {
namespace {

struct Symbol {
  size_t start;
  size_t length;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
  int32_t node;
};

struct Candidate {
  double priority;
  int32_t left;
  size_t length;  // combined length when queued, to spot stale entries

  // Max-heap order: higher priority first, then the leftmost pair.
  bool operator<(const Candidate& o) const {
    if (priority != o.priority) return priority < o.priority;
    return left > o.left;
  }
};

class Merger {
 public:
  Merger(std::string_view text, const std::vector<size_t>& starts, BpePairPriority priority)
      : text_(text), priority_(priority) {
    const int32_t n = static_cast<int32_t>(starts.size());
    symbols_.reserve(n);
    result_.nodes.reserve(2 * starts.size());
    for (int32_t i = 0; i < n; ++i) {
      const size_t end = i + 1 < n ? starts[i + 1] : text.size();
      symbols_.push_back({starts[i], end - starts[i], i - 1, i + 1 < n ? i + 1 : -1, i});
      result_.nodes.push_back({text.substr(starts[i], end - starts[i])});
    }
  }

  BpeMergeResult Run() {
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols_.size()); ++i) Consider(i, i + 1);
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[c.left];
      if (left.length == 0 || left.next < 0) continue;
      Symbol& right = symbols_[left.next];
      if (left.length + right.length != c.length) continue;  // a side has changed
      const int32_t node = static_cast<int32_t>(result_.nodes.size());
      result_.nodes.push_back({text_.substr(left.start, c.length), left.node, right.node});
      left.length = c.length;
      left.node = node;
      right.length = 0;
      left.next = right.next;
      if (left.next >= 0) symbols_[left.next].prev = c.left;
      if (left.prev >= 0) Consider(left.prev, c.left);
      if (left.next >= 0) Consider(c.left, left.next);
    }
    for (int32_t i = symbols_.empty() ? -1 : 0; i >= 0; i = symbols_[i].next) {
      result_.final_symbols.push_back(symbols_[i].node);
    }
    return std::move(result_);
  }

 private:
  void Consider(int32_t l, int32_t r) {
    const Symbol& a = symbols_[l];
    const Symbol& b = symbols_[r];
    const std::optional<double> p =
        priority_(text_.substr(a.start, a.length), text_.substr(b.start, b.length));
    if (p) queue_.push({*p, l, a.length + b.length});
  }

  std::string_view text_;
  BpePairPriority priority_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Candidate> queue_;
  BpeMergeResult result_;
};

}  // namespace

BpeMergeResult BpeMerge(std::string_view text, const std::vector<size_t>& starts,
                        BpePairPriority priority) {
  return Merger(text, starts, priority).Run();
}

BpeMergeRanks::BpeMergeRanks(const std::vector<std::string>& merges) {
  for (size_t i = 0; i < merges.size(); ++i) rank_.emplace(merges[i], static_cast<int32_t>(i));
}

BpeMergeResult BpeMergeRanks::Merge(std::string_view text,
                                    const std::vector<size_t>& starts) const {
  std::string key;
  return BpeMerge(text, starts,
                  [&](std::string_view l, std::string_view r) -> std::optional<double> {
                    key.assign(l).append(" ").append(r);
                    const auto it = rank_.find(key);
                    if (it == rank_.end()) return std::nullopt;
                    return -static_cast<double>(it->second);
                  });
}

}  // namespace odmoe
