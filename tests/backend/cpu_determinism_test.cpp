// Bitwise determinism of the CPU backend (the cluster's contract, see
// backend/backend.h and the canonical order in cpu_backend.h): every result
// must be identical, bit for bit, whatever the number of rows per call, their
// grouping, the thread count (1, 2, 3) and the ISA level (every level this
// machine supports: scalar, avx2, avx512, avx512vnni). For block32 weights
// a single row goes through the decode kernel (qdot_rows) and several rows
// through the packed one (qdot_packed), so the batching checks compare both.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "cpu_isa.h"
#include "cpu_kernels.h"
#include "cpu_math.h"
#include "cpu_qdot.h"
#include "op_cases.h"
#include "reference_ops.h"
#include "util/fp16.h"

namespace odmoe::test {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Every (ISA, threads) configuration of the CPU backend on this machine.
std::vector<std::unique_ptr<CpuBackend>> AllConfigurations() {
  std::vector<std::unique_ptr<CpuBackend>> out;
  for (CpuIsa isa : SupportedCpuIsas()) {
    for (int threads : {1, 2, 3}) out.push_back(std::make_unique<CpuBackend>(threads, isa));
  }
  return out;
}

std::string Describe(const CpuBackend& be) {
  return std::string(CpuIsaName(be.isa())) + " x" + std::to_string(be.threads());
}

TEST_CASE("every ISA level of this machine can be selected", "[backend][determinism]") {
  for (CpuIsa isa : SupportedCpuIsas()) CHECK(CpuBackend(1, isa).isa() == isa);
  CHECK(DefaultCpuIsa() <= DetectedCpuIsa());
  CHECK(ParseCpuIsa("avx2") == CpuIsa::kAvx2);
  CHECK_FALSE(ParseCpuIsa("sse9").has_value());
  CHECK(ParseCpuIsa("avx512vnni") == CpuIsa::kAvx512Vnni);
  if (DetectedCpuIsa() != CpuIsa::kAvx512Vnni) {
    WARN("levels above " << CpuIsaName(DetectedCpuIsa()) << " are not available: not tested");
  }
}

TEST_CASE("MatMul is bitwise identical across batching, grouping, threads and ISA",
          "[backend][determinism]") {
  struct Shape {
    int64_t k, out;
  };
  const int64_t n = 17;
  const auto configs = AllConfigurations();
  for (DType type : WeightTypesUnderTest()) {
    // Block32 types: 1, 3, 128 (8 full groups of 16), 17 and 37 blocks
    // (partial last group), and 512 (rows past kQInterleaveRowBytes: the
    // long-row decode path); K family: 1, 16, 17, 5 and 40 super-blocks.
    // 13, 9, 5 rows leave 1..3 rows in the last block of 4.
    std::vector<Shape> shapes = {{32, 13}, {96, 64}, {4096, 9}, {544, 5}, {1184, 10}, {16384, 8}};
    if (Traits(type).block_elems == 256) {
      shapes = {{256, 13}, {4096, 9}, {4352, 5}, {1280, 10}, {10240, 4}};
    }
    if (!Traits(type).quantized) shapes.push_back({50, 7});
    for (const Shape& s : shapes) {
      const std::vector<uint8_t> w = RandomWeight(type, s.out, s.k, 5);
      const std::vector<float> x = ref::RandomFloats(n * s.k, 6, -2, 2);
      const WeightRef wr{type, w.data(), s.out, s.k};
      auto run = [&](CpuBackend& be, int64_t first, int64_t rows) {
        std::vector<float> y(rows * s.out);
        be.MatMul(wr, ConstMat(x.data(), n, s.k).RowRange(first, rows), Mat{y.data(), rows, s.out});
        return y;
      };
      CpuBackend scalar(1, CpuIsa::kScalar);
      const std::vector<float> want = run(scalar, 0, n);
      for (const auto& be : configs) {
        INFO(Traits(type).name << " k=" << s.k << " out=" << s.out << " on " << Describe(*be));
        CHECK(SameBits(run(*be, 0, n), want));
        std::vector<float> rows, groups;
        for (int64_t t = 0; t < n; ++t) {  // one row at a time (decode)
          const auto y = run(*be, t, 1);
          rows.insert(rows.end(), y.begin(), y.end());
        }
        CHECK(SameBits(rows, want));
        for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 3}, {3, 5}, {8, 2}, {10, 7}}) {
          const auto y = run(*be, first, count);
          groups.insert(groups.end(), y.begin(), y.end());
        }
        CHECK(SameBits(groups, want));
      }
    }
  }
}

