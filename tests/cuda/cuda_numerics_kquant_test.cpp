// The CUDA kernels' K-family arithmetic (cuda_numerics_kquant.h), run on the
// host: the Q8_K activation quantizer (the sequential form and the warp form
// of the device kernel) against QuantizeRow, code and scale unpacking against
// the layouts of tensor/quant_blocks.h written out element by element here,
// dequantization against DequantizeRow, and the lane functions plus the tree
// against cpu_backend.h steps A-D written out plainly and against
// CpuBackend::MatMul on every ISA level, bit for bit, for quantizer output,
// random block bytes and integer extremes.
#include "cuda_numerics_kquant.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/reference_ops.h"
#include "catch2/catch.hpp"
#include "quant_test_util.h"
#include "tensor/quant.h"
#include "util/fp16.h"

namespace odmoe {
namespace {

namespace num = cuda_numerics;
using cuda_test::Bits;
using cuda_test::BlockFill;
using cuda_test::CheckLaneMatMulCases;
using cuda_test::RandomBlocks;
using cuda_test::SameBits;
using cuda_test::VisitTypeOf;

const DType kKTypes[] = {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                         DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS};

// ---- The layouts, element by element -----------------------------------------

uint16_t U16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

/// The signed code of element i (0..255) of a super-block.
int RefCode(DType type, const uint8_t* b, int i) {
  const int h = i / 128, s = (i % 128) / 32, l = i % 32;  // i = 128h + 32s + l
  const int c = i / 64, k = (i % 64) / 32;                // i = 64c + 32k + l
  switch (type) {
    case DType::kQ2_K:
      return (b[offsetof(BlockQ2K, qs) + 32 * h + l] >> (2 * s)) & 3;
    case DType::kQ3_K: {
      const int low = (b[offsetof(BlockQ3K, qs) + 32 * h + l] >> (2 * s)) & 3;
      const int hbit = (b[offsetof(BlockQ3K, hmask) + l] >> (4 * h + s)) & 1;
      return low + 4 * hbit - 4;
    }
    case DType::kQ4_K:
      return (b[offsetof(BlockQ4K, qs) + 32 * c + l] >> (4 * k)) & 15;
    case DType::kQ5_K:
      return ((b[offsetof(BlockQ5K, qs) + 32 * c + l] >> (4 * k)) & 15) |
             (((b[offsetof(BlockQ5K, qh) + l] >> (2 * c + k)) & 1) << 4);
    case DType::kQ6_K: {
      const int r = i % 128;
      const int low = (b[offsetof(BlockQ6K, ql) + 64 * h + r % 64] >> (4 * (r / 64))) & 15;
      const int high = (b[offsetof(BlockQ6K, qh) + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
      return (low | (high << 4)) - 32;
    }
    case DType::kIQ4_XS: {
      const int j = i / 32, t = i % 32;
      return kIq4nlValues[(b[offsetof(BlockIq4Xs, qs) + 16 * j + t % 16] >> (4 * (t / 16))) & 15];
    }
    default:
      return 0;
  }
}

int SubElems(DType type) {
  return type == DType::kQ2_K || type == DType::kQ3_K || type == DType::kQ6_K ? 16 : 32;
}
bool HasMins(DType type) {
  return type == DType::kQ2_K || type == DType::kQ4_K || type == DType::kQ5_K;
}

/// Scale and min of sub-block j.
void RefScale(DType type, const uint8_t* b, int j, int* sc, int* mn) {
  *mn = 0;
  switch (type) {
    case DType::kQ2_K:
      *sc = b[offsetof(BlockQ2K, scales) + j] & 15;
      *mn = b[offsetof(BlockQ2K, scales) + j] >> 4;
      return;
    case DType::kQ3_K: {
      const uint8_t* p = b + offsetof(BlockQ3K, scales);
      const int low = j < 8 ? p[j] & 15 : p[j - 8] >> 4;
      *sc = (low | (((p[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const uint8_t* p = b + offsetof(BlockQ4K, scales);  // same offset in BlockQ5K
      if (j < 4) {
        *sc = p[j] & 63;
        *mn = p[j + 4] & 63;
      } else {
        *sc = (p[j + 4] & 15) | ((p[j - 4] >> 6) << 4);
        *mn = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
      }
      return;
    }
    case DType::kQ6_K:
      *sc = static_cast<int8_t>(b[offsetof(BlockQ6K, scales) + j]);
      return;
    case DType::kIQ4_XS: {
      const int low = (b[offsetof(BlockIq4Xs, scales_l) + j / 2] >> (4 * (j % 2))) & 15;
      const int high = (U16(b + offsetof(BlockIq4Xs, scales_h)) >> (2 * j)) & 3;
      *sc = (low | (high << 4)) - 32;
      return;
    }
    default:
      *sc = 0;
  }
}

size_t DOffset(DType type) {
  switch (type) {
    case DType::kQ2_K:
      return offsetof(BlockQ2K, d);
    case DType::kQ3_K:
      return offsetof(BlockQ3K, d);
    case DType::kQ6_K:
      return offsetof(BlockQ6K, d);
    default:
      return 0;  // Q4_K, Q5_K, IQ4_XS: d first
  }
}
size_t DminOffset(DType type) { return type == DType::kQ2_K ? offsetof(BlockQ2K, dmin) : 2; }

/// (d * sc) * q, minus dmin * mn for the types with mins.
float RefDequant(DType type, const uint8_t* b, int i) {
  int sc, mn;
  RefScale(type, b, i / SubElems(type), &sc, &mn);
  const float dl = F16ToF32(U16(b + DOffset(type))) * static_cast<float>(sc);
  const float q = static_cast<float>(RefCode(type, b, i));
  if (!HasMins(type)) return dl * q;
  const float ml = F16ToF32(U16(b + DminOffset(type))) * static_cast<float>(mn);
  return dl * q - ml;
}

/// Steps B-C for one weight row and one Q8_K activation row, plainly.
float RefDot(DType type, const uint8_t* w_row, const BlockQ8K* xq, int64_t n_super) {
  float lanes[16] = {};
  const int bytes = Traits(type).block_bytes;
  for (int64_t s = 0; s < n_super; ++s) {
    const uint8_t* b = w_row + s * bytes;
    int32_t a = 0, bsum = 0;
    for (int j = 0; j < 256 / SubElems(type); ++j) {
      int sc, mn;
      RefScale(type, b, j, &sc, &mn);
      int32_t isum = 0, xsum = 0;
      for (int i = j * SubElems(type); i < (j + 1) * SubElems(type); ++i) {
        isum += RefCode(type, b, i) * xq[s].qs[i];
        xsum += xq[s].qs[i];
      }
      a += sc * isum;
      bsum += mn * xsum;
    }
    float& lane = lanes[s % 16];
    lane = std::fma(F16ToF32(U16(b + DOffset(type))) * xq[s].d, static_cast<float>(a), lane);
    if (HasMins(type)) {
      lane = std::fma(-(F16ToF32(U16(b + DminOffset(type))) * xq[s].d), static_cast<float>(bsum),
                      lane);
    }
  }
  return num::TreeReduce16(lanes);
}

/// Q8_K of one super-block as specified (tensor/quant.h), plainly.
BlockQ8K RefQ8K(const float* x) {
  BlockQ8K b{};
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 256; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0.0f) return b;
  const float iscale = -127.0f / max;
  for (int i = 0; i < 256; ++i) {
    const float v = iscale * x[i];
    b.qs[i] = static_cast<int8_t>(std::isnan(v) ? 127 : std::fmin(127.0f, std::nearbyint(v)));
  }
  for (int j = 0; j < 16; ++j) {
    int s = 0;
    for (int i = 16 * j; i < 16 * j + 16; ++i) s += b.qs[i];
    b.bsums[j] = static_cast<int16_t>(s);
  }
  b.d = 1.0f / iscale;
  return b;
}

/// The device kernel's form: 32 threads of 8 elements, picks merged by the
/// xor butterfly, words and sums per thread.
BlockQ8K WarpQ8K(const float* x) {
  num::AbsMaxPick p[32];
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 8; ++i) num::PickAbsMax(&p[l], x[8 * l + i], 8 * l + i);
  }
  for (int off = 16; off > 0; off /= 2) {
    num::AbsMaxPick next[32];
    for (int l = 0; l < 32; ++l) next[l] = num::MergeAbsMax(p[l], p[l ^ off]);
    std::copy(next, next + 32, p);
  }
  BlockQ8K b{};
  for (int l = 0; l < 32; ++l) {
    REQUIRE(Bits(p[l].max) == Bits(p[0].max));
    const bool zero = p[l].amax == 0.0f;
    const float iscale = num::Q8KInverseScale(p[l]);
    for (int w = 0; w < 2; ++w) {
      const int32_t word = zero ? 0 : num::Q8KCodeWord(iscale, x + 8 * l + 4 * w);
      std::memcpy(b.qs + 8 * l + 4 * w, &word, 4);
    }
    if (l == 0) b.d = zero ? 0.0f : 1.0f / iscale;
  }
  for (int j = 0; j < 16; ++j) {
    int s = 0;
    for (int i = 16 * j; i < 16 * j + 16; ++i) s += b.qs[i];
    b.bsums[j] = static_cast<int16_t>(s);
  }
  return b;
}

bool SameQ8K(const BlockQ8K& a, const BlockQ8K& b) {
  return Bits(a.d) == Bits(b.d) && std::memcmp(a.qs, b.qs, 256) == 0 &&
         std::memcmp(a.bsums, b.bsums, sizeof(a.bsums)) == 0;
}

// ---- The plain reference MatMul ----------------------------------------------

std::vector<float> RefMatMul(DType type, const std::vector<uint8_t>& w, int64_t out, int64_t k,
                             const std::vector<float>& x, int64_t n) {
  const int64_t ns = k / 256;
  std::vector<BlockQ8K> xq(static_cast<size_t>(n * ns));
  for (size_t i = 0; i < xq.size(); ++i) xq[i] = RefQ8K(x.data() + 256 * i);
  std::vector<float> y(static_cast<size_t>(n * out));
  const size_t rb = RowBytes(type, k);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t o = 0; o < out; ++o)
      y[t * out + o] = RefDot(type, w.data() + o * rb, &xq[t * ns], ns);
  }
  return y;
}

// ---- Cases -------------------------------------------------------------------

TEST_CASE("cuda K table agrees with the type table and the block structs", "[cuda][numerics]") {
  for (DType t : kKTypes) {
    INFO(Traits(t).name);
    CHECK(num::IsKFamily(t));
    CHECK(Traits(t).block_elems == 256);
    CHECK(Traits(t).vec_dot == DType::kQ8_K);
    VisitTypeOf<num::IsKFamily>(t, [&](auto tag) {
      constexpr num::KFormat F = num::KFormatOf<decltype(tag)::value>();
      CHECK(F.bytes == Traits(t).block_bytes);
      CHECK(F.sub_elems == SubElems(t));
      CHECK(static_cast<size_t>(F.d_offset) == DOffset(t));
      CHECK((F.dmin_offset >= 0) == HasMins(t));
      if (HasMins(t)) CHECK(static_cast<size_t>(F.dmin_offset) == DminOffset(t));
    });
  }
  CHECK_FALSE(num::IsKFamily(DType::kQ8_K));
  CHECK_FALSE(num::CudaKernelType(DType::kQ8_K));
}

TEST_CASE("cuda Q8_K activations equal the specification and QuantizeRow", "[cuda][numerics]") {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int trial = 0; trial < 600; ++trial) {
    INFO("trial " << trial);
    float x[256];
    for (float& v : x) v = u(rng) * (trial % 7 == 0 ? 1e-30f : 1.0f);
    if (trial % 5 == 0) {  // ties of magnitude with opposite signs: the first wins
      x[trial % 256] = 4.0f;
      x[(trial * 7 + 3) % 256] = -4.0f;
    }
    if (trial % 11 == 0) x[(trial * 3) % 256] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 13 == 0) std::fill(x, x + 256, 0.0f);
    if (trial % 17 == 0) x[9] = std::numeric_limits<float>::infinity();
    if (trial % 19 == 0) std::fill(x, x + 256, std::numeric_limits<float>::quiet_NaN());
    if (trial % 23 == 0) {  // exact half steps of the code grid: round half to even
      for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 64 - 32) * 0.5f;
      x[0] = -127.0f * 0.5f;
    }
    num::QActSuperBlock got;
    BlockQ8K raw;
    const float d = num::QuantizeBlockQ8_K(x, &got, &raw);
    const BlockQ8K spec = RefQ8K(x);
    CHECK(SameQ8K(raw, spec));
    CHECK(SameQ8K(WarpQ8K(x), spec));
    CHECK(Bits(d) == Bits(spec.d));
    for (int j = 0; j < 16; ++j) CHECK(got.bsum[j] == spec.bsums[j]);
    BlockQ8K want;
    QuantizeRow(DType::kQ8_K, x, &want, 256);
    CHECK(SameQ8K(raw, want));
  }
}

TEST_CASE("cuda K codes, scales and dequantization equal the layouts and DequantizeRow",
          "[cuda][numerics]") {
  const int64_t n_super = 12;
  uint32_t seed = 2000;
  for (DType type : kKTypes) {
    for (BlockFill fill : {BlockFill::kRandom, BlockFill::kZeros, BlockFill::kOnes,
                           BlockFill::kHigh, BlockFill::kAlternate}) {
      INFO(Traits(type).name << " fill " << static_cast<int>(fill));
      const std::vector<uint8_t> row = RandomBlocks(type, n_super, ++seed, fill);
      const int bytes = Traits(type).block_bytes;
      int bad_codes = 0, bad_scales = 0;
      std::vector<float> got(n_super * 256), spec(got.size());
      VisitTypeOf<num::IsKFamily>(type, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        constexpr num::KFormat F = num::KFormatOf<T>();
        for (int64_t s = 0; s < n_super; ++s) {
          const uint8_t* b = row.data() + s * bytes;
          int32_t sc[16], mn[16];
          num::KSubScales<T>(b, sc, mn);
          for (int j = 0; j < 256 / F.sub_elems; ++j) {
            int rsc, rmn;
            RefScale(type, b, j, &rsc, &rmn);
            if (sc[j] != rsc || mn[j] != rmn) ++bad_scales;
            for (int m = 0; m < F.sub_elems / 4; ++m) {
              const uint32_t word = static_cast<uint32_t>(num::KCodeWord<T>(b, j, m));
              for (int e = 0; e < 4; ++e) {
                const int i = j * F.sub_elems + 4 * m + e;
                if (static_cast<int8_t>((word >> (8 * e)) & 0xff) != RefCode(type, b, i))
                  ++bad_codes;
              }
            }
          }
          for (int i = 0; i < 256; ++i) spec[s * 256 + i] = RefDequant(type, b, i);
        }
      });
      got = cuda_test::DeviceDequant(type, row, n_super * 256);
      CHECK(bad_codes == 0);
      CHECK(bad_scales == 0);
      CHECK(SameBits(got, spec));
      std::vector<float> want(got.size());
      DequantizeRow(type, row.data(), want.data(), n_super * 256);
      CHECK(SameBits(got, want));
    }
  }
}

