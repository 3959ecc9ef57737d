// Backend names, the MatMul path decision and the record of the rows a norm
// kept quantized (norm_quant_cache.h) of the CUDA backend: plain logic,
// tested without a GPU.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cuda_backend_options.h"
#include "matmul_plan.h"
#include "norm_quant_cache.h"

namespace odmoe {
namespace {

TEST_CASE("cuda backend names parse and print back", "[cuda][options]") {
  struct Good {
    const char* arg;
    int device;
    FloatMatMulPolicy policy;
    const char* name;
  };
  for (const Good& g : {Good{"", 0, FloatMatMulPolicy::kExact, "cuda:0"},
                        Good{"0", 0, FloatMatMulPolicy::kExact, "cuda:0"},
                        Good{"3", 3, FloatMatMulPolicy::kExact, "cuda:3"},
                        Good{"1:cublas", 1, FloatMatMulPolicy::kCublas, "cuda:1:cublas"}}) {
    INFO(g.arg);
    auto o = ParseCudaBackendArg(g.arg);
    REQUIRE(o.ok());
    CHECK(o->device == g.device);
    CHECK(o->float_matmul == g.policy);
    CHECK(CudaBackendName(*o) == g.name);
  }
  for (const char* bad :
       {"x", "-1", "1x", "256", "99999999999", ":cublas", "0:", "0:fast", "0:cublas:1", " 0"}) {
    INFO(bad);
    auto o = ParseCudaBackendArg(bad);
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(o.status().message()).find(std::string("'cuda:") + bad + "'") !=
          std::string::npos);
  }
}

TEST_CASE("cuda MatMul plan: quantized, exact, and cuBLAS only when asked", "[cuda][options]") {
  const auto exact = FloatMatMulPolicy::kExact;
  const auto cublas = FloatMatMulPolicy::kCublas;
  for (DType q : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                  DType::kIQ4_NL, DType::kMXFP4}) {
    const MatMulPlan p = PlanMatMul(q, 4096, 4096, 512, cublas);
    CHECK(p.path == MatMulPath::kQuantized);
    CHECK(p.scratch_bytes == size_t{512} * 128 * 36);  // codes + scale per block
  }
  for (DType q :
       {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
    const MatMulPlan p = PlanMatMul(q, 14336, 4096, 7, cublas);
    CHECK(p.path == MatMulPath::kQuantizedK);
    CHECK(p.scratch_bytes == size_t{7} * 16 * kQ8KActBytes);  // 256 codes, 16 sums, scale
  }
  for (DType f : {DType::kF32, DType::kF16, DType::kBF16}) {
    CHECK(PlanMatMul(f, 4096, 4096, 4096, exact).path == MatMulPath::kFloatCanonical);
    CHECK(PlanMatMul(f, 4096, 4096, kCublasMinRows - 1, cublas).path ==
          MatMulPath::kFloatCanonical);
    CHECK(PlanMatMul(f, 4096, 4096, 1, cublas).scratch_bytes == 0);
  }
  CHECK(PlanMatMul(DType::kF32, 4096, 4096, kCublasMinRows, cublas).path == MatMulPath::kCublasF32);
  const MatMulPlan h = PlanMatMul(DType::kF16, 14336, 4096, 64, cublas);
  CHECK(h.path == MatMulPath::kCublasDequantized);
  CHECK(h.chunk_rows == static_cast<int64_t>(kDequantChunkBytes / (4096 * 4)));
  CHECK(h.scratch_bytes <= kDequantChunkBytes);
  // A tiny weight: one chunk of all its rows.
  const MatMulPlan t = PlanMatMul(DType::kBF16, 9, 50, 40, cublas);
  CHECK(t.chunk_rows == 9);
  CHECK(t.scratch_bytes == 9 * 50 * 4);
  // A row longer than the chunk budget still gets one row per chunk.
  CHECK(PlanMatMul(DType::kF16, 3, int64_t{16} << 20, 40, cublas).chunk_rows == 1);
  // Dimensions beyond cuBLAS's int stay on the canonical kernel.
  CHECK(PlanMatMul(DType::kF32, int64_t{3} << 31, 64, 64, cublas).path ==
        MatMulPath::kFloatCanonical);
}

TEST_CASE("cuda norm quantization record: exact rows only, dropped by any overlapping write",
          "[cuda][options]") {
  // Which norms quantize their output: 1 .. kMaxRows rows of a multiple of 256.
  CHECK(NormQuantCache::Fits(1, 4096));
  CHECK(NormQuantCache::Fits(NormQuantCache::kMaxRows, 256));
  CHECK_FALSE(NormQuantCache::Fits(NormQuantCache::kMaxRows + 1, 4096));
  CHECK_FALSE(NormQuantCache::Fits(0, 4096));
  CHECK_FALSE(NormQuantCache::Fits(1, 4096 + 32));
  CHECK_FALSE(NormQuantCache::Fits(32, 128));  // per-head q / k norms
  // The layout: Q8_K at 0, the Q8_0 codes and scales after it, 16-aligned.
  CHECK(NormQuantCache::Q8_0Offset(1, 4096) == QuantizedKActivationBytes(1, 4096));
  CHECK(NormQuantCache::Q8_0Offset(3, 256) % 16 == 0);
  CHECK(NormQuantCache::Bytes(3, 512) ==
        NormQuantCache::Q8_0Offset(3, 512) + QuantizedActivationBytes(3, 512));

  constexpr uint8_t kBoth = NormQuantCache::kQ8K | NormQuantCache::kQ8_0;
  // The kept rows inside a larger buffer, so that the bytes around them exist.
  std::vector<float> buffer(4 * 512), other(3 * 512);
  struct Rows {
    float* p;
    float* data() const { return p; }
    size_t size() const { return 3 * 512; }
  } rows{buffer.data() + 256};
  NormQuantCache c;
  const ConstMat x(rows.data(), 3, 512);
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, x).has_value());  // nothing kept yet
  c.Filled(rows.data(), 3, 512, nullptr, kBoth);
  CHECK(c.Find(MatMulPath::kQuantizedK, x) == size_t{0});
  CHECK(c.Find(MatMulPath::kQuantized, x) == NormQuantCache::Q8_0Offset(3, 512));
  CHECK(c.hits() == 2);
  // Only exactly those rows: not a part of them, not other memory, and not
  // for the float paths.
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, ConstMat(rows.data(), 2, 512)).has_value());
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, ConstMat(rows.data() + 512, 2, 512)).has_value());
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, ConstMat(rows.data(), 6, 256)).has_value());
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, ConstMat(other.data(), 3, 512)).has_value());
  CHECK_FALSE(c.Find(MatMulPath::kFloatCanonical, x).has_value());
  CHECK(c.hits() == 2);
  // Writes elsewhere keep them, touching writes drop them: before, after,
  // the first and the last byte.
  c.DropIfWrites(other.data(), other.size() * sizeof(float));
  c.DropIfWrites(rows.data() + rows.size(), 64);  // just past the end
  c.DropIfWrites(reinterpret_cast<const char*>(rows.data()) - 8, 8);  // just before
  c.DropIfWrites(rows.data(), 0);
  CHECK(c.valid());
  c.DropIfWrites(reinterpret_cast<const char*>(rows.data() + rows.size()) - 1, 1);
  CHECK_FALSE(c.valid());
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, x).has_value());
  c.Filled(rows.data(), 3, 512, nullptr, kBoth);
  c.DropIfWrites(reinterpret_cast<const char*>(rows.data()) - 4, 5);
  CHECK_FALSE(c.valid());
  c.Filled(rows.data(), 3, 512, nullptr, kBoth);
  c.DropIfWrites(Mat{rows.data() + 700, 1, 4});
  CHECK_FALSE(c.valid());
  c.Filled(rows.data(), 3, 512, nullptr, kBoth);
  c.Drop();
  CHECK_FALSE(c.Find(MatMulPath::kQuantized, x).has_value());
}

