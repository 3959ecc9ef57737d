// odmoe-bench-ops: micro-benchmarks of the CPU backend's ops (or of a device
// backend's MatMul).
//
// Measures the machine's memory read bandwidth (threads summing a
// 1 GiB array, best of several passes; again before each decode row), the
// matrix-vector products of decode (weights rotated over copies of two
// matrices, more than twice the last level cache, so they come from memory;
// shapes under 2 MiB stay in cache), small matrix-matrix products (prefill), and the other
// ops. Decode is reported against the best read bandwidth seen in the run,
// whether by the meter or by any kernel's weight stream (the F32 matvec often
// reads faster than the summing meter), and against the meter run just
// before it.
//
// With --backend (a device backend) it measures that backend's MatMul rows
// instead: decode GB/s against the device's copy bandwidth, prefill GFLOP/s.
//
//   odmoe-bench-ops --threads 2
//   ODMOE_CPU_ISA=avx2 odmoe-bench-ops --threads 2 --seconds 0.3
//   odmoe-bench-ops --backend cuda:0 --threads 16
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/backend_registry.h"
#include "cpu_backend.h"
#include "tensor/quant.h"
#include "util/cli_args.h"
#include "util/thread_pool.h"

namespace odmoe {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Best seconds per call of `fn` over batches, running for about `budget` s.
double TimeBest(const std::function<void(int)>& fn, double budget) {
  fn(0);  // warm up
  double best = 1e30;
  int call = 1;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    fn(call++);
    best = std::min(best, Seconds(t0, Clock::now()));
  } while (Seconds(start, Clock::now()) < budget || call < 4);
  return best;
}

/// Sums 64-bit words [b, e) of `data` with four independent accumulators
/// (written out by hand: an accumulator array would live on the stack).
uint64_t SumWordsPortable(const uint64_t* data, int64_t b, int64_t e) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int64_t i = b; i + 4 <= e; i += 4) {
    a0 += data[i];
    a1 += data[i + 1];
    a2 += data[i + 2];
    a3 += data[i + 3];
  }
  return a0 + a1 + a2 + a3;
}

