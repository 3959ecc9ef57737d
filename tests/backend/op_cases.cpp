#include "op_cases.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "backends/backend_registry.h"
#include "absl/strings/str_format.h"
#include "catch2/catch.hpp"
#include "reference_ops.h"
#include "cpu_ops.h"
#include "tensor/quant.h"

namespace odmoe::test {

void* DeviceData::Alloc(size_t bytes) {
  auto buf = be_.Allocate(bytes);
  REQUIRE(buf.ok());
  buffers_.push_back(std::move(buf).value());
  return buffers_.back()->data();
}

float* DeviceData::Floats(const std::vector<float>& host) {
  void* p = Alloc(host.size() * sizeof(float));
  REQUIRE(be_.CopyToBackend(p, host.data(), host.size() * sizeof(float)).ok());
  return static_cast<float*>(p);
}

float* DeviceData::Zeros(size_t n) { return Floats(std::vector<float>(n, 0.0f)); }

int32_t* DeviceData::Ints(const std::vector<int32_t>& host) {
  void* p = Alloc(host.size() * sizeof(int32_t));
  REQUIRE(be_.CopyToBackend(p, host.data(), host.size() * sizeof(int32_t)).ok());
  return static_cast<int32_t*>(p);
}

TensorView MatrixView(DType type, const void* data, int64_t rows, int64_t cols,
                      const char* name) {
  TensorView view;
  view.name = name;
  view.type = type;
  view.n_dims = 2;
  view.ne = {cols, rows, 1, 1};
  view.data = data;
  return view;
}

WeightRef DeviceData::Weight(DType type, const std::vector<uint8_t>& bytes, int64_t rows,
                             int64_t cols) {
  auto w = be_.LoadWeight(MatrixView(type, bytes.data(), rows, cols));
  REQUIRE(w.ok());
  weights_.push_back(std::move(w).value());
  return weights_.back().ref;
}

std::vector<float> DeviceData::Read(const float* p, size_t n) {
  std::vector<float> out(n);
  REQUIRE(be_.CopyToHost(out.data(), p, n * sizeof(float)).ok());
  return out;
}

std::vector<int32_t> DeviceData::ReadInts(const int32_t* p, size_t n) {
  std::vector<int32_t> out(n);
  REQUIRE(be_.CopyToHost(out.data(), p, n * sizeof(int32_t)).ok());
  return out;
}

std::vector<uint8_t> RandomWeight(DType type, int64_t rows, int64_t cols, uint32_t seed,
                                  float scale) {
  const std::vector<float> f =
      ref::RandomFloats(static_cast<size_t>(rows * cols), seed, -scale, scale);
  const size_t row_bytes = RowBytes(type, cols);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(type, f.data() + r * cols, bytes.data() + r * row_bytes, cols);
  }
  return bytes;
}

std::vector<std::string> EveryBackendName() {
  std::vector<std::string> names = {"cpu", "cpu:3"};
  for (const std::string& n : AvailableBackends()) {
    if (n != "cpu") names.push_back(n);
  }
  return names;
}

std::vector<DType> WeightTypesUnderTest() {
  std::vector<DType> types;
  for (DType t : kAllDTypes) {
    if (t != DType::kQ8_K && CpuSupportsWeightType(t)) types.push_back(t);
  }
  return types;
}

