// The one way the main node's HTTP API turns JSON into bytes. nlohmann's
// dump() throws type_error 316 on a string that is not valid UTF-8 (a token
// piece of a byte-fallback token, a path or header echoed in an error); a
// throw there used to end the process. DumpJson never throws: every byte that
// cannot be part of a valid UTF-8 character becomes U+FFFD (invalid sequences,
// overlong forms, surrogates, truncated characters), so every reply parses as
// JSON and is valid UTF-8. Where a client needs the raw bytes, the reply
// carries them as numbers (OpenAI's "bytes" arrays, http_reply.h).
//
//   res.Respond(HttpResponse::Json(200, DumpJson(body)));
//   // {"text": "\xff"} -> {"text":"\uFFFD" (as UTF-8)}
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace odmoe {

/// `value` as compact JSON text, invalid UTF-8 replaced by U+FFFD.
inline std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace odmoe
