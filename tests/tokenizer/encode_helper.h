// Encoding in tests: ids of a text with the given options, failing the test
// case if the tokenizer returns an error.
//
//   CHECK(test::Enc(*tok, "a</s>b", /*bos=*/false, /*special=*/true) == Ids{261, 2, 275});
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace odmoe::test {

using Ids = std::vector<int32_t>;

inline Ids Enc(const Tokenizer& t, std::string_view s, bool bos = false, bool special = false) {
  Tokenizer::EncodeOptions o;
  o.add_bos = bos;
  o.parse_special = special;
  auto r = t.Encode(s, o);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace odmoe::test