namespace {

// Tolerances. Weights are quantized before the reference sees them, and for
// Q8_0 / Q4_0 weights the reference quantizes the activations to Q8_0 as the
// op does (ref::MatMulActivations), so the only differences left are fp32
// rounding (accumulation, block scale products, ExpF's < 2 ulp, f32 sin/cos):
// errors of order 1e-7 relative; the bounds leave 10-100x room while a wrong
// element, lane or block (errors of order 1), or activations left
// unquantized (order 1e-3), fail by far.
constexpr double kNmseF32 = 1e-10;
constexpr double kRelF32 = 1e-5;

template <class T>
std::vector<double> AsDoubles(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

/// RouterTopK on `be` over n rows of logits (with a correction bias unless
/// it is empty): the ids as floats, then the weights.
std::vector<float> RunRouterTopK(Backend& be, const std::vector<float>& logits, int64_t n, int k,
                                 RouterGating gating, const std::vector<float>& bias) {
  DeviceData d(be);
  const int64_t n_expert = static_cast<int64_t>(logits.size()) / n;
  int32_t* ids = d.Ints(std::vector<int32_t>(n * k, -1));
  float* w = d.Zeros(n * k);
  if (!bias.empty()) gating.selection_bias = d.Floats(bias);
  be.RouterTopK(ConstMat(d.Floats(logits), n, n_expert), k, gating, ids, w);
  std::vector<float> out;
  for (int32_t id : d.ReadInts(ids, n * k)) out.push_back(static_cast<float>(id));
  for (float f : d.Read(w, n * k)) out.push_back(f);
  return out;
}

/// The reference's ids, then its weights (RunRouterTopK's order).
std::vector<double> IdsThenWeights(const std::vector<int32_t>& ids, const std::vector<double>& w) {
  std::vector<double> out(ids.begin(), ids.end());
  out.insert(out.end(), w.begin(), w.end());
  return out;
}

void AddMatMulCases(std::vector<OpCase>& cases) {
  struct Shape {
    int64_t k, out, n;
  };
  // Rows of 1..5 blocks and of more than 16 (a second pass over the lanes),
  // for 32- and 256-element blocks; 17, 33, 7, 9 rows leave 1..3 rows in the
  // last block of 4.
  const Shape shapes[] = {{32, 17, 3},   {64, 5, 1},   {96, 33, 17},  {4096, 7, 3},
                          {256, 64, 8},  {1184, 6, 5}, {1280, 9, 5},  {4352, 5, 2},
                          {512, 17, 3}};
  uint32_t seed = 100;
  for (DType type : WeightTypesUnderTest()) {
    std::vector<Shape> list;
    for (const Shape& s : shapes) {
      if (RowSizeValid(type, s.k)) list.push_back(s);
    }
    if (!Traits(type).quantized) list.push_back({50, 9, 2});  // k not a multiple of 16
    for (const Shape& s : list) {
      auto w = std::make_shared<std::vector<uint8_t>>(RandomWeight(type, s.out, s.k, ++seed));
      auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(s.k * s.n, ++seed));
      OpCase c;
      c.name = absl::StrFormat("MatMul %s k=%d out=%d n=%d", Traits(type).name, s.k, s.out, s.n);
      c.max_nmse = kNmseF32;
      c.max_rel = kRelF32;
      c.run = [=](Backend& be) {
        DeviceData d(be);
        const WeightRef wr = d.Weight(type, *w, s.out, s.k);
        float* y = d.Zeros(s.n * s.out);
        be.MatMul(wr, ConstMat(d.Floats(*x), s.n, s.k), Mat{y, s.n, s.out});
        return d.Read(y, s.n * s.out);
      };
      c.reference = [=] { return ref::MatMul(type, w->data(), s.out, s.k, *x, s.n); };
      c.weight_type = type;
      cases.push_back(std::move(c));
    }
  }
}

void AddMatMulPairCases(std::vector<OpCase>& cases) {
  // Two products of one input: same activation type (x quantized once where a
  // backend shares it: Q8_0 pairs, K-family pairs), different ones (the pair
  // falls back to two MatMuls), float weights; one row (the decode kernels),
  // a few, and a tile's worth.
  struct Pair {
    DType a, b;
  };
  const Pair pairs[] = {{DType::kQ8_0, DType::kQ8_0},
                        {DType::kQ4_K, DType::kQ6_K},
                        {DType::kIQ4_XS, DType::kQ2_K},
                        {DType::kQ4_K, DType::kQ8_0},
                        {DType::kF16, DType::kF32}};
  uint32_t seed = 900;
  for (const Pair p : pairs) {
    for (const int64_t n : {1, 3, 9}) {
      const int64_t k = 512, out_a = 17, out_b = 9;
      auto wa = std::make_shared<std::vector<uint8_t>>(RandomWeight(p.a, out_a, k, ++seed));
      auto wb = std::make_shared<std::vector<uint8_t>>(RandomWeight(p.b, out_b, k, ++seed));
      auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(k * n, ++seed));
      OpCase c;
      c.name = absl::StrFormat("MatMulPair %s %s k=%d n=%d", Traits(p.a).name, Traits(p.b).name,
                               k, n);
      c.max_nmse = kNmseF32;
      c.max_rel = kRelF32;
      c.run = [=](Backend& be) {
        DeviceData d(be);
        const WeightRef ra = d.Weight(p.a, *wa, out_a, k);
        const WeightRef rb = d.Weight(p.b, *wb, out_b, k);
        float* ya = d.Zeros(n * (out_a + out_b));
        float* yb = ya + n * out_a;
        be.MatMulPair(ra, rb, ConstMat(d.Floats(*x), n, k), Mat{ya, n, out_a}, Mat{yb, n, out_b});
        return d.Read(ya, n * (out_a + out_b));
      };
      c.reference = [=] {
        std::vector<double> r = ref::MatMul(p.a, wa->data(), out_a, k, *x, n);
        const std::vector<double> rb = ref::MatMul(p.b, wb->data(), out_b, k, *x, n);
        r.insert(r.end(), rb.begin(), rb.end());
        return r;
      };
      c.weight_type = p.a;
      cases.push_back(std::move(c));
    }
  }
}

