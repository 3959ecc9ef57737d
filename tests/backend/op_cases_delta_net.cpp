// Op cases of the linear-attention ops (backend.h: Mul, CausalConvSilu,
// GatedDeltaNet) against double-precision references written here from the
// definitions; MakeOpCases (op_cases.cpp) adds them.
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "op_cases.h"
#include "reference_ops.h"

namespace odmoe::test {
namespace {

constexpr double kNmse = 1e-10;
constexpr double kRel = 1e-5;

double SiluD(double x) { return x / (1.0 + std::exp(-x)); }

// The conv's outputs, then the state after the rows.
std::vector<double> ConvReference(const std::vector<float>& x, int64_t rows, int64_t ch,
                                  const std::vector<float>& w, int kernel,
                                  const std::vector<float>* state) {
  const int64_t hist = kernel - 1;
  std::vector<double> win(static_cast<size_t>((hist + rows) * ch), 0.0);
  if (state) {
    for (size_t i = 0; i < state->size(); ++i) win[i] = (*state)[i];
  }
  for (size_t i = 0; i < x.size(); ++i) win[static_cast<size_t>(hist * ch) + i] = x[i];
  std::vector<double> out;
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t c = 0; c < ch; ++c) {
      double acc = 0;
      for (int j = 0; j < kernel; ++j) {
        acc += w[static_cast<size_t>(c * kernel + j)] * win[static_cast<size_t>((t + j) * ch + c)];
      }
      out.push_back(SiluD(acc));
    }
  }
  for (int64_t j = 0; j < hist; ++j) {
    for (int64_t c = 0; c < ch; ++c) out.push_back(win[static_cast<size_t>((rows + j) * ch + c)]);
  }
  return out;
}

