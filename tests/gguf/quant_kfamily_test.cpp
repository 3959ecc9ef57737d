// K-family reference conversions (tensor/quant.h): dequantization bit for bit
// against the gguf Python package, the weight quantizers byte for byte against
// llama.cpp's reference quantizers (fixtures by
// scripts/fixtures/make_quant_kfamily.py), the Q8_K activation rule, the
// quantizers' error bands and edge cases, and the scale packing shared with
// the CPU kernels.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_k_scales.h"
#include "test_paths.h"

namespace odmoe {
namespace {

constexpr int kN = kSuperBlockElems;

std::vector<uint8_t> ReadFile(const std::string& relative) {
  std::ifstream in(test::SourcePath(relative), std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

struct KType {
  DType type;
  const char* name;
};
const KType kKTypes[] = {{DType::kQ2_K, "q2_K"},    {DType::kQ3_K, "q3_K"}, {DType::kQ4_K, "q4_K"},
                         {DType::kQ5_K, "q5_K"},    {DType::kQ6_K, "q6_K"}, {DType::kQ8_K, "q8_K"},
                         {DType::kIQ4_XS, "iq4_xs"}};

TEST_CASE("K family: DequantizeRow matches the gguf package bit for bit", "[quant][kquant]") {
  for (const KType& t : kKTypes) {
    INFO(t.name);
    const std::vector<uint8_t> file =
        ReadFile(std::string("tests/data/quant/") + t.name + ".dequant.bin");
    const size_t block_bytes = RowBytes(t.type, kN);
    REQUIRE(file.size() % (block_bytes + kN * sizeof(float)) == 0);
    const size_t n_blocks = file.size() / (block_bytes + kN * sizeof(float));
    REQUIRE(n_blocks >= 8);
    const int64_t n = static_cast<int64_t>(n_blocks) * kN;
    std::vector<float> expect(static_cast<size_t>(n));
    std::memcpy(expect.data(), file.data() + n_blocks * block_bytes, expect.size() * sizeof(float));

    std::vector<float> got(static_cast<size_t>(n));
    DequantizeRow(t.type, file.data(), got.data(), n);
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (Bits(got[i]) != Bits(expect[i]) && mismatches++ < 5) {
        INFO("block " << i / kN << " element " << i % kN);
        CHECK(got[i] == expect[i]);
      }
    }
    CHECK(mismatches == 0);

    // Row by row (one super-block at a time) gives the same values.
    std::vector<float> one(kN);
    DequantizeRow(t.type, file.data() + 5 * block_bytes, one.data(), kN);
    CHECK(std::memcmp(one.data(), got.data() + 5 * kN, kN * sizeof(float)) == 0);
  }
}

BlockQ8K QuantizeQ8K(const float* x) {
  BlockQ8K b;
  std::memset(&b, 0xa5, sizeof(b));  // every byte must be written
  QuantizeRow(DType::kQ8_K, x, &b, kN);
  return b;
}

TEST_CASE("Q8_K quantizer: the rows of the numpy reference byte for byte", "[quant][kquant]") {
  const std::vector<uint8_t> file = ReadFile("tests/data/quant/q8_K.quant.bin");
  const size_t per_row = kN * sizeof(float) + sizeof(BlockQ8K);
  REQUIRE(file.size() % per_row == 0);
  const size_t rows = file.size() / per_row;
  REQUIRE(rows >= 8);
  std::vector<float> x(rows * kN);
  std::memcpy(x.data(), file.data(), x.size() * sizeof(float));
  const uint8_t* expect = file.data() + x.size() * sizeof(float);

  std::vector<BlockQ8K> all(rows);
  QuantizeRow(DType::kQ8_K, x.data(), all.data(), static_cast<int64_t>(x.size()));
  for (size_t r = 0; r < rows; ++r) {
    INFO("row " << r);
    CHECK(std::memcmp(&all[r], expect + r * sizeof(BlockQ8K), sizeof(BlockQ8K)) == 0);
    const BlockQ8K one = QuantizeQ8K(x.data() + r * kN);
    CHECK(std::memcmp(&one, &all[r], sizeof(BlockQ8K)) == 0);
  }
}

TEST_CASE("Q8_K quantizer: signed max, half to even, bsums", "[quant][kquant]") {
  std::vector<float> x(kN, 0.0f);
  SECTION("all zero: d = 0 and every code 0") {
    const BlockQ8K b = QuantizeQ8K(x.data());
    CHECK(b.d == 0.0f);
    for (int i = 0; i < kN; ++i) CHECK(b.qs[i] == 0);
    for (int j = 0; j < 16; ++j) CHECK(b.bsums[j] == 0);
  }
  SECTION("max = +127 gives iscale -1: codes are -rint(x)") {
    x[3] = 127.0f;
    x[4] = -127.0f;  // same magnitude, later: the first one wins
    x[5] = 2.5f;     // -2.5 -> -2 (even)
    x[6] = -3.5f;    // 3.5 -> 4
    x[7] = 0.5f;     // -0.5 -> -0
    x[20] = 100.49f;
    const BlockQ8K b = QuantizeQ8K(x.data());
    CHECK(b.d == -1.0f);
    CHECK(b.qs[3] == -127);
    CHECK(b.qs[4] == 127);
    CHECK(b.qs[5] == -2);
    CHECK(b.qs[6] == 4);
    CHECK(b.qs[7] == 0);
    CHECK(b.qs[20] == -100);
    CHECK(b.bsums[0] == -127 + 127 - 2 + 4);
    CHECK(b.bsums[1] == -100);
  }
  SECTION("random rows: codes in range, d * code close to x, bsums are the sums") {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int trial = 0; trial < 50; ++trial) {
      for (float& v : x) v = normal(rng);
      const BlockQ8K b = QuantizeQ8K(x.data());
      float amax = 0.0f;
      for (float v : x) amax = std::fmax(amax, std::fabs(v));
      for (int i = 0; i < kN; ++i) {
        CHECK(b.qs[i] >= -127);
        CHECK(std::fabs(b.d * b.qs[i] - x[i]) <= std::fabs(b.d) * 0.5001f);
      }
      CHECK(std::fabs(b.d) == Approx(amax / 127.0f).epsilon(1e-6));
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int i = 16 * j; i < 16 * j + 16; ++i) sum += b.qs[i];
        CHECK(b.bsums[j] == sum);
      }
    }
  }
}