#if defined(__x86_64__)
/// The same with AVX2, reading four streams at once (one per quarter of the
/// range, one 64-byte line each per iteration) as the matrix-vector kernels
/// do with their 4 weight rows: one stream per core does not reach the
/// memory's bandwidth.
__attribute__((target("avx2"))) uint64_t SumWordsAvx2(const uint64_t* data, int64_t b, int64_t e) {
  const int64_t quarter = (e - b) / 4 / 8 * 8;
  const auto* p0 = reinterpret_cast<const __m256i*>(data + b);
  const auto* p1 = reinterpret_cast<const __m256i*>(data + b + quarter);
  const auto* p2 = reinterpret_cast<const __m256i*>(data + b + 2 * quarter);
  const auto* p3 = reinterpret_cast<const __m256i*>(data + b + 3 * quarter);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < quarter / 4; i += 2) {
    a0 = _mm256_add_epi64(
        a0, _mm256_add_epi64(_mm256_loadu_si256(p0 + i), _mm256_loadu_si256(p0 + i + 1)));
    a1 = _mm256_add_epi64(
        a1, _mm256_add_epi64(_mm256_loadu_si256(p1 + i), _mm256_loadu_si256(p1 + i + 1)));
    a2 = _mm256_add_epi64(
        a2, _mm256_add_epi64(_mm256_loadu_si256(p2 + i), _mm256_loadu_si256(p2 + i + 1)));
    a3 = _mm256_add_epi64(
        a3, _mm256_add_epi64(_mm256_loadu_si256(p3 + i), _mm256_loadu_si256(p3 + i + 1)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

/// Measures read bandwidth in GB/s: `threads` threads each sum their part of
/// a 1 GiB array (AVX2, 4 streams per thread, where available); best of
/// `passes` sweeps.
class BandwidthMeter {
 public:
  explicit BandwidthMeter(int threads) : pool_(threads), data_((size_t{1} << 30) / 8) {
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = i;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) sum_ = &SumWordsAvx2;
#endif
  }

  double Measure(int passes) {
    const int64_t words = static_cast<int64_t>(data_.size());
    const int threads = pool_.threads();
    std::vector<uint64_t> sink(static_cast<size_t>(threads));
    double best = 1e30;
    for (int pass = 0; pass < passes; ++pass) {
      const auto t0 = Clock::now();
      pool_.ParallelFor(words / 16, 1 << 16, [&](int64_t b, int64_t e) {
        sink[b * threads / (words / 16)] += sum_(data_.data(), 16 * b, 16 * e);
      });
      best = std::min(best, Seconds(t0, Clock::now()));
    }
    uint64_t total = 0;
    for (uint64_t v : sink) total += v;
    if (total == 42) std::printf(" ");  // keeps the sums alive
    return static_cast<double>(words * 8) / best / 1e9;
  }

 private:
  ThreadPool pool_;
  std::vector<uint64_t> data_;
  uint64_t (*sum_)(const uint64_t*, int64_t, int64_t) = &SumWordsPortable;
};

/// `count` distinct rows x cols weights of `type` (seeded random values,
/// row r of matrix m from seed (m, r)); quantized by `pool`'s threads when
/// given.
std::vector<std::vector<uint8_t>> MakeWeights(DType type, int64_t rows, int64_t cols, int count,
                                              ThreadPool* pool = nullptr) {
  std::vector<std::vector<uint8_t>> out;
  const size_t rb = RowBytes(type, cols);
  for (int m = 0; m < count; ++m) {
    out.emplace_back(rb * static_cast<size_t>(rows));
    uint8_t* dst = out.back().data();
    auto fill = [&](int64_t b, int64_t e) {
      std::vector<float> row(static_cast<size_t>(cols));
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (int64_t r = b; r < e; ++r) {
        std::mt19937 rng(static_cast<uint32_t>(7 + 1000003 * m + r));
        for (float& f : row) f = dist(rng);
        QuantizeRow(type, row.data(), dst + r * rb, cols);
      }
    };
    if (pool != nullptr) {
      pool->ParallelFor(rows, 64, fill);
    } else {
      fill(0, rows);
    }
  }
  return out;
}

/// How many copies of a `bytes` matrix decode rotates over: enough to
/// exceed twice the last level cache (at least 2, at most 64 and 2 GiB);
/// matrices under 2 MiB are timed in cache (one copy).
int RotationCopies(size_t bytes) {
  if (bytes < (size_t{2} << 20)) return 1;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = 32L << 20;
  const size_t want = (2 * static_cast<size_t>(llc) + bytes - 1) / bytes + 1;
  const size_t cap = std::max<size_t>(2, (size_t{2} << 30) / bytes);
  return static_cast<int>(std::clamp<size_t>(want, 2, std::min<size_t>(64, cap)));
}

const DType kBenchTypes[] = {DType::kF32,    DType::kF16,   DType::kBF16, DType::kQ8_0,
                             DType::kQ4_0,   DType::kQ4_1,  DType::kQ5_0, DType::kQ5_1,
                             DType::kIQ4_NL, DType::kMXFP4, DType::kQ4_K, DType::kQ6_K,
                             DType::kQ5_K,   DType::kQ3_K,  DType::kQ2_K, DType::kIQ4_XS};

struct Options {
  int threads = 2;
  float seconds = 0.5f;
  bool decode_only = false;
  std::vector<DType> types;                          // empty: kBenchTypes
  std::vector<std::pair<int64_t, int64_t>> shapes;  // empty: each tool's own
  /// The types to run: --types, else every benchmarked type.
  std::vector<DType> Types() const {
    return types.empty() ? std::vector<DType>(std::begin(kBenchTypes), std::end(kBenchTypes))
                         : types;
  }
  /// The decode shapes to run: --shapes, else `fallback`.
  std::vector<std::pair<int64_t, int64_t>> Shapes(
      std::vector<std::pair<int64_t, int64_t>> fallback) const {
    return shapes.empty() ? fallback : shapes;
  }
};

/// Parses "q4_K,q6_K" into types; false (with a message) on an unknown name.
bool ParseTypes(const std::string& list, std::vector<DType>* out) {
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::optional<DType> t = ParseDType(std::string_view(name.data(), name.size()));
    if (!t || std::find(std::begin(kBenchTypes), std::end(kBenchTypes), *t) == std::end(kBenchTypes)) {
      std::fprintf(stderr, "odmoe-bench-ops: error: --types: '%s' is not a benchmarked type\n",
                   std::string(name).c_str());
      return false;
    }
    out->push_back(*t);
  }
  return true;
}

/// Parses "14336x4096,256x4096" (rows x cols, cols a multiple of 256).
bool ParseShapes(const std::string& list, std::vector<std::pair<int64_t, int64_t>>* out) {
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> rc = absl::StrSplit(item, 'x');
    int64_t rows = 0, cols = 0;
    if (rc.size() != 2 || !absl::SimpleAtoi(rc[0], &rows) || !absl::SimpleAtoi(rc[1], &cols) ||
        rows < 1 || cols < 256 || cols % 256 != 0 || rows * cols > (int64_t{1} << 28)) {
      std::fprintf(stderr,
                   "odmoe-bench-ops: error: --shapes: '%s' is not ROWSxCOLS (cols a multiple of "
                   "256, at most 2^28 weights)\n",
                   std::string(item).c_str());
      return false;
    }
    out->emplace_back(rows, cols);
  }
  return true;
}

