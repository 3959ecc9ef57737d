// A JSON Schema `pattern` (an ECMA-262 regular expression, a subset) as a
// GBNF expression for a JSON string's content, as written between the quotes
// (characters that JSON escapes appear in their escaped form). Used by
// json_schema.cpp; it refers to the shared rule json-char.
//
//   RegexToGbnf("^[A-Z]{3}-[0-9]+$")  // -> [\U00000041-\U0000005a]{3} "-" ...
//
// Supported: literals, `.`, classes [a-z] [^...] with \d \w \s \D \W \S,
// groups ( ) and (?: ), `|`, `*` `+` `?` `{m}` `{m,}` `{m,n}` (lazy forms
// alike), `^` at the start and `$` at the end (unanchored ends match any
// text, as `pattern` searches). \d \w \s are ASCII (stricter than a Unicode
// validator). INVALID_ARGUMENT for anything else (lookaround, backreferences,
// \b, anchors elsewhere, counts over kMaxRepetition).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace odmoe {

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern);

}  // namespace odmoe
