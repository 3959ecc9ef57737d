// Element types of model tensors and their block layouts.
//
// The numeric values are the GGML type ids used in GGUF files, so a DType can
// be read straight from a file after IsKnownGgmlType() says it is supported.
// Quantized types store fixed-size blocks; the layouts are the ones used
// across the GGUF ecosystem:
//
//   Q8_0: 32 weights per 34-byte block   { f16 d; int8 qs[32]; }       w = d * qs[i]
//   Q4_0: 32 weights per 18-byte block   { f16 d; uint8 qs[16]; }
//         w[i]      = d * ((qs[i] & 0x0f) - 8)     for i in 0..15
//         w[i + 16] = d * ((qs[i] >> 4)  - 8)
//
//   size_t bytes = RowBytes(DType::kQ8_0, 4096);   // 4096 / 32 * 34 = 4352
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace odmoe {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kBF16 = 30,
};

inline constexpr int kQ8_0BlockElems = 32;
inline constexpr int kQ8_0BlockBytes = 34;
inline constexpr int kQ4_0BlockElems = 32;
inline constexpr int kQ4_0BlockBytes = 18;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8_0BlockElems];
};
static_assert(sizeof(BlockQ8_0) == kQ8_0BlockBytes);

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQ4_0BlockElems / 2];
};
static_assert(sizeof(BlockQ4_0) == kQ4_0BlockBytes);

/// Static facts about a DType.
struct DTypeTraits {
  std::string_view name;  // "f32", "f16", "bf16", "q8_0", "q4_0"
  int block_elems;        // elements per block (1 for unquantized types)
  int block_bytes;        // bytes per block
  bool quantized;
};

/// Traits of a supported type.
const DTypeTraits& Traits(DType type);

/// True when `ggml_type` is one of the ids above.
bool IsKnownGgmlType(uint32_t ggml_type);

/// Name of any GGML type id (also unsupported ones, for error messages).
std::string_view GgmlTypeName(uint32_t ggml_type);

/// Parses "f32", "f16", "bf16", "q8_0", "q4_0" (case-insensitive).
std::optional<DType> ParseDType(std::string_view name);

/// Bytes of `n` consecutive elements; n must be a multiple of the block size
/// (callers validate with RowSizeValid first when n comes from a file).
size_t RowBytes(DType type, int64_t n);

/// True when a row of `n` elements is a whole number of blocks.
bool RowSizeValid(DType type, int64_t n);

}  // namespace odmoe
