// The CUDA kernels' block32 arithmetic (cuda_numerics_block32.h), run on the
// host: decoding of every block32 type against a byte-by-byte reference
// written from tensor/quant_blocks.h, dequantization against DequantizeRow,
// and the lane functions plus the tree against the canonical order of
// cpu_backend.h written out plainly here and against CpuBackend::MatMul on
// every ISA level, bit for bit, for quantizer output, random block bytes and
// integer extremes.
#include "cuda_numerics_block32.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "backend/reference_ops.h"
#include "catch2/catch.hpp"
#include "quant_test_util.h"
#include "tensor/quant.h"
#include "util/fp16.h"

namespace odmoe {
namespace {

namespace num = cuda_numerics;
using cuda_test::BlockFill;
using cuda_test::CheckLaneMatMulCases;
using cuda_test::DeviceDequant;
using cuda_test::RandomBlocks;
using cuda_test::SameBits;
using cuda_test::VisitTypeOf;

const DType kBlock32Types[] = {DType::kQ8_0, DType::kQ4_0,   DType::kQ4_1, DType::kQ5_0,
                               DType::kQ5_1, DType::kIQ4_NL, DType::kMXFP4};

int Nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }
int FifthBit(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }

/// The signed code qw of element e, straight from the layouts.
int RefCode(DType type, const uint8_t* b, int e) {
  switch (type) {
    case DType::kQ8_0:
      return static_cast<int8_t>(b[offsetof(BlockQ8_0, qs) + e]);
    case DType::kQ4_0:
      return Nibble(b + offsetof(BlockQ4_0, qs), e) - 8;
    case DType::kQ4_1:
      return Nibble(b + offsetof(BlockQ4_1, qs), e);
    case DType::kQ5_0:
      return (Nibble(b + offsetof(BlockQ5_0, qs), e) | FifthBit(b + offsetof(BlockQ5_0, qh), e)
                                                           << 4) -
             16;
    case DType::kQ5_1:
      return Nibble(b + offsetof(BlockQ5_1, qs), e) | FifthBit(b + offsetof(BlockQ5_1, qh), e) << 4;
    case DType::kIQ4_NL:
      return kIq4nlValues[Nibble(b + offsetof(BlockIq4Nl, qs), e)];
    case DType::kMXFP4:
      return kMxfp4Values[Nibble(b + offsetof(BlockMxfp4, qs), e)];
    default:
      return 0;
  }
}

float RefScale(DType type, const uint8_t* b) {
  if (type == DType::kMXFP4) return E8M0Half(b[0]);
  uint16_t h;
  std::memcpy(&h, b, sizeof(h));
  return F16ToF32(h);
}

bool HasMin(DType type) { return type == DType::kQ4_1 || type == DType::kQ5_1; }

float RefMin(const uint8_t* b) {
  uint16_t h;
  std::memcpy(&h, b + 2, sizeof(h));  // m follows d in Q4_1 and Q5_1
  return F16ToF32(h);
}

/// cpu_backend.h a-d for one weight row and one activation row, plainly.
float RefDot(DType type, const uint8_t* w_row, const BlockQ8_0* xq, int64_t nb) {
  float lanes[16] = {};
  const int bytes = Traits(type).block_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w_row + b * bytes;
    const float dx = F16ToF32(xq[b].d);
    int32_t isum = 0, sx = 0;
    for (int e = 0; e < 32; ++e) {
      isum += RefCode(type, blk, e) * xq[b].qs[e];
      sx += xq[b].qs[e];
    }
    float& lane = lanes[b % 16];
    lane = std::fma(RefScale(type, blk) * dx, static_cast<float>(isum), lane);
    if (HasMin(type)) lane = std::fma(RefMin(blk) * dx, static_cast<float>(sx), lane);
  }
  return num::TreeReduce16(lanes);
}

std::vector<float> RefMatMul(DType type, const std::vector<uint8_t>& w, int64_t out, int64_t k,
                             const std::vector<float>& x, int64_t n) {
  const int64_t nb = k / 32;
  std::vector<BlockQ8_0> xq(static_cast<size_t>(n * nb));
  for (int64_t t = 0; t < n; ++t) QuantizeRow(DType::kQ8_0, x.data() + t * k, &xq[t * nb], k);
  std::vector<float> y(static_cast<size_t>(n * out));
  const size_t rb = RowBytes(type, k);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t o = 0; o < out; ++o)
      y[t * out + o] = RefDot(type, w.data() + o * rb, &xq[t * nb], nb);
  }
  return y;
}

