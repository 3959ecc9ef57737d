// Op cases of the Mamba-2 ops (backend.h: CausalConvBiasSilu, Mamba2Scan,
// GroupRmsNormGated) against double-precision references written here from
// the definitions; MakeOpCases (op_cases.cpp) adds them.
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

// The scan's outputs [rows, inner], then the state.
std::vector<double> ScanReference(const Mamba2Inputs& in, bool with_state) {
  const Mamba2Params& p = in.p;
  const int64_t inner = p.inner(), gs = int64_t{p.n_groups} * p.state, cols = inner + 2 * gs;
  std::vector<double> s(static_cast<size_t>(p.state_floats()), 0.0);
  if (with_state) {
    for (size_t i = 0; i < s.size(); ++i) s[i] = in.state[i];
  }
  std::vector<double> out(static_cast<size_t>(in.rows * inner));
  for (int64_t t = 0; t < in.rows; ++t) {
    const float* row = in.xbc.data() + t * cols;
    for (int h = 0; h < p.n_heads; ++h) {
      const int g = p.group_of(h);
      const double u = double(in.dt[static_cast<size_t>(t * p.n_heads + h)]) +
                       in.dt_bias[static_cast<size_t>(h)];
      const double step = u > 20 ? u : std::log1p(std::exp(u));
      const double decay = std::exp(step * in.a[static_cast<size_t>(h)]);
      for (int i = 0; i < p.head_dim; ++i) {
        const double x = row[h * p.head_dim + i];
        double* si = s.data() + (int64_t{h} * p.head_dim + i) * p.state;
        double y = 0;
        for (int k = 0; k < p.state; ++k) {
          si[k] = si[k] * decay + double(row[inner + g * p.state + k]) * x * step;
          y += si[k] * row[inner + gs + g * p.state + k];
        }
        out[static_cast<size_t>(t * inner + h * p.head_dim + i)] =
            y + double(in.d[static_cast<size_t>(h)]) * x;
      }
    }
  }
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace

Mamba2Inputs MakeMamba2Inputs(int heads, int head_dim, int groups, int state, int64_t rows,
                              uint32_t seed) {
  Mamba2Inputs in;
  in.p.n_heads = heads;
  in.p.head_dim = head_dim;
  in.p.n_groups = groups;
  in.p.state = state;
  in.rows = rows;
  const int64_t cols = in.p.inner() + 2 * int64_t{groups} * state;
  in.xbc = ref::RandomFloats(static_cast<size_t>(rows * cols), seed, -2, 2);
  in.dt = ref::RandomFloats(static_cast<size_t>(rows * heads), seed + 1, -3, 3);
  in.a = ref::RandomFloats(static_cast<size_t>(heads), seed + 2, -4.0f, -0.5f);
  in.d = ref::RandomFloats(static_cast<size_t>(heads), seed + 3, 0.5f, 1.5f);
  in.dt_bias = ref::RandomFloats(static_cast<size_t>(heads), seed + 4, -1, 1);
  in.state = ref::RandomFloats(static_cast<size_t>(in.p.state_floats()), seed + 5, -1, 1);
  return in;
}

std::vector<float> RunMamba2Scan(Backend& be, const Mamba2Inputs& in, bool with_state,
                                 std::span<const int64_t> chunks) {
  DeviceData d(be);
  const int64_t cols = static_cast<int64_t>(in.xbc.size()) / in.rows;
  const int64_t inner = in.p.inner(), nh = in.p.n_heads;
  const float* xbc = d.Floats(in.xbc);
  const float* dt = d.Floats(in.dt);
  const float* a = d.Floats(in.a);
  const float* dd = d.Floats(in.d);
  const float* bias = d.Floats(in.dt_bias);
  float* state = d.Floats(in.state);
  float* out = d.Zeros(static_cast<size_t>(in.rows * inner));
  int64_t row = 0;
  bool first = true;
  for (int64_t n : chunks) {
    be.Mamba2Scan(ConstMat{xbc + row * cols, n, cols}, ConstMat{dt + row * nh, n, nh}, a, dd, bias,
                  in.p, first && !with_state ? nullptr : state, state,
                  Mat{out + row * inner, n, inner});
    first = false;
    row += n;
  }
  std::vector<float> got = d.Read(out, static_cast<size_t>(in.rows * inner));
  const std::vector<float> s = d.Read(state, in.state.size());
  got.insert(got.end(), s.begin(), s.end());
  return got;
}

void AddMamba2Cases(std::vector<OpCase>& cases) {
  for (const bool with_state : {false, true}) {
    const int64_t rows = 7, ch = 40;
    const int kernel = 4;
    auto x = std::make_shared<std::vector<float>>(ref::RandomFloats(rows * ch, 371, -2, 2));
    auto w = std::make_shared<std::vector<float>>(ref::RandomFloats(ch * kernel, 372, -1, 1));
    auto b = std::make_shared<std::vector<float>>(ref::RandomFloats(ch, 373, -1, 1));
    auto st =
        std::make_shared<std::vector<float>>(ref::RandomFloats((kernel - 1) * ch, 374, -2, 2));
    OpCase c{absl::StrFormat("CausalConvBiasSilu rows=7 ch=40 kernel=4 state=%d", with_state),
             kNmse, kRel, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      const float* xd = d.Floats(*x);
      const float* wd = d.Floats(*w);
      const float* bd = d.Floats(*b);
      float* sd = d.Floats(*st);
      float* out = d.Zeros(rows * ch);
      be.CausalConvBiasSilu(ConstMat{xd, rows, ch}, wd, bd, kernel, with_state ? sd : nullptr, sd,
                            Mat{out, rows, ch});
      std::vector<float> got = d.Read(out, rows * ch);
      const std::vector<float> s = d.Read(sd, st->size());
      got.insert(got.end(), s.begin(), s.end());
      return got;
    };
    c.reference = [=] {
      const int64_t hist = kernel - 1;
      std::vector<double> win(static_cast<size_t>((hist + rows) * ch), 0.0);
      if (with_state) {
        for (size_t i = 0; i < st->size(); ++i) win[i] = (*st)[i];
      }
      for (size_t i = 0; i < x->size(); ++i) win[static_cast<size_t>(hist * ch) + i] = (*x)[i];
      std::vector<double> out;
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t ci = 0; ci < ch; ++ci) {
          double acc = (*b)[static_cast<size_t>(ci)];
          for (int j = 0; j < kernel; ++j) {
            acc += double((*w)[static_cast<size_t>(ci * kernel + j)]) *
                   win[static_cast<size_t>((t + j) * ch + ci)];
          }
          out.push_back(SiluD(acc));
        }
      }
      for (int64_t j = 0; j < hist; ++j) {
        for (int64_t ci = 0; ci < ch; ++ci) {
          out.push_back(win[static_cast<size_t>((rows + j) * ch + ci)]);
        }
      }
      return out;
    };
    cases.push_back(std::move(c));
  }
  for (const int groups : {1, 2}) {
    for (const bool with_state : {false, true}) {
      auto in = std::make_shared<Mamba2Inputs>(MakeMamba2Inputs(4, 8, groups, 16, 6, 375));
      OpCase c{absl::StrFormat("Mamba2Scan heads=4 head_dim=8 groups=%d state=16 rows=6 "
                               "with_state=%d",
                               groups, with_state),
               1e-9, 1e-4, nullptr, nullptr};
      c.run = [=](Backend& be) {
        const int64_t all[] = {in->rows};
        return RunMamba2Scan(be, *in, with_state, all);
      };
      c.reference = [=] { return ScanReference(*in, with_state); };
      cases.push_back(std::move(c));
    }
  }
  {
    const int64_t rows = 5, cols = 96;
    const int group = 24;
    auto y = std::make_shared<std::vector<float>>(ref::RandomFloats(rows * cols, 376, -2, 2));
    auto z = std::make_shared<std::vector<float>>(ref::RandomFloats(rows * cols, 377, -3, 3));
    auto w = std::make_shared<std::vector<float>>(ref::RandomFloats(cols, 378, 0.5f, 1.5f));
    OpCase c{"GroupRmsNormGated rows=5 cols=96 group=24", kNmse, kRel, nullptr, nullptr};
    c.run = [=](Backend& be) {
      DeviceData d(be);
      const float* yd = d.Floats(*y);
      const float* zd = d.Floats(*z);
      const float* wd = d.Floats(*w);
      float* out = d.Zeros(rows * cols);
      be.GroupRmsNormGated(ConstMat{yd, rows, cols}, ConstMat{zd, rows, cols}, wd, group, 1e-5f,
                           Mat{out, rows, cols});
      return d.Read(out, rows * cols);
    };
    c.reference = [=] {
      std::vector<double> out;
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t c0 = 0; c0 < cols; c0 += group) {
          std::vector<double> g;
          double sq = 0;
          for (int i = 0; i < group; ++i) {
            const size_t k = static_cast<size_t>(t * cols + c0 + i);
            g.push_back(double((*y)[k]) * SiluD((*z)[k]));
            sq += g.back() * g.back();
          }
          const double scale = 1.0 / std::sqrt(sq / group + 1e-5);
          for (int i = 0; i < group; ++i) {
            out.push_back(g[static_cast<size_t>(i)] * scale * (*w)[static_cast<size_t>(c0 + i)]);
          }
        }
      }
      return out;
    };
    cases.push_back(std::move(c));
  }
}

}  // namespace odmoe::test
