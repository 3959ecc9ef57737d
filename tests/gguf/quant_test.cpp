// Scalar reference conversions (tensor/quant.h): hand-computed blocks that pin
// the rounding rules, golden bytes from the GGUF ecosystem's quantizer, and
// round-trip error bounds on seeded random rows.
#include "tensor/quant.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "util/fp16.h"

namespace odmoe {
namespace {

std::vector<uint8_t> Quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(RowBytes(type, static_cast<int64_t>(x.size())));
  QuantizeRow(type, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

std::vector<float> Dequantize(DType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  DequantizeRow(type, bytes.data(), out.data(), static_cast<int64_t>(n));
  return out;
}

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

TEST_CASE("Q8_0: d = amax/127 and round half away from zero", "[quant]") {
  std::vector<float> x(64, 0.0f);
  // Block 0: amax 127 -> d = 1, so q = roundf(x).
  const float in0[] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49f, 100.4f, -100.6f};
  const int8_t q0[] = {127, -127, 1, -1, 2, 3, -3, 0, 100, -101};
  std::copy(std::begin(in0), std::end(in0), x.begin());
  // Block 1: all zeros -> d = 0 and every code 0.
  const std::vector<uint8_t> bytes = Quantize(DType::kQ8_0, x);
  BlockQ8_0 b[2];
  std::memcpy(b, bytes.data(), sizeof(b));
  CHECK(b[0].d == 0x3c00);
  for (int j = 0; j < 32; ++j) {
    INFO("element " << j);
    CHECK(b[0].qs[j] == (j < 10 ? q0[j] : 0));
    CHECK(b[1].qs[j] == 0);
  }
  CHECK(b[1].d == 0);

  // amax 12.7 -> d = 0.1f, stored as the nearest half 0x2e66; the codes use
  // the unrounded 1/d, the values the stored half.
  std::vector<float> y(32, 0.0f);
  y[0] = 12.7f;
  y[1] = 1.0f;
  y[2] = -2.0f;
  y[3] = 0.3f;
  const std::vector<uint8_t> ybytes = Quantize(DType::kQ8_0, y);
  BlockQ8_0 yb;
  std::memcpy(&yb, ybytes.data(), sizeof(yb));
  CHECK(yb.d == 0x2e66);
  CHECK(yb.qs[0] == 127);
  CHECK(yb.qs[1] == 10);
  CHECK(yb.qs[2] == -20);
  CHECK(yb.qs[3] == 3);
  const std::vector<float> back = Dequantize(DType::kQ8_0, ybytes, 32);
  CHECK(back[1] == F16ToF32(0x2e66) * 10.0f);
  CHECK(back[2] == F16ToF32(0x2e66) * -20.0f);
}

TEST_CASE("Q4_0: signed max, d = max/-8, q = min(15, trunc(x/d + 8.5))", "[quant]") {
  std::vector<float> x(32, 0.0f);
  // max = -8 (first largest magnitude) -> d = 1, id = 1.
  const std::pair<int, float> in[] = {{0, -8.0f},  {1, 7.0f},   {2, 7.4f},  {3, 0.0f},  {4, -0.5f},
                                      {5, -0.6f},  {6, 0.5f},   {7, 0.49f}, {8, -7.9f}, {9, 3.3f},
                                      {16, 7.99f}, {17, -3.5f}, {18, 2.5f}};
  for (auto [i, v] : in) x[i] = v;
  const std::vector<int> expect_q = {0,  15, 15, 8, 8, 7, 9, 8, 0, 11, 8, 8, 8, 8, 8, 8,
                                     15, 5,  11, 8, 8, 8, 8, 8, 8, 8,  8, 8, 8, 8, 8, 8};
  const std::vector<uint8_t> bytes = Quantize(DType::kQ4_0, x);
  BlockQ4_0 b;
  std::memcpy(&b, bytes.data(), sizeof(b));
  CHECK(b.d == 0x3c00);
  for (int j = 0; j < 16; ++j) {
    INFO("byte " << j);
    CHECK(b.qs[j] == (expect_q[j] | (expect_q[j + 16] << 4)));
  }
  const std::vector<float> back = Dequantize(DType::kQ4_0, bytes, 32);
  for (int j = 0; j < 32; ++j) CHECK(back[j] == static_cast<float>(expect_q[j] - 8));
}

TEST_CASE("Q4_0: a positive max flips the scale and clips its negation to -7/8", "[quant]") {
  std::vector<float> x(32, 0.0f);
  x[0] = 8.0f;   // max -> d = -1
  x[1] = -8.0f;  // -8 * -1 + 8.5 = 16.5 -> 16 -> clipped to 15 -> w = -7
  x[2] = 3.0f;   // -3 + 8.5 = 5.5 -> 5 -> w = -1 * (5 - 8) = 3
  x[3] = -2.5f;  // 2.5 + 8.5 = 11 -> w = -3
  const std::vector<uint8_t> bytes = Quantize(DType::kQ4_0, x);
  CHECK((bytes[0] | (bytes[1] << 8)) == 0xbc00);  // d = -1
  const std::vector<float> back = Dequantize(DType::kQ4_0, bytes, 32);
  CHECK(back[0] == 8.0f);
  CHECK(back[1] == -7.0f);
  CHECK(back[2] == 3.0f);
  CHECK(back[3] == -3.0f);
  CHECK(back[4] == 0.0f);
}

TEST_CASE("Q4_0: among equal magnitudes the first element sets the sign", "[quant]") {
  std::vector<float> x(32, 0.0f);
  x[0] = 4.0f;
  x[1] = -4.0f;
  std::vector<uint8_t> bytes = Quantize(DType::kQ4_0, x);
  CHECK((bytes[0] | (bytes[1] << 8)) == 0xb800);  // d = -0.5
  CHECK(Dequantize(DType::kQ4_0, bytes, 32)[1] == -3.5f);
  std::swap(x[0], x[1]);
  bytes = Quantize(DType::kQ4_0, x);
  CHECK((bytes[0] | (bytes[1] << 8)) == 0x3800);  // d = +0.5
  CHECK(Dequantize(DType::kQ4_0, bytes, 32)[1] == 3.5f);

  std::vector<float> zeros(32, 0.0f);
  bytes = Quantize(DType::kQ4_0, zeros);
  // An all-zero block has d = 0 / -8 = -0 (stored 0x8000, as the reference
  // does) and every code 8.
  CHECK(bytes[0] == 0x00);
  CHECK(bytes[1] == 0x80);
  for (int j = 2; j < 18; ++j) CHECK(bytes[j] == 0x88);
}

// Golden bytes from the `gguf` Python package's numpy quantizers (which are
// kept bit-exact with ggml's quantize_row_*_ref), for
//   x[i] = float(((i * 7919 + 13) % 2001) - 1000) / 373.0f, i < 128,
//   then x[96] = 3, x[97] = -3 (a magnitude tie in the last block).
TEST_CASE("Q8_0 / Q4_0: bit-exact against the GGUF reference quantizers", "[quant]") {
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) {
    x[i] = static_cast<float>(((i * 7919 + 13) % 2001) - 1000) / 373.0f;
  }
  x[96] = 3.0f;
  x[97] = -3.0f;
  const std::string q8_0 =
      "552581786d62574c41362b20150afff4e9ded3c9beb3a89d92877d73685d52473c314c25261b1005faefe4d9"
      "cec3b8ada2978c81796e63584d42372c21160b00f5eadfd44f25c9beb3a89d92877f74695e53483d32271c11"
      "06fbf0e5dacfc4b9aea3988d827a0c267f814e443b31271e140b01f7eee4dad1c7bdb4aaa09770675d534a40"
      "362d2319";
  const std::string q4_0 =
      "4b35505f4f3e2d2d1c0bfbfaf9e9d8c7c7b64135fafae9e8d8c7b6b6a59493837271615044b56b7c8d8e9eaf"
      "afb0c1c1d2e3f3f4f50600b6c0cfd3d4e4f5162627373849595a6a6b";
  CHECK(Quantize(DType::kQ8_0, x) == FromHex(q8_0));
  CHECK(Quantize(DType::kQ4_0, x) == FromHex(q4_0));
}

// Quantizes seeded N(0, 1) rows and checks every element's error against the
// bound the format allows, plus the normalised mean squared error.
struct RoundTripStats {
  double nmse = 0;
  bool within_bound = true;
};

RoundTripStats RoundTrip(DType type, uint32_t seed) {
  constexpr int kN = 32 * 512;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(kN);
  for (float& v : x) v = dist(rng);
  const std::vector<float> y = Dequantize(type, Quantize(type, x), kN);
  RoundTripStats stats;
  double err2 = 0;
  double ref2 = 0;
  for (int b = 0; b < kN / 32; ++b) {
    float amax = 0;
    float max = 0;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[b * 32 + j])) {
        amax = std::fabs(x[b * 32 + j]);
        max = x[b * 32 + j];
      }
    }
    for (int j = 0; j < 32; ++j) {
      const float xi = x[b * 32 + j];
      const float err = std::fabs(xi - y[b * 32 + j]);
      err2 += static_cast<double>(err) * err;
      ref2 += static_cast<double>(xi) * xi;
      // Half a step, plus the step's own f16 rounding (rel. 2^-11) times the
      // largest code; Q4_0 allows a whole step where the code clips at 15.
      float bound = 0;
      if (type == DType::kQ8_0) {
        bound = 0.5f * amax / 127 + amax / 2048;
      } else if (type == DType::kQ4_0) {
        const bool clipped = xi * max < 0 && std::fabs(xi) > amax * 7.5f / 8;
        bound = (clipped ? amax / 8 : amax / 16) + amax / 2048;
      } else if (type == DType::kF16) {
        bound = std::fabs(xi) / 2048;
      } else if (type == DType::kBF16) {
        bound = std::fabs(xi) / 256;
      }
      if (err > bound * 1.0001f + 1e-7f) stats.within_bound = false;
    }
  }
  stats.nmse = err2 / ref2;
  return stats;
}