struct DecodeRow {
  std::string type;
  int64_t rows, cols;
  double seconds, gbps, meter_gbps;
};

struct PrefillRow {
  std::string type;
  int64_t n;
  double seconds, gflops;
};

/// Decode and prefill products; raises *best_bw to the best read bandwidth
/// seen (meter or weight stream) and prints the tables against it.
void BenchMatMul(CpuBackend& be, const Options& opt, BandwidthMeter& meter, double* best_bw) {
  const auto shapes = opt.Shapes({{14336, 4096}, {4096, 14336}});
  std::vector<DecodeRow> decode;
  std::vector<PrefillRow> prefill;
  int64_t widest = 14336;
  for (auto [rows, cols] : shapes) widest = std::max({widest, rows, cols});
  std::vector<float> x(widest * 128), y(widest * 128);
  for (float& f : x) f = 0.5f;
  for (DType type : opt.Types()) {
    const std::string name(Traits(type).name);
    for (auto [rows, cols] : shapes) {
      std::vector<std::vector<uint8_t>> weights = MakeWeights(type, rows, cols, 2);
      // Copies to rotate over, so that decode reads from memory, not from
      // the last level cache (300 MB on some servers).
      const int copies = RotationCopies(weights[0].size());
      while (static_cast<int>(weights.size()) < copies) weights.push_back(weights[weights.size() % 2]);
      const double bytes = static_cast<double>(weights[0].size());
      // As a model gets them (LoadWeight: K-family weights may be kept in
      // the backend's interleaved layout), and then, where that differs, in
      // the file's row order too ("/rows").
      std::vector<BackendWeight> loaded;
      for (const auto& wb : weights) {
        TensorView view;
        view.name = "bench";
        view.type = type;
        view.n_dims = 2;
        view.ne = {cols, rows, 1, 1};
        view.data = wb.data();
        absl::StatusOr<BackendWeight> w = be.LoadWeight(view);
        if (!w.ok()) {
          std::fprintf(stderr, "odmoe-bench-ops: %s\n", std::string(w.status().message()).c_str());
          std::exit(1);
        }
        loaded.push_back(*std::move(w));
      }
      const bool repacked = loaded[0].ref.layout != WeightLayout::kRows;
      for (const bool as_loaded : {true, false}) {
        if (!as_loaded && !repacked) continue;
        const std::string label = as_loaded ? name : name + "/rows";
        auto call = [&](int i, int64_t n) {
          const WeightRef w =
              as_loaded ? loaded[i % copies].ref
                        : WeightRef{type, weights[i % copies].data(), rows, cols};
          be.MatMul(w, ConstMat(x.data(), n, cols), Mat{y.data(), n, rows});
        };
        const double bandwidth = meter.Measure(5);
        const double s = TimeBest([&](int i) { call(i, 1); }, opt.seconds);
        decode.push_back({label, rows, cols, s, bytes / s / 1e9, bandwidth});
        *best_bw = std::max({*best_bw, bandwidth, bytes / s / 1e9});
        if (rows != 14336 || opt.decode_only) continue;
        for (int64_t n : {2, 8, 32, 128}) {
          const double sm = TimeBest([&](int i) { call(i, n); }, opt.seconds);
          prefill.push_back({label, n, sm, 2.0 * rows * cols * n / sm / 1e9});
        }
      }
    }
  }
  std::printf("\nMatrix-vector (decode, x: 1 row), copies of 2 matrices rotated past the last level cache:\n");
  std::printf("(%% best: against the best read bandwidth seen in this run by any kernel or\n");
  std::printf(" the summing meter, %.2f GB/s; %% meter: against the meter run just before)\n",
              *best_bw);
  std::printf("(type/rows: K-family weights in the file's row order, where the backend\n");
  std::printf(" keeps them interleaved, ODMOE_CPU_REPACK=0)\n");
  std::printf("%-11s %-13s %10s %9s %8s %8s %9s %9s\n", "type", "rows x cols", "us/call", "GB/s",
              "% best", "% meter", "GFLOP/s", "[meter]");
  for (const DecodeRow& r : decode) {
    std::printf("%-11s %5lld x %-5lld %10.1f %9.2f %7.1f%% %7.1f%% %9.2f [%7.2f]\n", r.type.c_str(),
                static_cast<long long>(r.rows), static_cast<long long>(r.cols), r.seconds * 1e6,
                r.gbps, 100.0 * r.gbps / *best_bw, 100.0 * r.gbps / r.meter_gbps,
                2.0 * r.rows * r.cols / r.seconds / 1e9, r.meter_gbps);
  }
  if (prefill.empty()) return;
  std::printf("\nMatrix-matrix (prefill), 14336 x 4096 weights, x: n rows:\n");
  std::printf("%-11s %6s %10s %9s\n", "type", "n", "us/call", "GFLOP/s");
  for (const PrefillRow& r : prefill) {
    std::printf("%-11s %6lld %10.1f %9.2f\n", r.type.c_str(), static_cast<long long>(r.n),
                r.seconds * 1e6, r.gflops);
  }
}