TEST_CASE("quantized MatMul with subnormal f16 block scales is identical on every ISA",
          "[backend][determinism]") {
  // Weights of magnitude 1e-5 give block scales below 2^-14: F16 subnormals,
  // which the SIMD kernels convert with F16C and the scalar path in software.
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                     DType::kIQ4_NL, DType::kF16}) {
    const std::vector<uint8_t> w = RandomWeight(type, 8, 64, 3, 1e-5f);
    const std::vector<float> x = ref::RandomFloats(2 * 64, 4);
    const WeightRef wr{type, w.data(), 8, 64};
    std::vector<float> want(16), got(16);
    CpuBackend(1, CpuIsa::kScalar).MatMul(wr, ConstMat(x.data(), 2, 64), Mat{want.data(), 2, 8});
    const std::vector<double> exact = ref::MatMul(type, w.data(), 8, 64, x, 2);
    CHECK(ref::MaxRelError(want, exact) < 1e-5);
    for (CpuIsa isa : SupportedCpuIsas()) {
      INFO(Traits(type).name << " " << CpuIsaName(isa));
      CpuBackend(1, isa).MatMul(wr, ConstMat(x.data(), 2, 64), Mat{got.data(), 2, 8});
      CHECK(SameBits(got, want));
    }
  }
}

TEST_CASE("quantized MatMul at the integer extremes is exact and identical on every ISA",
          "[backend][determinism]") {
  // Q8_0 codes of -128 (valid in files, never written by QuantizeRow) against
  // activations quantized to +-127: the products that would saturate a
  // 16-bit maddubs pair (2 * 128 * 127 = 32512 must not, 2 * 255 * 127 would).
  const int64_t k = 1184, out = 6, n = 3;  // 37 blocks: 2 groups + 5
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> code(-128, 127), coin(0, 3);
  std::vector<uint8_t> w(RowBytes(DType::kQ8_0, k) * out);
  for (size_t b = 0; b < w.size() / kQ8_0BlockBytes; ++b) {
    BlockQ8_0 blk;
    blk.d = F32ToF16(std::ldexp(1.0f, -7 - static_cast<int>(b % 5)));
    for (int8_t& q : blk.qs) q = static_cast<int8_t>(coin(rng) == 0 ? -128 : code(rng));
    std::memcpy(w.data() + b * kQ8_0BlockBytes, &blk, sizeof(blk));
  }
  std::vector<float> x(static_cast<size_t>(n * k));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = (i % 32 == 0) ? 1.0f : (coin(rng) == 0 ? -1.0f : (coin(rng) - 1.5f) / 1.5f);
  }
  const WeightRef wr{DType::kQ8_0, w.data(), out, k};
  std::vector<float> want(n * out), got(n * out);
  CpuBackend(1, CpuIsa::kScalar).MatMul(wr, ConstMat(x.data(), n, k), Mat{want.data(), n, out});
  CHECK(ref::MaxRelError(want, ref::MatMul(DType::kQ8_0, w.data(), out, k, x, n)) < 1e-6);
  for (CpuIsa isa : SupportedCpuIsas()) {
    for (int64_t rows : {int64_t{1}, n}) {  // decode and packed kernels
      INFO(CpuIsaName(isa) << " rows per call " << rows);
      for (int64_t t = 0; t < n; t += rows) {
        CpuBackend(2, isa).MatMul(wr, ConstMat(x.data(), n, k).RowRange(t, rows),
                                  Mat{got.data(), n, out}.RowRange(t, rows));
      }
      CHECK(SameBits(got, want));
    }
  }
}