void AddSwiGluMatMulCases(std::vector<OpCase>& cases) {
  // gate = SwiGlu(gate, up), y = gate * w^T. Gates of 20..40 make SiLU the
  // identity in float (1 + e^-20 rounds to 1), so the activation is the one
  // float product g * u and the reference can quantize exactly what the op
  // does; the random-gate bits are compared with the CPU in the CUDA suite.
  uint32_t seed = 950;
  for (const DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kF16}) {
    for (const int64_t n : {1, 3, 9}) {
      const int64_t k = 512, out = 13;
      auto w = std::make_shared<std::vector<uint8_t>>(RandomWeight(type, out, k, ++seed));
      auto g = std::make_shared<std::vector<float>>(ref::RandomFloats(k * n, ++seed, 20.0f, 40.0f));
      auto u = std::make_shared<std::vector<float>>(ref::RandomFloats(k * n, ++seed, -3.0f, 3.0f));
      OpCase c;
      c.name = absl::StrFormat("SwiGluMatMul %s k=%d n=%d", Traits(type).name, k, n);
      c.max_nmse = kNmseF32;
      c.max_rel = kRelF32;
      c.run = [=](Backend& be) {
        DeviceData d(be);
        const WeightRef wr = d.Weight(type, *w, out, k);
        float* gd = d.Floats(*g);
        float* y = d.Zeros(n * out);
        be.SwiGluMatMul(wr, Mat{gd, n, k}, ConstMat(d.Floats(*u), n, k), Mat{y, n, out});
        std::vector<float> r = d.Read(gd, n * k);
        const std::vector<float> yr = d.Read(y, n * out);
        r.insert(r.end(), yr.begin(), yr.end());
        return r;
      };
      c.reference = [=] {
        std::vector<float> act(g->size());
        for (size_t i = 0; i < act.size(); ++i) act[i] = (*g)[i] * (*u)[i];
        std::vector<double> r(act.begin(), act.end());
        const std::vector<double> y = ref::MatMul(type, w->data(), out, k, act, n);
        r.insert(r.end(), y.begin(), y.end());
        return r;
      };
      c.weight_type = type;
      cases.push_back(std::move(c));
    }
  }
}

void AddGetRowsCases(std::vector<OpCase>& cases) {
  for (DType type : WeightTypesUnderTest()) {
    const int64_t rows = 10, cols = Traits(type).block_elems == 256 ? 512 : 96;
    auto w = std::make_shared<std::vector<uint8_t>>(RandomWeight(type, rows, cols, 7));
    const std::vector<int32_t> ids = {3, 0, 9, 3};
    OpCase c{absl::StrFormat("GetRows %s", Traits(type).name), 0.0, 0.0, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      const WeightRef wr = d.Weight(type, *w, rows, cols);
      float* out = d.Zeros(ids.size() * cols);
      be.GetRows(wr, d.Ints(ids), Mat{out, static_cast<int64_t>(ids.size()), cols});
      return d.Read(out, ids.size() * cols);
    };
    c.reference = [=] {
      std::vector<double> out;
      for (int32_t id : ids) {
        const auto r = ref::DecodeRow(type, w->data() + id * RowBytes(type, cols), cols);
        out.insert(out.end(), r.begin(), r.end());
      }
      return out;
    };
    c.weight_type = type;
    cases.push_back(std::move(c));
  }
}

void AddNormRopeCases(std::vector<OpCase>& cases) {
  for (auto [n, dim] : {std::pair<int64_t, int64_t>{3, 96}, {17, 4096}}) {
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 11, -3, 3));
    auto w = std::make_shared<std::vector<float>>(ref::RandomFloats(dim, 12, 0.5, 1.5));
    OpCase c{absl::StrFormat("RmsNorm in place n=%d d=%d", n, dim), kNmseF32, kRelF32, nullptr,
             nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* xd = d.Floats(*x);
      be.RmsNorm(ConstMat(xd, n, dim), d.Floats(*w), 1e-5f, Mat{xd, n, dim});  // y aliases x
      return d.Read(xd, n * dim);
    };
    c.reference = [=] { return ref::RmsNorm(*x, n, dim, *w, 1e-5); };
    cases.push_back(std::move(c));
  }
  for (RopeMode mode : {RopeMode::kInterleaved, RopeMode::kHalf}) {
    for (int rope_dims : {64, 32}) {
      const int64_t n = 5, hd = 64, cols = 4 * hd;
      auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * cols, 13));
      const std::vector<int32_t> pos = {0, 1, 17, 511, 3000};
      OpCase c{absl::StrFormat("Rope %s rope_dims=%d",
                               mode == RopeMode::kHalf ? "half" : "interleaved", rope_dims),
               kNmseF32, kRelF32, nullptr, nullptr};
      c.run = [=](Backend& be) {
        DeviceData d(be);
        float* xd = d.Floats(*x);
        RopeParams rope;
        rope.dims = rope_dims;
        rope.freq_base = 10000.0f;
        rope.mode = mode;
        be.Rope(Mat{xd, n, cols}, hd, d.Ints(pos), rope);
        return d.Read(xd, n * cols);
      };
      c.reference = [=] { return ref::Rope(*x, n, cols, hd, rope_dims, pos, 10000.0, mode); };
      cases.push_back(std::move(c));
    }
  }
}