void Report(const char* name, double s) { std::printf("%-44s %10.1f us\n", name, s * 1e6); }

void BenchOps(CpuBackend& be, const Options& opt) {
  std::printf("\nOther ops (dim 4096, 32 heads x 128, 8 KV heads, ffn 14336):\n");
  const int64_t d = 4096, ffn = 14336, hd = 128, n_head = 32, n_kv = 8, ctx = 512;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng);
    return v;
  };
  std::vector<float> x = rnd(128 * d), w = rnd(d), g = rnd(128 * ffn), u = rnd(128 * ffn);
  std::vector<float> out(128 * ffn);
  std::vector<int32_t> pos(128);
  for (int i = 0; i < 128; ++i) pos[i] = ctx - 128 + i;
  RopeParams rope;
  rope.dims = static_cast<int>(hd);
  rope.mode = RopeMode::kInterleaved;
  for (int64_t n : {1, 128}) {
    const std::string sfx = " n=" + std::to_string(n);
    Report(("RmsNorm d=4096" + sfx).c_str(),
           TimeBest(
               [&](int) {
                 be.RmsNorm(ConstMat(x.data(), n, d), w.data(), 1e-5f, Mat{out.data(), n, d});
               },
               opt.seconds));
    Report(("Rope 32x128" + sfx).c_str(), TimeBest(
                                              [&](int) {
                                                be.Rope(Mat{x.data(), n, d}, hd, pos.data(), rope);
                                              },
                                              opt.seconds));
    Report(("SwiGlu 14336" + sfx).c_str(), TimeBest(
                                               [&](int) {
                                                 be.SwiGlu(ConstMat(g.data(), n, ffn),
                                                           ConstMat(u.data(), n, ffn),
                                                           Mat{out.data(), n, ffn});
                                               },
                                               opt.seconds));
  }
  const std::vector<float> kc = rnd(ctx * n_kv * hd), vc = rnd(ctx * n_kv * hd);
  const std::vector<float> q = rnd(128 * d);
  Report("Attention 512 cached positions, n=1",
         TimeBest(
             [&](int) {
               be.Attention(ConstMat(q.data(), 1, d), ConstMat(kc.data(), ctx, n_kv * hd),
                            ConstMat(vc.data(), ctx, n_kv * hd), n_head, n_kv, hd, ctx - 1, 0.088f,
                            AttentionOptions{}, Mat{out.data(), 1, d});
             },
             opt.seconds));
  Report("Attention prefill 128 rows at pos 384..511",
         TimeBest(
             [&](int) {
               be.Attention(ConstMat(q.data(), 128, d), ConstMat(kc.data(), ctx, n_kv * hd),
                            ConstMat(vc.data(), ctx, n_kv * hd), n_head, n_kv, hd, ctx - 128,
                            0.088f, AttentionOptions{}, Mat{out.data(), 128, d});
             },
             opt.seconds));
  const std::vector<float> logits = rnd(128 * 8);
  std::vector<int32_t> ids(128 * 2);
  std::vector<float> wts(128 * 2);
  Report(
      "RouterTopK 8 experts k=2, n=128",
      TimeBest(
          [&](int) { be.RouterTopK(ConstMat(logits.data(), 128, 8), 2, {}, ids.data(), wts.data()); },
          opt.seconds));
  for (DType type : {DType::kF16, DType::kQ4_0}) {
    const auto table = MakeWeights(type, 32000, d, 1);
    std::vector<int32_t> tok(128);
    for (int i = 0; i < 128; ++i) tok[i] = (i * 7919) % 32000;
    const std::string name = "GetRows " + std::string(Traits(type).name) + " 32000x4096, n=128";
    Report(name.c_str(), TimeBest(
                             [&](int) {
                               be.GetRows(WeightRef{type, table[0].data(), 32000, d}, tok.data(),
                                          Mat{out.data(), 128, d});
                             },
                             opt.seconds));
  }
  // What a worker's slot load costs on this backend: packing one matrix in
  // the layout the backend computes it in (a copy, or KInterleave16), with
  // the source and destination rotated past the last level cache.
  for (DType type : {DType::kQ4_K, DType::kQ6_K}) {
    std::vector<std::vector<uint8_t>> src = MakeWeights(type, ffn, d, 2);
    const int copies = RotationCopies(src[0].size());
    while (static_cast<int>(src.size()) < copies) src.push_back(src[src.size() % 2]);
    std::vector<std::vector<uint8_t>> dst(static_cast<size_t>(copies),
                                          std::vector<uint8_t>(src[0].size()));
    const WeightLayout layout = be.SlotLayout(type, ffn, d);
    for (const bool arrange : {true, false}) {
      if (!arrange && layout == WeightLayout::kRows) continue;
      const double s = TimeBest(
          [&](int i) {
            TensorView v;
            v.type = type;
            v.n_dims = 2;
            v.ne = {d, ffn, 1, 1};
            v.data = src[i % copies].data();
            be.ArrangeWeight(v, arrange ? layout : WeightLayout::kRows, dst[i % copies].data());
          },
          opt.seconds);
      const std::string name = "slot pack " + std::string(Traits(type).name) + " 14336x4096 " +
                               (arrange && layout != WeightLayout::kRows ? "interleaved" : "copy");
      std::printf("%-48s %9.1f us  %6.2f GB/s\n", name.c_str(), s * 1e6,
                  static_cast<double>(src[0].size()) / s / 1e9);
    }
  }
}

