#include "util/clip_for_message.h"

#include <catch2/catch.hpp>
#include <string>

namespace odmoe {

TEST_CASE("clip: short values come back whole, long ones cut with their length", "[util]") {
  CHECK(ClipForMessage("shadow") == "shadow");
  CHECK(ClipForMessage(std::string(128, 'a')) == std::string(128, 'a'));
  const std::string clipped = ClipForMessage(std::string(100000, 'x'));
  CHECK(clipped == std::string(128, 'x') + "... (100000 bytes)");
  CHECK(ClipForMessage("abcdef", 3) == "abc... (6 bytes)");
}

TEST_CASE("clip: a cut never splits a UTF-8 character", "[util]") {
  // "é" is two bytes: a cut after 3 bytes of "aéé" would split the second one.
  CHECK(ClipForMessage("a\xc3\xa9\xc3\xa9", 5) == "a\xc3\xa9\xc3\xa9");
  CHECK(ClipForMessage("a\xc3\xa9\xc3\xa9!", 4) == "a\xc3\xa9... (6 bytes)");
  // Four-byte characters (U+1F600) only.
  const std::string faces = "\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80";
  CHECK(ClipForMessage(faces, 6) == "\xf0\x9f\x98\x80... (12 bytes)");
  // Bytes that are all continuations: cut back at most 3 bytes, never below 0.
  CHECK(ClipForMessage(std::string(10, '\x80'), 2) == "... (10 bytes)");
}

}  // namespace odmoe
