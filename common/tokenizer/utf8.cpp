#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Length of the sequence a lead byte starts, and the allowed range of the
// second byte (narrower for E0, ED, F0, F4 to rule out overlongs, surrogates
// and values above U+10FFFF). Length 0: not a lead byte.
struct LeadInfo {
  size_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Utf8Scan ScanUtf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  const LeadInfo lead = Lead(b0);
  if (lead.length == 0) return {};
  if (lead.length == 1) return {Utf8State::kValid, b0, 1};
  char32_t cp = b0 & (0xFF >> (lead.length + 1));
  for (size_t k = 1; k < lead.length; ++k) {
    if (pos + k >= text.size()) return {Utf8State::kIncomplete, 0, k};
    const uint8_t b = byte(pos + k);
    const bool ok = k == 1 ? (b >= lead.second_lo && b <= lead.second_hi) : IsContinuation(b);
    if (!ok) return {};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8State::kValid, cp, lead.length};
}

std::optional<size_t> FindInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Scan s = ScanUtf8(text, pos);
    if (s.state != Utf8State::kValid) return pos;
    pos += s.length;
  }
  return std::nullopt;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t AppendSanitizedUtf8(std::string_view bytes, bool final, std::string* out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Scan s = ScanUtf8(bytes, pos);
    if (s.state == Utf8State::kValid) {
      out->append(bytes.substr(pos, s.length));
      pos += s.length;
    } else if (s.state == Utf8State::kIncomplete && !final) {
      return pos;
    } else {
      out->append(kUtf8Replacement);
      ++pos;
    }
  }
  return pos;
}

}  // namespace odmoe
