// Products by ids and CombineExperts (backend.h, "Experts picked by ids") on
// every backend this machine offers: each gives exactly the bits of the plain
// ops it stands for, on the same backend and on the CPU reference, whatever
// the weight type, with repeated ids, a shared or per-slice activation row,
// and ids outside the table (never read out of bounds).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/expert_order.h"
#include "backends/backend_registry.h"
#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "op_cases.h"
#include "reference_ops.h"

namespace odmoe::test {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr int kEntries = 5;
constexpr int64_t kCols = 512;  // a multiple of every block size
constexpr int64_t kOut = 33;

/// kEntries random weights of `type` (seeded), as bytes.
std::vector<std::vector<uint8_t>> Entries(DType type, int64_t rows, uint32_t seed) {
  std::vector<std::vector<uint8_t>> e;
  for (int i = 0; i < kEntries; ++i) e.push_back(RandomWeight(type, rows, kCols, seed + i));
  return e;
}

/// The weights loaded on `d`'s backend, and their table.
struct Loaded {
  std::vector<WeightRef> refs;
  WeightTable table;
};
Loaded Load(Backend& be, DeviceData& d, DType type,
            const std::vector<std::vector<uint8_t>>& bytes, int64_t rows, int64_t cols) {
  Loaded l;
  for (const auto& b : bytes) l.refs.push_back(d.Weight(type, b, rows, cols));
  auto t = be.MakeWeightTable(l.refs);
  REQUIRE(t.ok());
  l.table = std::move(t).value();
  return l;
}

/// Row j of y = x row (shared: 0, else j) times entries[ids[j]], by plain
/// MatMuls on `be`.
std::vector<float> PlainProducts(Backend& be, DType type,
                                 const std::vector<std::vector<uint8_t>>& bytes,
                                 const std::vector<int32_t>& ids, const std::vector<float>& x,
                                 int64_t cols, int64_t out, bool shared) {
  DeviceData d(be);
  std::vector<WeightRef> refs;
  for (const auto& b : bytes) refs.push_back(d.Weight(type, b, out, cols));
  const float* xd = d.Floats(x);
  const int64_t n = static_cast<int64_t>(ids.size());
  float* y = d.Zeros(static_cast<size_t>(n * out));
  for (int64_t j = 0; j < n; ++j) {
    be.MatMul(refs[static_cast<size_t>(ids[static_cast<size_t>(j)])],
              ConstMat(xd + (shared ? 0 : j) * cols, 1, cols), Mat{y + j * out, 1, out});
  }
  return d.Read(y, static_cast<size_t>(n * out));
}

bool Accepts(Backend& be, DType type) {
  std::vector<uint8_t> bytes(RowBytes(type, kCols), 0);
  return be.LoadWeight(MatrixView(type, bytes.data(), 1, kCols)).ok();
}

const DType kTypes[] = {DType::kQ4_K, DType::kQ6_K, DType::kQ3_K, DType::kIQ4_XS, DType::kQ8_0,
                        DType::kQ4_0, DType::kQ5_1, DType::kMXFP4, DType::kF16, DType::kF32};

}  // namespace

TEST_CASE("every backend's MatMulById gives the plain products' bits", "[backend]") {
  CpuBackend cpu(2);
  const std::vector<int32_t> ids = {3, 0, 3, 4, 1};  // a repeat, unsorted
  const int64_t n = static_cast<int64_t>(ids.size());
  uint32_t seed = 31000;
  for (const std::string& name : EveryBackendName()) {
    auto be = CreateBackend(name);
    REQUIRE(be.ok());
    for (DType type : kTypes) {
      if (!Accepts(**be, type)) continue;
      const auto bytes = Entries(type, kOut, seed += 10);
      const std::vector<float> x = ref::RandomFloats(n * kCols, ++seed, -3.0f, 3.0f);
      for (bool shared : {true, false}) {
        INFO(name << " " << Traits(type).name << (shared ? " shared x" : " x per slice"));
        DeviceData d(**be);
        const Loaded l = Load(**be, d, type, bytes, kOut, kCols);
        float* y = d.Zeros(static_cast<size_t>(n * kOut));
        (*be)->MatMulById(l.table, d.Ints(ids), ConstMat(d.Floats(x), shared ? 1 : n, kCols),
                          Mat{y, n, kOut});
        const std::vector<float> got = d.Read(y, static_cast<size_t>(n * kOut));
        CHECK(SameBits(got, PlainProducts(**be, type, bytes, ids, x, kCols, kOut, shared)));
        CHECK(SameBits(got, PlainProducts(cpu, type, bytes, ids, x, kCols, kOut, shared)));
      }
    }
  }
}

