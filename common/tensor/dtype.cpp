#include "tensor/dtype.h"

#include <array>
#include <cassert>
#include <cctype>
#include <iterator>

namespace odmoe {
namespace {

// The one table of types (kAllDTypes order).
constexpr DTypeTraits kTable[] = {
    {DType::kF32, "f32", 1, 4, false, DType::kF32},
    {DType::kF16, "f16", 1, 2, false, DType::kF32},
    {DType::kQ4_0, "q4_0", 32, sizeof(BlockQ4_0), true, DType::kQ8_0},
    {DType::kQ4_1, "q4_1", 32, sizeof(BlockQ4_1), true, DType::kQ8_0},
    {DType::kQ5_0, "q5_0", 32, sizeof(BlockQ5_0), true, DType::kQ8_0},
    {DType::kQ5_1, "q5_1", 32, sizeof(BlockQ5_1), true, DType::kQ8_0},
    {DType::kQ8_0, "q8_0", 32, sizeof(BlockQ8_0), true, DType::kQ8_0},
    {DType::kQ2_K, "q2_K", 256, sizeof(BlockQ2K), true, DType::kQ8_K},
    {DType::kQ3_K, "q3_K", 256, sizeof(BlockQ3K), true, DType::kQ8_K},
    {DType::kQ4_K, "q4_K", 256, sizeof(BlockQ4K), true, DType::kQ8_K},
    {DType::kQ5_K, "q5_K", 256, sizeof(BlockQ5K), true, DType::kQ8_K},
    {DType::kQ6_K, "q6_K", 256, sizeof(BlockQ6K), true, DType::kQ8_K},
    {DType::kQ8_K, "q8_K", 256, sizeof(BlockQ8K), true, DType::kF32},
    {DType::kIQ4_NL, "iq4_nl", 32, sizeof(BlockIq4Nl), true, DType::kQ8_0},
    {DType::kIQ4_XS, "iq4_xs", 256, sizeof(BlockIq4Xs), true, DType::kQ8_K},
    {DType::kBF16, "bf16", 1, 2, false, DType::kF32},
    {DType::kMXFP4, "mxfp4", 32, sizeof(BlockMxfp4), true, DType::kQ8_0},
};
static_assert(std::size(kTable) == std::size(kAllDTypes));

const DTypeTraits* Find(uint32_t ggml_type) {
  for (const DTypeTraits& t : kTable) {
    if (static_cast<uint32_t>(t.type) == ggml_type) return &t;
  }
  return nullptr;
}

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
  const DTypeTraits* t = Find(static_cast<uint32_t>(type));
  assert(t != nullptr && "Traits() called with an unsupported DType");
  return t != nullptr ? *t : kTable[0];
}

bool IsKnownGgmlType(uint32_t ggml_type) { return Find(ggml_type) != nullptr; }

std::string_view GgmlTypeName(uint32_t ggml_type) {
  if (ggml_type < kGgmlTypeNames.size()) return kGgmlTypeNames[ggml_type];
  return "unknown";
}

std::string SupportedTypeNames() {
  std::string out;
  for (const DTypeTraits& t : kTable) {
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const DTypeTraits& t : kTable) {
    if (EqualsIgnoreCase(name, t.name)) return t.type;
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
