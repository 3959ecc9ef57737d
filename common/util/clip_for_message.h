// A value from the network, shortened before it goes into an error message:
// an error echoes what the caller sent so that they can find it, but an echo
// of a 100 KB value makes the message too large for gRPC's trailers (the
// caller then sees RESOURCE_EXHAUSTED "Stream removed" instead of the error)
// and fills logs. Values up to `max_bytes` come back unchanged; longer ones
// are cut at a UTF-8 character boundary and end with an ellipsis and the
// value's length.
//
//   ClipForMessage("shadow")                    // "shadow"
//   ClipForMessage(std::string(100000, 'x'))    // "xxx...x... (100000 bytes)": 128 x's
//   absl::StrCat("experiment.prediction '", ClipForMessage(p), "' is not valid")
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace odmoe {

/// The longest value echoed whole (bytes).
inline constexpr size_t kMaxEchoedBytes = 128;

/// `value` itself when at most `max_bytes` long; else its first `max_bytes`
/// bytes or fewer (never half a UTF-8 character), "..." and " (N bytes)".
std::string ClipForMessage(std::string_view value, size_t max_bytes = kMaxEchoedBytes);

}  // namespace odmoe