TEST_CASE("Round trip error stays within each format's bound", "[quant]") {
  const RoundTripStats f32 = RoundTrip(DType::kF32, 1);
  CHECK(f32.nmse == 0.0);
  const RoundTripStats f16 = RoundTrip(DType::kF16, 2);
  CHECK(f16.within_bound);
  CHECK(f16.nmse < 1e-7);
  const RoundTripStats bf16 = RoundTrip(DType::kBF16, 3);
  CHECK(bf16.within_bound);
  CHECK(bf16.nmse < 1e-5);
  CHECK(bf16.nmse > 1e-7);  // bf16 really is coarser than f16
  const RoundTripStats q8 = RoundTrip(DType::kQ8_0, 4);
  CHECK(q8.within_bound);
  CHECK(q8.nmse < 6e-5);
  const RoundTripStats q4 = RoundTrip(DType::kQ4_0, 5);
  CHECK(q4.within_bound);
  CHECK(q4.nmse < 1.2e-2);
  CHECK(q4.nmse > q8.nmse * 50);
}

TEST_CASE("F16 / BF16 rows convert element by element", "[quant]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  std::vector<float> x(96);
  for (float& v : x) v = dist(rng);
  const std::vector<uint8_t> f16 = Quantize(DType::kF16, x);
  const std::vector<uint8_t> bf16 = Quantize(DType::kBF16, x);
  REQUIRE(f16.size() == 192);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, f16.data() + 2 * i, 2);
    CHECK(h == F32ToF16(x[i]));
    std::memcpy(&h, bf16.data() + 2 * i, 2);
    CHECK(h == F32ToBF16(x[i]));
  }
  CHECK(Dequantize(DType::kF16, f16, x.size())[5] == F16ToF32(F32ToF16(x[5])));
}

