#include "util/cache_dir.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace odmoe {

absl::StatusOr<std::string> CacheDir() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : std::string();
  };
  std::string dir = env("ODMOE_CACHE_DIR");
  if (dir.empty() && !env("XDG_CACHE_HOME").empty()) dir = env("XDG_CACHE_HOME") + "/odmoe";
  if (dir.empty() && !env("HOME").empty()) dir = env("HOME") + "/.cache/odmoe";
  if (dir.empty()) {
    return absl::InternalError(
        "no cache folder: set ODMOE_CACHE_DIR (or HOME) to where odmoe may keep its copies");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot make the cache folder ", dir, " (ODMOE_CACHE_DIR): ", ec.message()));
  }
  return dir;
}

}  // namespace odmoe
