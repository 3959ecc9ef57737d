// Debian 12's Abseil (20220623) was built with its own absl::string_view,
// a different type from std::string_view. odmoe's interfaces use
// std::string_view; convert at calls into Abseil's string functions:
//
//   absl::StrCat("unknown option '", ToAbsl(arg), "'");
//   std::string_view msg = ToStd(status.message());
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace odmoe {

inline absl::string_view ToAbsl(std::string_view v) { return {v.data(), v.size()}; }
inline std::string_view ToStd(absl::string_view v) { return {v.data(), v.size()}; }

}  // namespace odmoe