/// Raw blocks of a block32 type with every code, a third of them saturated
/// with the extreme codes (IQ4_NL -127 / 113, MXFP4 +-12, Q5_x 0 / 31, Q4_x
/// 0 / 15) and power-of-two scales (all exponents 119..135 for MXFP4), f16
/// mins of either sign.
std::vector<uint8_t> ExtremeBlocks(DType type, size_t count, uint32_t seed) {
  const size_t bb = Traits(type).block_bytes;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), third(0, 2), exp(-9, 7);
  std::vector<uint8_t> out(count * bb);
  for (size_t b = 0; b < count; ++b) {
    uint8_t* blk = out.data() + b * bb;
    for (size_t i = 0; i < bb; ++i) blk[i] = static_cast<uint8_t>(byte(rng));
    const int kind = third(rng);
    const uint8_t fill = kind == 0 ? 0x00 : 0xFF;
    const QLayout l = QLayoutOf(type);
    if (kind < 2) {  // every code extreme: all-zero or all-one nibbles and fifth bits
      for (size_t i = l.qs; i < bb; ++i) blk[i] = fill;
      if (l.qh >= 0) std::memset(blk + l.qh, fill, 4);
      if (type == DType::kMXFP4 && kind == 1) std::memset(blk + l.qs, 0x77, 16);  // +12
    }
    if (l.e8m0) {
      blk[0] = static_cast<uint8_t>(127 + exp(rng));
    } else {
      const uint16_t d = F32ToF16(std::ldexp(1.0f, exp(rng)));
      std::memcpy(blk, &d, 2);
      if (l.m >= 0) {
        const uint16_t m = F32ToF16((byte(rng) - 128) / 64.0f);
        std::memcpy(blk + l.m, &m, 2);
      }
    }
  }
  return out;
}

TEST_CASE("block32 MatMul at the extreme codes is exact and identical on every ISA",
          "[backend][determinism]") {
  // Activations of +-1 quantize to codes of +-127 (the first element of each
  // block is 1, so every block's scale is 1/127): with the extreme weight
  // codes above the 16-bit maddubs pairs and the offset corrections reach
  // their largest values.
  const int64_t k = 1184, out = 6, n = 3;  // 37 blocks: 2 groups + 5
  std::mt19937 rng(22);
  std::uniform_int_distribution<int> coin(0, 3);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = (i % 32 == 0) ? 1.0f : (coin(rng) == 0 ? -1.0f : (coin(rng) < 2 ? 1.0f : -0.5f));
  }
  for (DType type : {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kMXFP4}) {
    const std::vector<uint8_t> w = ExtremeBlocks(type, out * k / 32, 23);
    const WeightRef wr{type, w.data(), out, k};
    std::vector<float> want(n * out), got(n * out);
    CpuBackend(1, CpuIsa::kScalar).MatMul(wr, ConstMat(x.data(), n, k), Mat{want.data(), n, out});
    INFO(Traits(type).name);
    CHECK(ref::MaxRelError(want, ref::MatMul(type, w.data(), out, k, x, n)) < 1e-6);
    for (CpuIsa isa : SupportedCpuIsas()) {
      for (int64_t rows : {int64_t{1}, n}) {  // decode and packed kernels
        INFO(CpuIsaName(isa) << " rows per call " << rows);
        std::fill(got.begin(), got.end(), 0.0f);
        for (int64_t t = 0; t < n; t += rows) {
          CpuBackend(2, isa).MatMul(wr, ConstMat(x.data(), n, k).RowRange(t, rows),
                                    Mat{got.data(), n, out}.RowRange(t, rows));
        }
        CHECK(SameBits(got, want));
      }
    }
  }
}