/// YaRN as gpt-oss (half mode, truncate off) and DeepSeek-V2 (interleaved,
/// truncated, the rotated dims at the end of each head) configure it, and a
/// plain RoPE at an offset (DeepSeek's shared k_pe after the compressed KV).
void AddRopeScalingCases(std::vector<OpCase>& cases) {
  struct Spec {
    const char* name;
    int64_t heads;
    int head_dim;
    RopeParams rope;
  };
  RopeParams gpt_oss;
  gpt_oss.dims = 64;
  gpt_oss.freq_base = 150000.0f;
  gpt_oss.mode = RopeMode::kHalf;
  gpt_oss.scaling = {RopeScalingType::kYarn,
                     32.0f,
                     4096,
                     32.0f,
                     1.0f,
                     static_cast<float>(YarnAttentionFactor(32.0)),
                     false};
  RopeParams deepseek;
  deepseek.dims = 32;
  deepseek.offset = 64;
  deepseek.freq_base = 10000.0f;
  deepseek.mode = RopeMode::kInterleaved;
  deepseek.scaling = {RopeScalingType::kYarn,
                      40.0f,
                      4096,
                      32.0f,
                      1.0f,
                      static_cast<float>(YarnAttentionFactor(40.0, 1.0, 0.707)),
                      true};
  RopeParams k_pe;
  k_pe.dims = 8;
  k_pe.offset = 32;
  k_pe.freq_base = 10000.0f;
  RopeParams proportional;  // Gemma 4's full layers: a quarter of the pairs rotate
  proportional.dims = 64;
  proportional.freq_base = 1000000.0f;
  proportional.mode = RopeMode::kHalf;
  proportional.rotated_pairs = 8;
  for (const Spec& spec :
       {Spec{"yarn half (gpt-oss) hd=64", 3, 64, gpt_oss},
        Spec{"yarn interleaved truncated offset=64 dims=32 hd=96", 4, 96, deepseek},
        Spec{"offset=32 dims=8 hd=40 one head", 1, 40, k_pe},
        Spec{"proportional half (gemma4) rotated_pairs=8 hd=64", 2, 64, proportional}}) {
    const int64_t n = 6, cols = spec.heads * spec.head_dim;
    const int hd = spec.head_dim;
    const RopeParams rope = spec.rope;
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * cols, 14));
    const std::vector<int32_t> pos = {0, 1, 17, 511, 3000, 70000};
    OpCase c{absl::StrCat("Rope ", spec.name), kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* xd = d.Floats(*x);
      be.Rope(Mat{xd, n, cols}, hd, d.Ints(pos), rope);
      return d.Read(xd, n * cols);
    };
    c.reference = [=] {
      const RopeScaling& s = rope.scaling;
      const bool yarn = s.type == RopeScalingType::kYarn;
      std::vector<double> inv =
          yarn ? ref::YarnInvFreq(rope.dims, rope.freq_base, s.factor, s.original_context,
                                  s.beta_fast, s.beta_slow, s.truncate)
               : std::vector<double>{};
      if (rope.rotated_pairs > 0) {  // transformers' "proportional": the rest do not turn
        inv.assign(static_cast<size_t>(rope.dims / 2), 0.0);
        for (int i = 0; i < rope.rotated_pairs; ++i) {
          inv[i] = std::pow(double{rope.freq_base}, -2.0 * i / rope.dims);
        }
      }
      return ref::Rope(*x, n, cols, hd, rope.dims, pos, rope.freq_base, rope.mode, rope.offset, inv,
                       yarn ? s.attention_factor : 1.0);
    };
    cases.push_back(std::move(c));
  }
}