/// Exits with the status's message unless it is OK (a device benchmark has
/// nothing to go on with).
void OrExit(const absl::Status& st) {
  if (st.ok()) return;
  std::fprintf(stderr, "odmoe-bench-ops: error: %s\n", std::string(st.message()).c_str());
  std::exit(1);
}

/// Device memory of `bytes`.
std::unique_ptr<BackendBuffer> DeviceBuffer(Backend& be, size_t bytes) {
  absl::StatusOr<std::unique_ptr<BackendBuffer>> buf = be.Allocate(bytes);
  OrExit(buf.status());
  return *std::move(buf);
}

void SyncOrExit(Backend& be) { OrExit(be.Synchronize()); }

/// Seconds per call of `fn` on a device backend: `calls` calls queued, then
/// one Synchronize; best of 5 such batches, after at least 0.3 s of warm-up
/// batches (an idle GPU lowers its clocks, and raises them only under load).
/// `*queue_s` (optional): the host's seconds per call to queue the best batch
/// (close to the total: the host, not the device, sets the pace).
double TimeDevice(Backend& be, int calls, const std::function<void(int)>& fn,
                  double* queue_s = nullptr) {
  double queued = 0;
  auto batch = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) fn(i);
    queued = Seconds(t0, Clock::now()) / calls;
    SyncOrExit(be);
    return Seconds(t0, Clock::now()) / calls;
  };
  const auto start = Clock::now();
  while (Seconds(start, Clock::now()) < 0.3) batch();
  double best = 1e30;
  for (int b = 0; b < 5; ++b) {
    const double s = batch();
    if (s < best) {
      best = s;
      if (queue_s != nullptr) *queue_s = queued;
    }
  }
  return best;
}

