#include "util/version.h"

#include "absl/strings/str_cat.h"
#include "odmoe_git_revision.h"

namespace odmoe {

std::string VersionText(const std::string& program) {
  return absl::StrCat(program, " ", ODMOE_VERSION, " (git ", ODMOE_GIT_REVISION,
                      "), backends: ", ODMOE_BACKENDS, "\n");
}

}  // namespace odmoe
