#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace odmoe {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

std::vector<uint8_t> Encode(uint32_t cp) {
  if (cp < 0x80) return {static_cast<uint8_t>(cp)};
  if (cp < 0x800)
    return {static_cast<uint8_t>(0xC0 | (cp >> 6)), static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  if (cp < 0x10000) {
    return {static_cast<uint8_t>(0xE0 | (cp >> 12)),
            static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)),
            static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  }
  return {static_cast<uint8_t>(0xF0 | (cp >> 18)), static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F)),
          static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)),
          static_cast<uint8_t>(0x80 | (cp & 0x3F))};
}

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

/// [lo, hi] within one encoded length: split until every continuation
/// position spans whole 64-value blocks, then the ranges pair up bytewise.
void SplitSameLength(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>* out) {
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitSameLength(lo, lo | m, out);
        SplitSameLength((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitSameLength(lo, (hi & ~m) - 1, out);
        SplitSameLength(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::vector<uint8_t> a = Encode(lo), b = Encode(hi);
  Utf8Sequence seq;
  for (size_t i = 0; i < a.size(); ++i) seq.emplace_back(a[i], b[i]);
  out->push_back(std::move(seq));
}

}  // namespace

std::vector<CodePointRange> ComplementCodePoints(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodePointRange> out;
  uint32_t next = 0;  // the first code point not yet covered
  bool done = false;
  for (const auto& [lo, hi] : ranges) {
    if (lo > next) out.emplace_back(next, lo - 1);
    if (hi >= kMaxCodePoint) {
      done = true;
      break;
    }
    next = std::max(next, hi + 1);
  }
  if (!done) out.emplace_back(next, kMaxCodePoint);
  return out;
}

std::vector<Utf8Sequence> Utf8SequencesOf(const std::vector<CodePointRange>& ranges) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  std::vector<Utf8Sequence> out;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodePoint);
    // Without the surrogates, cut where the encoded length changes.
    std::vector<CodePointRange> pieces;
    if (lo < kSurrogateLo && hi > kSurrogateHi) {
      pieces = {{lo, kSurrogateLo - 1}, {kSurrogateHi + 1, hi}};
    } else if (lo >= kSurrogateLo && hi <= kSurrogateHi) {
      continue;
    } else if (lo >= kSurrogateLo && lo <= kSurrogateHi) {
      pieces = {{kSurrogateHi + 1, hi}};
    } else if (hi >= kSurrogateLo && hi <= kSurrogateHi) {
      pieces = {{lo, kSurrogateLo - 1}};
    } else {
      pieces = {{lo, hi}};
    }
    for (auto [a, b] : pieces) {
      if (a > b) continue;
      for (const uint32_t end : kLengthEnds) {
        if (a > end) continue;
        const uint32_t top = std::min(b, end);
        SplitSameLength(a, top, &out);
        if (top == b) break;
        a = top + 1;
      }
    }
  }
  return out;
}

}  // namespace odmoe