/// The MatMul rows on a device backend (`--backend`): decode GB/s of the
/// weight stream against the device's copy bandwidth (a 1 GiB Copy, bytes
/// read plus written, best of 5), prefill GFLOP/s. Each shape rotates over 4
/// uploads of the same weights so the stream never fits in the cache.
void BenchDeviceMatMul(Backend& be, const Options& opt) {
  ThreadPool pool(opt.threads);
  const int64_t copy_cols = 4096, copy_rows = (int64_t{1} << 28) / copy_cols;  // 1 GiB of f32
  auto a = DeviceBuffer(be, sizeof(float) * copy_rows * copy_cols);
  auto b = DeviceBuffer(be, sizeof(float) * copy_rows * copy_cols);
  const double copy_s = TimeDevice(be, 4, [&](int) {
    be.Copy(ConstMat(static_cast<const float*>(a->data()), copy_rows, copy_cols),
            Mat{static_cast<float*>(b->data()), copy_rows, copy_cols});
  });
  a.reset();
  b.reset();
  const double copy_bw = 2.0 * sizeof(float) * copy_rows * copy_cols / copy_s / 1e9;
  std::printf("Device copy bandwidth (1 GiB Copy, read + written, best of 5): %.1f GB/s\n",
              copy_bw);
  // The last shape is tiny: its time is the per-call floor (launches, gaps).
  const auto shapes = opt.Shapes({{14336, 4096}, {4096, 14336}, {64, 4096}});
  const int64_t max_n = 128;
  auto x = DeviceBuffer(be, sizeof(float) * 14336 * max_n);
  auto y = DeviceBuffer(be, sizeof(float) * 14336 * max_n);
  {
    std::vector<float> hx(14336 * max_n);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& f : hx) f = dist(rng);
    OrExit(be.CopyToBackend(x->data(), hx.data(), hx.size() * sizeof(float)));
  }
  std::printf("\nMatrix-vector (decode, x: 1 row) on %s, 4 uploads rotated:\n", be.name().c_str());
  std::printf("%-6s %-13s %10s %9s %8s %9s %12s %12s %12s\n", "type", "rows x cols", "us/call",
              "GB/s", "% copy", "queue us", "n=8 GFLOP/s", "n=32", "n=128");
  for (DType type : opt.Types()) {
    for (auto [rows, cols] : shapes) {
      const auto host = MakeWeights(type, rows, cols, 1, &pool);
      std::vector<BackendWeight> weights;
      for (int i = 0; i < 4; ++i) {
        TensorView view;
        view.name = "bench";
        view.type = type;
        view.n_dims = 2;
        view.ne = {cols, rows, 1, 1};
        view.data = host[0].data();
        absl::StatusOr<BackendWeight> w = be.LoadWeight(view);
        OrExit(w.status());
        weights.push_back(*std::move(w));
      }
      auto call = [&](int i, int64_t n) {
        be.MatMul(weights[i % 4].ref, ConstMat(static_cast<const float*>(x->data()), n, cols),
                  Mat{static_cast<float*>(y->data()), n, rows});
      };
      const double bytes = static_cast<double>(host[0].size());
      double queue_s = 0;
      const double s = TimeDevice(be, 40, [&](int i) { call(i, 1); }, &queue_s);
      double gflops[3] = {0, 0, 0};
      if (!opt.decode_only) {
        const int64_t ns[3] = {8, 32, 128};
        for (int j = 0; j < 3; ++j) {
          const double sn = TimeDevice(be, 8, [&](int i) { call(i, ns[j]); });
          gflops[j] = 2.0 * rows * cols * ns[j] / sn / 1e9;
        }
      }
      std::printf("%-6s %5lld x %-5lld %10.1f %9.1f %7.1f%% %9.1f %12.1f %12.1f %12.1f\n",
                  std::string(Traits(type).name).c_str(), static_cast<long long>(rows),
                  static_cast<long long>(cols), s * 1e6, bytes / s / 1e9,
                  100.0 * bytes / s / 1e9 / copy_bw, queue_s * 1e6, gflops[0], gflops[1],
                  gflops[2]);
    }
  }
}