TEST_CASE("Q8_K quantizer: NaN and Inf input give defined codes", "[quant][kquant]") {
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  SECTION("NaN is skipped for the max and clamps to 127") {
    x[0] = std::numeric_limits<float>::quiet_NaN();
    x[1] = -16.0f;  // the max: iscale = 127 / 16
    const BlockQ8K b = QuantizeQ8K(x.data());
    CHECK(b.d == 1.0f / (-127.0f / -16.0f));
    CHECK(b.qs[0] == 127);
    CHECK(b.qs[1] == -127);  // iscale * max = -127 always
  }
  SECTION("Inf is the max: iscale = -0, finite x give 0, Inf (NaN product) 127") {
    x[9] = std::numeric_limits<float>::infinity();
    x[10] = -std::numeric_limits<float>::infinity();
    const BlockQ8K b = QuantizeQ8K(x.data());
    CHECK(std::isinf(b.d));
    CHECK(b.qs[9] == 127);
    CHECK(b.qs[10] == 127);
    CHECK(b.qs[0] == 0);
    CHECK(b.bsums[0] == 2 * 127);
  }
}

TEST_CASE("K scales: Pack and Unpack are inverse", "[quant][kquant]") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    uint8_t sc[8], mn[8], packed[kKScaleBytes], sc2[8], mn2[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(rng() % 64);
      mn[j] = static_cast<uint8_t>(rng() % 64);
    }
    PackQ4KScalesMins(sc, mn, packed);
    UnpackQ4KScalesMins(packed, sc2, mn2);
    CHECK(std::memcmp(sc, sc2, 8) == 0);
    CHECK(std::memcmp(mn, mn2, 8) == 0);

    int8_t s3[16], s3b[16];
    for (int j = 0; j < 16; ++j) s3[j] = static_cast<int8_t>(static_cast<int>(rng() % 64) - 32);
    PackQ3KScales(s3, packed);
    UnpackQ3KScales(packed, s3b);
    CHECK(std::memcmp(s3, s3b, 16) == 0);

    int8_t s4[8], s4b[8];
    uint16_t h;
    uint8_t l[4];
    for (int j = 0; j < 8; ++j) s4[j] = static_cast<int8_t>(static_cast<int>(rng() % 64) - 32);
    PackIq4XsScales(s4, &h, l);
    UnpackIq4XsScales(h, l, s4b);
    CHECK(std::memcmp(s4, s4b, 8) == 0);
  }
  // The packed bytes of a known Q4_K pattern (layout of tensor/quant_k_scales.h).
  const uint8_t sc[8] = {1, 2, 3, 4, 0x3f, 0x20, 0x11, 0x0f};
  const uint8_t mn[8] = {5, 6, 7, 8, 0x30, 0x01, 0x2a, 0x3c};
  uint8_t packed[kKScaleBytes];
  PackQ4KScalesMins(sc, mn, packed);
  const uint8_t expect[kKScaleBytes] = {0xc1, 0x82, 0x43, 0x04, 0xc5, 0x06,
                                        0x87, 0xc8, 0x0f, 0x10, 0xa1, 0xcf};
  CHECK(std::memcmp(packed, expect, kKScaleBytes) == 0);
}