TEST_CASE("cuda K-family MatMul lanes give the canonical order and the CPU's bits",
          "[cuda][numerics]") {
  uint32_t seed = 3000;
  for (DType type : kKTypes) {
    CheckLaneMatMulCases(type, {{256, 5, 1}, {768, 4, 3}, {4096, 3, 2}, {5120, 2, 1}, {1024, 3, 9}},
                         -2.5f, RefMatMul, &seed);
  }
}

TEST_CASE("cuda K-family sums of several activation rows equal one row at a time",
          "[cuda][numerics]") {
  // The prefill kernel decodes a weight super-block once for NX rows.
  const std::vector<uint8_t> w = RandomBlocks(DType::kQ5_K, 1, 4000);
  const std::vector<float> x = ref::RandomFloats(256 * 8, 4001, -2.0f, 2.0f);
  std::vector<num::QActSuperBlock> xq(8);
  for (int t = 0; t < 8; ++t) num::QuantizeBlockQ8_K(x.data() + 256 * t, &xq[t], nullptr);
  int32_t a8[8], b8[8];
  num::KSuperBlockSums<DType::kQ5_K, 8>(w.data(), xq.data(), 1, 5, a8, b8);
  for (int t = 0; t < 8; ++t) {
    int32_t a1 = 0, b1 = 0;
    num::KSuperBlockSums<DType::kQ5_K, 1>(w.data(), &xq[t], 0, 1, &a1, &b1);
    CHECK(a8[t] == (t < 5 ? a1 : 0));
    CHECK(b8[t] == (t < 5 ? b1 : 0));
  }
}

