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
//   static Budget bodies(64 << 20);     // bytes, grown as they arrive
//   Budget::Share body = bodies.Empty();
//   if (!body.GrowTo(bytes_so_far)) { /* 503 */ }
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

  /// Holds `amount` of the budget until destroyed (or released); movable. A
  /// share may grow as a need becomes known (a request body as it is read).
  class Share {
   public:
    Share() = default;  // holds nothing, of no budget
    Share(Share&& other) noexcept : budget_(other.budget_), amount_(other.amount_) {
      other.budget_ = nullptr;
      other.amount_ = 0;
    }
    Share& operator=(Share&& other) noexcept {
      if (this != &other) {
        Release();
        budget_ = other.budget_;
        amount_ = other.amount_;
        other.budget_ = nullptr;
        other.amount_ = 0;
      }
      return *this;
    }
    Share(const Share&) = delete;
    Share& operator=(const Share&) = delete;
    ~Share() { Release(); }

    uint64_t amount() const { return amount_; }
    /// Holds `total` in all, taking the difference from the budget; false,
    /// and nothing more taken, when the budget cannot spare it.
    bool GrowTo(uint64_t total);
    /// Gives the whole share back now.
    void Release() {
      if (budget_ != nullptr && amount_ > 0) budget_->GiveBack(amount_);
      amount_ = 0;
    }

   private:
    friend class Budget;
    Share(Budget* budget, uint64_t amount) : budget_(budget), amount_(amount) {}
    Budget* budget_ = nullptr;
    uint64_t amount_ = 0;
  };

  /// A share of nothing yet, to grow with Share::GrowTo.
  Share Empty() { return Share(this, 0); }

  /// `amount` of the budget, or nullopt when less than that is left (an
  /// amount larger than the capacity is never granted).
  std::optional<Share> Take(uint64_t amount);

  uint64_t capacity() const { return capacity_; }
  /// What is taken now.
  uint64_t in_use() const;

 private:
  bool TryTake(uint64_t amount);
  void GiveBack(uint64_t amount);

  const uint64_t capacity_;
  mutable std::mutex mu_;
  uint64_t in_use_ = 0;
};

}  // namespace odmoe