const KType kWeightTypes[] = {{DType::kQ2_K, "q2_K"}, {DType::kQ3_K, "q3_K"},
                              {DType::kQ4_K, "q4_K"}, {DType::kQ5_K, "q5_K"},
                              {DType::kQ6_K, "q6_K"}, {DType::kIQ4_XS, "iq4_xs"}};

std::vector<uint8_t> Quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(RowBytes(type, static_cast<int64_t>(x.size())), 0xa5);
  QuantizeRow(type, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

std::vector<float> Dequantize(DType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  DequantizeRow(type, bytes.data(), out.data(), static_cast<int64_t>(n));
  return out;
}

// Golden files: M * 256 float32 inputs, then llama.cpp's M blocks.
//   <type>.quant.bin         llama.cpp 0c1e57098's ggml_quantize_chunk (no
//                            imatrix): Gaussian rows at 1e-3 .. 100, outliers,
//                            zero, small integers, uniform, constant rows.
//   <type>.quant_varied.bin  ggml-quants.c's quantize_row_<type>_ref on the
//                            rows of make_quant_kfamily.py's golden_inputs():
//                            zero sub-blocks, one-signed, sparse, heavy tails.
void CheckGolden(const KType& t, const std::string& file_name) {
  INFO(file_name);
  const std::vector<uint8_t> file = ReadFile("tests/data/quant/" + file_name);
  const size_t block_bytes = RowBytes(t.type, kN);
  const size_t per_block = kN * sizeof(float) + block_bytes;
  REQUIRE(file.size() % per_block == 0);
  const size_t n_blocks = file.size() / per_block;
  REQUIRE(n_blocks >= 8);
  std::vector<float> x(n_blocks * kN);
  std::memcpy(x.data(), file.data(), x.size() * sizeof(float));
  const uint8_t* expect = file.data() + x.size() * sizeof(float);

  const std::vector<uint8_t> got = Quantize(t.type, x);
  size_t bad_blocks = 0;
  for (size_t b = 0; b < n_blocks; ++b) {
    if (std::memcmp(got.data() + b * block_bytes, expect + b * block_bytes, block_bytes) != 0) {
      if (bad_blocks++ < 3) FAIL_CHECK("block " << b << " differs");
    }
  }
  CHECK(bad_blocks == 0);
}

TEST_CASE("K family: QuantizeRow matches llama.cpp's reference quantizers byte for byte",
          "[quant][kquant]") {
  for (const KType& t : kWeightTypes) {
    CheckGolden(t, std::string(t.name) + ".quant.bin");
    CheckGolden(t, std::string(t.name) + ".quant_varied.bin");
  }
}

double RelativeRmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

TEST_CASE("K family quantizers: round-trip error on Gaussian rows", "[quant][kquant]") {
  std::mt19937 rng(123);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(kN * 64);
  for (float& v : x) v = normal(rng);
  // Relative RMSE bands around the values measured on 100k Gaussian
  // elements (Q2_K 0.298, Q3_K 0.151, Q4_K 0.072, IQ4_XS 0.077, Q5_K 0.036,
  // Q6_K 0.018; llama.cpp's own bytes, so the same for it).
  struct Band {
    DType type;
    double lo, hi;
  };
  const Band bands[] = {{DType::kQ2_K, 0.26, 0.34},   {DType::kQ3_K, 0.13, 0.17},
                        {DType::kQ4_K, 0.062, 0.082}, {DType::kIQ4_XS, 0.067, 0.087},
                        {DType::kQ5_K, 0.031, 0.041}, {DType::kQ6_K, 0.0155, 0.0205}};
  double previous = 1.0;
  for (const Band& band : bands) {
    INFO(Traits(band.type).name);
    const double rmse = RelativeRmse(x, Dequantize(band.type, Quantize(band.type, x), x.size()));
    CHECK(rmse > band.lo);
    CHECK(rmse < band.hi);
    if (band.type != DType::kIQ4_XS) {
      CHECK(rmse < previous);  // Q2_K > Q3_K > Q4_K > Q5_K > Q6_K
      previous = rmse;
    }
  }
}

TEST_CASE("K family quantizers: zero rows, zero sub-blocks, one huge value", "[quant][kquant]") {
  for (const KType& t : kWeightTypes) {
    INFO(t.name);
    std::vector<float> zeros(kN, 0.0f);
    for (float v : Dequantize(t.type, Quantize(t.type, zeros), kN)) CHECK(v == 0.0f);

    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(kN);
    for (float& v : x) v = normal(rng);
    std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // a zero sub-block
    x[200] = 1000.0f;                                 // one huge value
    const std::vector<float> back = Dequantize(t.type, Quantize(t.type, x), kN);
    for (int i = 64; i < 96; ++i) CHECK(std::fabs(back[i]) <= 1e-3f * 1000.0f);
    CHECK(back[200] == Approx(1000.0f).epsilon(0.1));
    for (float v : back) CHECK(std::isfinite(v));
  }
}

TEST_CASE("K family quantizers: requantizing a dequantized row changes little", "[quant][kquant]") {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kN * 16);
  for (float& v : x) v = normal(rng);
  for (const KType& t : kWeightTypes) {
    INFO(t.name);
    const std::vector<float> once = Dequantize(t.type, Quantize(t.type, x), x.size());
    const std::vector<float> twice = Dequantize(t.type, Quantize(t.type, once), x.size());
    // The second pass starts on the grid of the first: its error is a small
    // fraction of the first pass's.
    CHECK(RelativeRmse(once, twice) < 0.5 * RelativeRmse(x, once));
  }
}

TEST_CASE("K family quantizers: NaN and Inf input give defined bytes", "[quant][kquant]") {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 3e38f, 1e-45f};
  for (const KType& t : kWeightTypes) {
    for (float special : specials) {
      INFO(t.name << " with " << special);
      std::vector<float> x(kN);
      for (int i = 0; i < kN; ++i) x[i] = std::sin(static_cast<float>(i));
      x[17] = special;
      x[130] = special;
      const std::vector<uint8_t> a = Quantize(t.type, x);
      const std::vector<uint8_t> b = Quantize(t.type, x);
      CHECK(a == b);  // deterministic, every byte written
      (void)Dequantize(t.type, a, kN);
    }
  }
}

}  // namespace
}  // namespace odmoe
