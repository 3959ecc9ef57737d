// A count of something costly that callers take a share of and give back:
// calls running at once, bytes being worked on at once. Take() either grants
// the whole share at once or refuses at once (no waiting: a refused caller is
// told RESOURCE_EXHAUSTED and may retry), so a flood of callers costs no
// more than the budget allows and holds no threads.
//
//   static Budget calls(4);
//   std::optional<Budget::Share> share = calls.Take(1);
//   if (!share) return absl::ResourceExhaustedError("4 calls run already");
//   ... work ...                       // the share is given back when destroyed
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

namespace odmoe {

class Budget {
 public:
  explicit Budget(uint64_t capacity) : capacity_(capacity) {}
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  /// Holds `amount` of the budget until destroyed.
  class Share {
   public:
    Share(Share&& other) noexcept : budget_(other.budget_), amount_(other.amount_) {
      other.budget_ = nullptr;
    }
    Share& operator=(Share&&) = delete;
    ~Share() {
      if (budget_ != nullptr) budget_->GiveBack(amount_);
    }

   private:
    friend class Budget;
    Share(Budget* budget, uint64_t amount) : budget_(budget), amount_(amount) {}
    Budget* budget_;
    uint64_t amount_;
  };

  /// `amount` of the budget, or nullopt when less than that is left (an
  /// amount larger than the capacity is never granted).
  std::optional<Share> Take(uint64_t amount);

  uint64_t capacity() const { return capacity_; }
  /// What is taken now.
  uint64_t in_use() const;

 private:
  void GiveBack(uint64_t amount);

  const uint64_t capacity_;
  mutable std::mutex mu_;
  uint64_t in_use_ = 0;
};

}  // namespace odmoe