TEST_CASE("cuda K-family super-block sums split in halves add up to the whole",
          "[cuda][numerics]") {
  // The MatMul kernel gives each half of a super-block's sub-blocks to its own
  // thread and adds the two exact int32 parts.
  uint32_t seed = 4100;
  for (DType type : kKTypes) {
    INFO(Traits(type).name);
    const std::vector<uint8_t> w = RandomBlocks(type, 1, ++seed);
    const std::vector<float> x = ref::RandomFloats(256 * 3, ++seed, -2.0f, 2.0f);
    std::vector<num::QActSuperBlock> xq(3);
    for (int t = 0; t < 3; ++t) num::QuantizeBlockQ8_K(x.data() + 256 * t, &xq[t], nullptr);
    VisitTypeOf<num::IsKFamily>(type, [&](auto tag) {
      constexpr DType T = decltype(tag)::value;
      constexpr int kHalf = 256 / num::KFormatOf<T>().sub_elems / 2;
      int32_t a[4], b[4], a0[4], b0[4], a1[4], b1[4];
      num::KSuperBlockSums<T, 4>(w.data(), xq.data(), 1, 3, a, b);
      num::KSuperBlockSumsPart<T, 4, kHalf>(w.data(), xq.data(), 1, 3, 0, a0, b0);
      num::KSuperBlockSumsPart<T, 4, kHalf>(w.data(), xq.data(), 1, 3, kHalf, a1, b1);
      for (int t = 0; t < 3; ++t) {
        CHECK(a[t] == a0[t] + a1[t]);
        CHECK(b[t] == b0[t] + b1[t]);
      }
      CHECK(a0[0] != 0);
      CHECK(a1[0] != 0);
    });
  }
}


