// The one logging header of odmoe (spdlog behind macros).
//
// Every line carries the node id set with SetLogNodeId() ("run", "main",
// "worker-3", ...). Per-token detail belongs at debug level.
//
//   odmoe::SetLogNodeId("worker-3");
//   ODMOE_LOG_INFO("loaded expert {} of layer {} in {:.2f} ms", e, l, ms);
#pragma once

#include <string_view>

#include "absl/base/config.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

#if !defined(ABSL_USES_STD_STRING_VIEW)
// Debian's Abseil has its own string_view (absl::Status::message() returns
// one); let log lines format it like any string.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
#endif

namespace odmoe {

/// Sets the node id printed on every log line and (re)configures the sink
/// (stderr, colour when a terminal). Thread-safe; call once at start-up.
void SetLogNodeId(std::string_view node_id);

/// Sets the level from a name: trace, debug, info, warn, error, off.
/// Returns false (and keeps the current level) for an unknown name.
bool SetLogLevel(std::string_view level);

}  // namespace odmoe

#define ODMOE_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define ODMOE_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define ODMOE_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define ODMOE_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define ODMOE_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
