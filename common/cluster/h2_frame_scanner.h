// Reads a client's side of an HTTP/2 connection as it passes through a relay
// (cluster/h2_guard.h) and decides, frame by frame, whether the connection may
// go on: the 24-byte client preface first ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
// then frames (a 9-byte header: 24-bit payload length, type, flags, 31-bit
// stream id; the payload is skipped, never copied). It counts the streams the
// client opens (HEADERS, type 0x1, on a stream id above every earlier one) and
// the streams it resets (RST_STREAM, type 0x3). Each reset takes a token from
// the connection's H2ResetBudget and one from the node's; a reset that finds
// either empty ends the connection: the HTTP/2 "rapid reset" attack
// (CVE-2023-44487) opens and resets streams as fast as it can, and gRPC 1.51
// queues a call for every one of them. gRPC's own clients reset a stream only
// when a call is cancelled or runs out of time, far below the budget.
//
//   H2ResetBudget node_budget(H2ResetBudget::NodeDefault());
//   H2FrameScanner scanner(node_budget);
//   H2FrameScanner::Verdict v = scanner.Scan(bytes, n, Clock::now());
//   relay(bytes, v.forward);               // the bytes before a refused frame
//   if (v.refusal != H2FrameScanner::Refusal::kNone) close(connection);
//
// Bytes may arrive split at any point (a frame header over several reads).
// Not thread-safe: one connection's bytes in order; the node budget is shared
// by the connections of one relay thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace odmoe {

/// A token bucket of stream resets: `burst` tokens, refilled at `per_second`.
class H2ResetBudget {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    double burst = 0;
    double per_second = 0;
  };
  /// One connection: 100 resets at once, 50 a second after that.
  static constexpr Limits ConnectionDefault() { return {100, 50}; }
  /// All the connections of one node together: 400 at once, 200 a second.
  static constexpr Limits NodeDefault() { return {400, 200}; }

  explicit H2ResetBudget(Limits limits) : limits_(limits), tokens_(limits.burst) {}

  /// Whether a token is left at `now` (then it is taken).
  bool Take(Clock::time_point now);
  /// Puts back a token taken by Take (when another budget refused the reset).
  void Return() { tokens_ += 1; }

 private:
  void Refill(Clock::time_point now);

  const Limits limits_;
  double tokens_;
  Clock::time_point last_{};
};

class H2FrameScanner {
 public:
  enum class Refusal {
    kNone,
    kNotHttp2,       // the bytes do not start with the client preface
    kResetsTooFast,  // a reset beyond the connection's or the node's budget
  };
  struct Verdict {
    size_t forward = 0;  // the first `forward` bytes may be relayed
    Refusal refusal = Refusal::kNone;
  };

  explicit H2FrameScanner(H2ResetBudget& node_budget,
                          H2ResetBudget::Limits connection = H2ResetBudget::ConnectionDefault())
      : node_budget_(node_budget), connection_budget_(connection) {}

  /// Scans the next `n` bytes of the client's stream. Once a Verdict refused
  /// the connection, later calls forward nothing.
  Verdict Scan(const char* data, size_t n, H2ResetBudget::Clock::time_point now);

  uint64_t streams_opened() const { return streams_opened_; }
  uint64_t streams_reset() const { return streams_reset_; }
  uint64_t frames() const { return frames_; }
  /// "not HTTP/2 (no client preface)", "N stream resets ...": for the log.
  std::string Describe(Refusal refusal) const;

 private:
  static constexpr uint8_t kFrameHeaders = 0x1;
  static constexpr uint8_t kFrameRstStream = 0x3;
  static constexpr size_t kFrameHeaderBytes = 9;

  // Whether the frame whose header is header_ may pass.
  bool FrameAllowed(H2ResetBudget::Clock::time_point now);

  H2ResetBudget& node_budget_;
  H2ResetBudget connection_budget_;
  size_t preface_seen_ = 0;  // bytes of the preface matched so far
  uint8_t header_[kFrameHeaderBytes] = {};
  size_t header_seen_ = 0;     // bytes of the current frame header so far
  uint64_t payload_left_ = 0;  // bytes of the current payload still to skip
  uint32_t last_stream_ = 0;   // the highest stream id HEADERS opened
  uint64_t streams_opened_ = 0, streams_reset_ = 0, frames_ = 0;
  Refusal refusal_ = Refusal::kNone;
};

}  // namespace odmoe