TEST_CASE("MXFP4 MatMul over every exponent is identical on every ISA",
          "[backend][determinism]") {
  // One block per weight row, row e with exponent e (0 and 1: subnormal
  // scales; 255: 2^127, whose products overflow to inf): the SIMD tables
  // decode E8M0 with integer shifts, the scalar one with E8M0Half.
  const int64_t k = 32, out = 256, n = 2;
  std::vector<uint8_t> w = ExtremeBlocks(DType::kMXFP4, out, 24);
  for (int e = 0; e < out; ++e) w[e * sizeof(BlockMxfp4)] = static_cast<uint8_t>(e);
  const std::vector<float> x = ref::RandomFloats(n * k, 25, -2, 2);
  const WeightRef wr{DType::kMXFP4, w.data(), out, k};
  std::vector<float> want(n * out), got(n * out);
  CpuBackend(1, CpuIsa::kScalar).MatMul(wr, ConstMat(x.data(), n, k), Mat{want.data(), n, out});
  const std::vector<double> exact = ref::MatMul(DType::kMXFP4, w.data(), out, k, x, n);
  for (int64_t t = 0; t < n; ++t) {
    for (int e = 0; e < 250; ++e) {
      INFO("e = " << e);
      const double v = exact[t * out + e];
      CHECK(std::fabs(want[t * out + e] - v) <= 1e-6 * std::fabs(v));
    }
  }
  for (CpuIsa isa : SupportedCpuIsas()) {
    for (int64_t rows : {int64_t{1}, n}) {
      INFO(CpuIsaName(isa) << " rows per call " << rows);
      for (int64_t t = 0; t < n; t += rows) {
        CpuBackend(1, isa).MatMul(wr, ConstMat(x.data(), n, k).RowRange(t, rows),
                                  Mat{got.data(), n, out}.RowRange(t, rows));
      }
      CHECK(SameBits(got, want));
    }
  }
}

TEST_CASE("every op is bitwise identical across threads and ISA levels", "[backend][determinism]") {
  CpuBackend scalar(1, CpuIsa::kScalar);
  const auto configs = AllConfigurations();
  for (const OpCase& c : MakeOpCases()) {
    const std::vector<float> want = c.run(scalar);
    for (const auto& be : configs) {
      INFO(c.name << " on " << Describe(*be));
      CHECK(SameBits(c.run(*be), want));
    }
  }
}

TEST_CASE("Attention of a batch equals the same rows one at a time", "[backend][determinism]") {
  const int n_head = 8, n_head_kv = 2, hd = 64, pos0 = 20;
  const int64_t n = 6, qc = n_head * hd, kc = n_head_kv * hd, cap = pos0 + n;
  const std::vector<float> q = ref::RandomFloats(n * qc, 1, -2, 2);
  const std::vector<float> k = ref::RandomFloats(cap * kc, 2, -2, 2);
  const std::vector<float> v = ref::RandomFloats(cap * kc, 3);
  const std::vector<float> sinks = ref::RandomFloats(n_head, 4, -2, 4);
  AttentionOptions sliding;  // gpt-oss's sliding layers: sinks and a window
  sliding.sinks = sinks.data();
  sliding.window = 5;
  for (const AttentionOptions& options : {AttentionOptions{}, sliding}) {
    for (const auto& be : AllConfigurations()) {
      INFO(Describe(*be) << " window " << options.window);
      std::vector<float> batch(n * qc), single(n * qc);
      be->Attention(ConstMat(q.data(), n, qc), ConstMat(k.data(), cap, kc),
                    ConstMat(v.data(), cap, kc), n_head, n_head_kv, hd, pos0, 0.125f, options,
                    Mat{batch.data(), n, qc});
      for (int64_t t = 0; t < n; ++t) {
        be->Attention(ConstMat(q.data(), n, qc).RowRange(t, 1), ConstMat(k.data(), cap, kc),
                      ConstMat(v.data(), cap, kc), n_head, n_head_kv, hd, pos0 + t, 0.125f, options,
                      Mat{single.data(), n, qc}.RowRange(t, 1));
      }
      CHECK(SameBits(batch, single));
    }
  }
}

