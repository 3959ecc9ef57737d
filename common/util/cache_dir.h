// Where odmoe keeps what it makes once per machine and reuses (the shadow's
// quantized copy of a model, the workers' low-precision expert copy): never
// the temp folder. $ODMOE_CACHE_DIR if set, else $XDG_CACHE_HOME/odmoe, else
// $HOME/.cache/odmoe; the folder is made if missing. The test suite sets
// ODMOE_CACHE_DIR to a folder of the build tree.
//
//   ODMOE_ASSIGN_OR_RETURN(std::string dir, CacheDir());
//   const std::string path = dir + "/odmoe-shadow-...-q8_0.gguf";
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace odmoe {

/// The cache folder, made if missing; INTERNAL naming it when it cannot be.
absl::StatusOr<std::string> CacheDir();

}  // namespace odmoe
