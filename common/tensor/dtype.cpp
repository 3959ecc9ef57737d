#include "tensor/dtype.h"

#include <array>
#include <cassert>
#include <cctype>

namespace odmoe {
namespace {

constexpr DTypeTraits kF32Traits{"f32", 1, 4, false};
constexpr DTypeTraits kF16Traits{"f16", 1, 2, false};
constexpr DTypeTraits kBF16Traits{"bf16", 1, 2, false};
constexpr DTypeTraits kQ8_0Traits{"q8_0", kQ8_0BlockElems, kQ8_0BlockBytes, true};
constexpr DTypeTraits kQ4_0Traits{"q4_0", kQ4_0BlockElems, kQ4_0BlockBytes, true};

// GGML type ids in order; ids whose types were removed from GGML are named so
// an error message still says what the file holds.
constexpr std::array<std::string_view, 40> kGgmlTypeNames = {
    "f32",
    "f16",
    "q4_0",
    "q4_1",
    "q4_2 (removed)",
    "q4_3 (removed)",
    "q5_0",
    "q5_1",
    "q8_0",
    "q8_1",
    "q2_K",
    "q3_K",
    "q4_K",
    "q5_K",
    "q6_K",
    "q8_K",
    "iq2_xxs",
    "iq2_xs",
    "iq3_xxs",
    "iq1_s",
    "iq4_nl",
    "iq3_s",
    "iq2_s",
    "iq4_xs",
    "i8",
    "i16",
    "i32",
    "i64",
    "f64",
    "iq1_m",
    "bf16",
    "q4_0_4_4 (removed)",
    "q4_0_4_8 (removed)",
    "q4_0_8_8 (removed)",
    "tq1_0",
    "tq2_0",
    "iq4_nl_4_4 (removed)",
    "iq4_nl_4_8 (removed)",
    "iq4_nl_8_8 (removed)",
    "mxfp4",
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

const DTypeTraits& Traits(DType type) {
  switch (type) {
    case DType::kF32:
      return kF32Traits;
    case DType::kF16:
      return kF16Traits;
    case DType::kBF16:
      return kBF16Traits;
    case DType::kQ8_0:
      return kQ8_0Traits;
    case DType::kQ4_0:
      return kQ4_0Traits;
  }
  assert(false && "Traits() called with an unsupported DType");
  return kF32Traits;
}

bool IsKnownGgmlType(uint32_t ggml_type) {
  switch (static_cast<DType>(ggml_type)) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
      return true;
  }
  return false;
}

std::string_view GgmlTypeName(uint32_t ggml_type) {
  if (ggml_type < kGgmlTypeNames.size()) return kGgmlTypeNames[ggml_type];
  return "unknown";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    if (EqualsIgnoreCase(name, Traits(type).name)) return type;
  }
  return std::nullopt;
}

size_t RowBytes(DType type, int64_t n) {
  const DTypeTraits& traits = Traits(type);
  assert(RowSizeValid(type, n));
  return static_cast<size_t>(n / traits.block_elems) * static_cast<size_t>(traits.block_bytes);
}

bool RowSizeValid(DType type, int64_t n) { return n >= 0 && n % Traits(type).block_elems == 0; }

}  // namespace odmoe