/// Bytes at a chosen offset from a 16-byte line, with 48 readable bytes on
/// either side (LoadRun8<2> reads the lines around its run).
struct PaddedBytes {
  std::vector<uint8_t> storage;
  uint8_t* data;
  PaddedBytes(const std::vector<uint8_t>& bytes, int offset) : storage(bytes.size() + 128) {
    uint8_t* p = storage.data() + 48;
    p += (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16;
    data = p + offset;
    std::memcpy(data, bytes.data(), bytes.size());
  }
};

TEST_CASE("cuda K-family quarter sums add up to the whole super-block sums",
          "[cuda][numerics]") {
  // The decode kernel gives each quarter of a super-block to its own thread
  // (KQuarterSums) and adds the four exact int32 parts; 2-byte aligned types
  // shift their words out of 16-byte lines, tried at every even offset.
  uint32_t seed = 4200;
  for (DType type : kKTypes) {
    for (int fill = 0; fill < 3; ++fill) {
      INFO(Traits(type).name << " fill " << fill);
      const BlockFill f = fill == 0 ? BlockFill::kRandom
                                    : (fill == 1 ? BlockFill::kOnes : BlockFill::kAlternate);
      const std::vector<uint8_t> w = RandomBlocks(type, 1, ++seed, f);
      const std::vector<float> x = ref::RandomFloats(256 * 4, ++seed, -2.0f, 2.0f);
      std::vector<num::QActSuperBlock> xq(4);
      for (int t = 0; t < 4; ++t) num::QuantizeBlockQ8_K(x.data() + 256 * t, &xq[t], nullptr);
      VisitTypeOf<num::IsKFamily>(type, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        const int step = num::KVecAlign<T>();
        for (int offset = 0; offset < 16; offset += step) {
          INFO("offset " << offset);
          const PaddedBytes sb(w, offset);
          for (int nt = 1; nt <= 4; ++nt) {
            int32_t a[4], b[4], sa[4] = {}, sb4[4] = {};
            num::KSuperBlockSums<T, 4>(sb.data, xq.data(), 1, nt, a, b);
            for (int q = 0; q < 4; ++q) {
              int32_t qa[4], qb[4];
              num::KQuarterSums<T, 4>(sb.data, q, xq.data(), 1, nt, qa, qb);
              for (int t = 0; t < 4; ++t) {
                sa[t] += qa[t];
                sb4[t] += qb[t];
                if (t >= nt) CHECK((qa[t] == 0 && qb[t] == 0));
              }
            }
            for (int t = 0; t < 4; ++t) {
              CHECK(sa[t] == a[t]);
              CHECK(sb4[t] == b[t]);
            }
            int32_t a1, b1;
            num::KQuarterSums<T, 1>(sb.data, 3, xq.data(), 0, 1, &a1, &b1);
            int32_t a4[4], b4[4];
            num::KQuarterSums<T, 4>(sb.data, 3, xq.data(), 1, 4, a4, b4);
            CHECK(a1 == a4[0]);
            CHECK(b1 == b4[0]);
          }
        }
      });
    }
  }
}