/// Attention with the options gpt-oss and DeepSeek-V2 need: sinks, sliding
/// windows (cut at position 0, wider than the context, of one key), V heads
/// narrower than K heads, and V as a prefix of the K rows (MLA's one
/// compressed KV head).
void AddAttentionOptionCases(std::vector<OpCase>& cases) {
  struct Spec {
    const char* name;
    int n_head, n_head_kv, hd, pos0;
    int64_t n;
    bool sinks;
    int window, vd;
    bool v_in_k;  // v_cache is k_cache read as [cap, n_head_kv * hd] rows
  };
  for (const Spec& s : {Spec{"sinks", 8, 2, 64, 37, 5, true, 0, 0, false},
                        Spec{"window=8", 4, 2, 32, 3, 9, false, 8, 0, false},
                        Spec{"sinks window=4 (gpt-oss sliding)", 8, 2, 64, 2, 7, true, 4, 0, false},
                        Spec{"window=1", 4, 4, 32, 5, 3, true, 1, 0, false},
                        Spec{"window=1000", 4, 1, 32, 20, 4, false, 1000, 0, false},
                        Spec{"v_head_dim=32 hd=48", 4, 4, 48, 9, 3, false, 0, 32, false},
                        Spec{"v in k (MLA) hd=40 vd=32", 4, 1, 40, 11, 4, false, 0, 32, true}}) {
    const int vd = s.vd > 0 ? s.vd : s.hd;
    const int64_t qc = s.n_head * s.hd, kc = s.n_head_kv * s.hd, oc = s.n_head * vd;
    const int64_t cap = s.pos0 + s.n + 3, vc = s.v_in_k ? kc : int64_t(s.n_head_kv) * vd;
    auto q = std::make_shared<std::vector<float>>(ref::RandomFloats(s.n * qc, 24, -2, 2));
    auto k = std::make_shared<std::vector<float>>(ref::RandomFloats(cap * kc, 25, -2, 2));
    auto v = std::make_shared<std::vector<float>>(s.v_in_k ? *k : ref::RandomFloats(cap * vc, 26));
    // Sinks from well below to above the scores, so that some dominate.
    auto sinks = std::make_shared<std::vector<float>>(
        s.sinks ? ref::RandomFloats(s.n_head, 27, -3, 6) : std::vector<float>{});
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    OpCase c{absl::StrFormat("Attention %s heads=%d/%d pos0=%d n=%d", s.name, s.n_head, s.n_head_kv,
                             s.pos0, s.n),
             kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* out = d.Zeros(s.n * oc);
      float* kd = d.Floats(*k);
      AttentionOptions options;
      options.sinks = s.sinks ? d.Floats(*sinks) : nullptr;
      options.window = s.window;
      options.v_head_dim = s.vd;
      be.Attention(ConstMat(d.Floats(*q), s.n, qc), ConstMat(kd, cap, kc),
                   ConstMat(s.v_in_k ? kd : d.Floats(*v), cap, vc), s.n_head, s.n_head_kv, s.hd,
                   s.pos0, scale, options, Mat{out, s.n, oc});
      return d.Read(out, s.n * oc);
    };
    c.reference = [=] {
      ref::AttentionExtras extras;
      extras.sinks = *sinks;
      extras.window = s.window;
      extras.vd = s.vd;
      extras.ldv = vc;
      return ref::Attention(*q, *k, *v, s.n, s.n_head, s.n_head_kv, s.hd, s.pos0, scale, extras);
    };
    cases.push_back(std::move(c));
  }
}

void AddAttentionCases(std::vector<OpCase>& cases) {
  struct Shape {
    int n_head, n_head_kv, hd, pos0;
    int64_t n;
  };
  for (const Shape& s : {Shape{8, 2, 64, 0, 5}, Shape{8, 2, 64, 37, 1}, Shape{4, 4, 32, 512, 3},
                         Shape{6, 1, 128, 9, 17}}) {
    const int64_t qc = s.n_head * s.hd, kc = s.n_head_kv * s.hd, cap = s.pos0 + s.n + 3;
    auto q = std::make_shared<std::vector<float>>(ref::RandomFloats(s.n * qc, 21, -2, 2));
    auto k = std::make_shared<std::vector<float>>(ref::RandomFloats(cap * kc, 22, -2, 2));
    auto v = std::make_shared<std::vector<float>>(ref::RandomFloats(cap * kc, 23));
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    OpCase c{absl::StrFormat("Attention heads=%d/%d hd=%d pos0=%d n=%d", s.n_head, s.n_head_kv,
                             s.hd, s.pos0, s.n),
             kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* out = d.Zeros(s.n * qc);
      be.Attention(ConstMat(d.Floats(*q), s.n, qc), ConstMat(d.Floats(*k), cap, kc),
                   ConstMat(d.Floats(*v), cap, kc), s.n_head, s.n_head_kv, s.hd, s.pos0, scale,
                   AttentionOptions{}, Mat{out, s.n, qc});
      return d.Read(out, s.n * qc);
    };
    c.reference = [=] {
      return ref::Attention(*q, *k, *v, s.n, s.n_head, s.n_head_kv, s.hd, s.pos0, scale);
    };
    cases.push_back(std::move(c));
  }
}

