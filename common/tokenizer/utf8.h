// Strict UTF-8 helpers shared by the tokenizers and the decoders.
//
// "Valid" means RFC 3629: no overlong forms, no surrogates (U+D800..U+DFFF),
// nothing above U+10FFFF.
//
//   Utf8Scan s = ScanUtf8(text, pos);
//   if (s.state == Utf8State::kValid) { use(s.codepoint); pos += s.length; }
//
//   std::optional<size_t> bad = FindInvalidUtf8(text);   // offset of first bad byte
//
//   std::string out;
//   size_t used = AppendSanitizedUtf8(bytes, /*final=*/false, &out);
//   // `out` got every complete character of bytes[0, used); each byte that
//   // cannot be part of a valid character became U+FFFD; bytes[used, end)
//   // are a valid but unfinished sequence, to be retried with more bytes.
//
// Replacement is one U+FFFD per offending byte (what SentencePiece's and
// Hugging Face's byte-fallback decoders produce), and the decision for a byte
// depends only on the bytes that follow it within one sequence, so feeding
// the bytes in pieces (final=false, then final=true at the end) gives exactly
// the same text as feeding them all at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace odmoe {

/// The UTF-8 replacement character U+FFFD, encoded.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

enum class Utf8State {
  kValid,       // a whole character: `codepoint`, `length` bytes
  kIncomplete,  // the bytes up to the end are a proper prefix of a valid character
  kInvalid,     // the byte at `pos` cannot start a valid character here
};

struct Utf8Scan {
  Utf8State state = Utf8State::kInvalid;
  char32_t codepoint = 0;
  size_t length = 0;  // bytes of the character (kValid) or of the prefix (kIncomplete)
};

/// Looks at the character starting at byte `pos` (< text.size()).
Utf8Scan ScanUtf8(std::string_view text, size_t pos);

/// Offset of the first byte that is not part of a complete valid character
/// (a truncated sequence at the end counts), or nullopt if `text` is valid.
std::optional<size_t> FindInvalidUtf8(std::string_view text);

/// Appends the UTF-8 encoding of `cp` (must be a valid scalar value).
void AppendUtf8(char32_t cp, std::string* out);

/// Appends `bytes` to `out` with invalid bytes replaced (see the top of this
/// file) and returns how many bytes were consumed. With final=false a valid
/// but incomplete sequence at the end is left unconsumed; with final=true
/// everything is consumed.
size_t AppendSanitizedUtf8(std::string_view bytes, bool final, std::string* out);

}  // namespace odmoe