TEST_CASE("canonical dot kernels agree on every length and ISA", "[backend][determinism]") {
  // Lengths around the 16-lane and 32-element block boundaries exercise the
  // zero-padded tails; values span magnitudes so that summation order shows.
  std::vector<float> a = ref::RandomFloats(300, 9, -1, 1);
  std::vector<float> b = ref::RandomFloats(300, 10, -1, 1);
  for (size_t i = 0; i < a.size(); i += 7) a[i] *= 1e4f;
  const CpuKernels& scalar = CpuKernelsFor(CpuIsa::kScalar);
  for (int64_t n : {1, 5, 15, 16, 17, 31, 32, 33, 47, 64, 100, 255, 300}) {
    double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += double(a[i]) * b[i];
    const float want = scalar.dot_f32(a.data(), b.data(), n);
    CHECK(std::fabs(want - exact) <= 1e-6 * (1e4 * n));
    for (CpuIsa isa : SupportedCpuIsas()) {
      INFO("n=" << n << " isa=" << CpuIsaName(isa));
      const float got = CpuKernelsFor(isa).dot_f32(a.data(), b.data(), n);
      CHECK(std::memcmp(&got, &want, sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the vector ExpF of SwiGlu gives the scalar bits on every ISA",
          "[backend][determinism]") {
  // g sweeps the whole range of ExpF(-g), both cut-offs, halves of ln2 steps
  // (where n rounds), subnormals and the special values; u = 1 except where
  // it checks the final product.
  std::vector<float> g;
  for (float v = -120.0f; v < 120.0f; v += 0.00731f) g.push_back(v);
  for (float v : {88.7228394f, -88.7228394f, 103.972084f, -103.972084f, 0.0f, -0.0f, 1e-40f,
                  -1e-40f, 3.4e38f, -3.4e38f, INFINITY, -INFINITY, NAN}) {
    g.push_back(v);
  }
  for (int k = -300; k <= 300; ++k) g.push_back((k + 0.5f) * 0.693147182f);
  std::vector<float> u(g.size(), 1.0f);
  for (size_t i = 0; i < u.size(); i += 5) u[i] = -0.75f;
  const auto n = static_cast<int64_t>(g.size());
  std::vector<float> want(g.size()), got(g.size());
  for (size_t i = 0; i < g.size(); ++i) want[i] = cpu_math::Silu(g[i]) * u[i];
  for (CpuIsa isa : SupportedCpuIsas()) {
    INFO(CpuIsaName(isa));
    CpuKernelsFor(isa).swiglu(g.data(), u.data(), got.data(), n);
    CHECK(SameBits(got, want));
  }
}

TEST_CASE("ExpF is accurate to 2 ulp over the float range", "[backend]") {
  double worst = 0;
  for (float x = -103.0f; x < 88.7f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    const double got = cpu_math::ExpF(x);
    const double ulp = std::max(std::ldexp(1.0, std::ilogb(want) - 23), std::ldexp(1.0, -149));
    worst = std::max(worst, std::fabs(got - want) / ulp);
  }
  CHECK(worst <= 2.0);
  CHECK(cpu_math::ExpF(0.0f) == 1.0f);
  CHECK(std::isinf(cpu_math::ExpF(100.0f)));
  CHECK(cpu_math::ExpF(-200.0f) == 0.0f);
  CHECK(std::isnan(cpu_math::ExpF(NAN)));
  CHECK(cpu_math::ExpF(-INFINITY) == 0.0f);
}

}  // namespace
}  // namespace odmoe::test

namespace odmoe::test {
namespace {

/// Rows of `blocks` Q8_0 blocks that reach every branch of the quantizer.
std::vector<float> Q8_0QuantizerRows(int64_t blocks, int64_t rows, std::mt19937& rng) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(static_cast<size_t>(rows * blocks * 32));
  std::normal_distribution<float> nd;
  const float scales[] = {1.0f, 1e-30f, 3e4f, 1e38f};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      float* blk = x.data() + (r * blocks + b) * 32;
      const int kind = static_cast<int>((r * blocks + b) % 8);
      for (int i = 0; i < 32; ++i) blk[i] = nd(rng) * scales[(r + b) % 4];
      if (kind == 1) {  // amax 127: id 1, so these are exact ties
        blk[0] = 127.0f;
        blk[1] = 2.5f;
        blk[2] = -3.5f;
        blk[3] = 0.5f;
        blk[4] = -0.5f;
        blk[5] = -127.0f;
      }
      if (kind == 2) std::fill(blk, blk + 32, 0.0f);
      if (kind == 3) blk[7] = nan;
      if (kind == 4) blk[9] = inf;
      if (kind == 5) blk[3] = -inf;
      if (kind == 6) {  // subnormal inputs and both zeros
        for (int i = 0; i < 32; ++i) blk[i] = (i % 3 - 1) * 1e-40f;
        blk[31] = -0.0f;
      }
      if (kind == 7) {  // equal magnitudes of both signs
        for (int i = 0; i < 32; ++i) blk[i] = i % 2 ? 3.0f : -3.0f;
      }
    }
  }
  return x;
}

TEST_CASE("the SIMD Q8_0 activation quantizer gives QuantizeRow's groups, bit for bit",
          "[backend][determinism]") {
  std::mt19937 rng(41);
  const CpuKernels& scalar = CpuKernelsFor(CpuIsa::kScalar);
  REQUIRE(scalar.quantize_q8_0_acts == nullptr);  // the definition's path
  int simd = 0;
  for (CpuIsa isa : SupportedCpuIsas()) {
    const CpuKernels& k = CpuKernelsFor(isa);
    if (k.quantize_q8_0_acts == nullptr) continue;
    ++simd;
    for (int64_t blocks : {1, 15, 16, 17, 33, 128}) {
      const int64_t rows = 5;
      const std::vector<float> x = Q8_0QuantizerRows(blocks, rows, rng);
      ThreadPool pool(2);
      CpuQuantScratch want_scratch, got_scratch;
      const ConstMat m(x.data(), rows, blocks * 32);
      const QActs want = QuantizeActivations(m, scalar, &want_scratch, &pool);
      const QActs got = QuantizeActivations(m, k, &got_scratch, &pool);
      INFO(CpuIsaName(isa) << " blocks " << blocks);
      REQUIRE(got.groups_per_row == want.groups_per_row);
      CHECK(std::memcmp(got.groups, want.groups,
                        static_cast<size_t>(rows * want.groups_per_row) * sizeof(QActGroup)) == 0);
    }
  }
  if (simd == 0) WARN("no ISA of this CPU has a SIMD Q8_0 quantizer; nothing to compare");
}

}  // namespace
}  // namespace odmoe::test

