// Switches read from the environment that are on unless set to "0": the
// knobs that turn an optimization off for comparison (ODMOE_CPU_REPACK,
// ODMOE_ROUTED_EXPERTS, ODMOE_CUDA_NORM_QUANT, ODMOE_CUDA_PDL,
// ODMOE_CUDA_ATTENTION_AHEAD; docs/operations.md). Header-only, so that the
// CUDA backend's .cu files can use it too.
//
//   static const bool repack = EnvFlagOn("ODMOE_CPU_REPACK");   // read once
#pragma once

#include <cstdlib>
#include <string_view>

namespace odmoe {

/// True unless the environment variable `name` is set to exactly "0".
inline bool EnvFlagOn(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || std::string_view(value) != "0";
}

}  // namespace odmoe
