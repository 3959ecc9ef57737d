// Helpers shared by the fuzz targets (tests/fuzz/targets/*.cpp): the source
// tree's files, a per-process scratch file, a sink the optimizer cannot drop,
// and a hard failure for a broken invariant (libFuzzer then keeps the input).
//
//   const std::string& path = odmoe::fuzz::ScratchFile("gguf");
//   odmoe::fuzz::WriteFile(path, data, size);
//   if (decoded != expected) odmoe::fuzz::Die("round trip differs");
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace odmoe::fuzz {

/// A file of the source tree (ODMOE_SOURCE_DIR is the repository root).
inline std::string SourcePath(const std::string& rel) {
  return std::string(ODMOE_SOURCE_DIR) + "/" + rel;
}

/// A file in TMPDIR (or /tmp) unique to this process, removed when the
/// process exits normally.
inline const std::string& ScratchFile(const char* tag) {
  struct Scratch {
    std::string path;
    ~Scratch() { std::remove(path.c_str()); }
  };
  static const Scratch scratch{[tag] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/odmoe_fuzz_" + tag + "_" +
           std::to_string(getpid());
  }()};
  return scratch.path;
}

inline bool WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

/// Keeps a value alive so the work that made it is not optimized away.
inline void Consume(uint64_t v) {
  static volatile uint64_t sink = 0;
  sink = sink + v;
}

[[noreturn]] inline void Die(const std::string& why) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", why.c_str());
  std::abort();
}

}  // namespace odmoe::fuzz
