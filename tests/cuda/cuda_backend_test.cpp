// The CUDA backend on a GPU: every op against the CPU backend bit for bit
// (RoPE to the last bit of its f32 cos/sin), MatMul's independence from the
// number of rows, the cuBLAS policy within tolerance and deterministic, the
// sticky error, and the expert arena with real copies. Where there is no
// usable GPU these cases pass with a warning (Catch2 2.x has no SKIP), and
// the first case checks what a CUDA build says on such a machine. Every
// weight type the backend computes with is covered (float, block32, K
// family), from the quantizers' output and from random block bytes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/reference_ops.h"
#include "backends/backend_registry.h"
#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "cpu_ops.h"
#include "cuda_backend.h"
#include "cuda_resources.h"
#include "cuda_slot_device.h"
#include "expert_slot_arena.h"
#include "quant_test_util.h"
#include "tensor/quant.h"

namespace odmoe {
namespace {

bool HaveGpu() {
  const absl::StatusOr<int> count = cuda::UsableDeviceCount();
  if (!count.ok()) WARN("no usable GPU, GPU case skipped: " << count.status().message());
  return count.ok();
}

std::unique_ptr<Backend> MakeCuda(const char* name) {
  auto be = CreateBackend(name);
  REQUIRE(be.ok());  // a GPU is there: creating the backend must work
  return std::move(be).value();
}

/// Buffers on one backend, uploaded from and read back to host vectors.
class Dev {
 public:
  explicit Dev(Backend& be) : be_(be) {}
  template <class T>
  T* Put(const std::vector<T>& host) {
    auto buf = be_.Allocate(host.size() * sizeof(T));
    REQUIRE(buf.ok());
    REQUIRE(be_.CopyToBackend((*buf)->data(), host.data(), host.size() * sizeof(T)).ok());
    buffers_.push_back(std::move(buf).value());
    return static_cast<T*>(buffers_.back()->data());
  }
  template <class T>
  std::vector<T> Get(const T* p, size_t n) {
    std::vector<T> out(n);
    const absl::Status st = be_.CopyToHost(out.data(), p, n * sizeof(T));
    INFO(st.ToString());
    REQUIRE(st.ok());
    return out;
  }
  WeightRef Weight(DType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
    return WeightRef{type, Put(bytes), rows, cols};
  }

