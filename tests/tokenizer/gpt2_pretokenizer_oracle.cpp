#include "gpt2_pretokenizer_oracle.h"

#include <cstddef>

#include "unicode_classes.h"
#include "tokenizer/utf8.h"

namespace odmoe::test {
namespace {

// The text as code points, with a sentinel offset at the end.
struct CodepointText {
  std::vector<char32_t> cps;
  std::vector<size_t> offsets;  // byte offset of cps[i]; offsets[n] = text size

  explicit CodepointText(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
      const Utf8Scan s = ScanUtf8(text, pos);
      // Callers pass valid UTF-8; a stray byte still advances (as itself).
      const size_t len = s.state == Utf8State::kValid ? s.length : 1;
      cps.push_back(s.state == Utf8State::kValid ? s.codepoint : 0xFFFD);
      offsets.push_back(pos);
      pos += len;
    }
    offsets.push_back(text.size());
  }
  size_t size() const { return cps.size(); }
};

class Matcher {
 public:
  explicit Matcher(const CodepointText& t) : t_(t) {}

  // Length in code points of the match starting at code point i (always >= 1).
  size_t MatchAt(size_t i) const {
    if (size_t n = Contraction(i)) return n;
    const size_t j = (t_.cps[i] == U' ' && i + 1 < t_.size()) ? i + 1 : i;
    const CodepointClass cj = Class(j);
    if (cj == CodepointClass::kLetter || cj == CodepointClass::kNumber) {
      return RunOf(j, [cj](CodepointClass c) { return c == cj; }) - i;
    }
    if (cj == CodepointClass::kOther) {
      return RunOf(j, [](CodepointClass c) { return c == CodepointClass::kOther; }) - i;
    }
    // Here t_.cps[i] is whitespace: \s+(?!\S), else \s+.
    const size_t end = RunOf(i, [](CodepointClass c) { return c == CodepointClass::kWhitespace; });
    if (end == t_.size() || end - i == 1) return end - i;
    return end - 1 - i;  // leave the last space to prefix the next word
  }

 private:
  CodepointClass Class(size_t i) const { return ClassifyCodepoint(t_.cps[i]); }

  template <typename Pred>
  size_t RunOf(size_t i, Pred pred) const {
    while (i < t_.size() && pred(Class(i))) ++i;
    return i;
  }

  size_t Contraction(size_t i) const {
    if (t_.cps[i] != U'\'' || i + 1 >= t_.size()) return 0;
    const char32_t a = t_.cps[i + 1];
    if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
    if (i + 2 >= t_.size()) return 0;
    const char32_t b = t_.cps[i + 2];
    if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
    return 0;
  }

  const CodepointText& t_;
};

}  // namespace

std::vector<std::string_view> Gpt2PreTokenize(std::string_view text) {
  const CodepointText t(text);
  const Matcher matcher(t);
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < t.size()) {
    const size_t n = matcher.MatchAt(i);
    words.push_back(text.substr(t.offsets[i], t.offsets[i + n] - t.offsets[i]));
    i += n;
  }
  return words;
}

}  // namespace odmoe::test