TEST_CASE("MatMulById: wide float weights, entries at any even address, 70000 slices",
          "[backend]") {
  // The paths the other cases leave: float rows past the one-row kernel's
  // limit, a table whose entries share no 16-byte alignment (the K-family
  // decode kernel then stages rows), and more slices than one grid holds.
  CpuBackend cpu(2);
  uint32_t seed = 35000;
  for (const std::string& name : EveryBackendName()) {
    auto be = CreateBackend(name);
    REQUIRE(be.ok());
    for (DType type : {DType::kF16, DType::kF32}) {
      INFO(name << " " << Traits(type).name << " 1100 rows");
      const int64_t out = 1100, cols = 64;
      std::vector<std::vector<uint8_t>> bytes;
      for (int i = 0; i < kEntries; ++i) bytes.push_back(RandomWeight(type, out, cols, ++seed));
      const std::vector<int32_t> ids = {4, 2, 2};
      const std::vector<float> x = ref::RandomFloats(cols, ++seed, -2.0f, 2.0f);
      DeviceData d(**be);
      const Loaded l = Load(**be, d, type, bytes, out, cols);
      float* y = d.Zeros(static_cast<size_t>(3 * out));
      (*be)->MatMulById(l.table, d.Ints(ids), ConstMat(d.Floats(x), 1, cols), Mat{y, 3, out});
      CHECK(SameBits(d.Read(y, static_cast<size_t>(3 * out)),
                     PlainProducts(cpu, type, bytes, ids, x, cols, out, true)));
    }
    for (DType type : {DType::kQ6_K, DType::kQ3_K, DType::kQ4_K}) {
      INFO(name << " " << Traits(type).name << " entries at even offsets");
      const auto bytes = Entries(type, kOut, seed += 10);
      const size_t wb = bytes[0].size();
      // One buffer: entry e at 16 * e * (wb / 16 + 1) + 2 + 4 * e bytes.
      std::vector<uint8_t> packed(kEntries * (wb + 64), 0);
      std::vector<size_t> at;
      for (int e = 0; e < kEntries; ++e) {
        at.push_back(16 * static_cast<size_t>(e) * (wb / 16 + 1) + 2 + 4 * static_cast<size_t>(e));
        std::memcpy(packed.data() + at.back(), bytes[static_cast<size_t>(e)].data(), wb);
      }
      DeviceData d(**be);
      auto* base = reinterpret_cast<uint8_t*>(d.Floats(std::vector<float>(packed.size() / 4 + 1)));
      REQUIRE((*be)->CopyToBackend(base, packed.data(), packed.size()).ok());
      std::vector<WeightRef> refs;
      for (size_t a : at) refs.push_back(WeightRef{type, base + a, kOut, kCols});
      auto table = (*be)->MakeWeightTable(refs);
      REQUIRE(table.ok());
      const std::vector<int32_t> ids = {1, 3, 0, 4, 2};
      const std::vector<float> x = ref::RandomFloats(kCols, ++seed, -3.0f, 3.0f);
      float* y = d.Zeros(5 * kOut);
      (*be)->MatMulById(*table, d.Ints(ids), ConstMat(d.Floats(x), 1, kCols), Mat{y, 5, kOut});
      CHECK(SameBits(d.Read(y, 5 * kOut),
                     PlainProducts(cpu, type, bytes, ids, x, kCols, kOut, true)));
    }
    {
      INFO(name << " 70000 slices");
      const int64_t n = 70000, out = 2, cols = 32;
      std::vector<std::vector<uint8_t>> bytes;
      for (int i = 0; i < kEntries; ++i) bytes.push_back(RandomWeight(DType::kQ8_0, out, cols, ++seed));
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) ids[static_cast<size_t>(j)] = static_cast<int32_t>((j * 7 + j / 3) % kEntries);
      const std::vector<float> x = ref::RandomFloats(n * cols, ++seed, -3.0f, 3.0f);
      DeviceData d(**be);
      const Loaded l = Load(**be, d, DType::kQ8_0, bytes, out, cols);
      float* y = d.Zeros(static_cast<size_t>(n * out));
      (*be)->MatMulById(l.table, d.Ints(ids), ConstMat(d.Floats(x), n, cols), Mat{y, n, out});
      CHECK(SameBits(d.Read(y, static_cast<size_t>(n * out)),
                     PlainProducts(cpu, DType::kQ8_0, bytes, ids, x, cols, out, false)));
    }
  }
}