TEST_CASE("cuda norm quantization record: a norm writes the forms its products read",
          "[cuda][options]") {
  std::vector<float> rows(4096), weight_a(4096), weight_b(4096), weight_c(4096);
  const ConstMat x(rows.data(), 1, 4096);
  constexpr uint8_t kK = NormQuantCache::kQ8K, kQ0 = NormQuantCache::kQ8_0;
  NormQuantCache c;
  // A norm never seen: both forms.
  CHECK(c.FormsFor(weight_a.data()) == (kK | kQ0));
  c.Filled(rows.data(), 1, 4096, weight_a.data(), kK | kQ0);
  CHECK(c.Find(MatMulPath::kQuantizedK, x).has_value());  // only Q8_K is read
  c.Drop();
  CHECK(c.FormsFor(weight_a.data()) == kK);
  // Next time it writes Q8_K only; a product asking for Q8_0 quantizes its own
  // rows (no offset) and the norm writes both again after that.
  c.Filled(rows.data(), 1, 4096, weight_a.data(), kK);
  CHECK(c.Find(MatMulPath::kQuantizedK, x) == size_t{0});
  CHECK_FALSE(c.Find(MatMulPath::kQuantized, x).has_value());
  CHECK(c.hits() == 2);
  c.Filled(rows.data(), 1, 4096, weight_b.data(), kK | kQ0);  // another norm: a's is learned
  CHECK(c.FormsFor(weight_a.data()) == (kK | kQ0));
  // b's rows read by float products only: it writes none, and is still kept
  // so that a later request is noted.
  CHECK_FALSE(c.Find(MatMulPath::kFloatCanonical, x).has_value());
  c.DropIfWrites(rows.data(), 4);
  CHECK(c.FormsFor(weight_b.data()) == 0);
  c.Filled(rows.data(), 1, 4096, weight_b.data(), 0);
  CHECK_FALSE(c.Find(MatMulPath::kQuantized, x).has_value());
  c.Drop();
  CHECK(c.FormsFor(weight_b.data()) == kQ0);
  // Requests for other rows, or after the rows were dropped, teach nothing.
  c.Filled(rows.data(), 1, 4096, weight_c.data(), kK | kQ0);
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, ConstMat(weight_c.data(), 1, 4096)).has_value());
  c.Drop();
  CHECK_FALSE(c.Find(MatMulPath::kQuantizedK, x).has_value());
  c.Drop();
  CHECK(c.FormsFor(weight_c.data()) == 0);
}

}  // namespace
}  // namespace odmoe