/// KMatVecKernel's thread plan run on the host: thread t of a row's warp adds
/// quarter t % 4 of super-blocks s0 + t / 4 and s0 + 8 + t / 4 into its two
/// accumulators, the four threads' int32 parts summed first; the tree takes
/// lane l < 8 from thread 4l's first accumulator and lane 8 + l from its
/// second.
template <DType T>
std::vector<float> QuarterPlanMatMul(const uint8_t* w, int64_t out, int64_t k,
                                     const std::vector<num::QActSuperBlock>& xq, int64_t n) {
  constexpr num::KFormat F = num::KFormatOf<T>();
  const int64_t ns = k / 256;
  const int64_t rb = ns * F.bytes;
  std::vector<float> y(static_cast<size_t>(n * out));
  for (int64_t t = 0; t < n; ++t) {
    const num::QActSuperBlock* xr = xq.data() + t * ns;
    for (int64_t o = 0; o < out; ++o) {
      const uint8_t* wr = w + o * rb;
      float acc[2][8] = {};  // [half][g]: equal in the four threads of g
      for (int64_t s0 = 0; s0 < ns; s0 += 16) {
        for (int half = 0; half < 2; ++half) {
          for (int g = 0; g < 8; ++g) {
            const int64_t s = s0 + 8 * half + g;
            if (s >= ns) continue;
            int32_t a = 0, b = 0;
            for (int q = 0; q < 4; ++q) {
              int32_t qa, qb;
              num::KQuarterSums<T, 1>(wr + s * F.bytes, q, xr + s, 0, 1, &qa, &qb);
              a += qa;
              b += qb;
            }
            acc[half][g] = num::KStep<T>(wr + s * F.bytes, xr[s].d, a, b, acc[half][g]);
          }
        }
      }
      float lanes[16];
      for (int l = 0; l < 16; ++l) lanes[l] = acc[l / 8][l % 8];
      y[static_cast<size_t>(t * out + o)] = num::TreeReduce16(lanes);
    }
  }
  return y;
}

TEST_CASE("cuda K-family decode plan of quarters gives the canonical bits", "[cuda][numerics]") {
  uint32_t seed = 4300;
  for (DType type : kKTypes) {
    for (const int64_t k : {256, 4096, 17 * 256, 56 * 256}) {
      INFO(Traits(type).name << " k=" << k);
      const int64_t out = 3, n = 2;
      const std::vector<uint8_t> w = RandomBlocks(type, out * k / 256, ++seed);
      const std::vector<float> x = ref::RandomFloats(k * n, ++seed, -3.0f, 3.0f);
      std::vector<num::QActSuperBlock> xq(static_cast<size_t>(n * k / 256));
      for (size_t i = 0; i < xq.size(); ++i) {
        num::QuantizeBlockQ8_K(x.data() + 256 * i, &xq[i], nullptr);
      }
      const PaddedBytes wb(w, 0);
      std::vector<float> got;
      VisitTypeOf<num::IsKFamily>(type, [&](auto tag) {
        got = QuarterPlanMatMul<decltype(tag)::value>(wb.data, out, k, xq, n);
      });
      CHECK(SameBits(got, cuda_test::LaneMatMul(type, w, out, k, x, n)));
    }
  }
}

}  // namespace
}  // namespace odmoe