// The delta rule's outputs [rows, n_v * head_v], then the state.
std::vector<double> DeltaReference(const DeltaInputs& in, bool with_state) {
  const DeltaNetParams& p = in.p;
  const int hk = p.head_k, hv = p.head_v;
  const int64_t key_dim = int64_t{p.n_k_heads} * hk;
  const int64_t cols = 2 * key_dim + int64_t{p.n_v_heads} * hv;
  std::vector<double> s(static_cast<size_t>(p.state_floats()), 0.0);
  if (with_state) {
    for (size_t i = 0; i < s.size(); ++i) s[i] = in.state[i];
  }
  std::vector<double> out(static_cast<size_t>(in.rows * p.n_v_heads * hv));
  for (int64_t t = 0; t < in.rows; ++t) {
    const float* row = in.qkv.data() + t * cols;
    for (int j = 0; j < p.n_v_heads; ++j) {
      const int kh = p.key_head_of(j);
      std::vector<double> q(static_cast<size_t>(hk)), k(static_cast<size_t>(hk));
      double sq = 0, sk = 0;
      for (int c = 0; c < hk; ++c) {
        q[static_cast<size_t>(c)] = row[kh * hk + c];
        k[static_cast<size_t>(c)] = row[key_dim + kh * hk + c];
        sq += q[static_cast<size_t>(c)] * q[static_cast<size_t>(c)];
        sk += k[static_cast<size_t>(c)] * k[static_cast<size_t>(c)];
      }
      for (int c = 0; c < hk; ++c) {
        q[static_cast<size_t>(c)] /= std::sqrt(sq + p.l2_eps) * std::sqrt(double(hk));
        k[static_cast<size_t>(c)] /= std::sqrt(sk + p.l2_eps);
      }
      const double u = double(in.alpha[static_cast<size_t>(t * p.n_v_heads + j)]) +
                       in.dt_bias[static_cast<size_t>(j)];
      const double g = in.a[static_cast<size_t>(j)] * (u > 20 ? u : std::log1p(std::exp(u)));
      const double b =
          1.0 / (1.0 + std::exp(-double(in.beta[static_cast<size_t>(t * p.n_v_heads + j)])));
      for (int i = 0; i < hv; ++i) {
        double* si = s.data() + (int64_t{j} * hv + i) * hk;
        double dot = 0;
        for (int c = 0; c < hk; ++c) {
          si[c] *= std::exp(g);
          dot += si[c] * k[static_cast<size_t>(c)];
        }
        const double d = (row[2 * key_dim + j * hv + i] - dot) * b;
        double o = 0;
        for (int c = 0; c < hk; ++c) {
          si[c] += k[static_cast<size_t>(c)] * d;
          o += si[c] * q[static_cast<size_t>(c)];
        }
        out[static_cast<size_t>((t * p.n_v_heads + j) * hv + i)] = o;
      }
    }
  }
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace

DeltaInputs MakeDeltaInputs(int nk, int nv, int hk, int64_t rows, bool tiled, uint32_t seed) {
  DeltaInputs in;
  in.p.n_k_heads = nk;
  in.p.n_v_heads = nv;
  in.p.head_k = hk;
  in.p.head_v = hk;
  in.p.v_heads_tiled = tiled;
  in.rows = rows;
  const int64_t cols = 2 * int64_t{nk} * hk + int64_t{nv} * hk;
  in.qkv = ref::RandomFloats(static_cast<size_t>(rows * cols), seed, -2, 2);
  in.alpha = ref::RandomFloats(static_cast<size_t>(rows * nv), seed + 1, -3, 3);
  in.beta = ref::RandomFloats(static_cast<size_t>(rows * nv), seed + 2, -3, 3);
  in.a = ref::RandomFloats(static_cast<size_t>(nv), seed + 3, -1.0f, -0.05f);
  in.dt_bias = ref::RandomFloats(static_cast<size_t>(nv), seed + 4, -1, 1);
  in.state = ref::RandomFloats(static_cast<size_t>(in.p.state_floats()), seed + 5, -1, 1);
  return in;
}

std::vector<float> RunDeltaNet(Backend& be, const DeltaInputs& in, bool with_state,
                               std::span<const int64_t> chunks) {
  DeviceData d(be);
  const int64_t cols = in.qkv.size() / static_cast<size_t>(in.rows);
  const int64_t out_cols = int64_t{in.p.n_v_heads} * in.p.head_v;
  const float* qkv = d.Floats(in.qkv);
  const float* alpha = d.Floats(in.alpha);
  const float* beta = d.Floats(in.beta);
  const float* a = d.Floats(in.a);
  const float* dt = d.Floats(in.dt_bias);
  float* state = d.Floats(in.state);
  float* out = d.Zeros(static_cast<size_t>(in.rows * out_cols));
  int64_t row = 0;
  bool first = true;
  for (int64_t n : chunks) {
    be.GatedDeltaNet(ConstMat{qkv + row * cols, n, cols},
                     ConstMat{alpha + row * in.p.n_v_heads, n, in.p.n_v_heads},
                     ConstMat{beta + row * in.p.n_v_heads, n, in.p.n_v_heads}, a, dt, in.p,
                     first && !with_state ? nullptr : state, state,
                     Mat{out + row * out_cols, n, out_cols});
    first = false;
    row += n;
  }
  std::vector<float> got = d.Read(out, static_cast<size_t>(in.rows * out_cols));
  const std::vector<float> s = d.Read(state, in.state.size());
  got.insert(got.end(), s.begin(), s.end());
  return got;
}

void AddDeltaNetCases(std::vector<OpCase>& cases) {
  {
    const int64_t n = 5, dim = 300;
    auto a = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 351, -3, 3));
    auto b = std::make_shared<std::vector<float>>(ref::RandomFloats(n * dim, 352, -3, 3));
    OpCase c{"Mul n=5 dim=300", kNmse, kRel, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      float* x = d.Floats(*a);
      const float* y = d.Floats(*b);
      be.Mul(ConstMat{x, n, dim}, ConstMat{y, n, dim}, Mat{x, n, dim});
      return d.Read(x, n * dim);
    };
    c.reference = [=] {
      std::vector<double> y;
      for (size_t i = 0; i < a->size(); ++i) y.push_back(double((*a)[i]) * (*b)[i]);
      return y;
    };
    cases.push_back(std::move(c));
  }
  for (const bool with_state : {false, true}) {
    const int64_t rows = 7, ch = 40;
    const int kernel = 4;
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(rows * ch, 353, -2, 2));
    auto w = std::make_shared<std::vector<float>>(ref::RandomFloats(ch * kernel, 354, -1, 1));
    auto st =
        std::make_shared<std::vector<float>>(ref::RandomFloats((kernel - 1) * ch, 355, -2, 2));
    OpCase c{absl::StrFormat("CausalConvSilu rows=7 ch=40 kernel=4 state=%d", with_state), kNmse,
             kRel, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      const float* xd = d.Floats(*x);
      const float* wd = d.Floats(*w);
      float* sd = d.Floats(*st);
      float* out = d.Zeros(rows * ch);
      be.CausalConvSilu(ConstMat{xd, rows, ch}, wd, kernel, with_state ? sd : nullptr, sd,
                        Mat{out, rows, ch});
      std::vector<float> got = d.Read(out, rows * ch);
      const std::vector<float> s = d.Read(sd, st->size());
      got.insert(got.end(), s.begin(), s.end());
      return got;
    };
    c.reference = [=] {
      return ConvReference(*x, rows, ch, *w, kernel, with_state ? st.get() : nullptr);
    };
    cases.push_back(std::move(c));
  }
  for (const bool tiled : {false, true}) {
    for (const bool with_state : {false, true}) {
      auto in = std::make_shared<DeltaInputs>(MakeDeltaInputs(2, 4, 16, 6, tiled, 356));
      OpCase c{absl::StrFormat("GatedDeltaNet nk=2 nv=4 head=16 rows=6 tiled=%d state=%d", tiled,
                               with_state),
               1e-9, 1e-4, nullptr, nullptr};
      c.run = [=](Backend& be) {
        const int64_t all[] = {in->rows};
        return RunDeltaNet(be, *in, with_state, all);
      };
      c.reference = [=] { return DeltaReference(*in, with_state); };
      cases.push_back(std::move(c));
    }
  }
}

}  // namespace odmoe::test