TEST_CASE("cuda block32 table agrees with the type table and the block structs",
          "[cuda][numerics]") {
  for (DType t : kBlock32Types) {
    INFO(Traits(t).name);
    CHECK(num::IsBlock32(t));
    CHECK(Traits(t).block_elems == 32);
    CHECK(Traits(t).vec_dot == DType::kQ8_0);
  }
  CHECK(num::Block32FormatOf<DType::kQ4_1>().bytes == sizeof(BlockQ4_1));
  CHECK(num::Block32FormatOf<DType::kQ4_1>().min_offset == offsetof(BlockQ4_1, m));
  CHECK(num::Block32FormatOf<DType::kQ4_1>().qs_offset == offsetof(BlockQ4_1, qs));
  CHECK(num::Block32FormatOf<DType::kQ5_0>().bytes == sizeof(BlockQ5_0));
  CHECK(num::Block32FormatOf<DType::kQ5_0>().qh_offset == offsetof(BlockQ5_0, qh));
  CHECK(num::Block32FormatOf<DType::kQ5_0>().qs_offset == offsetof(BlockQ5_0, qs));
  CHECK(num::Block32FormatOf<DType::kQ5_1>().bytes == sizeof(BlockQ5_1));
  CHECK(num::Block32FormatOf<DType::kQ5_1>().min_offset == offsetof(BlockQ5_1, m));
  CHECK(num::Block32FormatOf<DType::kQ5_1>().qh_offset == offsetof(BlockQ5_1, qh));
  CHECK(num::Block32FormatOf<DType::kQ5_1>().qs_offset == offsetof(BlockQ5_1, qs));
  CHECK(num::Block32FormatOf<DType::kIQ4_NL>().bytes == sizeof(BlockIq4Nl));
  CHECK(num::Block32FormatOf<DType::kMXFP4>().bytes == sizeof(BlockMxfp4));
  CHECK(num::Block32FormatOf<DType::kMXFP4>().qs_offset == offsetof(BlockMxfp4, qs));
  for (uint32_t e = 0; e < 256; ++e) {
    CHECK(cuda_test::Bits(num::E8M0Half(e)) == cuda_test::Bits(E8M0Half(static_cast<uint8_t>(e))));
  }
}

TEST_CASE("cuda block32 codes and dequantization equal the layouts and DequantizeRow",
          "[cuda][numerics]") {
  const int64_t n = 32 * 40;
  uint32_t seed = 900;
  for (DType type : kBlock32Types) {
    for (BlockFill fill : {BlockFill::kRandom, BlockFill::kZeros, BlockFill::kOnes,
                           BlockFill::kHigh, BlockFill::kAlternate}) {
      INFO(Traits(type).name << " fill " << static_cast<int>(fill));
      std::vector<uint8_t> row = RandomBlocks(type, n / 32, ++seed, fill);
      if (type == DType::kMXFP4) {  // every exponent, subnormal scales and 2^127 included
        for (int64_t b = 0; b < n / 32; ++b)
          row[b * 17] = static_cast<uint8_t>(b * 7 + (b < 3 ? 0 : 200));
      }
      int bad_codes = 0;
      const int bytes = Traits(type).block_bytes;
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = row.data() + b * bytes;
        for (int m = 0; m < 8; ++m) {
          int32_t word = 0;
          VisitTypeOf<num::IsBlock32>(
              type, [&](auto tag) { word = num::Block32CodeWord<decltype(tag)::value>(blk, m); });
          for (int i = 0; i < 4; ++i) {
            const int got = static_cast<int8_t>((static_cast<uint32_t>(word) >> (8 * i)) & 0xff);
            if (got != RefCode(type, blk, 4 * m + i)) ++bad_codes;
          }
        }
      }
      CHECK(bad_codes == 0);
      std::vector<float> want(n);
      DequantizeRow(type, row.data(), want.data(), n);
      CHECK(SameBits(DeviceDequant(type, row, n), want));
    }
  }
}

TEST_CASE("cuda block32 MatMul lanes give the canonical order and the CPU's bits",
          "[cuda][numerics]") {
  uint32_t seed = 1000;
  for (DType type : kBlock32Types) {
    CheckLaneMatMulCases(
        type, {{32, 5, 1}, {96, 7, 3}, {512, 4, 2}, {4096, 3, 2}, {1184, 2, 5}, {2880, 2, 1}}, 2.5f,
        RefMatMul, &seed);
  }
}

TEST_CASE("cuda block32 decode reads MXFP4 blocks at odd addresses", "[cuda][numerics]") {
  // Rows of MXFP4 are 17 * n bytes: block b of a row starts at an odd offset
  // for odd b, and a row itself may start anywhere.
  std::vector<uint8_t> buf(1 + 17 * 64);
  const std::vector<uint8_t> row = RandomBlocks(DType::kMXFP4, 64, 77);
  std::memcpy(buf.data() + 1, row.data(), row.size());
  std::vector<float> want(64 * 32);
  DequantizeRow(DType::kMXFP4, row.data(), want.data(), 64 * 32);
  std::vector<float> got(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    got[i] = num::DequantElement<DType::kMXFP4>(buf.data() + 1, i);
  CHECK(SameBits(got, want));
}

}  // namespace
}  // namespace odmoe
