#include "util/budget.h"

namespace odmoe {

bool Budget::TryTake(uint64_t amount) {
  std::lock_guard<std::mutex> lock(mu_);
  if (amount > capacity_ - in_use_) return false;
  in_use_ += amount;
  return true;
}

std::optional<Budget::Share> Budget::Take(uint64_t amount) {
  if (!TryTake(amount)) return std::nullopt;
  return Share(this, amount);
}

bool Budget::Share::GrowTo(uint64_t total) {
  if (total <= amount_) return true;
  if (budget_ == nullptr || !budget_->TryTake(total - amount_)) return false;
  amount_ = total;
  return true;
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