void AddActivationCases(std::vector<OpCase>& cases) {
  {
    const int64_t n = 3, dim = 1000;
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 31, -30, 30));
    OpCase c{"Softmax n=3 d=1000", kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* xd = d.Floats(*x);
      be.Softmax(Mat{xd, n, dim});
      return d.Read(xd, n * dim);
    };
    c.reference = [=] { return ref::Softmax(*x, n, dim); };
    cases.push_back(std::move(c));
  }
  {
    const int64_t n = 4, dim = 1000;
    auto g = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 32, -20, 20));
    auto u = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 33));
    OpCase c{"SwiGlu out aliases gate", kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* gd = d.Floats(*g);
      be.SwiGlu(ConstMat(gd, n, dim), ConstMat(d.Floats(*u), n, dim), Mat{gd, n, dim});
      return d.Read(gd, n * dim);
    };
    c.reference = [=] { return ref::SwiGlu(*g, *u); };
    cases.push_back(std::move(c));
  }
  {
    // gpt-oss's constants; values across and exactly at the clamps.
    const int64_t n = 3, dim = 700;
    auto g = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 36, -20, 20));
    auto u = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 37, -20, 20));
    (*g)[0] = (*u)[1] = 7.0f;
    (*u)[2] = -7.0f;
    (*g)[3] = -7.0f;
    OpCase c{"SwiGluOai alpha=1.702 limit=7 out aliases up", kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* ud = d.Floats(*u);
      be.SwiGluOai(ConstMat(d.Floats(*g), n, dim), ConstMat(ud, n, dim), 1.702f, 7.0f,
                   Mat{ud, n, dim});
      return d.Read(ud, n * dim);
    };
    c.reference = [=] { return ref::SwiGluOai(*g, *u, 1.702f, 7.0f); };
    cases.push_back(std::move(c));
  }
  {
    // Gemma's GeGLU (gelu_pytorch_tanh(gate) * up), gates far into both tails.
    const int64_t n = 3, dim = 700;
    auto g = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 38, -12, 12));
    auto u = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 39, -4, 4));
    (*g)[0] = 0.0f;
    (*g)[1] = 1e-4f;
    OpCase c{"GeGlu out aliases gate", kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* gd = d.Floats(*g);
      be.GeGlu(ConstMat(gd, n, dim), ConstMat(d.Floats(*u), n, dim), Mat{gd, n, dim});
      return d.Read(gd, n * dim);
    };
    c.reference = [=] {
      std::vector<double> y(g->size());
      for (size_t i = 0; i < y.size(); ++i) {
        const double x = (*g)[i];
        y[i] = 0.5 * x *
               (1.0 +
                std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))) *
               (*u)[i];
      }
      return y;
    };
    cases.push_back(std::move(c));
  }
  {
    // Logit soft-capping at 30 (Gemma 4), values well past the cap.
    const int64_t n = 2, dim = 900;
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 40, -120, 120));
    OpCase c{"SoftCap cap=30", kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* xd = d.Floats(*x);
      be.SoftCap(Mat{xd, n, dim}, 30.0f);
      return d.Read(xd, n * dim);
    };
    c.reference = [=] {
      std::vector<double> y(x->size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = 30.0 * std::tanh((*x)[i] / 30.0);
      return y;
    };
    cases.push_back(std::move(c));
  }
  {
    // A factor in backend memory (Gemma's embedding and layer output scales).
    const int64_t n = 3, dim = 500;
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 41));
    OpCase c{"Scale by a factor in backend memory", kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* xd = d.Floats(*x);
      be.Scale(Mat{xd, n, dim}, d.Floats(std::vector<float>{0.37f}));
      return d.Read(xd, n * dim);
    };
    c.reference = [=] {
      std::vector<double> y(x->size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = double{(*x)[i]} * double{0.37f};
      return y;
    };
    cases.push_back(std::move(c));
  }
  // Row 1 has ties (ids 2 and 5 share the top logit, 0 and 7 the next).
  // Every gating of the architecture table: renormalised (Mixtral, Qwen3),
  // the full softmax (OLMoE, Qwen2-MoE), scaled (DeepSeek).
  struct Gate {
    const char* name;
    int64_t n_expert;
    int k;
    RouterGating gating;
  };
  for (const Gate& g : {Gate{"experts=8 k=2", 8, 2, {}},
                        Gate{"experts=64 k=8 full softmax", 64, 8, {false, 1.0f}},
                        Gate{"experts=16 k=4 full softmax scale 2.5", 16, 4, {false, 2.5f}},
                        Gate{"experts=32 k=8 scale 0.5", 32, 8, {true, 0.5f}}}) {
    const int64_t n = 4, n_expert = g.n_expert;
    const int k = g.k;
    const RouterGating gating = g.gating;
    auto l = std::make_shared<std::vector<float>>(ref::RandomFloats(n * n_expert, 34, -4, 4));
    for (int e : {2, 5}) (*l)[n_expert + e] = 6.0f;
    (*l)[3 * n_expert + 0] = (*l)[3 * n_expert + 7] = 5.0f;
    OpCase c{absl::StrCat("RouterTopK n=4 ", g.name, " (ids as floats, then weights)"), kNmseF32,
             kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) { return RunRouterTopK(be, *l, n, k, gating, {}); };
    c.reference = [=] {
      std::vector<int32_t> ids;
      std::vector<double> w;
      ref::RouterTopK(*l, n, n_expert, k, gating.normalize, gating.scale, &ids, &w);
      return IdsThenWeights(ids, w);
    };
    cases.push_back(std::move(c));
  }
  // DeepSeek-V3's sigmoid routing (RouterScore::kSigmoid): a correction bias,
  // groups (DeepSeek-V3's 8 of 32 keeping 4; k beyond the kept groups' experts;
  // one group of all), renormalised or not, scaled. Row 1 ties two biased
  // scores (ids 2 and 5: same logit, same bias).
  struct SigmoidGate {
    const char* name;
    int64_t n_expert;
    int k;
    bool normalize;
    float scale;
    int n_group, n_group_used;
    bool bias;
  };
  for (const SigmoidGate& g :
       {SigmoidGate{"experts=256 k=8 groups 4 of 8 bias scale 2.5", 256, 8, true, 2.5f, 8, 4, true},
        SigmoidGate{"experts=16 k=4 bias (MiniMax-M2)", 16, 4, true, 1.0f, 1, 1, true},
        SigmoidGate{"experts=16 k=6 groups 1 of 8 (k beyond them) not renormalised", 16, 6, false,
                    1.0f, 8, 1, true},
        SigmoidGate{"experts=32 k=4 groups 2 of 4 no bias", 32, 4, true, 1.0f, 4, 2, false},
        SigmoidGate{"experts=64 k=8 groups 8 of 8 bias scale 1.8", 64, 8, true, 1.8f, 8, 8,
                    true}}) {
    const int64_t n = 4, n_expert = g.n_expert;
    const int k = g.k;
    RouterGating gating{g.normalize, g.scale};
    gating.score = RouterScore::kSigmoid;
    gating.n_group = g.n_group;
    gating.n_group_used = g.n_group_used;
    auto l = std::make_shared<std::vector<float>>(ref::RandomFloats(n * n_expert, 38, -4, 4));
    auto bias = std::make_shared<std::vector<float>>(
        g.bias ? ref::RandomFloats(n_expert, 39, -0.3f, 0.3f) : std::vector<float>{});
    (*l)[n_expert + 5] = (*l)[n_expert + 2] = 6.0f;
    if (g.bias) (*bias)[5] = (*bias)[2];
    OpCase c{absl::StrCat("RouterTopK sigmoid n=4 ", g.name, " (ids as floats, then weights)"),
             kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) { return RunRouterTopK(be, *l, n, k, gating, *bias); };
    c.reference = [=] {
      std::vector<int32_t> ids;
      std::vector<double> w;
      ref::RouterTopKSigmoid(*l, n, n_expert, k, gating.normalize, gating.scale, gating.n_group,
                             gating.n_group_used, *bias, &ids, &w);
      return IdsThenWeights(ids, w);
    };
    cases.push_back(std::move(c));
  }
  {
    const int64_t n = 5, dim = 300;
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 35, -30, 30));
    OpCase c{"Sigmoid n=5 dim=300", kNmseF32, kRelF32, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* xd = d.Floats(*x);
      be.Sigmoid(Mat{xd, n, dim});
      return d.Read(xd, n * dim);
    };
    c.reference = [=] {
      std::vector<double> y;
      for (float v : *x) y.push_back(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
      return y;
    };
    cases.push_back(std::move(c));
  }
}

