// The CUDA kernels' arithmetic (cuda_numerics.h), run on the host, against
// the CPU backend bit for bit. No GPU needed: this is what shows, on any
// machine, that the kernels' building blocks and the order in which the
// kernels combine them (lanes of a half-warp, the shuffle tree) are the CPU
// backend's canonical order.
#include "cuda_numerics.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/reference_ops.h"
#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "cpu_math.h"
#include "cuda_numerics_block32.h"
#include "cuda_numerics_dequant.h"
#include "quant_test_util.h"
#include "tensor/quant.h"
#include "util/fp16.h"

namespace odmoe {
namespace {

namespace num = cuda_numerics;

using cuda_test::Bits;
using cuda_test::HalfWarp;
using cuda_test::LaneMatMul;
using cuda_test::QuantizedRows;
using cuda_test::SameBits;

TEST_CASE("cuda ExpF and Silu are the CPU's bit for bit", "[cuda][numerics]") {
  CHECK(num::kExpMax == cpu_math::kExpMax);
  CHECK(num::kExpMin == cpu_math::kExpMin);
  CHECK(num::kExpLn2Hi == cpu_math::kExpLn2Hi);
  CHECK(num::kExpLn2Lo == cpu_math::kExpLn2Lo);
  const float poly[] = {num::kExpP7, num::kExpP6, num::kExpP5, num::kExpP4, num::kExpP3};
  for (int i = 0; i < 5; ++i) CHECK(poly[i] == cpu_math::kExpPoly[i]);
  int mismatches = 0;
  // Every 9973rd bit pattern covers all exponents, both signs, NaN and inf.
  for (uint64_t u = 0; u <= 0xffffffffull; u += 9973) {
    float x;
    const uint32_t b = static_cast<uint32_t>(u);
    std::memcpy(&x, &b, sizeof(x));
    if (Bits(num::ExpF(x)) != Bits(cpu_math::ExpF(x))) ++mismatches;
    if (Bits(num::Silu(x)) != Bits(cpu_math::Silu(x))) ++mismatches;
  }
  for (float x : {0.0f, -0.0f, 88.72f, 88.73f, -103.97f, -104.0f, 1e-30f, -1e-30f}) {
    if (Bits(num::ExpF(x)) != Bits(cpu_math::ExpF(x))) ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(std::isnan(num::ExpF(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("cuda half-precision conversions equal util/fp16.h", "[cuda][numerics]") {
  int bad = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float want = F16ToF32(static_cast<uint16_t>(h));
    const float got = num::F16ToF32(static_cast<uint16_t>(h));
    if (Bits(got) != Bits(want)) ++bad;
    if (Bits(num::BF16ToF32(static_cast<uint16_t>(h))) != Bits(BF16ToF32(static_cast<uint16_t>(h))))
      ++bad;
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 997) {
    const uint32_t b = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &b, sizeof(f));
    const uint16_t want = F32ToF16(f);
    const uint16_t got = num::F32ToF16(f);
    // NaN payloads may differ; both must be NaN.
    if (got != want && !(std::isnan(f) && (got & 0x7c00) == 0x7c00 && (got & 0x3ff))) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("cuda Q8_0 activation blocks equal QuantizeRow", "[cuda][numerics]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int trial = 0; trial < 2000; ++trial) {
    float x[32];
    for (float& v : x) v = u(rng) * (trial % 7 == 0 ? 1e-6f : 1.0f);
    if (trial % 11 == 0) x[trial % 32] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 13 == 0) x[(trial + 3) % 32] = 127.0f * 0.5f / 127.0f;  // exact half steps
    if (trial % 17 == 0) std::fill(x, x + 32, 0.0f);
    if (trial % 19 == 0) x[5] = std::numeric_limits<float>::infinity();
    BlockQ8_0 want;
    QuantizeRow(DType::kQ8_0, x, &want, 32);
    num::QActBlock got;
    uint16_t d_bits = 0;
    const float d = num::QuantizeBlockQ8_0(x, &got, &d_bits);
    INFO("trial " << trial);
    REQUIRE(d_bits == want.d);
    CHECK(Bits(d) == Bits(F16ToF32(want.d)));
    CHECK(std::memcmp(got.qs, want.qs, 32) == 0);
  }
}

TEST_CASE("cuda weight block decode and dp4a sums are exact", "[cuda][numerics]") {
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    const std::vector<float> w = ref::RandomFloats(64, 7, -2.0f, 2.0f);
    const std::vector<float> x = ref::RandomFloats(64, 8, -2.0f, 2.0f);
    const std::vector<uint8_t> wq = QuantizedRows(type, w, 1, 64);
    std::vector<float> w_deq(64);
    DequantizeRow(type, wq.data(), w_deq.data(), 64);
    const std::vector<float> w_dev = cuda_test::DeviceDequant(type, wq, 64);
    for (int b = 0; b < 2; ++b) {
      const uint8_t* block = wq.data() + b * (type == DType::kQ8_0 ? 34 : 18);
      num::QActBlock act;
      num::QuantizeBlockQ8_0(x.data() + 32 * b, &act, nullptr);
      num::Block32Weights decoded;
      cuda_test::VisitTypeOf<num::IsBlock32>(
          type, [&](auto tag) { num::DecodeBlock32<decltype(tag)::value>(block, &decoded); });
      const int32_t* codes = decoded.codes;
      const float dw = decoded.d;
      int32_t want = 0;
      for (int e = 0; e < 32; ++e) {
        const int qw = static_cast<int>(std::lround(w_deq[32 * b + e] / dw));
        const int8_t qx = static_cast<int8_t>(reinterpret_cast<const uint8_t*>(act.qs)[e]);
        CHECK(static_cast<int8_t>(reinterpret_cast<const uint8_t*>(codes)[e]) == qw);
        want += qw * qx;
        CHECK(Bits(w_dev[32 * b + e]) == Bits(w_deq[32 * b + e]));
      }
      CHECK(num::BlockIsum(codes, act) == want);
    }
  }
  // dp4a's extremes: -128 * -128 four times.
  CHECK(num::Dot4(static_cast<int32_t>(0x80808080u), static_cast<int32_t>(0x80808080u), 1) ==
        4 * 16384 + 1);
  CHECK(num::NibblesToCodes(0x0f000800u) == static_cast<int32_t>(0x07f800f8u));
}

std::vector<float> CpuMatMul(DType type, const std::vector<uint8_t>& w, int64_t out, int64_t k,
                             const std::vector<float>& x, int64_t n) {
  CpuBackend cpu(2);
  std::vector<float> y(static_cast<size_t>(n * out));
  cpu.MatMul(WeightRef{type, w.data(), out, k}, ConstMat(x.data(), n, k), Mat{y.data(), n, out});
  return y;
}

TEST_CASE("cuda MatMul lanes and tree give the CPU's bits for every weight type",
          "[cuda][numerics]") {
  struct Shape {
    int64_t k, out, n;
  };
  uint32_t seed = 300;
  for (const Shape s :
       {Shape{32, 5, 1}, Shape{96, 7, 3}, Shape{50, 4, 5}, Shape{4096, 3, 2}, Shape{1184, 2, 9}}) {
    const std::vector<float> wf = ref::RandomFloats(s.k * s.out, ++seed);
    const std::vector<float> x = ref::RandomFloats(s.k * s.n, ++seed, -3.0f, 3.0f);
    INFO("k=" << s.k << " out=" << s.out << " n=" << s.n);
    for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
      if (s.k % Traits(type).block_elems != 0) continue;
      INFO(Traits(type).name);
      const std::vector<uint8_t> w = QuantizedRows(type, wf, s.out, s.k);
      CHECK(SameBits(LaneMatMul(type, w, s.out, s.k, x, s.n),
                     CpuMatMul(type, w, s.out, s.k, x, s.n)));
    }
  }
}

TEST_CASE("cuda RmsNorm and Softmax orders give the CPU's bits", "[cuda][numerics]") {
  CpuBackend cpu(2);
  {  // RmsNorm: scale from the lane dot of x with itself, then (x * s) * w.
    const int64_t n = 3, d = 4096;
    std::vector<float> x = ref::RandomFloats(n * d, 41, -3.0f, 3.0f);
    const std::vector<float> w = ref::RandomFloats(d, 42, 0.5f, 1.5f);
    std::vector<float> got(x.size());
    for (int64_t t = 0; t < n; ++t) {
      const float* xr = x.data() + t * d;
      const float ss = HalfWarp([&](int l) { return num::LaneDot<DType::kF32>(xr, xr, d, l); });
      const float scale = 1.0f / num::Sqrt(ss / static_cast<float>(d) + 1e-5f);
      for (int64_t i = 0; i < d; ++i) got[t * d + i] = (xr[i] * scale) * w[i];
    }
    cpu.RmsNorm(ConstMat(x.data(), n, d), w.data(), 1e-5f, Mat{x.data(), n, d});
    CHECK(SameBits(got, x));
  }
  {  // Softmax: max, ExpF, lane sum and tree, divide.
    const int64_t d = 1000;
    std::vector<float> x = ref::RandomFloats(d, 43, -30.0f, 30.0f);
    std::vector<float> got = x;
    float m = num::NegInfinity();
    for (float v : got) m = num::MaxSkipNan(m, v);
    for (float& v : got) v = num::ExpF(v - m);
    const float sum = HalfWarp([&](int l) { return num::LaneSum(got.data(), d, l); });
    for (float& v : got) v = v / sum;
    cpu.Softmax(Mat{x.data(), 1, d});
    CHECK(SameBits(got, x));
  }
}

/// The attention kernel's steps (cuda_attention.cu) for one query row at
/// position pos0, on the host: half-warp dots, the sink in the max and the
/// denominator, the window's first row, fma accumulation over the V rows.
std::vector<float> HostAttentionRow(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int n_head, int n_kv, int hd,
                                    int64_t ldv, int pos0, float scale, const float* sinks,
                                    int window, int vd) {
  const int64_t kc = int64_t(n_kv) * hd;
  const int64_t first = num::AttentionFirstRow(pos0, window);
  const int64_t len = pos0 + 1 - first;
  std::vector<float> got(int64_t(n_head) * vd);
  for (int h = 0; h < n_head; ++h) {
    const int kvh = h / (n_head / n_kv);
    const float* kg = k.data() + first * kc + kvh * hd;
    std::vector<float> s(len);
    for (int64_t j = 0; j < len; ++j) {
      s[j] = HalfWarp([&](int l) {
               return num::LaneDot<DType::kF32>(kg + j * kc, q.data() + h * hd, hd, l);
             }) *
             scale;
    }
    float m = num::NegInfinity();
    for (float x : s) m = num::MaxSkipNan(m, x);
    const bool has_sink = sinks != nullptr;
    const float sink = has_sink ? sinks[h] : 0.0f;
    m = num::AttentionMax(m, has_sink, sink);
    for (float& x : s) x = num::ExpF(x - m);
    const float lanes = HalfWarp([&](int l) { return num::LaneSum(s.data(), len, l); });
    const float sum = num::AttentionDenominator(lanes, has_sink, sink, m);
    const float* vg = v.data() + first * ldv + kvh * vd;
    for (int d = 0; d < vd; ++d) {
      float acc = 0.0f;
      for (int64_t j = 0; j < len; ++j) acc = num::Fma(s[j], vg[j * ldv + d], acc);
      got[h * vd + d] = acc / sum;
    }
  }
  return got;
}

TEST_CASE("cuda Attention's order gives the CPU's bits, with sinks, windows and V head sizes",
          "[cuda][numerics]") {
  CpuBackend cpu(2);
  struct Spec {
    int n_head, n_kv, hd, vd, pos0, window;
    bool sinks, v_in_k;
  };
  for (const Spec sp :
       {Spec{4, 2, 64, 64, 37, 0, false, false},  // the plain op
        Spec{8, 2, 64, 64, 37, 0, true, false}, Spec{8, 2, 64, 64, 37, 8, true, false},
        Spec{4, 4, 32, 32, 3, 8, false, false},  // window cut at row 0
        Spec{4, 1, 32, 32, 5, 1, true, false}, Spec{4, 4, 48, 32, 9, 0, false, false},
        Spec{4, 1, 40, 32, 11, 0, true, true}}) {
    INFO("heads " << sp.n_head << "/" << sp.n_kv << " hd " << sp.hd << " vd " << sp.vd << " window "
                  << sp.window << " sinks " << sp.sinks);
    const int64_t len = sp.pos0 + 1, qc = sp.n_head * sp.hd, kc = sp.n_kv * sp.hd;
    const int64_t ldv = sp.v_in_k ? kc : int64_t(sp.n_kv) * sp.vd;
    const std::vector<float> q = ref::RandomFloats(qc, 44, -2.0f, 2.0f);
    const std::vector<float> k = ref::RandomFloats(len * kc, 45, -2.0f, 2.0f);
    const std::vector<float> v = sp.v_in_k ? k : ref::RandomFloats(len * ldv, 46);
    const std::vector<float> sinks = ref::RandomFloats(sp.n_head, 47, -3.0f, 6.0f);
    const float scale = 0.125f;
    const float* sink_ptr = sp.sinks ? sinks.data() : nullptr;
    const std::vector<float> got = HostAttentionRow(q, k, v, sp.n_head, sp.n_kv, sp.hd, ldv,
                                                    sp.pos0, scale, sink_ptr, sp.window, sp.vd);
    std::vector<float> want(int64_t(sp.n_head) * sp.vd);
    AttentionOptions options;
    options.sinks = sink_ptr;
    options.window = sp.window;
    options.v_head_dim = sp.vd;
    cpu.Attention(ConstMat(q.data(), 1, qc), ConstMat(k.data(), len, kc),
                  ConstMat(v.data(), len, ldv), sp.n_head, sp.n_kv, sp.hd, sp.pos0, scale, options,
                  Mat{want.data(), 1, static_cast<int64_t>(want.size())});
    CHECK(SameBits(got, want));
  }
}

TEST_CASE("cuda RoPE's cos, sin and rotation give the CPU's bits on the host, YaRN included",
          "[cuda][numerics]") {
  // On the host RopeCosSin uses glibc like the CPU, so the kernel's steps
  // must match it bit for bit (the device's libdevice cos / sin may differ
  // in the last bit: cuda_backend.h).
  CpuBackend cpu(2);
  RopeParams plain;
  plain.dims = 32;
  RopeParams yarn_half;
  yarn_half.dims = 64;
  yarn_half.freq_base = 150000.0f;
  yarn_half.mode = RopeMode::kHalf;
  yarn_half.scaling = {RopeScalingType::kYarn, 32.0f, 4096, 32.0f, 1.0f, 1.3465736f, false};
  RopeParams yarn_offset;
  yarn_offset.dims = 32;
  yarn_offset.offset = 64;
  yarn_offset.scaling = {RopeScalingType::kYarn, 40.0f, 4096, 32.0f, 1.0f, 0.9f, true};
  for (const RopeParams& rope : {plain, yarn_half, yarn_offset}) {
    INFO("dims " << rope.dims << " offset " << rope.offset);
    const int hd = 96;
    const int64_t n = 5, cols = 3 * hd;
    const std::vector<int32_t> pos = {0, 1, 17, 3000, 70000};
    std::vector<float> want = ref::RandomFloats(n * cols, 15);
    std::vector<float> got = want;
    const std::vector<double> inv = RopeInverseFrequencies(rope);
    const int half = rope.dims / 2;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < cols / hd; ++h) {
        for (int i = 0; i < half; ++i) {
          float c, s;
          num::RopeCosSin(pos[t] * inv[i], RopeAttentionFactor(rope), &c, &s);
          float* v = got.data() + t * cols + h * hd + rope.offset;
          const bool il = rope.mode == RopeMode::kInterleaved;
          num::RopeRotate(c, s, &v[il ? 2 * i : i], &v[il ? 2 * i + 1 : i + half]);
        }
      }
    }
    cpu.Rope(Mat{want.data(), n, cols}, hd, pos.data(), rope);
    CHECK(SameBits(got, want));
  }
}

TEST_CASE("cuda SwiGluOai equals the CPU's bit for bit", "[cuda][numerics]") {
  int mismatches = 0;
  // Gate over every 9973rd bit pattern (NaN, inf, both signs, the clamp),
  // up over values across and at the clamp.
  for (float up : {-100.0f, -7.0f, -6.5f, -1.0f, 0.0f, 0.3f, 6.999f, 7.0f, 12.0f}) {
    for (uint64_t u = 0; u <= 0xffffffffull; u += 9973) {
      float g;
      const uint32_t b = static_cast<uint32_t>(u);
      std::memcpy(&g, &b, sizeof(g));
      const float got = num::SwiGluOai(g, up, 1.702f, 7.0f);
      const float want = cpu_math::SwiGluOai(g, up, 1.702f, 7.0f);
      if (Bits(got) != Bits(want) && !(std::isnan(got) && std::isnan(want))) ++mismatches;
    }
  }
  CHECK(mismatches == 0);
  CHECK(std::isnan(num::SwiGluOai(std::numeric_limits<float>::quiet_NaN(), 1.0f, 1.702f, 7.0f)));
  CHECK(std::isnan(num::SwiGluOai(1.0f, std::numeric_limits<float>::quiet_NaN(), 1.702f, 7.0f)));
  CHECK(num::SwiGluOai(100.0f, 100.0f, 1.702f, 7.0f) == num::SwiGluOai(7.0f, 7.0f, 1.702f, 7.0f));
  // And the CPU op (its row loop) on random rows.
  CpuBackend cpu(2);
  const std::vector<float> gate = ref::RandomFloats(3000, 51, -20.0f, 20.0f);
  std::vector<float> up = ref::RandomFloats(3000, 52, -20.0f, 20.0f);
  std::vector<float> got;
  for (size_t i = 0; i < gate.size(); ++i)
    got.push_back(num::SwiGluOai(gate[i], up[i], 1.702f, 7.0f));
  cpu.SwiGluOai(ConstMat(gate.data(), 3, 1000), ConstMat(up.data(), 3, 1000), 1.702f, 7.0f,
                Mat{up.data(), 3, 1000});
  CHECK(SameBits(got, up));
}

TEST_CASE("cuda RouterTopKRow equals the CPU's for every gating, ties to the lower id",
          "[cuda][numerics]") {
  CpuBackend cpu(1);
  const int64_t n = 6, n_expert = 8;
  const int k = 3;
  std::vector<float> l = ref::RandomFloats(n * n_expert, 47, -4.0f, 4.0f);
  l[n_expert + 2] = l[n_expert + 5] = l[n_expert + 6] = 6.0f;  // a three-way tie
  l[3 * n_expert + 0] = l[3 * n_expert + 7] = 5.0f;
  for (const RouterGating gating : {RouterGating{}, RouterGating{false, 1.0f},
                                    RouterGating{false, 16.0f}, RouterGating{true, 0.75f}}) {
    INFO("normalize " << gating.normalize << " scale " << gating.scale);
    std::vector<int32_t> want_ids(n * k), got_ids(n * k);
    std::vector<float> want_w(n * k), got_w(n * k);
    cpu.RouterTopK(ConstMat(l.data(), n, n_expert), k, gating, want_ids.data(), want_w.data());
    for (int64_t t = 0; t < n; ++t) {
      num::RouterTopKRow(l.data() + t * n_expert, n_expert, k, gating.normalize, gating.scale,
                         got_ids.data() + t * k, got_w.data() + t * k);
    }
    CHECK(got_ids == want_ids);
    CHECK(SameBits(got_w, want_w));
    CHECK(got_ids[k + 0] == 2);
    CHECK(got_ids[k + 1] == 5);
    CHECK(got_ids[k + 2] == 6);
  }
}

TEST_CASE("cuda RouterTopKSigmoidRow equals the CPU's with groups and a correction bias",
          "[cuda][numerics]") {
  CpuBackend cpu(1);
  const int64_t n = 6, n_expert = 32;
  const int k = 6;
  std::vector<float> l = ref::RandomFloats(n * n_expert, 48, -4.0f, 4.0f);
  const std::vector<float> bias = ref::RandomFloats(n_expert, 50, -0.3f, 0.3f);
  l[n_expert + 2] = l[n_expert + 3] = 6.0f;  // a tie of biased scores needs equal biases too
  struct Groups {
    int n_group, n_group_used;
    bool normalize, with_bias;
  };
  for (const Groups g : {Groups{8, 3, true, true}, Groups{4, 2, false, true},
                         Groups{1, 1, true, true}, Groups{16, 1, true, false}}) {
    INFO("groups " << g.n_group_used << " of " << g.n_group << " bias " << g.with_bias);
    RouterGating gating{g.normalize, 2.5f};
    gating.score = RouterScore::kSigmoid;
    gating.n_group = g.n_group;
    gating.n_group_used = g.n_group_used;
    gating.selection_bias = g.with_bias ? bias.data() : nullptr;
    std::vector<int32_t> want_ids(n * k), got_ids(n * k);
    std::vector<float> want_w(n * k), got_w(n * k);
    cpu.RouterTopK(ConstMat(l.data(), n, n_expert), k, gating, want_ids.data(), want_w.data());
    for (int64_t t = 0; t < n; ++t) {
      num::RouterTopKSigmoidRow(l.data() + t * n_expert, n_expert, k, gating.normalize,
                                gating.scale, g.n_group, g.n_group_used, gating.selection_bias,
                                got_ids.data() + t * k, got_w.data() + t * k);
    }
    CHECK(got_ids == want_ids);
    CHECK(SameBits(got_w, want_w));
  }
}

TEST_CASE("cuda Sigmoid equals the CPU's", "[cuda][numerics]") {
  CpuBackend cpu(1);
  std::vector<float> x = ref::RandomFloats(999, 49, -40.0f, 40.0f);
  std::vector<float> got;
  for (float v : x) got.push_back(num::Sigmoid(v));
  cpu.Sigmoid(Mat{x.data(), 1, static_cast<int64_t>(x.size())});
  CHECK(SameBits(got, x));
}

TEST_CASE("cuda canonical lane sum equals CanonicalSum", "[cuda][numerics]") {
  for (int64_t n : {1, 15, 16, 17, 1000, 4099}) {
    const std::vector<float> v = ref::RandomFloats(n, 48 + n, -1e3f, 1e3f);
    const float got = HalfWarp([&](int l) { return num::LaneSum(v.data(), n, l); });
    CHECK(Bits(got) == Bits(cpu_math::CanonicalSum(v.data(), n)));
  }
}

}  // namespace
}  // namespace odmoe
