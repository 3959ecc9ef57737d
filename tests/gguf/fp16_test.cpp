// F16 / BF16 scalar conversions (util/fp16.h): exhaustive round trips, known
// bit patterns (subnormals, overflow, NaN, ties), and F32ToF16 against an
// independent nearest-value search over all finite halves.
#include "util/fp16.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace odmoe {
namespace {

float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

bool IsF16NaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// Reference F32 -> F16: the nearest of all non-negative halves 0x0000..0x7c00
// (0x7c00 standing for 65536, the next value after 65504 for rounding), ties
// to the even code.
uint16_t NearestF16(float f) {
  static const std::vector<double> kValues = [] {
    std::vector<double> v;
    for (uint32_t h = 0; h < 0x7c00u; ++h) v.push_back(F16ToF32(static_cast<uint16_t>(h)));
    v.push_back(65536.0);
    return v;
  }();
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65536.0) return sign | 0x7c00u;
  // First code whose value is >= a.
  const auto it = std::lower_bound(kValues.begin(), kValues.end(), a);
  const uint16_t hi = static_cast<uint16_t>(it - kValues.begin());
  if (*it == a || hi == 0) return sign | hi;
  const uint16_t lo = hi - 1;
  const double d_lo = a - kValues[lo];
  const double d_hi = kValues[hi] - a;
  if (d_lo < d_hi) return sign | lo;
  if (d_hi < d_lo) return sign | hi;
  return sign | ((lo & 1u) == 0 ? lo : hi);
}

TEST_CASE("F16: every non-NaN half survives F16 -> F32 -> F16", "[fp16]") {
  int nan_count = 0;
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t h16 = static_cast<uint16_t>(h);
    const float f = F16ToF32(h16);
    if (IsF16NaN(h16)) {
      ++nan_count;
      REQUIRE(std::isnan(f));
      REQUIRE(std::signbit(f) == ((h16 & 0x8000u) != 0));
      REQUIRE(IsF16NaN(F32ToF16(f)));
      continue;
    }
    REQUIRE(F32ToF16(f) == h16);
  }
  CHECK(nan_count == 2 * 1023);
}