TEST_CASE("every backend's MatMulPairById and SwiGluMatMulById give the plain ops' bits",
          "[backend]") {
  CpuBackend cpu(2);
  const std::vector<int32_t> ids = {2, 4, 0};
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t n_ff = 512;  // the down products' columns
  uint32_t seed = 32000;
  struct Pair {
    DType a, b;
  };
  for (const std::string& name : EveryBackendName()) {
    auto be = CreateBackend(name);
    REQUIRE(be.ok());
    // Same activation type (one quantization; of one shape too: one launch on
    // the GPU), different types, floats.
    for (const Pair p : {Pair{DType::kQ4_K, DType::kQ4_K}, Pair{DType::kQ6_K, DType::kQ6_K},
                         Pair{DType::kQ8_0, DType::kQ4_0}, Pair{DType::kQ8_0, DType::kQ8_0},
                         Pair{DType::kQ4_K, DType::kQ8_0}, Pair{DType::kF16, DType::kF16}}) {
      if (!Accepts(**be, p.a) || !Accepts(**be, p.b)) continue;
      for (const int64_t ob : {kOut, kOut + 2}) {
        INFO(name << " pair " << Traits(p.a).name << " + " << Traits(p.b).name << " of " << ob);
        const auto ba = Entries(p.a, kOut, seed += 10);
        const auto bb = Entries(p.b, ob, seed += 10);
        const std::vector<float> x = ref::RandomFloats(kCols, ++seed, -3.0f, 3.0f);
        DeviceData d(**be);
        const Loaded la = Load(**be, d, p.a, ba, kOut, kCols);
        const Loaded lb = Load(**be, d, p.b, bb, ob, kCols);
        float* ya = d.Zeros(static_cast<size_t>(n * kOut));
        float* yb = d.Zeros(static_cast<size_t>(n * ob));
        (*be)->MatMulPairById(la.table, lb.table, d.Ints(ids), ConstMat(d.Floats(x), 1, kCols),
                              Mat{ya, n, kOut}, Mat{yb, n, ob});
        CHECK(SameBits(d.Read(ya, static_cast<size_t>(n * kOut)),
                       PlainProducts(cpu, p.a, ba, ids, x, kCols, kOut, true)));
        CHECK(SameBits(d.Read(yb, static_cast<size_t>(n * ob)),
                       PlainProducts(cpu, p.b, bb, ids, x, kCols, ob, true)));
      }
    }
    for (DType type : {DType::kQ6_K, DType::kQ8_0, DType::kIQ4_XS, DType::kF32}) {
      if (!Accepts(**be, type)) continue;
      INFO(name << " SwiGluMatMulById " << Traits(type).name);
      std::vector<std::vector<uint8_t>> bytes;
      for (int i = 0; i < kEntries; ++i) bytes.push_back(RandomWeight(type, kOut, n_ff, ++seed));
      const std::vector<float> g = ref::RandomFloats(n * n_ff, ++seed, -6.0f, 6.0f);
      const std::vector<float> u = ref::RandomFloats(n * n_ff, ++seed, -3.0f, 3.0f);
      std::vector<float> act(g.size());
      cpu.SwiGlu(ConstMat(g.data(), n, n_ff), ConstMat(u.data(), n, n_ff),
                 Mat{act.data(), n, n_ff});
      DeviceData d(**be);
      const Loaded l = Load(**be, d, type, bytes, kOut, n_ff);
      float* gd = d.Floats(g);
      float* y = d.Zeros(static_cast<size_t>(n * kOut));
      (*be)->SwiGluMatMulById(l.table, d.Ints(ids), Mat{gd, n, n_ff},
                              ConstMat(d.Floats(u), n, n_ff), Mat{y, n, kOut});
      CHECK(SameBits(d.Read(gd, g.size()), act));
      CHECK(SameBits(d.Read(y, static_cast<size_t>(n * kOut)),
                     PlainProducts(cpu, type, bytes, ids, act, n_ff, kOut, false)));
    }
  }
}

