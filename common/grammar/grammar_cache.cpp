#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace odmoe {

absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnfCached(std::string_view text) {
  struct Entry {
    std::string text;
    std::shared_ptr<const Grammar> grammar;
  };
  static std::mutex mu;
  static std::vector<Entry> cache;  // most recently used first
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->text == text) {
        std::rotate(cache.begin(), it, it + 1);
        return cache.front().grammar;
      }
    }
  }
  absl::StatusOr<std::shared_ptr<const Grammar>> parsed = ParseGbnf(text);  // outside the lock
  if (!parsed.ok()) return parsed;
  std::lock_guard<std::mutex> lock(mu);
  cache.insert(cache.begin(), Entry{std::string(text), *parsed});
  if (cache.size() > kCachedGrammars) cache.pop_back();
  return parsed;
}

}  // namespace odmoe
