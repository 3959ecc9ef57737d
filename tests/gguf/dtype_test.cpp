// DType traits, GGML type names and TensorView slicing.
#include "tensor/dtype.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tensor/tensor_view.h"

namespace odmoe {
namespace {

TEST_CASE("DType traits and row sizes", "[dtype]") {
  CHECK(Traits(DType::kF32).block_bytes == 4);
  CHECK(Traits(DType::kBF16).name == "bf16");
  CHECK(Traits(DType::kQ4_0).quantized);
  CHECK_FALSE(Traits(DType::kF16).quantized);
  CHECK(RowBytes(DType::kQ8_0, 4096) == 4352);
  CHECK(RowBytes(DType::kQ4_0, 64) == 36);
  CHECK(RowBytes(DType::kF16, 3) == 6);
  CHECK(RowBytes(DType::kF32, 5) == 20);
  CHECK(RowSizeValid(DType::kF32, 7));
  CHECK(RowSizeValid(DType::kQ8_0, 64));
  CHECK_FALSE(RowSizeValid(DType::kQ8_0, 33));
  CHECK_FALSE(RowSizeValid(DType::kQ4_0, 16));
  CHECK_FALSE(RowSizeValid(DType::kF32, -1));
}

TEST_CASE("the type table: block geometry as GGUF files store it", "[dtype]") {
  struct Want {
    DType type;
    int elems, bytes;
    DType vec_dot;
  };
  // Sizes from the GGUF format documentation (GGML_QUANT_SIZES).
  const Want want[] = {
      {DType::kQ4_1, 32, 20, DType::kQ8_0},   {DType::kQ5_0, 32, 22, DType::kQ8_0},
      {DType::kQ5_1, 32, 24, DType::kQ8_0},   {DType::kQ2_K, 256, 84, DType::kQ8_K},
      {DType::kQ3_K, 256, 110, DType::kQ8_K}, {DType::kQ4_K, 256, 144, DType::kQ8_K},
      {DType::kQ5_K, 256, 176, DType::kQ8_K}, {DType::kQ6_K, 256, 210, DType::kQ8_K},
      {DType::kQ8_K, 256, 292, DType::kF32},  {DType::kIQ4_NL, 32, 18, DType::kQ8_0},
      {DType::kIQ4_XS, 256, 136, DType::kQ8_K}, {DType::kMXFP4, 32, 17, DType::kQ8_0},
      {DType::kQ8_0, 32, 34, DType::kQ8_0},   {DType::kQ4_0, 32, 18, DType::kQ8_0},
  };
  for (const Want& w : want) {
    INFO(Traits(w.type).name);
    CHECK(Traits(w.type).type == w.type);
    CHECK(Traits(w.type).block_elems == w.elems);
    CHECK(Traits(w.type).block_bytes == w.bytes);
    CHECK(Traits(w.type).quantized);
    CHECK(Traits(w.type).vec_dot == w.vec_dot);
  }
  for (DType t : kAllDTypes) {
    CHECK(Traits(t).name == GgmlTypeName(static_cast<uint32_t>(t)));
    CHECK(ParseDType(Traits(t).name) == t);
  }
  CHECK(RowBytes(DType::kQ4_K, 4096) == 16 * 144);
  CHECK_FALSE(RowSizeValid(DType::kQ6_K, 128));
  CHECK(SupportedTypeNames().find("iq4_xs") != std::string::npos);
}

TEST_CASE("GGML type ids and names", "[dtype]") {
  for (uint32_t id : {0u, 1u, 2u, 3u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 15u, 20u, 23u, 30u, 39u})
    CHECK(IsKnownGgmlType(id));
  for (uint32_t id : {4u, 9u, 16u, 19u, 21u, 29u, 31u, 34u, 1000u}) CHECK_FALSE(IsKnownGgmlType(id));
  CHECK(GgmlTypeName(12) == "q4_K");
  CHECK(GgmlTypeName(14) == "q6_K");
  CHECK(GgmlTypeName(30) == "bf16");
  CHECK(GgmlTypeName(8) == "q8_0");
  CHECK(GgmlTypeName(4000000000u) == "unknown");
  CHECK(ParseDType("Q8_0") == DType::kQ8_0);
  CHECK(ParseDType("bf16") == DType::kBF16);
  CHECK(ParseDType("F32") == DType::kF32);
  CHECK(ParseDType("q4_k") == DType::kQ4_K);
  CHECK(ParseDType("IQ4_XS") == DType::kIQ4_XS);
  CHECK(ParseDType("mxfp4") == DType::kMXFP4);
  CHECK_FALSE(ParseDType("q4_k_m").has_value());
  CHECK_FALSE(ParseDType("iq2_xxs").has_value());
  CHECK_FALSE(ParseDType("").has_value());
}

TEST_CASE("TensorView geometry and Slice2D", "[dtype]") {
  // 3 experts of a 64-in, 2-out Q8_0 matrix: each row 2 blocks = 68 bytes.
  std::vector<uint8_t> bytes(3 * 2 * 68);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  TensorView v;
  v.name = "blk.0.ffn_up_exps.weight";
  v.type = DType::kQ8_0;
  v.n_dims = 3;
  v.ne = {64, 2, 3, 1};
  v.data = bytes.data();
  CHECK(v.elements() == 384);
  CHECK(v.rows() == 6);
  CHECK(v.row_bytes() == 68);
  CHECK(v.bytes() == bytes.size());
  CHECK(v.Row(5) == bytes.data() + 5 * 68);

  const TensorView e2 = v.Slice2D(2);
  CHECK(e2.n_dims == 2);
  CHECK(e2.ne == std::array<int64_t, 4>{64, 2, 1, 1});
  CHECK(e2.type == DType::kQ8_0);
  CHECK(e2.data == bytes.data() + 2 * 2 * 68);
  CHECK(e2.bytes() == 136);
  CHECK(e2.Row(1) == bytes.data() + 5 * 68);
  CHECK(e2.name == "blk.0.ffn_up_exps.weight[2]");
  CHECK(v.Slice2D(0).data == bytes.data());
}

}  // namespace
}  // namespace odmoe