TEST_CASE("every backend's CombineExperts is ScatterAddScaled from zeros in ascending id order",
          "[backend]") {
  // What the plan's path computes (LocalExpertExecutor before routing on the
  // backend): out = 0, then one ScatterAddScaled per expert, ascending id.
  const int k = 3;
  const int64_t rows = 4, cols = 300;
  const std::vector<int32_t> ids = {5, 1, 3, /**/ 0, 7, 2, /**/ 6, 6, 1, /**/ 2, 1, 0};
  const std::vector<float> w = ref::RandomFloats(rows * k, 33001, 0.0f, 1.0f);
  std::vector<float> ys = ref::RandomFloats(rows * k * cols, 33002, -5.0f, 5.0f);
  ys[7] = -0.0f;  // 0 + w * -0 stays +0 only as an addition to zero does
  CpuBackend cpu(1);
  std::vector<float> want(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t t = 0; t < rows; ++t) {
    const int32_t row = static_cast<int32_t>(t);
    for (int j = NextExpertSlot(&ids[t * k], k, -1); j >= 0; j = NextExpertSlot(&ids[t * k], k, j)) {
      const size_t s = static_cast<size_t>(t * k + j);
      cpu.ScatterAddScaled(ConstMat(&ys[s * cols], 1, cols), &row, &w[s],
                           Mat{want.data(), rows, cols});
    }
  }
  for (const std::string& name : EveryBackendName()) {
    INFO(name);
    auto be = CreateBackend(name);
    REQUIRE(be.ok());
    DeviceData d(**be);
    float* out = d.Floats(std::vector<float>(static_cast<size_t>(rows * cols), 9.0f));
    (*be)->CombineExperts(ConstMat(d.Floats(ys), rows * k, cols), d.Ints(ids), d.Floats(w), k,
                          Mat{out, rows, cols});
    CHECK(SameBits(d.Read(out, static_cast<size_t>(rows * cols)), want));
  }
}

TEST_CASE("NextExpertSlot: ascending ids, equal ids in slot order, every slot once", "[backend]") {
  const std::vector<int32_t> ids = {4, 1, 4, 0, 1, 9};
  std::vector<int> order;
  for (int j = NextExpertSlot(ids.data(), 6, -1); j >= 0; j = NextExpertSlot(ids.data(), 6, j)) {
    order.push_back(j);
  }
  CHECK(order == std::vector<int>{3, 1, 4, 0, 2, 5});
  CHECK(NextExpertSlot(ids.data(), 1, -1) == 0);
  CHECK(NextExpertSlot(ids.data(), 1, 0) == -1);
}

TEST_CASE("products by ids never read outside the table, and tables are checked", "[backend]") {
  const std::vector<int32_t> ids = {1, 7, -1, 4};  // 7 and -1 are outside 5 entries
  const int64_t n = static_cast<int64_t>(ids.size());
  const auto bytes = Entries(DType::kQ4_K, kOut, 34000);
  const std::vector<float> x = ref::RandomFloats(kCols, 34100, -3.0f, 3.0f);
  CpuBackend cpu(1);
  const std::vector<float> want =
      PlainProducts(cpu, DType::kQ4_K, bytes, {1, 0, 0, 4}, x, kCols, kOut, true);
  for (const std::string& name : EveryBackendName()) {
    INFO(name);
    auto be = CreateBackend(name);
    REQUIRE(be.ok());
    DeviceData d(**be);
    const Loaded l = Load(**be, d, DType::kQ4_K, bytes, kOut, kCols);
    float* y = d.Zeros(static_cast<size_t>(n * kOut));
    (*be)->MatMulById(l.table, d.Ints(ids), ConstMat(d.Floats(x), 1, kCols), Mat{y, n, kOut});
    const std::vector<float> got = d.Read(y, static_cast<size_t>(n * kOut));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t o = 0; o < kOut; ++o) {
        const float v = got[static_cast<size_t>(j * kOut + o)];
        if (j == 0 || j == 3) {
          CHECK(std::memcmp(&v, &want[static_cast<size_t>(j * kOut + o)], sizeof v) == 0);
        } else {  // left unwritten, or NaN
          CHECK((v == 0.0f || std::isnan(v)));
        }
      }
    }
    // Tables: not empty, one type and shape.
    CHECK(!(*be)->MakeWeightTable({}).ok());
    std::vector<WeightRef> mixed = l.refs;
    mixed[2].rows -= 1;
    CHECK(!(*be)->MakeWeightTable(mixed).ok());
    mixed = l.refs;
    mixed[1].type = DType::kQ6_K;
    CHECK(!(*be)->MakeWeightTable(mixed).ok());
  }
}

}  // namespace odmoe::test