namespace odmoe::test {
namespace {

TEST_CASE("K-family MatMul of many rows (several chunks, tiles fetched ahead) is bitwise the "
          "scalar result, row order and loaded layout",
          "[backend][determinism]") {
  // 150 activation rows: chunks of 64, 64 and 22; 40 weight rows: two full
  // tiles (the second fetched while the first computes) and a partial one.
  const int64_t n = 150, k = 512, out = 40;
  const std::vector<float> x = ref::RandomFloats(n * k, 8, -2, 2);
  for (DType type : {DType::kQ6_K, DType::kQ4_K, DType::kIQ4_XS, DType::kQ3_K}) {
    const std::vector<uint8_t> w = RandomWeight(type, out, k, 9);
    const WeightRef rows{type, w.data(), out, k};
    CpuBackend scalar(1, CpuIsa::kScalar);
    std::vector<float> want(n * out);
    scalar.MatMul(rows, ConstMat(x.data(), n, k), Mat{want.data(), n, out});
    const TensorView v = MatrixView(type, w.data(), out, k);
    for (const auto& be : AllConfigurations()) {
      auto loaded = be->LoadWeight(v);
      REQUIRE(loaded.ok());
      for (const WeightRef& wr : {rows, loaded->ref}) {
        std::vector<float> y(n * out);
        be->MatMul(wr, ConstMat(x.data(), n, k), Mat{y.data(), n, out});
        INFO(Traits(type).name << " on " << Describe(*be) << " layout "
                               << static_cast<int>(wr.layout));
        CHECK(SameBits(y, want));
      }
    }
  }
}

}  // namespace
}  // namespace odmoe::test