TEST_CASE("Q8_0 codes equal the libm formulation fmax(-127, fmin(roundf(x*id), 127))", "[quant]") {
  // QuantizeRow avoids libm calls for speed; this pins it to the textbook
  // formula on random blocks of many magnitudes, halves (k + 0.5 after
  // scaling), and blocks with NaN, infinities and subnormals.
  auto textbook = [](const float* x, BlockQ8_0* out) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out->d = F32ToF16(d);
    for (int j = 0; j < 32; ++j) {
      out->qs[j] =
          static_cast<int8_t>(std::fmax(-127.0f, std::fmin(std::roundf(x[j] * id), 127.0f)));
    }
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-140, 120), code(-127, 127), pick(0, 9);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -3e-39f, 3.4e38f};
  std::vector<float> x(32);
  int mismatches = 0;
  for (int block = 0; block < 200000; ++block) {
    const float scale = std::ldexp(1.0f, exponent(rng));
    for (float& v : x) v = unit(rng) * scale;
    if (block % 3 == 0) {  // exact halves: amax 127 gives d = 1
      x[0] = 127.0f;
      for (int j = 1; j < 32; ++j) x[j] = static_cast<float>(code(rng)) + 0.5f;
    }
    if (block % 7 == 0) x[static_cast<size_t>(block) % 32] = specials[pick(rng) % 8];
    BlockQ8_0 got, want;
    QuantizeRow(DType::kQ8_0, x.data(), &got, 32);
    textbook(x.data(), &want);
    if (std::memcmp(&got, &want, sizeof(got)) != 0) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("Non-finite input quantizes without undefined behaviour", "[quant]") {
  std::vector<float> x(32, 1.0f);
  x[3] = std::nanf("");
  x[4] = INFINITY;
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    const std::vector<uint8_t> bytes = Quantize(type, x);
    const std::vector<float> y = Dequantize(type, bytes, 32);
    CHECK(y.size() == 32);  // codes are in range; values may be inf/NaN
  }
}

}  // namespace
}  // namespace odmoe
