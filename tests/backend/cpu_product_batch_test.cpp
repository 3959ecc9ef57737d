// CpuMatMulBatch (MatMulPair, MatMulById, MatMulPairById on the CPU): one
// quantization of x and one parallel loop over every product's rows, with
// chunk boundaries anywhere inside a product (interleaved groups, the rows
// after them, row-order weights), gives each product exactly the bits of its
// own MatMul, for any thread count.
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "op_cases.h"
#include "reference_ops.h"

namespace odmoe::test {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// 40 groups of 16 rows and 3 rows after them; wide enough that a batch of
// five such products splits into several chunks on 3 threads (the chunks'
// minimum work is ~256k elements, one unit of 4 rows here is 16k).
constexpr int64_t kRows = 16 * 40 + 3;
constexpr int64_t kCols = 4096;
constexpr int kEntries = 5;

TEST_CASE("CPU batches of products split anywhere give every product its own MatMul's bits",
          "[backend][cpu]") {
  CpuBackend one(1);  // the reference: each product alone, on one thread
  const std::vector<int32_t> ids = {3, 0, 4, 3, 1, 2, 9};  // a repeat, unsorted, one outside
  const int64_t slices = static_cast<int64_t>(ids.size());
  uint32_t seed = 52000;
  for (DType type :
       {DType::kQ4_K, DType::kQ6_K, DType::kIQ4_XS, DType::kQ8_0, DType::kQ5_0, DType::kF16}) {
    std::vector<std::vector<uint8_t>> bytes;
    for (int i = 0; i < kEntries; ++i) bytes.push_back(RandomWeight(type, kRows, kCols, ++seed));
    const std::vector<float> x = ref::RandomFloats(slices * kCols, ++seed, -3.0f, 3.0f);
    // want[e][j]: entry e times x row j (row 0 is also the shared row).
    std::vector<std::vector<std::vector<float>>> want(kEntries);
    {
      DeviceData d(one);
      for (int e = 0; e < kEntries; ++e) {
        const WeightRef w = d.Weight(type, bytes[static_cast<size_t>(e)], kRows, kCols);
        for (int64_t j = 0; j < slices; ++j) {
          std::vector<float> y(kRows);
          one.MatMul(w, ConstMat(x.data() + j * kCols, 1, kCols), Mat{y.data(), 1, kRows});
          want[static_cast<size_t>(e)].push_back(y);
        }
      }
    }
    for (const auto& [threads, repack] : {std::pair{2, true}, {3, true}, {3, false}}) {
      // ODMOE_CPU_REPACK=0: K-family weights as views in row order.
      if (!repack) setenv("ODMOE_CPU_REPACK", "0", 1);
      CpuBackend be(threads);
      if (!repack) unsetenv("ODMOE_CPU_REPACK");
      DeviceData d(be);
      std::vector<WeightRef> refs;
      for (const auto& b : bytes) refs.push_back(d.Weight(type, b, kRows, kCols));
      auto table = be.MakeWeightTable(refs);
      REQUIRE(table.ok());
      for (bool shared : {true, false}) {
        INFO(Traits(type).name << ", " << threads << " threads, repack " << repack << ", "
                               << (shared ? "shared x" : "x per slice"));
        const float nan = std::nanf("");
        std::vector<float> ya(static_cast<size_t>(slices * kRows), nan);
        std::vector<float> yb(ya.size(), nan);
        be.MatMulPairById(*table, *table, ids.data(),
                          ConstMat(x.data(), shared ? 1 : slices, kCols),
                          Mat{ya.data(), slices, kRows}, Mat{yb.data(), slices, kRows});
        std::vector<float> y(ya.size(), nan);
        be.MatMulById(*table, ids.data(), ConstMat(x.data(), shared ? 1 : slices, kCols),
                      Mat{y.data(), slices, kRows});
        for (int64_t j = 0; j < slices; ++j) {
          const auto row = [&](const std::vector<float>& v) {
            return std::vector<float>(v.begin() + j * kRows, v.begin() + (j + 1) * kRows);
          };
          const int32_t id = ids[static_cast<size_t>(j)];
          if (id >= kEntries) {  // outside the table: left as it was
            CHECK(std::isnan(row(ya)[0]));
            CHECK(std::isnan(row(y)[kRows - 1]));
            continue;
          }
          const std::vector<float>& w = want[static_cast<size_t>(id)][shared ? 0 : j];
          CHECK(SameBits(row(ya), w));
          CHECK(SameBits(row(yb), w));
          CHECK(SameBits(row(y), w));
        }
      }
      // MatMulPair of several rows (prefill: the tile kernels for K types).
      for (int64_t n : {1, 5}) {
        INFO(Traits(type).name << " MatMulPair, " << threads << " threads, n=" << n);
        std::vector<float> ya(static_cast<size_t>(n * kRows)), yb(ya.size());
        be.MatMulPair(refs[1], refs[2], ConstMat(x.data(), n, kCols), Mat{ya.data(), n, kRows},
                      Mat{yb.data(), n, kRows});
        std::vector<float> wa(ya.size()), wb(ya.size());
        DeviceData r(one);
        one.MatMul(r.Weight(type, bytes[1], kRows, kCols), ConstMat(x.data(), n, kCols),
                   Mat{wa.data(), n, kRows});
        one.MatMul(r.Weight(type, bytes[2], kRows, kCols), ConstMat(x.data(), n, kCols),
                   Mat{wb.data(), n, kRows});
        CHECK(SameBits(ya, wa));
        CHECK(SameBits(yb, wb));
      }
    }
  }
}

}  // namespace
}  // namespace odmoe::test
