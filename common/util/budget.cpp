#include "util/budget.h"

namespace odmoe {

std::optional<Budget::Share> Budget::Take(uint64_t amount) {
  std::lock_guard<std::mutex> lock(mu_);
  if (amount > capacity_ - in_use_) return std::nullopt;
  in_use_ += amount;
  return Share(this, amount);
}

uint64_t Budget::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

void Budget::GiveBack(uint64_t amount) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= amount;
}

}  // namespace odmoe
