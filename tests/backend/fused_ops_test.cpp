// The fused ops that stand for a sequence of plain ops (AddRmsNorm) give
// exactly that sequence's bits on every backend this machine offers: rows of
// every staging path (float4 rows, odd widths, rows past the shared-memory
// stage), and the CPU reference's bits.
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
  std::vector<std::string> names = {"cpu", "cpu:3"};
  for (const std::string& n : AvailableBackends()) {
    if (n != "cpu") names.push_back(n);
  }
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

}  // namespace odmoe::test
