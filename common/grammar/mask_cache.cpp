#include "grammar/mask_cache.h"

namespace odmoe {

MaskCache& MaskCache::Shared() {
  static MaskCache* cache = new MaskCache(64 << 20);  // never destroyed: used until exit
  return *cache;
}

std::string MaskCache::Key(uint64_t grammar_fingerprint, uint64_t trie_id, int32_t eos_id,
                           std::string_view state_key) {
  std::string key(reinterpret_cast<const char*>(&grammar_fingerprint), sizeof(grammar_fingerprint));
  key.append(reinterpret_cast<const char*>(&trie_id), sizeof(trie_id));
  key.append(reinterpret_cast<const char*>(&eos_id), sizeof(eos_id));
  key.append(state_key);
  return key;
}

MaskCache::Mask MaskCache::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.in_order);
  return it->second.mask;
}

void MaskCache::Insert(const std::string& key, Mask mask) {
  const size_t size = mask->size() * sizeof(uint64_t) + key.size();
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.contains(key) || size > max_bytes_) return;
  order_.push_front(key);
  entries_.emplace(key, Entry{std::move(mask), order_.begin()});
  bytes_ += size;
  while (bytes_ > max_bytes_) {
    const auto last = entries_.find(order_.back());
    bytes_ -= last->second.mask->size() * sizeof(uint64_t) + last->first.size();
    entries_.erase(last);
    order_.pop_back();
  }
}

size_t MaskCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace odmoe
