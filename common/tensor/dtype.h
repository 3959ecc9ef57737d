// Element types of model tensors and their block layouts.
//
// The numeric values are the GGML type ids used in GGUF files, so a DType can
// be read straight from a file after IsKnownGgmlType() says it is one of
// them. Quantized types store fixed-size blocks with the layouts used across
// the GGUF ecosystem (tensor/quant_blocks.h has them byte for byte).
//
// Every type has a row in one table (dtype.cpp): its name, block geometry
// and the activation type its dot products quantize x to (VecDotType):
//   block32 types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) -> Q8_0
//   K family (Q2_K .. Q6_K, IQ4_XS)                              -> Q8_K
//   float types and Q8_K itself                                  -> F32 (none)
// Whether a backend computes with a type is the backend's own question
// (Backend::LoadWeight refuses what it cannot use).
//
//   size_t bytes = RowBytes(DType::kQ8_0, 4096);   // 4096 / 32 * 34 = 4352
//   DType act = Traits(DType::kQ4_K).vec_dot;      // DType::kQ8_K
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tensor/quant_blocks.h"

namespace odmoe {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
  kMXFP4 = 39,
};

/// Every DType, in GGML id order.
inline constexpr DType kAllDTypes[] = {
    DType::kF32,  DType::kF16,  DType::kQ4_0,   DType::kQ4_1,   DType::kQ5_0, DType::kQ5_1,
    DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,   DType::kQ5_K, DType::kQ6_K,
    DType::kQ8_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kBF16, DType::kMXFP4};

/// Static facts about a DType.
struct DTypeTraits {
  DType type;
  std::string_view name;  // "f32", "q8_0", "q4_K", "iq4_xs", "mxfp4" (GGML's spelling)
  int block_elems;        // elements per block (1 for unquantized types)
  int block_bytes;        // bytes per block
  bool quantized;
  /// What a quantized MatMul quantizes each activation row to (kQ8_0 or
  /// kQ8_K); kF32 for the float types and for Q8_K (an activation type only).
  DType vec_dot;
};

/// Traits of a supported type.
const DTypeTraits& Traits(DType type);

/// True when `ggml_type` is one of the ids above (a type odmoe can read).
bool IsKnownGgmlType(uint32_t ggml_type);

/// Name of any GGML type id (also unsupported ones, for error messages).
std::string_view GgmlTypeName(uint32_t ggml_type);

/// "f32, f16, q4_0, ..." : every DType's name, for error messages.
std::string SupportedTypeNames();

/// Parses a type name ("f32", "q8_0", "q4_k", "IQ4_XS", ...; case-insensitive).
std::optional<DType> ParseDType(std::string_view name);

/// Bytes of `n` consecutive elements; n must be a multiple of the block size
/// (callers validate with RowSizeValid first when n comes from a file).
size_t RowBytes(DType type, int64_t n);

/// True when a row of `n` elements is a whole number of blocks.
bool RowSizeValid(DType type, int64_t n);

}  // namespace odmoe
