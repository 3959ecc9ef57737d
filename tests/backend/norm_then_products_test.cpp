// Products that follow a norm, on every backend this machine offers, give the
// CPU reference's bits for the same sequence of ops, also when the normed
// rows change in between. (The CUDA backend's norms of up to 8 rows keep
// their output quantized for the products that read it, norm_quant_cache.h;
// every way of changing those rows must make the next product quantize the
// new values: another op writing them, a copy from the host, SwiGLU written
// into them, a second norm elsewhere, an op's output that overlaps them.)
#include <cstring>
#include <string>
#include <vector>

#include "backends/backend_registry.h"
#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "op_cases.h"
#include "reference_ops.h"

namespace odmoe::test {
namespace {

constexpr int64_t kOut = 33;    // output rows of the products
constexpr int64_t kRouter = 8;  // experts of the router-like F32 product
constexpr int kPicks = 2;

struct Inputs {
  int64_t rows = 0, cols = 0;
  bool k_family = false;  // cols % 256 == 0: K-family weights fit
  std::vector<float> x, x2, a, z, u, host, norm_w;
  std::vector<uint8_t> wk, w6, w8a, w8b, w40, wf, t0, t1, t2, t3;
};

Inputs MakeInputs(int64_t rows, int64_t cols, uint32_t seed) {
  Inputs in;
  in.rows = rows;
  in.cols = cols;
  in.k_family = cols % 256 == 0;
  const auto n = static_cast<size_t>(rows * cols);
  in.x = ref::RandomFloats(n, ++seed, -3, 3);
  in.x2 = ref::RandomFloats(n, ++seed, -3, 3);
  in.a = ref::RandomFloats(n, ++seed, -3, 3);
  in.z = ref::RandomFloats(n, ++seed, -3, 3);
  in.u = ref::RandomFloats(n, ++seed, -3, 3);
  in.host = ref::RandomFloats(n, ++seed, -3, 3);
  in.norm_w = ref::RandomFloats(static_cast<size_t>(cols), ++seed, 0.5f, 1.5f);
  const DType k4 = in.k_family ? DType::kQ4_K : DType::kQ8_0;
  const DType k6 = in.k_family ? DType::kQ6_K : DType::kQ4_0;
  in.wk = RandomWeight(k4, kOut, cols, ++seed);
  in.w6 = RandomWeight(k6, kOut, cols, ++seed);
  in.w8a = RandomWeight(DType::kQ8_0, kOut, cols, ++seed);
  in.w8b = RandomWeight(DType::kQ8_0, kOut, cols, ++seed);
  in.w40 = RandomWeight(DType::kQ4_0, kOut, cols, ++seed);
  in.wf = RandomWeight(DType::kF32, kRouter, cols, ++seed);
  in.t0 = RandomWeight(k4, kOut, cols, ++seed);
  in.t1 = RandomWeight(k4, kOut, cols, ++seed);
  in.t2 = RandomWeight(k4, kOut, cols, ++seed);
  in.t3 = RandomWeight(k4, kOut, cols, ++seed);
  return in;
}

/// The sequence on `be`; every output read back, in order.
std::vector<std::vector<float>> RunSequence(Backend& be, const Inputs& in) {
  const int64_t n = in.rows, k = in.cols;
  const auto size = static_cast<size_t>(n * k);
  const DType k4 = in.k_family ? DType::kQ4_K : DType::kQ8_0;
  const DType k6 = in.k_family ? DType::kQ6_K : DType::kQ4_0;
  DeviceData d(be);
  const WeightRef wk = d.Weight(k4, in.wk, kOut, k);
  const WeightRef w6 = d.Weight(k6, in.w6, kOut, k);
  const WeightRef w8a = d.Weight(DType::kQ8_0, in.w8a, kOut, k);
  const WeightRef w8b = d.Weight(DType::kQ8_0, in.w8b, kOut, k);
  const WeightRef w40 = d.Weight(DType::kQ4_0, in.w40, kOut, k);
  const WeightRef wf = d.Weight(DType::kF32, in.wf, kRouter, k);
  float* x = d.Floats(in.x);
  float* x2 = d.Floats(in.x2);
  const float* a = d.Floats(in.a);
  const float* z = d.Floats(in.z);
  const float* u = d.Floats(in.u);
  const float* nw = d.Floats(in.norm_w);
  float* y = d.Zeros(size);
  float* y2 = d.Zeros(size);
  const Mat ym{y, n, k};
  std::vector<std::vector<float>> outs;
  auto product = [&](const WeightRef& w, const float* from, int64_t out_rows) {
    float* o = d.Zeros(static_cast<size_t>(n * out_rows));
    be.MatMul(w, ConstMat(from, n, k), Mat{o, n, out_rows});
    outs.push_back(d.Read(o, static_cast<size_t>(n * out_rows)));
  };
  const float eps = 1e-5f;

  // 1. A norm, then products of every path on its rows (K family, a pair of
  //    Q8_0 weights of one shape, F32, Q4_0).
  be.RmsNorm(ConstMat(x, n, k), nw, eps, ym);
  product(wk, y, kOut);
  {
    float* o2 = d.Zeros(static_cast<size_t>(n * kOut));
    float* o3 = d.Zeros(static_cast<size_t>(n * kOut));
    be.MatMulPair(w8a, w8b, ym, Mat{o2, n, kOut}, Mat{o3, n, kOut});
    outs.push_back(d.Read(o2, static_cast<size_t>(n * kOut)));
    outs.push_back(d.Read(o3, static_cast<size_t>(n * kOut)));
  }
  product(wf, y, kRouter);
  product(w40, y, kOut);
  // 2. AddRmsNorm into the same rows.
  be.AddRmsNorm(Mat{x2, n, k}, ConstMat(a, n, k), nw, eps, ym);
  product(w6, y, kOut);
  product(w8a, y, kOut);
  outs.push_back(d.Read(x2, size));
  // 3. Another op overwrites the normed rows.
  be.Copy(ConstMat(z, n, k), ym);
  product(wk, y, kOut);
  product(w8a, y, kOut);
  // 4. A copy from the host overwrites them.
  be.RmsNorm(ConstMat(x, n, k), nw, eps, ym);
  product(wk, y, kOut);
  REQUIRE(be.CopyToBackend(y, in.host.data(), size * sizeof(float)).ok());
  product(wk, y, kOut);
  product(w8a, y, kOut);
  // 5. SwiGLU is written into them (SwiGluMatMul's gate).
  be.RmsNorm(ConstMat(x, n, k), nw, eps, ym);
  {
    float* o = d.Zeros(static_cast<size_t>(n * kOut));
    be.SwiGluMatMul(wk, ym, ConstMat(u, n, k), Mat{o, n, kOut});
    outs.push_back(d.Read(o, static_cast<size_t>(n * kOut)));
  }
  product(wk, y, kOut);
  product(w8b, y, kOut);
  // 6. A second norm into other rows: products of both.
  be.RmsNorm(ConstMat(x, n, k), nw, eps, ym);
  be.RmsNorm(ConstMat(x2, n, k), nw, eps, Mat{y2, n, k});
  product(wk, y, kOut);
  product(w8a, y2, kOut);
  product(wk, y2, kOut);
  // 7. The router's top-k writes its weights over the normed rows.
  be.RmsNorm(ConstMat(x, n, k), nw, eps, ym);
  {
    float* logits = d.Zeros(static_cast<size_t>(n * kRouter));
    be.MatMul(wf, ym, Mat{logits, n, kRouter});
    int32_t* ids = d.Ints(std::vector<int32_t>(static_cast<size_t>(n * kPicks), 0));
    be.RouterTopK(ConstMat(logits, n, kRouter), kPicks, RouterGating{}, ids, y);
    outs.push_back(d.Read(logits, static_cast<size_t>(n * kRouter)));
  }
  product(wk, y, kOut);
  product(w8a, y, kOut);
  // 8. One row: the picked experts' gate and up by ids from the normed row,
  //    then a product of it again.
  if (n == 1) {
    be.RmsNorm(ConstMat(x, n, k), nw, eps, ym);
    std::vector<WeightRef> ta = {d.Weight(k4, in.t0, kOut, k), d.Weight(k4, in.t1, kOut, k)};
    std::vector<WeightRef> tb = {d.Weight(k4, in.t2, kOut, k), d.Weight(k4, in.t3, kOut, k)};
    auto table_a = be.MakeWeightTable(ta);
    auto table_b = be.MakeWeightTable(tb);
    REQUIRE(table_a.ok());
    REQUIRE(table_b.ok());
    const int32_t* ids = d.Ints({1, 0, 1});
    float* ga = d.Zeros(3 * kOut);
    float* gb = d.Zeros(3 * kOut);
    be.MatMulPairById(*table_a, *table_b, ids, ym, Mat{ga, 3, kOut}, Mat{gb, 3, kOut});
    outs.push_back(d.Read(ga, 3 * kOut));
    outs.push_back(d.Read(gb, 3 * kOut));
    float* one = d.Zeros(2 * kOut);
    be.MatMulById(*table_b, ids, ym, Mat{one, 2, kOut});
    outs.push_back(d.Read(one, 2 * kOut));
    product(wk, y, kOut);
  }
  outs.push_back(d.Read(y, size));
  outs.push_back(d.Read(y2, size));
  return outs;
}

}  // namespace

TEST_CASE("every backend's products after a norm give the CPU's bits, also after the rows change",
          "[backend]") {
  const std::vector<std::string> names = EveryBackendName();
  CpuBackend cpu(1);
  struct Shape {
    int64_t rows, cols;
  };
  uint32_t seed = 39000;
  // One row of 4096 (16 super-blocks, 128 Q8_0 blocks: each warp of the CUDA
  // norm quantizes several), small batches up to 8 rows (kept quantized),
  // 9 rows (not), and rows no K-family weight fits (not).
  for (const Shape s : {Shape{1, 4096}, Shape{1, 512}, Shape{3, 512}, Shape{8, 256},
                        Shape{9, 512}, Shape{1, 96}, Shape{2, 4 * 256 + 32}}) {
    const Inputs in = MakeInputs(s.rows, s.cols, seed += 100);
    const std::vector<std::vector<float>> want = RunSequence(cpu, in);
    for (const std::string& name : names) {
      INFO(name << " " << s.rows << " x " << s.cols);
      auto be = CreateBackend(name);
      REQUIRE(be.ok());
      const std::vector<std::vector<float>> got = RunSequence(**be, in);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("output " << i);
        REQUIRE(got[i].size() == want[i].size());
        CHECK(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)) == 0);
      }
    }
  }
}

}  // namespace odmoe::test
