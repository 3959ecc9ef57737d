// Token masks shared by every request that uses the same grammar over the
// same vocabulary (grammar_constraint.h): the mask of a grammar state is a
// function of the grammar, the vocabulary, the end-of-sequence id and the
// state's stacks alone, so a schema that every request of an app sends pays
// for each mask once per process instead of once per request.
//
//   MaskCache& cache = MaskCache::Shared();
//   std::string key = MaskCache::Key(grammar.fingerprint, trie.id, eos_id,
//                                    matcher.StateKey(state));
//   MaskCache::Mask mask = cache.Find(key);
//   if (!mask) {
//     mask = std::make_shared<const std::vector<uint64_t>>(Compute());
//     cache.Insert(key, mask);
//   }
//
// Least recently used masks go first once the cache holds more than its
// byte budget (64 MiB for Shared()). Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace odmoe {

class MaskCache {
 public:
  using Mask = std::shared_ptr<const std::vector<uint64_t>>;
  explicit MaskCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  /// The process-wide cache.
  static MaskCache& Shared();
  static std::string Key(uint64_t grammar_fingerprint, uint64_t trie_id, int32_t eos_id,
                         std::string_view state_key);

  /// The mask stored under `key`, or null.
  Mask Find(const std::string& key);
  void Insert(const std::string& key, Mask mask);
  size_t bytes() const;

 private:
  struct Entry {
    Mask mask;
    std::list<std::string>::iterator in_order;
  };
  size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<std::string> order_;  // most recently used first
  absl::flat_hash_map<std::string, Entry> entries_;
  size_t bytes_ = 0;
};

}  // namespace odmoe
