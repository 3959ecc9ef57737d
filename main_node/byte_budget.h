// A count of bytes shared by many holders with a ceiling: the HTTP server's
// request bodies held at once, all connections together (http_server.h,
// max_buffered_body_bytes). Thread-safe.
//
//   ByteBudget budget(64 << 20);
//   ByteBudget::Hold hold(&budget);
//   if (!hold.GrowTo(content_length)) { /* 503: too many bodies at once */ }
//   // ... the body is read and handled; the bytes return when `hold` dies
#pragma once

#include <atomic>
#include <cstddef>
#include <utility>

namespace odmoe {

class ByteBudget {
 public:
  explicit ByteBudget(size_t limit) : limit_(limit) {}
  size_t limit() const { return limit_; }
  size_t used() const { return used_.load(); }

  /// Takes `n` bytes if they fit under the limit.
  bool TryTake(size_t n) {
    size_t cur = used_.load();
    do {
      if (n > limit_ || cur > limit_ - n) return false;
    } while (!used_.compare_exchange_weak(cur, cur + n));
    return true;
  }
  void Give(size_t n) { used_.fetch_sub(n); }

  /// Bytes held from a budget, returned when it is destroyed (movable).
  class Hold {
   public:
    Hold() = default;
    explicit Hold(ByteBudget* budget) : budget_(budget) {}
    Hold(Hold&& o) noexcept : budget_(o.budget_), held_(std::exchange(o.held_, 0)) {}
    Hold& operator=(Hold&& o) noexcept {
      if (this != &o) {
        Release();
        budget_ = o.budget_;
        held_ = std::exchange(o.held_, 0);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { Release(); }

    /// Holds at least `n` bytes in all (taking the difference); false, and
    /// nothing more taken, when the budget cannot spare them.
    bool GrowTo(size_t n) {
      if (n <= held_) return true;
      if (budget_ == nullptr || !budget_->TryTake(n - held_)) return false;
      held_ = n;
      return true;
    }
    size_t held() const { return held_; }
    void Release() {
      if (budget_ != nullptr && held_ > 0) budget_->Give(held_);
      held_ = 0;
    }

   private:
    ByteBudget* budget_ = nullptr;
    size_t held_ = 0;
  };

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

}  // namespace odmoe
