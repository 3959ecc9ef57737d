// UTF-8 scanning, validation and the streaming sanitizer.
#include "tokenizer/utf8.h"

#include <catch2/catch.hpp>
#include <random>

namespace odmoe {
namespace {

TEST_CASE("utf8 scan accepts valid characters", "[tokenizer]") {
  struct Case {
    std::string bytes;
    char32_t cp;
  };
  for (const Case& c : {Case{"A", U'A'}, Case{"\xC3\xA9", 0xE9}, Case{"\xE2\x82\xAC", 0x20AC},
                        Case{"\xF0\x9F\x98\x80", 0x1F600}, Case{"\xF4\x8F\xBF\xBF", 0x10FFFF},
                        Case{"\xEF\xBF\xBD", 0xFFFD}, Case{std::string(1, '\0'), 0}}) {
    const Utf8Scan s = ScanUtf8(c.bytes, 0);
    CHECK(s.state == Utf8State::kValid);
    CHECK(s.codepoint == c.cp);
    CHECK(s.length == c.bytes.size());
  }
}

TEST_CASE("utf8 scan rejects overlongs, surrogates, out of range", "[tokenizer]") {
  for (const char* bad : {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF",
                          "\xED\xA0\x80", "\xED\xBF\xBF", "\xF0\x80\x80\x80", "\xF4\x90\x80\x80",
                          "\xF5\x80\x80\x80", "\xFF", "\xC3\x41"}) {
    CHECK(ScanUtf8(bad, 0).state == Utf8State::kInvalid);
    CHECK(FindInvalidUtf8(std::string("ok") + bad) == 2u);
  }
  CHECK(ScanUtf8("\xE2\x82", 0).state == Utf8State::kIncomplete);
  CHECK(ScanUtf8("\xF0", 0).state == Utf8State::kIncomplete);
  CHECK(FindInvalidUtf8("abc\xF0\x9F\x98") == 3u);
  CHECK_FALSE(FindInvalidUtf8("caf\xC3\xA9 \xF0\x9F\x98\x80").has_value());
  CHECK_FALSE(FindInvalidUtf8("").has_value());
}

TEST_CASE("utf8 encode round trip", "[tokenizer]") {
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    char32_t cp = rng() % 0x110000;
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    AppendUtf8(cp, &s);
    const Utf8Scan scan = ScanUtf8(s, 0);
    REQUIRE(scan.state == Utf8State::kValid);
    CHECK(scan.codepoint == cp);
    CHECK(scan.length == s.size());
  }
}

TEST_CASE("utf8 sanitize replaces each bad byte", "[tokenizer]") {
  std::string out;
  CHECK(AppendSanitizedUtf8("a\xE2\x82x", true, &out) == 4);
  CHECK(out == "a\uFFFD\uFFFDx");
  out.clear();
  CHECK(AppendSanitizedUtf8("a\xE2\x82", false, &out) == 1);  // waits for more
  CHECK(out == "a");
  out.clear();
  CHECK(AppendSanitizedUtf8("\xC3\xA9\xFF\xED\xA0\x80", true, &out) == 6);
  CHECK(out == "\u00e9\uFFFD\uFFFD\uFFFD\uFFFD");
}

TEST_CASE("utf8 sanitize in pieces equals all at once", "[tokenizer]") {
  const std::vector<std::string> parts = {"a",    "\xC3",     "\xA9",     "\xE2\x82",
                                          "\xAC", "\xF0\x9F", "\x98\x80", "\x80",
                                          "\xFF", "\xED\xA0", "\xE0"};
  std::mt19937 rng(5);
  for (int iter = 0; iter < 500; ++iter) {
    std::string bytes;
    std::vector<std::string> chunks;
    for (int i = 0, n = static_cast<int>(rng() % 12); i < n; ++i) {
      chunks.push_back(parts[rng() % parts.size()]);
      bytes += chunks.back();
    }
    std::string whole;
    AppendSanitizedUtf8(bytes, true, &whole);
    CHECK_FALSE(FindInvalidUtf8(whole).has_value());
    std::string streamed, pending;
    for (const std::string& c : chunks) {
      pending += c;
      pending.erase(0, AppendSanitizedUtf8(pending, false, &streamed));
    }
    AppendSanitizedUtf8(pending, true, &streamed);
    CHECK(streamed == whole);
  }
}

}  // namespace
}  // namespace odmoe