void AddRowOpCases(std::vector<OpCase>& cases) {
  const int64_t n = 6, dim = 40;
  {
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 43));
    auto bias = std::make_shared<std::vector<float>>(ref::RandomFloats(dim, 44));
    OpCase c{"AddBias n=6 dim=40", 0.0, 0.0, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* xd = d.Floats(*x);
      be.AddBias(Mat{xd, n, dim}, d.Floats(*bias));
      return d.Read(xd, n * dim);
    };
    c.reference = [=] {  // one f32 rounding per element: exact when computed in float
      std::vector<double> out;
      for (size_t i = 0; i < x->size(); ++i) out.push_back((*x)[i] + (*bias)[i % dim]);
      return out;
    };
    cases.push_back(std::move(c));
  }
  auto a = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 41));
  auto b = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 42));
  OpCase add{"Add out aliases b", 0.0, 0.0, nullptr, nullptr};
  add.run = [=](Backend& be) {
    DeviceData d(be);
    float* bd = d.Floats(*b);
    be.Add(ConstMat(d.Floats(*a), n, dim), ConstMat(bd, n, dim), Mat{bd, n, dim});
    return d.Read(bd, n * dim);
  };
  add.reference = [=] {  // one f32 rounding: exact when computed in float
    std::vector<double> out;
    for (size_t i = 0; i < a->size(); ++i) out.push_back((*a)[i] + (*b)[i]);
    return out;
  };
  cases.push_back(std::move(add));

  OpCase copy{"Copy", 0.0, 0.0, nullptr, nullptr};
  copy.run = [=](Backend& be) {
    DeviceData d(be);
    float* dst = d.Zeros(n * dim);
    be.Copy(ConstMat(d.Floats(*a), n, dim), Mat{dst, n, dim});
    return d.Read(dst, n * dim);
  };
  copy.reference = [=] { return AsDoubles(*a); };
  cases.push_back(std::move(copy));

  // MLA's per-head slices: columns [3, 3 + 7) of a 40-wide matrix into
  // columns [9, 16) of a 16-wide one whose other columns stay as they were.
  OpCase columns{"CopyColumns", 0.0, 0.0, nullptr, nullptr};
  columns.run = [=](Backend& be) {
    DeviceData d(be);
    float* dst = d.Floats(std::vector<float>(b->begin(), b->begin() + n * 16));
    be.CopyColumns(ConstMat(d.Floats(*a), n, dim), 3, Mat{dst, n, 16}, 9, 7);
    return d.Read(dst, n * 16);
  };
  columns.reference = [=] {
    std::vector<double> out(b->begin(), b->begin() + n * 16);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < 7; ++j) out[t * 16 + 9 + j] = (*a)[t * dim + 3 + j];
    }
    return out;
  };
  cases.push_back(std::move(columns));

  const std::vector<int32_t> idx = {5, 0, 0, 3};
  OpCase gather{"GatherRows", 0.0, 0.0, nullptr, nullptr};
  gather.run = [=](Backend& be) {
    DeviceData d(be);
    float* dst = d.Zeros(idx.size() * dim);
    be.GatherRows(ConstMat(d.Floats(*a), n, dim), d.Ints(idx),
                  Mat{dst, static_cast<int64_t>(idx.size()), dim});
    return d.Read(dst, idx.size() * dim);
  };
  gather.reference = [=] {
    std::vector<double> out;
    for (int32_t i : idx) out.insert(out.end(), a->begin() + i * dim, a->begin() + (i + 1) * dim);
    return out;
  };
  cases.push_back(std::move(gather));

  const std::vector<float> scale = {0.5f, -1.25f, 2.0f, 0.75f};
  OpCase scatter{"ScatterAddScaled repeated index", kNmseF32, kRelF32, nullptr, nullptr};
  scatter.run = [=](Backend& be) {
    DeviceData d(be);
    float* dst = d.Floats(*b);
    be.ScatterAddScaled(ConstMat(d.Floats(*a), static_cast<int64_t>(idx.size()), dim), d.Ints(idx),
                        d.Floats(scale), Mat{dst, n, dim});
    return d.Read(dst, n * dim);
  };
  scatter.reference = [=] {
    std::vector<double> out = AsDoubles(*b);
    for (size_t i = 0; i < idx.size(); ++i) {
      for (int64_t c = 0; c < dim; ++c)
        out[idx[i] * dim + c] += double(scale[i]) * (*a)[i * dim + c];
    }
    return out;
  };
  cases.push_back(std::move(scatter));
}

}  // namespace

std::vector<OpCase> MakeOpCases() {
  std::vector<OpCase> cases;
  AddMatMulCases(cases);
  AddMatMulPairCases(cases);
  AddSwiGluMatMulCases(cases);
  AddGetRowsCases(cases);
  AddNormRopeCases(cases);
  AddRopeScalingCases(cases);
  AddAttentionCases(cases);
  AddAttentionOptionCases(cases);
  AddActivationCases(cases);
  AddRowOpCases(cases);
  AddDeltaNetCases(cases);
  AddMamba2Cases(cases);
  return cases;
}

}  // namespace odmoe::test
