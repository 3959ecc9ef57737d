// The fused ops that stand for a sequence of plain ops (AddRmsNorm, RopePair,
// MatMulPair) give exactly that sequence's bits on every backend this machine
// offers: rows of every staging path (float4 rows, odd widths, rows past the
// shared-memory stage), weights of one or two shapes and types, and the CPU
// reference's bits.
#include <cstring>
#include <string>
#include <vector>

#include "backends/backend_registry.h"
#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "op_cases.h"
#include "reference_ops.h"

namespace odmoe::test {

TEST_CASE("every backend's AddRmsNorm is Add then RmsNorm, bit for bit", "[backend]") {
  const std::vector<std::string> names = EveryBackendName();
  CpuBackend cpu(1);
  struct Shape {
    int64_t rows, cols;
  };
  uint32_t seed = 36000;
  for (const Shape s : {Shape{1, 4096}, Shape{3, 64}, Shape{2, 37}, Shape{1, 12288}}) {
    const size_t n = static_cast<size_t>(s.rows * s.cols);
    const std::vector<float> x = ref::RandomFloats(n, ++seed, -4.0f, 4.0f);
    const std::vector<float> a = ref::RandomFloats(n, ++seed, -4.0f, 4.0f);
    const std::vector<float> w = ref::RandomFloats(static_cast<size_t>(s.cols), ++seed, 0.5f, 1.5f);
    // The reference: the two plain ops on the CPU.
    std::vector<float> sum(n), want(n);
    cpu.Add(ConstMat(x.data(), s.rows, s.cols), ConstMat(a.data(), s.rows, s.cols),
            Mat{sum.data(), s.rows, s.cols});
    cpu.RmsNorm(ConstMat(sum.data(), s.rows, s.cols), w.data(), 1e-5f,
                Mat{want.data(), s.rows, s.cols});
    for (const std::string& name : names) {
      INFO(name << " " << s.rows << " x " << s.cols);
      auto be = CreateBackend(name);
      REQUIRE(be.ok());
      DeviceData d(**be);
      float* xd = d.Floats(x);
      float* yd = d.Zeros(n);
      (*be)->AddRmsNorm(Mat{xd, s.rows, s.cols}, ConstMat(d.Floats(a), s.rows, s.cols),
                        d.Floats(w), 1e-5f, Mat{yd, s.rows, s.cols});
      const std::vector<float> got_x = d.Read(xd, n), got_y = d.Read(yd, n);
      CHECK(std::memcmp(got_x.data(), sum.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(got_y.data(), want.data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("every backend's RopePair is two Ropes, bit for bit", "[backend]") {
  // q of 8 heads and k of 2 (grouped-query attention), plain and YaRN, the
  // halves and interleaved layouts, part of a head rotated at an offset.
  const std::vector<std::string> names = EveryBackendName();
  const int head_dim = 64;
  const int64_t rows = 3;
  const std::vector<int32_t> pos = {0, 7, 1000};
  uint32_t seed = 38000;
  for (const bool yarn : {false, true}) {
    RopeParams rope;
    rope.dims = yarn ? 32 : 64;
    rope.offset = yarn ? 16 : 0;
    rope.mode = yarn ? RopeMode::kHalf : RopeMode::kInterleaved;
    if (yarn) {
      rope.scaling.type = RopeScalingType::kYarn;
      rope.scaling.factor = 4.0f;
      rope.scaling.original_context = 512;
      rope.scaling.attention_factor = 1.1f;
    }
    const std::vector<float> q = ref::RandomFloats(rows * 8 * head_dim, ++seed, -2, 2);
    const std::vector<float> k = ref::RandomFloats(rows * 2 * head_dim, ++seed, -2, 2);
    for (const std::string& name : names) {
      INFO(name << (yarn ? " yarn" : " plain"));
      auto be = CreateBackend(name);
      REQUIRE(be.ok());
      DeviceData d(**be);
      float* q1 = d.Floats(q);
      float* k1 = d.Floats(k);
      float* q2 = d.Floats(q);
      float* k2 = d.Floats(k);
      const int32_t* p = d.Ints(pos);
      (*be)->Rope(Mat{q1, rows, 8 * head_dim}, head_dim, p, rope);
      (*be)->Rope(Mat{k1, rows, 2 * head_dim}, head_dim, p, rope);
      (*be)->RopePair(Mat{q2, rows, 8 * head_dim}, Mat{k2, rows, 2 * head_dim}, head_dim, p, rope);
      const size_t nq = q.size(), nk = k.size();
      const std::vector<float> a = d.Read(q1, nq), b = d.Read(q2, nq);
      const std::vector<float> c = d.Read(k1, nk), e = d.Read(k2, nk);
      CHECK(std::memcmp(a.data(), b.data(), nq * sizeof(float)) == 0);
      CHECK(std::memcmp(c.data(), e.data(), nk * sizeof(float)) == 0);
      CHECK(std::memcmp(a.data(), q.data(), nq * sizeof(float)) != 0);  // it did rotate
    }
  }
}

TEST_CASE("every backend's MatMulPair is two MatMuls, bit for bit", "[backend]") {
  // Weights of one type and shape (k and v; one launch on the GPU), of one
  // activation type and different shapes, of different activation types.
  const std::vector<std::string> names = EveryBackendName();
  CpuBackend cpu(1);
  struct Pair {
    DType a, b;
    int64_t ob;
  };
  const int64_t k = 512, oa = 33;
  uint32_t seed = 37000;
  for (const Pair p : {Pair{DType::kQ8_0, DType::kQ8_0, oa}, Pair{DType::kQ4_K, DType::kQ4_K, oa},
                       Pair{DType::kQ6_K, DType::kQ6_K, oa}, Pair{DType::kQ4_K, DType::kQ4_K, 17},
                       Pair{DType::kQ4_K, DType::kQ8_0, oa}, Pair{DType::kF16, DType::kF16, oa}}) {
    const std::vector<uint8_t> wa = RandomWeight(p.a, oa, k, ++seed);
    const std::vector<uint8_t> wb = RandomWeight(p.b, p.ob, k, ++seed);
    for (const int64_t n : {1, 3, 12}) {
      const std::vector<float> x = ref::RandomFloats(static_cast<size_t>(n * k), ++seed, -3, 3);
      // The reference: two plain MatMuls on the CPU.
      std::vector<float> want_a(static_cast<size_t>(n * oa)), want_b(static_cast<size_t>(n * p.ob));
      {
        DeviceData c(cpu);
        cpu.MatMul(c.Weight(p.a, wa, oa, k), ConstMat(x.data(), n, k), Mat{want_a.data(), n, oa});
        cpu.MatMul(c.Weight(p.b, wb, p.ob, k), ConstMat(x.data(), n, k),
                   Mat{want_b.data(), n, p.ob});
      }
      for (const std::string& name : names) {
        INFO(name << " " << Traits(p.a).name << " + " << Traits(p.b).name << " of " << p.ob
                  << ", n=" << n);
        auto be = CreateBackend(name);
        REQUIRE(be.ok());
        DeviceData d(**be);
        float* ya = d.Zeros(want_a.size());
        float* yb = d.Zeros(want_b.size());
        (*be)->MatMulPair(d.Weight(p.a, wa, oa, k), d.Weight(p.b, wb, p.ob, k),
                          ConstMat(d.Floats(x), n, k), Mat{ya, n, oa}, Mat{yb, n, p.ob});
        const std::vector<float> got_a = d.Read(ya, want_a.size());
        const std::vector<float> got_b = d.Read(yb, want_b.size());
        CHECK(std::memcmp(got_a.data(), want_a.data(), want_a.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(got_b.data(), want_b.data(), want_b.size() * sizeof(float)) == 0);
      }
    }
  }
}

}  // namespace odmoe::test