 private:
  Backend& be_;
  std::vector<std::unique_ptr<BackendBuffer>> buffers_;
};

std::vector<uint8_t> RandomWeight(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> f = ref::RandomFloats(static_cast<size_t>(rows * cols), seed);
  const size_t rb = RowBytes(type, cols);
  std::vector<uint8_t> bytes(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    QuantizeRow(type, f.data() + r * cols, bytes.data() + r * rb, cols);
  return bytes;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// y = x w^T on `be` (host vectors in and out); the weight starts `offset`
/// bytes into its buffer.
std::vector<float> RunMatMul(Backend& be, DType type, const std::vector<uint8_t>& w, int64_t out,
                             int64_t k, const std::vector<float>& x, int64_t n, size_t offset = 0) {
  Dev d(be);
  std::vector<uint8_t> placed(offset, 0xee);
  placed.insert(placed.end(), w.begin(), w.end());
  WeightRef wr = d.Weight(type, placed, out, k);
  wr.data = static_cast<const uint8_t*>(wr.data) + offset;
  float* y = d.Put(std::vector<float>(static_cast<size_t>(n * out), 0.0f));
  be.MatMul(wr, ConstMat(d.Put(x), n, k), Mat{y, n, out});
  return d.Get(y, static_cast<size_t>(n * out));
}

const DType kAllTypes[] = {DType::kF32,    DType::kF16,   DType::kBF16, DType::kQ8_0,
                           DType::kQ4_0,   DType::kQ4_1,  DType::kQ5_0, DType::kQ5_1,
                           DType::kIQ4_NL, DType::kMXFP4, DType::kQ2_K, DType::kQ3_K,
                           DType::kQ4_K,   DType::kQ5_K,  DType::kQ6_K, DType::kIQ4_XS};

/// The CPU backend is the reference: it must compute with every type too.
bool CpuCanCompare(DType type) {
  const bool ok = CpuSupportsWeightType(type);
  CHECK(ok);  // a type the CPU backend lacks cannot be checked on the GPU
  return ok;
}

/// Random block bytes with finite scales, or the quantizer's output.
std::vector<uint8_t> WeightFrom(int source, DType type, int64_t rows, int64_t cols, uint32_t seed) {
  if (source == 0 || !Traits(type).quantized) return RandomWeight(type, rows, cols, seed);
  return cuda_test::RandomBlocks(type, rows * cols / Traits(type).block_elems, seed);
}

TEST_CASE("cuda: names, availability and a clear error without a GPU", "[cuda][backend]") {
  const std::vector<std::string> families = CompiledBackendFamilies();
  CHECK(std::find(families.begin(), families.end(), "cuda") != families.end());
  CHECK(CreateBackend("cuda:x").status().code() == absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> avail = AvailableBackends();
  const absl::StatusOr<int> count = cuda::UsableDeviceCount();
  CpuBackend cpu(1);
  CHECK(MakeCudaSlotDevice(cpu).status().code() == absl::StatusCode::kInvalidArgument);
  if (!count.ok()) {
    auto be = CreateBackend("cuda:0");
    REQUIRE_FALSE(be.ok());
    CHECK(be.status().code() == absl::StatusCode::kUnavailable);
    const std::string msg(be.status().message());
    CHECK(msg.find("cuda:0") != std::string::npos);
    CHECK(msg.find("no usable CUDA device") != std::string::npos);
    for (const std::string& n : avail) CHECK(n.rfind("cuda", 0) != 0);
    CHECK_FALSE(PinnedExpertStore::Create(2, 1024).ok());  // an error, not a crash
    auto fallback = CreateBackendOrFallback("cuda:0", "cpu");
    REQUIRE(fallback.ok());
    CHECK((*fallback)->name() == "cpu");
    return;
  }
  CHECK(std::find(avail.begin(), avail.end(), "cuda:0") != avail.end());
  auto beyond = CreateBackend("cuda:" + std::to_string(*count));
  CHECK(beyond.status().code() == absl::StatusCode::kUnavailable);
  auto be = MakeCuda("cuda:0");
  CHECK(be->name() == "cuda:0");
  CHECK_FALSE(be->host_memory());
  CHECK(MakeCuda("cuda:0:cublas")->name() == "cuda:0:cublas");
}

TEST_CASE("cuda MatMul gives the CPU's bits for every weight type and shape", "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  struct Shape {
    int64_t k, out, n;
  };
  uint32_t seed = 500;
  for (DType type : kAllTypes) {
    if (!CpuCanCompare(type)) continue;
    for (const Shape s :
         {Shape{32, 17, 3}, Shape{64, 5, 1}, Shape{96, 33, 17}, Shape{4096, 7, 3},
          Shape{256, 300, 40}, Shape{1184, 6, 5}, Shape{50, 9, 2}, Shape{4096, 1, 70},
          Shape{512, 33, 17}, Shape{2048, 20, 8}, Shape{1024, 5, 1}, Shape{5120, 3, 2},
          Shape{14336, 9, 1}, Shape{14336, 3, 4}, Shape{1280, 13, 1}, Shape{4352, 11, 2},
          Shape{4096, 8, 1}, Shape{2080, 60, 1}, Shape{6144, 1030, 1}}) {
      if (s.k % Traits(type).block_elems != 0) continue;
      for (int source = 0; source < (Traits(type).quantized ? 2 : 1); ++source) {
        INFO(Traits(type).name << " k=" << s.k << " out=" << s.out << " n=" << s.n
                               << (source == 0 ? " quantizer" : " random bytes"));
        const std::vector<uint8_t> w = WeightFrom(source, type, s.out, s.k, ++seed);
        const std::vector<float> x = ref::RandomFloats(s.k * s.n, ++seed, -3.0f, 3.0f);
        CHECK(SameBits(RunMatMul(*gpu, type, w, s.out, s.k, x, s.n),
                       RunMatMul(cpu, type, w, s.out, s.k, x, s.n)));
      }
    }
  }
}

TEST_CASE("cuda MatMulPair and SwiGluMatMul give the CPU's bits", "[cuda][backend]") {
  // One quantization of x for both products (same activation type), two
  // MatMuls otherwise; SwiGLU formed inside the down product's quantization.
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  struct Pair {
    DType a, b;
  };
  uint32_t seed = 7000;
  for (const Pair p : {Pair{DType::kQ4_K, DType::kQ6_K}, Pair{DType::kQ8_0, DType::kQ4_0},
                       Pair{DType::kQ4_K, DType::kQ8_0}, Pair{DType::kF16, DType::kF16}}) {
    for (const int64_t n : {1, 3, 12}) {
      INFO(Traits(p.a).name << " + " << Traits(p.b).name << " n=" << n);
      const int64_t k = 4096, oa = 33, ob = 17;
      const std::vector<uint8_t> wa = RandomWeight(p.a, oa, k, ++seed);
      const std::vector<uint8_t> wb = RandomWeight(p.b, ob, k, ++seed);
      const std::vector<float> x = ref::RandomFloats(k * n, ++seed, -3.0f, 3.0f);
      Dev d(*gpu);
      float* ya = d.Put(std::vector<float>(static_cast<size_t>(n * oa), 0.0f));
      float* yb = d.Put(std::vector<float>(static_cast<size_t>(n * ob), 0.0f));
      gpu->MatMulPair(d.Weight(p.a, wa, oa, k), d.Weight(p.b, wb, ob, k),
                      ConstMat(d.Put(x), n, k), Mat{ya, n, oa}, Mat{yb, n, ob});
      CHECK(SameBits(d.Get(ya, static_cast<size_t>(n * oa)),
                     RunMatMul(cpu, p.a, wa, oa, k, x, n)));
      CHECK(SameBits(d.Get(yb, static_cast<size_t>(n * ob)),
                     RunMatMul(cpu, p.b, wb, ob, k, x, n)));
    }
  }
  for (const DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kIQ4_XS,
                           DType::kF32}) {
    for (const int64_t n : {1, 5, 9}) {
      INFO("SwiGluMatMul " << Traits(type).name << " n=" << n);
      const int64_t k = 14336, out = 19;
      const std::vector<uint8_t> w = RandomWeight(type, out, k, ++seed);
      const std::vector<float> g = ref::RandomFloats(k * n, ++seed, -6.0f, 6.0f);
      const std::vector<float> u = ref::RandomFloats(k * n, ++seed, -3.0f, 3.0f);
      std::vector<float> act(g.size());
      cpu.SwiGlu(ConstMat(g.data(), n, k), ConstMat(u.data(), n, k), Mat{act.data(), n, k});
      Dev d(*gpu);
      float* gd = d.Put(g);
      float* y = d.Put(std::vector<float>(static_cast<size_t>(n * out), 0.0f));
      gpu->SwiGluMatMul(d.Weight(type, w, out, k), Mat{gd, n, k}, ConstMat(d.Put(u), n, k),
                        Mat{y, n, out});
      CHECK(SameBits(d.Get(gd, g.size()), act));
      CHECK(SameBits(d.Get(y, static_cast<size_t>(n * out)),
                     RunMatMul(cpu, type, w, out, k, act, n)));
    }
  }
}

TEST_CASE("cuda MatMul reads weights at any address its type allows", "[cuda][backend]") {
  // The quantized kernels stage each row with 16-byte loads: rows that start
  // anywhere in a 16-byte line (expert slices of a packed tensor) read only
  // their own bytes and give the CPU's bits.
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  uint32_t seed = 900;
  for (DType type : kAllTypes) {
    if (type == DType::kF32 || !CpuCanCompare(type)) continue;
    const size_t step = type == DType::kMXFP4 ? 1 : 2;
    for (int64_t k : {int64_t{768}, int64_t{2304}}) {
      if (k % Traits(type).block_elems != 0) continue;
      const std::vector<uint8_t> w = WeightFrom(1, type, 7, k, ++seed);
      const std::vector<float> x = ref::RandomFloats(k * 3, ++seed, -3.0f, 3.0f);
      const std::vector<float> want = RunMatMul(cpu, type, w, 7, k, x, 3);
      for (size_t offset = step; offset < 16; offset += 3 * step) {
        INFO(Traits(type).name << " k=" << k << " offset " << offset);
        CHECK(SameBits(RunMatMul(*gpu, type, w, 7, k, x, 3, offset), want));
        CHECK(SameBits(RunMatMul(*gpu, type, w, 7, k, x, 1, offset),
                       std::vector<float>(want.begin(), want.begin() + 7)));
      }
    }
  }
}

TEST_CASE("cuda MatMul rows do not depend on the rows beside them", "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  const int64_t k = 512, out = 48, n = 23;
  for (DType type : kAllTypes) {
    INFO(Traits(type).name);
    const std::vector<uint8_t> w = WeightFrom(1, type, out, k, 77);
    const std::vector<float> x = ref::RandomFloats(k * n, 78);
    const std::vector<float> all = RunMatMul(*gpu, type, w, out, k, x, n);
    for (int64_t t : {int64_t{0}, int64_t{9}, n - 1}) {
      const std::vector<float> row(x.begin() + t * k, x.begin() + (t + 1) * k);
      const std::vector<float> alone = RunMatMul(*gpu, type, w, out, k, row, 1);
      CHECK(
          SameBits(alone, std::vector<float>(all.begin() + t * out, all.begin() + (t + 1) * out)));
    }
  }
}

TEST_CASE("cuda cuBLAS policy matches the CPU within tolerance, run to run exactly",
          "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0:cublas");
  CpuBackend cpu(2);
  const int64_t k = 1024, out = 300, n = 64;  // n >= kCublasMinRows: the cuBLAS paths
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    INFO(Traits(type).name);
    const std::vector<uint8_t> w = RandomWeight(type, out, k, 91);
    const std::vector<float> x = ref::RandomFloats(k * n, 92);
    const std::vector<float> a = RunMatMul(*gpu, type, w, out, k, x, n);
    const std::vector<float> b = RunMatMul(*gpu, type, w, out, k, x, n);
    CHECK(SameBits(a, b));
    const std::vector<float> want = RunMatMul(cpu, type, w, out, k, x, n);
    CHECK(ref::Nmse(a, std::vector<double>(want.begin(), want.end())) <= 1e-10);
  }
}

TEST_CASE("cuda products after a norm read the rows it quantized, and only while unchanged",
          "[cuda][backend]") {
  // norm_quant_cache.h: a norm of up to 8 rows of a multiple of 256 floats
  // writes its output's Q8_K and Q8_0 forms; the products of exactly those
  // rows read them (a hit each) and give the CPU's bits; any other op drops
  // them. (Every-backend bits of the same sequences:
  // tests/backend/norm_then_products_test.cpp.)
  if (!HaveGpu()) return;
  auto be = MakeCuda("cuda:0");
  auto* gpu = dynamic_cast<CudaBackend*>(be.get());
  REQUIRE(gpu != nullptr);
  CpuBackend cpu(2);
  const int64_t k = 4096, out = 40;
  uint32_t seed = 7700;
  const std::vector<uint8_t> w4 = RandomWeight(DType::kQ4_K, out, k, ++seed);
  const std::vector<uint8_t> w8 = RandomWeight(DType::kQ8_0, out, k, ++seed);
  for (const int64_t n : {1, 8, 9}) {
    INFO("rows " << n);
    const std::vector<float> x = ref::RandomFloats(k * n, ++seed, -3.0f, 3.0f);
    const std::vector<float> nw = ref::RandomFloats(k, ++seed, 0.5f, 1.5f);
    std::vector<float> normed(x.size());
    cpu.RmsNorm(ConstMat(x.data(), n, k), nw.data(), 1e-5f, Mat{normed.data(), n, k});
    Dev d(*gpu);
    float* y = d.Put(std::vector<float>(x.size(), 0.0f));
    float* o = d.Put(std::vector<float>(static_cast<size_t>(n * out), 0.0f));
    const uint64_t before = gpu->norm_quant_hits();
    gpu->RmsNorm(ConstMat(d.Put(x), n, k), d.Put(nw), 1e-5f, Mat{y, n, k});
    gpu->MatMul(d.Weight(DType::kQ4_K, w4, out, k), ConstMat(y, n, k), Mat{o, n, out});
    CHECK(SameBits(d.Get(o, static_cast<size_t>(n * out)),
                   RunMatMul(cpu, DType::kQ4_K, w4, out, k, normed, n)));
    gpu->MatMul(d.Weight(DType::kQ8_0, w8, out, k), ConstMat(y, n, k), Mat{o, n, out});
    CHECK(SameBits(d.Get(o, static_cast<size_t>(n * out)),
                   RunMatMul(cpu, DType::kQ8_0, w8, out, k, normed, n)));
    CHECK(gpu->norm_quant_hits() - before == (n <= 8 ? 2u : 0u));
    // Rows changed by another op: the next product quantizes them itself.
    gpu->Copy(ConstMat(d.Put(x), n, k), Mat{y, n, k});
    gpu->MatMul(d.Weight(DType::kQ4_K, w4, out, k), ConstMat(y, n, k), Mat{o, n, out});
    CHECK(SameBits(d.Get(o, static_cast<size_t>(n * out)),
                   RunMatMul(cpu, DType::kQ4_K, w4, out, k, x, n)));
    CHECK(gpu->norm_quant_hits() - before == (n <= 8 ? 2u : 0u));
  }
  // ODMOE_CUDA_NORM_QUANT=0: the same bits, no hits.
  setenv("ODMOE_CUDA_NORM_QUANT", "0", 1);
  auto off_be = MakeCuda("cuda:0");
  unsetenv("ODMOE_CUDA_NORM_QUANT");
  auto* off = dynamic_cast<CudaBackend*>(off_be.get());
  REQUIRE(off != nullptr);
  const std::vector<float> x = ref::RandomFloats(k, ++seed, -3.0f, 3.0f);
  const std::vector<float> nw = ref::RandomFloats(k, ++seed, 0.5f, 1.5f);
  std::vector<float> normed(x.size());
  cpu.RmsNorm(ConstMat(x.data(), 1, k), nw.data(), 1e-5f, Mat{normed.data(), 1, k});
  Dev d(*off);
  float* y = d.Put(std::vector<float>(x.size(), 0.0f));
  float* o = d.Put(std::vector<float>(out, 0.0f));
  off->RmsNorm(ConstMat(d.Put(x), 1, k), d.Put(nw), 1e-5f, Mat{y, 1, k});
  off->MatMul(d.Weight(DType::kQ4_K, w4, out, k), ConstMat(y, 1, k), Mat{o, 1, out});
  CHECK(SameBits(d.Get(o, out), RunMatMul(cpu, DType::kQ4_K, w4, out, k, normed, 1)));
  CHECK(off->norm_quant_hits() == 0);
}

TEST_CASE("cuda row ops give the CPU's bits", "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu_owner = MakeCuda("cuda:0");
  Backend& gpu = *gpu_owner;
  CpuBackend cpu(2);
  Dev d(gpu);
  const int64_t n = 5, dim = 1000;
  // RmsNorm stages rows of up to 32 KiB in shared memory: rows below, at and
  // above that size.
  for (const int64_t d_norm : {int64_t{4096}, int64_t{8192}, int64_t{12288}}) {
    INFO("RmsNorm d=" << d_norm);
    const std::vector<float> xs = ref::RandomFloats(3 * d_norm, 7, -20.0f, 20.0f);
    const std::vector<float> ws = ref::RandomFloats(d_norm, 8, 0.5f, 1.5f);
    std::vector<float> want(xs.size());
    cpu.RmsNorm(ConstMat(xs.data(), 3, d_norm), ws.data(), 1e-5f, Mat{want.data(), 3, d_norm});
    float* gy = d.Put(std::vector<float>(xs.size(), 0.0f));
    gpu.RmsNorm(ConstMat(d.Put(xs), 3, d_norm), d.Put(ws), 1e-5f, Mat{gy, 3, d_norm});
    CHECK(SameBits(d.Get(gy, xs.size()), want));
  }
  const std::vector<float> a = ref::RandomFloats(n * dim, 1, -20.0f, 20.0f);
  const std::vector<float> b = ref::RandomFloats(n * dim, 2);
  const std::vector<float> w = ref::RandomFloats(dim, 3, 0.5f, 1.5f);
  auto check = [&](const char* op, auto&& run) {
    INFO(op);
    std::vector<float> host_a = a, host_b = b;
    float* da = d.Put(a);
    float* db = d.Put(b);
    run(cpu, host_a.data(), host_b.data(), w.data());
    run(gpu, da, db, d.Put(w));
    CHECK(SameBits(d.Get(da, a.size()), host_a));
    CHECK(SameBits(d.Get(db, b.size()), host_b));
  };
  check("RmsNorm", [&](Backend& be, float* x, float* y, const float* wt) {
    be.RmsNorm(ConstMat(x, n, dim), wt, 1e-5f, Mat{y, n, dim});
  });
  check("Softmax", [&](Backend& be, float* x, float*, const float*) {
    be.Softmax(Mat{x, n, dim});
  });
  check("SwiGlu", [&](Backend& be, float* g, float* u, const float*) {
    be.SwiGlu(ConstMat(g, n, dim), ConstMat(u, n, dim), Mat{g, n, dim});
  });
  check("Add", [&](Backend& be, float* x, float* y, const float*) {
    be.Add(ConstMat(x, n, dim), ConstMat(y, n, dim), Mat{y, n, dim});
  });
  check("Copy", [&](Backend& be, float* x, float* y, const float*) {
    be.Copy(ConstMat(x, n, dim), Mat{y, n, dim});
  });
  // Index ops: indices in each backend's memory.
  const std::vector<int32_t> idx = {4, 0, 0, 2};
  const std::vector<float> scale = {0.5f, -1.25f, 2.0f, 0.75f};
  int32_t* didx = d.Put(idx);
  float* dscale = d.Put(scale);
  check("GatherRows", [&](Backend& be, float* x, float* y, const float*) {
    be.GatherRows(ConstMat(x, n, dim), &be == &gpu ? didx : idx.data(), Mat{y, 4, dim});
  });
  check("ScatterAddScaled", [&](Backend& be, float* x, float* y, const float*) {
    be.ScatterAddScaled(ConstMat(x, 4, dim), &be == &gpu ? didx : idx.data(),
                        &be == &gpu ? dscale : scale.data(), Mat{y, n, dim});
  });
  // RouterTopK with ties, GetRows of every type.
  std::vector<float> logits = ref::RandomFloats(4 * 8, 4, -4.0f, 4.0f);
  logits[8 + 2] = logits[8 + 5] = 6.0f;
  std::vector<int32_t> ids(8);
  std::vector<float> wts(8);
  cpu.RouterTopK(ConstMat(logits.data(), 4, 8), 2, {false, 2.0f}, ids.data(), wts.data());
  int32_t* gids = d.Put(std::vector<int32_t>(8, -1));
  float* gw = d.Put(std::vector<float>(8, 0.0f));
  gpu.RouterTopK(ConstMat(d.Put(logits), 4, 8), 2, {false, 2.0f}, gids, gw);
  CHECK(d.Get(gids, 8) == ids);
  CHECK(SameBits(d.Get(gw, 8), wts));
  const std::vector<int32_t> rows = {3, 0, 9, 3};
  for (DType type : kAllTypes) {
    if (!CpuCanCompare(type)) continue;
    const int64_t cols = Traits(type).block_elems == 256 ? 512 : 96;
    for (int source = 0; source < (Traits(type).quantized ? 2 : 1); ++source) {
      INFO("GetRows " << Traits(type).name << (source == 0 ? " quantizer" : " random bytes"));
      const std::vector<uint8_t> table = WeightFrom(source, type, 10, cols, 5);
      std::vector<float> want(4 * cols);
      cpu.GetRows(WeightRef{type, table.data(), 10, cols}, rows.data(), Mat{want.data(), 4, cols});
      float* got = d.Put(std::vector<float>(4 * cols));
      gpu.GetRows(d.Weight(type, table, 10, cols), d.Put(rows), Mat{got, 4, cols});
      CHECK(SameBits(d.Get(got, 4 * cols), want));
    }
  }
}

TEST_CASE("cuda Attention gives the CPU's bits, and Rope agrees to the last bit",
          "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  Dev d(*gpu);
  struct Shape {
    int n_head, n_head_kv, hd, pos0;
    int64_t n;
  };
  // Decode (up to 4 query rows) keeps q and K in registers for heads up to
  // 256 wide (72: lanes of 5 and 4 elements; 272: the plain loop) and tiles
  // V in shared memory (2000 rows: 31 tiles of 64 and 17 more).
  for (const Shape s : {Shape{8, 2, 64, 0, 5}, Shape{8, 2, 64, 37, 1}, Shape{4, 4, 32, 512, 3},
                        Shape{6, 1, 128, 9, 17}, Shape{32, 8, 128, 2000, 1},
                        Shape{8, 2, 256, 130, 4}, Shape{8, 8, 72, 50, 2},
                        Shape{4, 4, 272, 20, 1}}) {
    INFO("heads " << s.n_head << "/" << s.n_head_kv << " hd " << s.hd << " pos0 " << s.pos0);
    const int64_t qc = s.n_head * s.hd, kc = s.n_head_kv * s.hd, cap = s.pos0 + s.n;
    const std::vector<float> q = ref::RandomFloats(s.n * qc, 21, -2.0f, 2.0f);
    const std::vector<float> k = ref::RandomFloats(cap * kc, 22, -2.0f, 2.0f);
    const std::vector<float> v = ref::RandomFloats(cap * kc, 23);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    std::vector<float> want(s.n * qc);
    cpu.Attention(ConstMat(q.data(), s.n, qc), ConstMat(k.data(), cap, kc),
                  ConstMat(v.data(), cap, kc), s.n_head, s.n_head_kv, s.hd, s.pos0, scale,
                  AttentionOptions{}, Mat{want.data(), s.n, qc});
    float* out = d.Put(std::vector<float>(s.n * qc));
    gpu->Attention(ConstMat(d.Put(q), s.n, qc), ConstMat(d.Put(k), cap, kc),
                   ConstMat(d.Put(v), cap, kc), s.n_head, s.n_head_kv, s.hd, s.pos0, scale,
                   AttentionOptions{}, Mat{out, s.n, qc});
    CHECK(SameBits(d.Get(out, s.n * qc), want));
  }
  RopeParams yarn;  // gpt-oss-20b's YaRN
  yarn.dims = 64;
  yarn.freq_base = 150000.0f;
  yarn.mode = RopeMode::kHalf;
  yarn.scaling = {RopeScalingType::kYarn, 32.0f, 4096, 32.0f, 1.0f, 1.3465736f, false};
  for (RopeMode mode : {RopeMode::kInterleaved, RopeMode::kHalf}) {
    for (int offset : {0, 32}) {
      const int64_t n = 5, hd = 64, cols = 4 * hd;
      std::vector<float> x = ref::RandomFloats(n * cols, 13);
      const std::vector<int32_t> pos = {0, 1, 17, 511, 3000};
      RopeParams rope;
      rope.dims = 32;
      rope.offset = offset;
      rope.mode = mode;
      float* dx = d.Put(x);
      gpu->Rope(Mat{dx, n, cols}, hd, d.Put(pos), rope);
      cpu.Rope(Mat{x.data(), n, cols}, hd, pos.data(), rope);
      // The same table key with YaRN must not reuse the plain table.
      std::vector<float> y = ref::RandomFloats(n * cols, 14);
      float* dy = d.Put(y);
      yarn.mode = mode;
      gpu->Rope(Mat{dy, n, cols}, hd, d.Put(pos), yarn);
      cpu.Rope(Mat{y.data(), n, cols}, hd, pos.data(), yarn);
      const std::vector<float> got = d.Get(dx, x.size());
      const std::vector<float> got_yarn = d.Get(dy, y.size());
      double worst = 0.0;
      for (size_t i = 0; i < x.size(); ++i) {
        worst = std::max(worst, double(std::fabs(got[i] - x[i])));
        worst = std::max(worst, double(std::fabs(got_yarn[i] - y[i])));
      }
      CHECK(worst <= 6e-7);  // a last-bit difference of cos / sin at most (|x| * 1.35 < 2)
    }
  }
}

TEST_CASE("cuda Attention with sinks, windows and V head sizes gives the CPU's bits",
          "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  Dev d(*gpu);
  struct Shape {
    int n_head, n_head_kv, hd, vd, pos0, window;
    int64_t n;
    bool sinks, v_in_k;
  };
  // gpt-oss-20b (64 heads / 8, 64 wide, window 128), DeepSeek-V2-Lite MLA
  // (16 heads over one 576-wide compressed head, V its first 512), and small
  // windows cut at row 0.
  for (const Shape s :
       {Shape{64, 8, 64, 64, 300, 128, 3, true, false},
        Shape{64, 8, 64, 64, 0, 128, 17, true, false}, Shape{8, 2, 64, 64, 3, 4, 9, false, false},
        Shape{4, 4, 48, 32, 9, 0, 5, true, false}, Shape{16, 1, 576, 512, 40, 0, 2, false, true}}) {
    INFO("heads " << s.n_head << "/" << s.n_head_kv << " hd " << s.hd << " vd " << s.vd
                  << " window " << s.window << " pos0 " << s.pos0);
    const int64_t qc = s.n_head * s.hd, kc = s.n_head_kv * s.hd, oc = s.n_head * s.vd;
    const int64_t cap = s.pos0 + s.n, vc = s.v_in_k ? kc : int64_t(s.n_head_kv) * s.vd;
    const std::vector<float> q = ref::RandomFloats(s.n * qc, 31, -2.0f, 2.0f);
    const std::vector<float> k = ref::RandomFloats(cap * kc, 32, -2.0f, 2.0f);
    const std::vector<float> v = s.v_in_k ? k : ref::RandomFloats(cap * vc, 33);
    const std::vector<float> sinks = ref::RandomFloats(s.n_head, 34, -3.0f, 6.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    AttentionOptions options;
    options.window = s.window;
    options.v_head_dim = s.vd;
    options.sinks = s.sinks ? sinks.data() : nullptr;
    std::vector<float> want(s.n * oc);
    cpu.Attention(ConstMat(q.data(), s.n, qc), ConstMat(k.data(), cap, kc),
                  ConstMat(v.data(), cap, vc), s.n_head, s.n_head_kv, s.hd, s.pos0, scale, options,
                  Mat{want.data(), s.n, oc});
    options.sinks = s.sinks ? d.Put(sinks) : nullptr;
    float* dk = d.Put(k);
    float* out = d.Put(std::vector<float>(s.n * oc));
    gpu->Attention(ConstMat(d.Put(q), s.n, qc), ConstMat(dk, cap, kc),
                   ConstMat(s.v_in_k ? dk : d.Put(v), cap, vc), s.n_head, s.n_head_kv, s.hd, s.pos0,
                   scale, options, Mat{out, s.n, oc});
    CHECK(SameBits(d.Get(out, s.n * oc), want));
  }
}

TEST_CASE("cuda SwiGluOai gives the CPU's bits", "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  Dev d(*gpu);
  const int64_t n = 7, cols = 2880;  // gpt-oss-20b's expert width
  const std::vector<float> gate = ref::RandomFloats(n * cols, 35, -20.0f, 20.0f);
  std::vector<float> up = ref::RandomFloats(n * cols, 36, -20.0f, 20.0f);
  float* dg = d.Put(gate);
  float* du = d.Put(up);
  gpu->SwiGluOai(ConstMat(dg, n, cols), ConstMat(du, n, cols), 1.702f, 7.0f, Mat{dg, n, cols});
  cpu.SwiGluOai(ConstMat(gate.data(), n, cols), ConstMat(up.data(), n, cols), 1.702f, 7.0f,
                Mat{up.data(), n, cols});
  CHECK(SameBits(d.Get(dg, gate.size()), up));
}

TEST_CASE("cuda keeps the first error and reports it from then on", "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CHECK(gpu->Allocate(SIZE_MAX / 2).status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(gpu->Synchronize().ok());  // a refused allocation does not fail the backend
  Dev d(*gpu);
  const std::vector<uint8_t> w = RandomWeight(DType::kQ8_0, 4, 64, 9);
  std::vector<uint8_t> shifted(w.size() + 1);
  std::memcpy(shifted.data() + 1, w.data(), w.size());
  const auto* base = static_cast<const uint8_t*>(static_cast<const void*>(d.Put(shifted)));
  float* y = d.Put(std::vector<float>(4));
  gpu->MatMul(WeightRef{DType::kQ8_0, base + 1, 4, 64},
              ConstMat(d.Put(ref::RandomFloats(64, 10)), 1, 64), Mat{y, 1, 4});
  const absl::Status st = gpu->Synchronize();
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(st.message()).find("misaligned") != std::string::npos);
  std::vector<float> host(4);
  CHECK(gpu->CopyToHost(host.data(), y, 16).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cuda LoadWeight uploads and rejects bad tensors", "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  std::vector<uint8_t> bytes = RandomWeight(DType::kQ4_0, 4, 64, 1);
  TensorView v;
  v.name = "w";
  v.type = DType::kQ4_0;
  v.n_dims = 2;
  v.ne = {64, 4, 1, 1};
  v.data = bytes.data();
  auto w = gpu->LoadWeight(v);
  REQUIRE(w.ok());
  CHECK(w->ref.data != bytes.data());
  CHECK(w->storage != nullptr);
  std::vector<uint8_t> back(bytes.size());
  REQUIRE(gpu->CopyToHost(back.data(), w->ref.data, back.size()).ok());
  CHECK(back == bytes);
  TensorView bad = v;
  bad.ne = {48, 4, 1, 1};
  CHECK(gpu->LoadWeight(bad).status().code() == absl::StatusCode::kInvalidArgument);
  bad = v;
  bad.data = nullptr;
  CHECK(gpu->LoadWeight(bad).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cuda LoadWeight and the alignment rules for every weight type", "[cuda][backend]") {
  if (!HaveGpu()) return;
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  for (DType type : kAllTypes) {
    INFO(Traits(type).name);
    const int64_t cols = Traits(type).block_elems == 256 ? 512 : 64;
    std::vector<uint8_t> bytes = WeightFrom(1, type, 3, cols, 31);
    TensorView v;
    v.name = "w";
    v.type = type;
    v.n_dims = 2;
    v.ne = {cols, 3, 1, 1};
    v.data = bytes.data();
    auto w = gpu->LoadWeight(v);
    REQUIRE(w.ok());
    std::vector<uint8_t> back(bytes.size());
    REQUIRE(gpu->CopyToHost(back.data(), w->ref.data, back.size()).ok());
    CHECK(back == bytes);
    if (Traits(type).block_elems > 1) {  // not a whole number of blocks
      TensorView bad = v;
      bad.ne = {cols + Traits(type).block_elems / 2, 3, 1, 1};
      CHECK(gpu->LoadWeight(bad).status().code() == absl::StatusCode::kInvalidArgument);
    }
  }
  TensorView q8k;
  std::vector<uint8_t> q8k_bytes(RowBytes(DType::kQ8_K, 256));
  q8k.name = "activations";
  q8k.type = DType::kQ8_K;
  q8k.n_dims = 2;
  q8k.ne = {256, 1, 1, 1};
  q8k.data = q8k_bytes.data();
  CHECK(gpu->LoadWeight(q8k).status().code() == absl::StatusCode::kInvalidArgument);

  // MXFP4 rows are read byte by byte: a weight at an odd device address
  // computes (and gives the CPU's bits); a K-family weight there is refused.
  if (CpuCanCompare(DType::kMXFP4)) {
    Dev d(*gpu);
    const int64_t out = 5, k = 96, n = 3;
    const std::vector<uint8_t> w = WeightFrom(1, DType::kMXFP4, out, k, 32);
    std::vector<uint8_t> shifted(w.size() + 1);
    std::memcpy(shifted.data() + 1, w.data(), w.size());
    const auto* base = static_cast<const uint8_t*>(static_cast<const void*>(d.Put(shifted)));
    const std::vector<float> x = ref::RandomFloats(k * n, 33);
    float* y = d.Put(std::vector<float>(n * out));
    gpu->MatMul(WeightRef{DType::kMXFP4, base + 1, out, k}, ConstMat(d.Put(x), n, k),
                Mat{y, n, out});
    CHECK(SameBits(d.Get(y, n * out), RunMatMul(cpu, DType::kMXFP4, w, out, k, x, n)));
    const std::vector<int32_t> ids = {4, 1};
    float* rows = d.Put(std::vector<float>(2 * k));
    gpu->GetRows(WeightRef{DType::kMXFP4, base + 1, out, k}, d.Put(ids), Mat{rows, 2, k});
    std::vector<float> want(2 * k);
    cpu.GetRows(WeightRef{DType::kMXFP4, w.data(), out, k}, ids.data(), Mat{want.data(), 2, k});
    CHECK(SameBits(d.Get(rows, 2 * k), want));
  }
  Dev d(*gpu);
  const std::vector<uint8_t> wk = WeightFrom(1, DType::kQ4_K, 2, 256, 34);
  std::vector<uint8_t> shifted(wk.size() + 1);
  const auto* base = static_cast<const uint8_t*>(static_cast<const void*>(d.Put(shifted)));
  float* y = d.Put(std::vector<float>(2));
  gpu->MatMul(WeightRef{DType::kQ4_K, base + 1, 2, 256},
              ConstMat(d.Put(ref::RandomFloats(256, 35)), 1, 256), Mat{y, 1, 2});
  const absl::Status st = gpu->Synchronize();
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(st.message()).find("misaligned") != std::string::npos);
}

/// Three experts of `type` through a two-slot arena (one eviction and a
/// reload), each computed on its slot and compared with the CPU.
void CheckArena(DType type);

TEST_CASE("cuda expert arena loads from pinned memory and computes on the slot",
          "[cuda][backend][arena]") {
  if (!HaveGpu()) return;
  // 17-byte MXFP4 blocks and 110-byte Q3_K super-blocks: expert sizes that
  // are no multiple of anything, in slots of ExpertSlotStride bytes.
  for (DType type : {DType::kQ4_0, DType::kMXFP4, DType::kQ3_K, DType::kQ6_K}) {
    INFO(Traits(type).name);
    if (CpuCanCompare(type)) CheckArena(type);
  }
}

void CheckArena(DType type) {
  auto gpu = MakeCuda("cuda:0");
  CpuBackend cpu(2);
  const int64_t out = 63, k = 256;
  const size_t bytes = RowBytes(type, k) * out;
  auto store = PinnedExpertStore::Create(3, bytes);
  REQUIRE(store.ok());
  std::vector<std::vector<uint8_t>> experts;
  for (int e = 0; e < 3; ++e) {
    experts.push_back(WeightFrom(1, type, out, k, 60 + e));
    std::memcpy(store->entry(e), experts.back().data(), bytes);
  }
  auto dev = MakeCudaSlotDevice(*gpu);
  REQUIRE(dev.ok());
  auto arena = ExpertSlotArena::Create(std::move(dev).value(),
                                       {bytes, 2 * ExpertSlotArena::SlotStride(bytes), 0});
  REQUIRE(arena.ok());
  CHECK((*arena)->slots() == 2);
  CHECK((*arena)->Load({0, 9}, experts[0].data()).status().code() ==
        absl::StatusCode::kInvalidArgument);  // pageable: refused
  Dev d(*gpu);
  const std::vector<float> x = ref::RandomFloats(k * 3, 70);
  const float* dx = d.Put(x);
  float* y = d.Put(std::vector<float>(3 * out));
  for (int e : {0, 1, 2, 0}) {  // the fourth load evicts and reloads expert 0
    INFO("expert " << e);
    auto slot = (*arena)->Load({0, e}, store->entry(e));
    REQUIRE(slot.ok());
    auto w = (*arena)->Acquire(*slot);
    REQUIRE(w.ok());
    gpu->MatMul(WeightRef{type, *w, out, k}, ConstMat(dx, 3, k), Mat{y, 3, out});
    REQUIRE((*arena)->Release(*slot).ok());
    auto secs = (*arena)->WaitLoaded(*slot);
    REQUIRE(secs.ok());
    CHECK(*secs >= 0.0);
    std::vector<float> want(3 * out);
    cpu.MatMul(WeightRef{type, experts[e].data(), out, k}, ConstMat(x.data(), 3, k),
               Mat{want.data(), 3, out});
    CHECK(SameBits(d.Get(y, 3 * out), want));
  }
  const ExpertSlotArena::Stats st = (*arena)->stats();
  CHECK(st.loads == 4);
  CHECK(st.evictions == 2);
  CHECK(st.peak_held == 2);
}

}  // namespace
}  // namespace odmoe