int Main(int argc, char** argv) {
  Options opt;
  CliArgs args("odmoe-bench-ops",
               "Benchmark the CPU backend's ops (ODMOE_CPU_ISA forces an ISA), or a device "
               "backend's MatMul (--backend).");
  args.AddInt("threads", &opt.threads, "N", "threads (default 2)");
  args.AddFloat("seconds", &opt.seconds, "S", "time budget per measurement (default 0.5)");
  args.AddFlag("decode-only", &opt.decode_only, "only the matrix-vector products");
  std::string types, shapes;
  args.AddString("types", &types, "LIST",
                 "only these weight types, e.g. q4_K,q6_K (default: every type)");
  args.AddString("shapes", &shapes, "LIST",
                 "decode shapes ROWSxCOLS, e.g. 256x4096 (small ones stay in cache: the "
                 "kernel's compute cost; default: 14336x4096,4096x14336)");
  std::string backend;
  args.AddString("backend", &backend, "NAME",
                 "a device backend (cuda:0, cuda:0:cublas): its MatMul rows against its copy "
                 "bandwidth (default: the CPU backend's ops)");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (!ParseTypes(types, &opt.types) || !ParseShapes(shapes, &opt.shapes)) {
    return CliArgs::kUsageExit;
  }
  if (opt.threads < 1 || opt.seconds <= 0) {
    std::fprintf(stderr, "odmoe-bench-ops: error: --threads and --seconds must be positive\n");
    return CliArgs::kUsageExit;
  }
  if (!backend.empty() && backend.rfind("cpu", 0) != 0) {
    absl::StatusOr<std::unique_ptr<Backend>> dev = CreateBackend(backend);
    if (!dev.ok()) {
      std::fprintf(stderr, "odmoe-bench-ops: error: %s\n",
                   std::string(dev.status().message()).c_str());
      return 1;
    }
    BenchDeviceMatMul(**dev, opt);
    return 0;
  }
  CpuBackend be(opt.threads);
  std::printf("odmoe-bench-ops: %d threads, ISA %s\n", be.threads(),
              std::string(CpuIsaName(be.isa())).c_str());
  BandwidthMeter meter(opt.threads);
  double best_bw = meter.Measure(10);
  std::printf("Memory read bandwidth (%d threads summing a 1 GiB array, best of 10): %.2f GB/s\n",
              opt.threads, best_bw);
  BenchMatMul(be, opt, meter, &best_bw);
  if (!opt.decode_only) BenchOps(be, opt);
  std::printf("\nBest read bandwidth seen during the run: %.2f GB/s\n", best_bw);
  return 0;
}

}  // namespace
}  // namespace odmoe

int main(int argc, char** argv) { return odmoe::Main(argc, argv); }
