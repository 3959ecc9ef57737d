// Where tests find the repository's data and the built binaries.
//
//   std::string model = SourcePath("models/tiny-mixtral-f16.gguf");
//   std::string run = BinaryPath("bin/odmoe-run");
#pragma once

#include <string>

namespace odmoe::test {

inline std::string SourcePath(const std::string& relative) {
  return std::string(ODMOE_SOURCE_DIR) + "/" + relative;
}
inline std::string BinaryPath(const std::string& relative) {
  return std::string(ODMOE_BINARY_DIR) + "/" + relative;
}

}  // namespace odmoe::test