TEST_CASE("F16: known values decode exactly", "[fp16]") {
  CHECK(F16ToF32(0x3c00) == 1.0f);
  CHECK(F16ToF32(0xc000) == -2.0f);
  CHECK(F16ToF32(0x7bff) == 65504.0f);
  CHECK(F16ToF32(0x0400) == std::ldexp(1.0f, -14));     // smallest normal
  CHECK(F16ToF32(0x0001) == std::ldexp(1.0f, -24));     // smallest subnormal
  CHECK(F16ToF32(0x03ff) == std::ldexp(1023.0f, -24));  // largest subnormal
  CHECK(F16ToF32(0x3555) == std::ldexp(1365.0f, -12));  // 0.333251953125
  CHECK(Bits(F16ToF32(0x8000)) == 0x80000000u);         // -0
  CHECK(F16ToF32(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(F16ToF32(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(F16ToF32(0x7e00)));
}

TEST_CASE("F16: encoding of special values, subnormals, overflow and ties", "[fp16]") {
  CHECK(F32ToF16(0.0f) == 0x0000);
  CHECK(F32ToF16(-0.0f) == 0x8000);
  CHECK(F32ToF16(1.0f) == 0x3c00);
  CHECK(F32ToF16(-2.0f) == 0xc000);
  CHECK(F32ToF16(65504.0f) == 0x7bff);
  CHECK(F32ToF16(65519.996f) == 0x7bff);  // just under the midpoint to 65536
  CHECK(F32ToF16(65520.0f) == 0x7c00);    // midpoint: ties to even = overflow
  CHECK(F32ToF16(1e10f) == 0x7c00);
  CHECK(F32ToF16(-1e10f) == 0xfc00);
  CHECK(F32ToF16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(F32ToF16(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(IsF16NaN(F32ToF16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(IsF16NaN(F32ToF16(FromBits(0x7f800001u))));  // signalling NaN with low payload bits only
  CHECK(F32ToF16(FromBits(0xffc00000u)) & 0x8000u);  // negative NaN keeps its sign

  const float ulp1 = std::ldexp(1.0f, -10);        // spacing of halves in [1, 2)
  CHECK(F32ToF16(1.0f + ulp1 / 2) == 0x3c00);      // tie -> even (down)
  CHECK(F32ToF16(1.0f + 3 * ulp1 / 2) == 0x3c02);  // tie -> even (up)
  CHECK(F32ToF16(std::nextafter(1.0f + ulp1 / 2, 2.0f)) == 0x3c01);
  CHECK(F32ToF16(std::nextafter(1.0f + ulp1 / 2, 0.0f)) == 0x3c00);

  const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal half
  CHECK(F32ToF16(tiny) == 0x0001);
  CHECK(F32ToF16(tiny / 2) == 0x0000);                        // tie -> even (zero)
  CHECK(F32ToF16(std::nextafter(tiny / 2, 1.0f)) == 0x0001);  // just above the tie
  CHECK(F32ToF16(tiny * 1.5f) == 0x0002);                     // tie -> even (2)
  CHECK(F32ToF16(tiny * 2.5f) == 0x0002);                     // tie -> even (2)
  CHECK(F32ToF16(-tiny * 3.5f) == 0x8004);
  CHECK(F32ToF16(std::ldexp(1.0f, -30)) == 0x0000);
  CHECK(F32ToF16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  // Largest subnormal + half an ulp rounds up to the smallest normal.
  CHECK(F32ToF16(std::ldexp(1023.5f, -24)) == 0x0400);
}

TEST_CASE("F16: F32ToF16 matches a nearest-value search", "[fp16]") {
  std::mt19937 rng(20240611);
  // Random bit patterns concentrated on the exponents a half can represent
  // (and a little beyond), plus fully random patterns.
  std::uniform_int_distribution<uint32_t> mant(0, 0x7fffffu);
  std::uniform_int_distribution<uint32_t> exp(127 - 27, 127 + 17);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 400000; ++i) {
    uint32_t bits =
        (i % 4 == 3) ? any(rng) : ((exp(rng) << 23) | mant(rng) | (any(rng) & 0x80000000u));
    const float f = FromBits(bits);
    if (std::isnan(f)) continue;
    INFO("f32 bits 0x" << std::hex << bits);
    REQUIRE(F32ToF16(f) == NearestF16(f));
  }
  // Every exact midpoint between two adjacent halves (ties), both signs.
  for (uint32_t h = 0; h < 0x7bffu; ++h) {
    const double mid = (static_cast<double>(F16ToF32(static_cast<uint16_t>(h))) +
                        F16ToF32(static_cast<uint16_t>(h + 1))) /
                       2;
    const float f = static_cast<float>(mid);
    REQUIRE(static_cast<double>(f) == mid);  // midpoints are exact in f32
    const uint16_t even = (h & 1u) == 0 ? h : h + 1;
    REQUIRE(F32ToF16(f) == even);
    REQUIRE(F32ToF16(-f) == (even | 0x8000u));
  }
}

TEST_CASE("BF16: every non-NaN value survives BF16 -> F32 -> BF16", "[fp16]") {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t h16 = static_cast<uint16_t>(h);
    const float f = BF16ToF32(h16);
    REQUIRE(Bits(f) == (h << 16));
    if (std::isnan(f)) {
      REQUIRE(std::isnan(BF16ToF32(F32ToBF16(f))));
      continue;
    }
    REQUIRE(F32ToBF16(f) == h16);
  }
}

TEST_CASE("BF16: rounding to nearest even, overflow, NaN, subnormals", "[fp16]") {
  CHECK(F32ToBF16(1.0f) == 0x3f80);
  CHECK(F32ToBF16(FromBits(0x3f808000u)) == 0x3f80);              // tie -> even (down)
  CHECK(F32ToBF16(FromBits(0x3f818000u)) == 0x3f82);              // tie -> even (up)
  CHECK(F32ToBF16(FromBits(0x3f808001u)) == 0x3f81);              // above the tie
  CHECK(F32ToBF16(FromBits(0x3f807fffu)) == 0x3f80);              // below the tie
  CHECK(F32ToBF16(FromBits(0xbf818000u)) == 0xbf82);              // sign is kept
  CHECK(F32ToBF16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to inf
  CHECK(F32ToBF16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(F32ToBF16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(F32ToBF16(FromBits(0x00010000u)) == 0x0001);  // subnormals are kept
  CHECK(F32ToBF16(FromBits(0x00018000u)) == 0x0002);  // tie among subnormals
  // A NaN whose payload lies only in the low 16 bits must stay a NaN.
  const uint16_t nan = F32ToBF16(FromBits(0x7f800001u));
  CHECK((nan & 0x7f80u) == 0x7f80u);
  CHECK((nan & 0x7fu) != 0);
}

}  // namespace
}  // namespace odmoe
