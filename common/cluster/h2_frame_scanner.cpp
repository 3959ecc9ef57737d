#include "cluster/h2_frame_scanner.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace odmoe {
namespace {

constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kClientPrefaceBytes = sizeof(kClientPreface) - 1;  // 24

}  // namespace

void H2ResetBudget::Refill(Clock::time_point now) {
  if (last_ != Clock::time_point{} && now > last_) {
    tokens_ =
        std::min(limits_.burst,
                 tokens_ + limits_.per_second * std::chrono::duration<double>(now - last_).count());
  }
  if (now > last_) last_ = now;
}

bool H2ResetBudget::Take(Clock::time_point now) {
  Refill(now);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

bool H2FrameScanner::FrameAllowed(H2ResetBudget::Clock::time_point now) {
  ++frames_;
  const uint8_t type = header_[3];
  const uint32_t stream = ((uint32_t{header_[5]} & 0x7f) << 24) | (uint32_t{header_[6]} << 16) |
                          (uint32_t{header_[7]} << 8) | uint32_t{header_[8]};
  if (type == kFrameHeaders && stream > last_stream_) {
    last_stream_ = stream;
    ++streams_opened_;
  } else if (type == kFrameRstStream) {
    if (!connection_budget_.Take(now)) return false;
    if (!node_budget_.Take(now)) {
      connection_budget_.Return();
      return false;
    }
    ++streams_reset_;
  }
  return true;
}

H2FrameScanner::Verdict H2FrameScanner::Scan(const char* data, size_t n,
                                             H2ResetBudget::Clock::time_point now) {
  Verdict v;
  if (refusal_ != Refusal::kNone) {
    v.refusal = refusal_;
    return v;
  }
  size_t i = 0;
  if (preface_seen_ < kClientPrefaceBytes) {
    const size_t take = std::min(n, kClientPrefaceBytes - preface_seen_);
    if (std::memcmp(data, kClientPreface + preface_seen_, take) != 0) {
      refusal_ = v.refusal = Refusal::kNotHttp2;
      return v;
    }
    preface_seen_ += take;
    i = take;
  }
  while (i < n) {
    if (payload_left_ > 0) {
      const size_t skip = static_cast<size_t>(std::min<uint64_t>(payload_left_, n - i));
      payload_left_ -= skip;
      i += skip;
      continue;
    }
    // A frame header; `start` is where it began in this call's bytes (0 when
    // it began in an earlier call, whose bytes are already relayed).
    const size_t start = header_seen_ > 0 ? 0 : i;
    const size_t take = std::min(kFrameHeaderBytes - header_seen_, n - i);
    std::memcpy(header_ + header_seen_, data + i, take);
    header_seen_ += take;
    i += take;
    if (header_seen_ < kFrameHeaderBytes) break;
    header_seen_ = 0;
    if (!FrameAllowed(now)) {
      refusal_ = v.refusal = Refusal::kResetsTooFast;
      v.forward = start;
      return v;
    }
    payload_left_ = (uint64_t{header_[0]} << 16) | (uint64_t{header_[1]} << 8) | header_[2];
  }
  v.forward = n;
  return v;
}

std::string H2FrameScanner::Describe(Refusal refusal) const {
  switch (refusal) {
    case Refusal::kNone:
      return "no refusal";
    case Refusal::kNotHttp2:
      return "not HTTP/2 (no client preface)";
    case Refusal::kResetsTooFast:
      return absl::StrFormat(
          "HTTP/2 stream resets beyond the budget (%d streams opened, %d reset, %d frames; "
          "CVE-2023-44487 rapid reset)",
          streams_opened_, streams_reset_, frames_);
  }
  return "unknown";
}

}  // namespace odmoe
