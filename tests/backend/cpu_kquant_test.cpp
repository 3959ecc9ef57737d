// The CPU backend's K-family MatMul kernels (cpu_kquant.h): every ISA's
// unpacking against the scalar definition, exact integer sums at the extremes
// of every type (no int16 saturation), random block bytes (not only quantizer
// output) bitwise equal across ISAs, decode and prefill, and close to a
// double-precision reference from DequantizeRow and the Q8_K-decoded
// activations; rows of 1, 15, 16, 17 and 56 super-blocks; zero rows; the
// SIMD Q8_K activation quantizer against QuantizeRow.
#include "cpu_kquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "cpu_isa.h"
#include "op_cases.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "util/fp16.h"

namespace odmoe::test {
namespace {

constexpr DType kKTypes[] = {DType::kQ4_K, DType::kQ6_K, DType::kQ5_K,
                             DType::kQ3_K, DType::kQ2_K, DType::kIQ4_XS};

std::string Name(DType t) { return std::string(Traits(t).name); }

/// Byte offsets of the f16 `d` and `dmin` (-1: none) of a super-block.
void ScaleOffsets(DType type, int* d, int* dmin) {
  *dmin = -1;
  switch (type) {
    case DType::kQ2_K:
      *d = offsetof(BlockQ2K, d);
      *dmin = offsetof(BlockQ2K, dmin);
      return;
    case DType::kQ3_K:
      *d = offsetof(BlockQ3K, d);
      return;
    case DType::kQ4_K:
      *d = offsetof(BlockQ4K, d);
      *dmin = offsetof(BlockQ4K, dmin);
      return;
    case DType::kQ5_K:
      *d = offsetof(BlockQ5K, d);
      *dmin = offsetof(BlockQ5K, dmin);
      return;
    case DType::kQ6_K:
      *d = offsetof(BlockQ6K, d);
      return;
    default:
      *d = offsetof(BlockIq4Xs, d);
      return;
  }
}

void SetF16(uint8_t* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, sizeof(h));
}

/// `count` super-blocks of random bytes with finite random f16 scales.
std::vector<uint8_t> RandomBlocks(DType type, int64_t count, std::mt19937& rng) {
  const int bytes = KBlockBytes(type);
  std::vector<uint8_t> out(static_cast<size_t>(count * bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : out) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> mag(1.0f / 4096, 1.0f / 64);
  std::bernoulli_distribution neg(0.2);
  int d, dmin;
  ScaleOffsets(type, &d, &dmin);
  for (int64_t s = 0; s < count; ++s) {
    uint8_t* blk = out.data() + s * bytes;
    SetF16(blk + d, neg(rng) ? -mag(rng) : mag(rng));
    if (dmin >= 0) SetF16(blk + dmin, mag(rng));
  }
  return out;
}

/// Activation rows in the kernels' layout, built from codes directly.
struct TestActs {
  std::vector<KActBlock> blocks;
  std::vector<float> d;
  int64_t stride = 0;
  bool biased = false;
  KActs View() const { return KActs{blocks.data(), d.data(), stride, biased}; }
  /// The same rows with biased codes (KActs::biased).
  TestActs Biased() const {
    TestActs b = *this;
    FlipKActCodes(b.blocks.data(), static_cast<int64_t>(b.blocks.size()));
    b.biased = true;
    return b;
  }
};

TestActs MakeActs(int64_t rows, int64_t count, const std::vector<int8_t>& codes,
                  const std::vector<float>& scales) {
  TestActs a;
  a.stride = (count + 15) / 16 * 16;
  a.blocks.resize(static_cast<size_t>(rows * a.stride));
  a.d.assign(static_cast<size_t>(rows * a.stride), 0.0f);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t s = 0; s < count; ++s) {
      KActBlock& b = a.blocks[t * a.stride + s];
      std::memcpy(b.qs, codes.data() + (t * count + s) * 256, 256);
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += b.qs[16 * j + i];
        b.bsums[j] = static_cast<int16_t>(sum);
      }
      a.d[t * a.stride + s] = scales[t * count + s];
    }
  }
  return a;
}

TestActs RandomActs(int64_t rows, int64_t count, std::mt19937& rng) {
  std::vector<int8_t> codes(static_cast<size_t>(rows * count * 256));
  std::uniform_int_distribution<int> code(-127, 127);
  for (auto& c : codes) c = static_cast<int8_t>(code(rng));
  std::vector<float> scales(static_cast<size_t>(rows * count));
  std::uniform_real_distribution<float> d(-0.05f, 0.05f);
  for (auto& s : scales) s = d(rng);
  return MakeActs(rows, count, codes, scales);
}

std::vector<const CpuKQuantKernels*> AllTables() {
  std::vector<const CpuKQuantKernels*> out;
  for (CpuIsa isa : SupportedCpuIsas()) out.push_back(&CpuKQuantKernelsFor(isa));
  return out;
}

/// Warns when no table of this CPU has the optional kernel `member` (its
/// comparisons then have nothing to run on); `what` names it.
template <class F>
void WarnIfNoTableHas(F CpuKQuantKernels::*member, const char* what) {
  for (const CpuKQuantKernels* k : AllTables()) {
    if (k->*member != nullptr) return;
  }
  WARN("no ISA of this CPU has " << what << "; nothing to compare");
}

/// The three ways a table computes the dot: from the stored blocks (decode),
/// from KUnpacked rows (prefill) and from KTiles (prefill, where the ISA has
/// tile kernels).
enum class Path { kStored, kUnpacked, kTile };

const char* PathName(Path p) {
  return p == Path::kStored ? "stored" : p == Path::kUnpacked ? "unpacked" : "tile";
}

std::vector<Path> PathsOf(const CpuKQuantKernels& k) {
  std::vector<Path> out = {Path::kStored, Path::kUnpacked};
  if (k.dot_tile != nullptr) out.push_back(Path::kTile);
  return out;
}

/// y[t * nw + r] through the path asked for.
std::vector<float> Run(const CpuKQuantKernels& k, DType type, const std::vector<uint8_t>& w, int nw,
                       int64_t count, const TestActs& x, int64_t nx, Path path) {
  std::vector<float> y(static_cast<size_t>(nx * nw), -1.0f);
  const size_t row_bytes = static_cast<size_t>(count * KBlockBytes(type));
  if (path == Path::kStored) {
    k.dot_rows(type, w.data(), row_bytes, nw, count, x.View(), nx, y.data(), nw);
  } else if (path == Path::kUnpacked) {
    std::vector<KUnpacked> u(static_cast<size_t>(nw * count));
    k.unpack_rows(type, w.data(), row_bytes, nw, count, u.data());
    k.dot_unpacked(type, u.data(), nw, count, x.View(), nx, y.data(), nw);
  } else {
    // Tiles hold 16 rows; wider matrices take several.
    std::vector<KTile> t(static_cast<size_t>(count));
    const TestActs xt = TileTakesBiasedActs(type) ? x.Biased() : x;
    for (int r0 = 0; r0 < nw; r0 += kKTileRows) {
      const int rows = std::min(kKTileRows, nw - r0);
      k.pack_tile(type, w.data() + r0 * row_bytes, row_bytes, rows, count, t.data());
      k.dot_tile(type, t.data(), rows, count, xt.View(), nx, y.data() + r0, nw);
    }
  }
  return y;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Exact A_s and B_s of one unpacked super-block (64-bit, by definition).
void ExactSums(DType type, const KUnpacked& u, const KActBlock& x, int64_t* a, int64_t* b) {
  *a = *b = 0;
  for (int j = 0; j < 16; ++j) {
    int64_t isum = 0, xsum = 0;
    for (int i = 16 * j; i < 16 * j + 16; ++i) {
      const int q = type == DType::kIQ4_XS ? static_cast<int8_t>(u.q[i]) : u.q[i];
      isum += static_cast<int64_t>(q) * x.qs[i];
      xsum += x.qs[i];
    }
    *a += u.sc[j] * isum + u.corr[j] * xsum;
    *b += u.mn[j] * xsum;
  }
}

TEST_CASE("K-family: every ISA unpacks the bytes of the scalar definition", "[backend][kquant]") {
  std::mt19937 rng(11);
  for (DType type : kKTypes) {
    const int64_t count = 17;
    const std::vector<uint8_t> w = RandomBlocks(type, 2 * count, rng);
    std::vector<KUnpacked> ref(static_cast<size_t>(2 * count));
    CpuKQuantUnpackReference(type, w.data(), 2 * count, ref.data());
    for (const CpuKQuantKernels* k : AllTables()) {
      std::vector<KUnpacked> got(ref.size());
      k->unpack_rows(type, w.data(), static_cast<size_t>(count * KBlockBytes(type)), 2, count,
                     got.data());
      INFO(Name(type) << " " << CpuIsaName(k->isa));
      CHECK(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(KUnpacked)) == 0);
    }
  }
}

TEST_CASE("K-family: unpacking matches DequantizeRow", "[backend][kquant]") {
  std::mt19937 rng(12);
  for (DType type : kKTypes) {
    const int64_t count = 3;
    const std::vector<uint8_t> w = RandomBlocks(type, count, rng);
    std::vector<KUnpacked> u(count);
    CpuKQuantUnpackReference(type, w.data(), count, u.data());
    std::vector<float> deq(static_cast<size_t>(count * 256));
    DequantizeRow(type, w.data(), deq.data(), count * 256);
    int bad = 0;
    for (int64_t s = 0; s < count; ++s) {
      for (int i = 0; i < 256; ++i) {
        const int j = i / 16;
        const int q = type == DType::kIQ4_XS ? static_cast<int8_t>(u[s].q[i]) : u[s].q[i];
        // The code as the dot sees it: corr = -offset * sc gives qw = q - offset.
        const int offset = u[s].sc[j] == 0 ? 0 : -u[s].corr[j] / u[s].sc[j];
        const double want = static_cast<double>(u[s].d) * u[s].sc[j] * (q - offset) -
                            static_cast<double>(u[s].dmin) * u[s].mn[j];
        const double got = deq[s * 256 + i];
        if (std::fabs(got - want) > 1e-6 * (std::fabs(want) + 1e-6)) ++bad;
      }
    }
    INFO(Name(type));
    CHECK(bad == 0);
  }
}

TEST_CASE("K-family: integer sums at the extremes are exact on every ISA", "[backend][kquant]") {
  // d = dmin = 1 and dx = 1 on a single super-block: the result is
  // fl(fl(A) - fl(B)), so any saturated or wrapped partial sum shows.
  const uint8_t code_fills[] = {0x00, 0xff, 0x55, 0xaa};
  const uint8_t scale_fills[] = {0xff, 0x80, 0x7f, 0x00};
  for (DType type : kKTypes) {
    const int bytes = KBlockBytes(type);
    int d, dmin;
    ScaleOffsets(type, &d, &dmin);
    for (uint8_t code_fill : code_fills) {
      for (uint8_t scale_fill : scale_fills) {
        std::vector<uint8_t> w(static_cast<size_t>(bytes), code_fill);
        // The scale bytes of each layout.
        auto fill = [&](size_t off, size_t n) { std::memset(w.data() + off, scale_fill, n); };
        switch (type) {
          case DType::kQ2_K:
            fill(offsetof(BlockQ2K, scales), 16);
            break;
          case DType::kQ3_K:
            fill(offsetof(BlockQ3K, scales), kKScaleBytes);
            break;
          case DType::kQ4_K:
            fill(offsetof(BlockQ4K, scales), kKScaleBytes);
            break;
          case DType::kQ5_K:
            fill(offsetof(BlockQ5K, scales), kKScaleBytes);
            break;
          case DType::kQ6_K:
            fill(offsetof(BlockQ6K, scales), 16);
            break;
          default:
            fill(offsetof(BlockIq4Xs, scales_h), 6);
            break;
        }
        SetF16(w.data() + d, 1.0f);
        if (dmin >= 0) SetF16(w.data() + dmin, 1.0f);
        KUnpacked u;
        CpuKQuantUnpackReference(type, w.data(), 1, &u);
        for (int pattern = 0; pattern < 3; ++pattern) {
          std::vector<int8_t> codes(256);
          for (int i = 0; i < 256; ++i) {
            codes[i] = pattern == 0 ? 127 : pattern == 1 ? -127 : (i % 2 ? -127 : 127);
          }
          const TestActs x = MakeActs(1, 1, codes, {1.0f});
          int64_t a, b;
          ExactSums(type, u, x.blocks[0], &a, &b);
          REQUIRE(std::llabs(a) < (int64_t{1} << 28));
          const float want = static_cast<float>(static_cast<double>(static_cast<float>(a)) -
                                                static_cast<double>(static_cast<float>(b)));
          for (const CpuKQuantKernels* k : AllTables()) {
            for (Path path : PathsOf(*k)) {
              const std::vector<float> y = Run(*k, type, w, 1, 1, x, 1, path);
              INFO(Name(type) << " " << CpuIsaName(k->isa) << " codes 0x" << std::hex
                              << int{code_fill} << " scales 0x" << int{scale_fill} << std::dec
                              << " x pattern " << pattern << " path " << PathName(path));
              CHECK(y[0] == want);
            }
          }
        }
      }
    }
  }
}

/// sum_i w_i * x_i in double from DequantizeRow and the decoded activations;
/// `mag` gets sum |w_i * x_i|.
double ReferenceDot(DType type, const uint8_t* w, int64_t count, const TestActs& x, int64_t t,
                    double* mag) {
  std::vector<float> wf(static_cast<size_t>(count * 256));
  DequantizeRow(type, w, wf.data(), count * 256);
  double sum = 0.0;
  *mag = 0.0;
  for (int64_t s = 0; s < count; ++s) {
    const KActBlock& b = x.blocks[t * x.stride + s];
    const double dx = x.d[t * x.stride + s];
    for (int i = 0; i < 256; ++i) {
      const double p = static_cast<double>(wf[s * 256 + i]) * dx * b.qs[i];
      sum += p;
      *mag += std::fabs(p);
    }
  }
  return sum;
}

TEST_CASE("K-family: random blocks give the same bits on every ISA, decode and prefill",
          "[backend][kquant]") {
  std::mt19937 rng(13);
  for (DType type : kKTypes) {
    for (int64_t count : {1, 15, 16, 17, 56}) {
      const int nw = 4;
      const int64_t nx = 5;
      const std::vector<uint8_t> w = RandomBlocks(type, nw * count, rng);
      const TestActs x = RandomActs(nx, count, rng);
      const CpuKQuantKernels& scalar = CpuKQuantKernelsFor(CpuIsa::kScalar);
      const std::vector<float> want = Run(scalar, type, w, nw, count, x, nx, Path::kStored);
      for (const CpuKQuantKernels* k : AllTables()) {
        for (Path path : PathsOf(*k)) {
          for (int rows = 1; rows <= nw; ++rows) {
            for (int64_t acts : {int64_t{1}, int64_t{2}, nx}) {
              const std::vector<float> y = Run(*k, type, w, rows, count, x, acts, path);
              std::vector<float> ref(static_cast<size_t>(acts * rows));
              for (int64_t t = 0; t < acts; ++t) {
                for (int r = 0; r < rows; ++r) ref[t * rows + r] = want[t * nw + r];
              }
              INFO(Name(type) << " " << CpuIsaName(k->isa) << " superblocks " << count << " rows "
                              << rows << " acts " << acts << " path " << PathName(path));
              CHECK(SameBits(y, ref));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("K-family: tiles of 16 rows give the scalar bits, full and partial",
          "[backend][kquant]") {
  std::mt19937 rng(17);
  WarnIfNoTableHas(&CpuKQuantKernels::dot_tile, "tile kernels");
  for (DType type : kKTypes) {
    for (int64_t count : {1, 17, 56}) {
      const int nw = 37;  // two full tiles and a partial one
      const int64_t nx = 13;  // activation rows in blocks of 8, 4 and the rest
      const std::vector<uint8_t> w = RandomBlocks(type, nw * count, rng);
      const TestActs x = RandomActs(nx, count, rng);
      const std::vector<float> want =
          Run(CpuKQuantKernelsFor(CpuIsa::kScalar), type, w, nw, count, x, nx, Path::kStored);
      for (const CpuKQuantKernels* k : AllTables()) {
        if (k->dot_tile == nullptr) continue;
        for (int rows : {1, 15, 16, 37}) {
          for (int64_t acts : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{11}, nx}) {
            const std::vector<float> y = Run(*k, type, w, rows, count, x, acts, Path::kTile);
            std::vector<float> ref(static_cast<size_t>(acts * rows));
            for (int64_t t = 0; t < acts; ++t) {
              for (int r = 0; r < rows; ++r) ref[t * rows + r] = want[t * nw + r];
            }
            INFO(Name(type) << " " << CpuIsaName(k->isa) << " superblocks " << count << " rows "
                            << rows << " acts " << acts);
            CHECK(SameBits(y, ref));
          }
        }
      }
    }
  }
}

TEST_CASE("K-family: the dot is close to a double-precision reference", "[backend][kquant]") {
  std::mt19937 rng(15);
  for (DType type : kKTypes) {
    for (int64_t count : {1, 17, 56}) {
      const int nw = 3;
      const int64_t nx = 2;
      const std::vector<uint8_t> w = RandomBlocks(type, nw * count, rng);
      const TestActs x = RandomActs(nx, count, rng);
      const std::vector<float> y =
          Run(CpuKQuantKernelsFor(CpuIsa::kScalar), type, w, nw, count, x, nx, Path::kStored);
      const size_t row_bytes = static_cast<size_t>(count * KBlockBytes(type));
      for (int64_t t = 0; t < nx; ++t) {
        for (int r = 0; r < nw; ++r) {
          double mag;
          const double ref = ReferenceDot(type, w.data() + r * row_bytes, count, x, t, &mag);
          INFO(Name(type) << " superblocks " << count << " row " << r << " act " << t << " got "
                          << y[t * nw + r] << " want " << ref << " magnitude " << mag);
          CHECK(std::fabs(y[t * nw + r] - ref) <= 1e-5 * mag);
          CHECK(mag > 0.0);
        }
      }
    }
  }
}

TEST_CASE("K-family MatMul: zero weights and zero activations give +0, never NaN",
          "[backend][kquant]") {
  std::mt19937 rng(14);
  const int64_t k = 512, out = 6;
  for (DType type : kKTypes) {
    const std::vector<uint8_t> zero_w(static_cast<size_t>(out * 2 * KBlockBytes(type)), 0);
    const std::vector<uint8_t> rand_w = RandomBlocks(type, out * 2, rng);
    std::vector<float> x(static_cast<size_t>(2 * k));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int64_t i = 0; i < k; ++i) x[i] = dist(rng);  // row 1 stays zero
    for (CpuIsa isa : SupportedCpuIsas()) {
      CpuBackend be(2, isa);
      for (const auto* w : {&zero_w, &rand_w}) {
        WeightRef wr;
        wr.type = type;
        wr.data = w->data();
        wr.rows = out;
        wr.cols = k;
        for (int64_t n : {int64_t{1}, int64_t{2}}) {
          std::vector<float> y(static_cast<size_t>(n * out), -1.0f);
          be.MatMul(wr, ConstMat(x.data() + (n == 1 ? k : 0), n, k), Mat{y.data(), n, out});
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t o = 0; o < out; ++o) {
              const float v = y[t * out + o];
              const bool zero_row = w == &zero_w || n == 1 || t == 1;
              INFO(Name(type) << " " << CpuIsaName(isa) << " n " << n);
              CHECK_FALSE(std::isnan(v));
              if (zero_row) CHECK((v == 0.0f && !std::signbit(v)));
            }
          }
        }
      }
    }
  }
}

/// `nw` rows of `count` super-blocks in KInterleave16 (whole groups; the
/// rest of the rows as they are).
std::vector<uint8_t> Interleaved(DType type, const std::vector<uint8_t>& w, int nw, int64_t count) {
  const size_t row_bytes = static_cast<size_t>(count * KBlockBytes(type));
  std::vector<uint8_t> out = w;
  for (int g = 0; g + kInterleaveRows <= nw; g += kInterleaveRows) {
    InterleaveKRows(type, w.data() + g * row_bytes, row_bytes, out.data() + g * row_bytes);
  }
  return out;
}

TEST_CASE("K-family: KInterleave16 moves every byte and comes back", "[backend][kquant]") {
  std::mt19937 rng(19);
  for (DType type : kKTypes) {
    for (int64_t count : {1, 3, 17}) {
      const size_t row_bytes = static_cast<size_t>(count * KBlockBytes(type));
      const std::vector<uint8_t> w = RandomBlocks(type, kInterleaveRows * count, rng);
      const std::vector<uint8_t> g = Interleaved(type, w, kInterleaveRows, count);
      INFO(Name(type) << " superblocks " << count);
      std::vector<uint8_t> sorted_w = w, sorted_g = g;
      std::sort(sorted_w.begin(), sorted_w.end());
      std::sort(sorted_g.begin(), sorted_g.end());
      CHECK(sorted_w == sorted_g);  // a permutation of the bytes
      CHECK(g != w);
      // Word 1 of super-block 0: row r at bytes 64 + 4r.
      CHECK(std::memcmp(g.data() + 64 + 4 * 3, w.data() + 3 * row_bytes + 4, 4) == 0);
      std::vector<uint8_t> back(w.size());
      DeinterleaveKRows(type, g.data(), row_bytes, back.data());
      CHECK(back == w);
      for (int r = 0; r < kInterleaveRows; ++r) {
        std::vector<uint8_t> row(row_bytes);
        DeinterleaveKRow(type, g.data(), row_bytes, r, row.data());
        CHECK(std::memcmp(row.data(), w.data() + r * row_bytes, row_bytes) == 0);
      }
      // The ISAs' own (SIMD) moves give the same bytes.
      for (const CpuKQuantKernels* k : AllTables()) {
        INFO(CpuIsaName(k->isa));
        if (k->interleave_rows != nullptr) {
          std::vector<uint8_t> simd(w.size());
          k->interleave_rows(type, w.data(), row_bytes, simd.data());
          CHECK(simd == g);
        }
      }
    }
  }
}

TEST_CASE("K-family: interleaved decode gives the scalar bits, random and extreme blocks",
          "[backend][kquant]") {
  std::mt19937 rng(23);
  WarnIfNoTableHas(&CpuKQuantKernels::dot_interleaved, "interleaved decode kernels");
  const CpuKQuantKernels& scalar = CpuKQuantKernelsFor(CpuIsa::kScalar);
  for (DType type : kKTypes) {
    for (int64_t count : {1, 15, 16, 17, 56}) {
      for (bool extreme : {false, true}) {
        std::vector<uint8_t> w = RandomBlocks(type, kInterleaveRows * count, rng);
        TestActs x = RandomActs(1, count, rng);
        if (extreme) {  // every code and scale at its largest, activations at +-127
          int d, dmin;
          ScaleOffsets(type, &d, &dmin);
          const int bytes = KBlockBytes(type);
          for (int64_t s = 0; s < kInterleaveRows * count; ++s) {
            uint8_t* blk = w.data() + s * bytes;
            for (int i = 0; i < bytes; ++i) {
              if (i != d && i != d + 1 && i != dmin && i != dmin + 1) blk[i] = 0xff;
            }
          }
          std::vector<int8_t> codes(static_cast<size_t>(count * 256));
          for (size_t i = 0; i < codes.size(); ++i) codes[i] = i % 3 == 0 ? -127 : 127;
          x = MakeActs(1, count, codes, x.d);
        }
        const std::vector<float> want =
            Run(scalar, type, w, kInterleaveRows, count, x, 1, Path::kStored);
        const std::vector<uint8_t> g = Interleaved(type, w, kInterleaveRows, count);
        for (const CpuKQuantKernels* k : AllTables()) {
          if (k->dot_interleaved == nullptr || !k->interleaved(type)) continue;
          std::vector<float> y(kInterleaveRows, -1.0f);
          k->dot_interleaved(type, g.data(), count, x.View(), y.data());
          INFO(Name(type) << " " << CpuIsaName(k->isa) << " superblocks " << count
                          << (extreme ? " extreme" : " random"));
          CHECK(SameBits(y, want));
          if (k->pack_tile_interleaved != nullptr) {  // the tiles of the row-order rows, byte for byte
            std::vector<KTile> from_rows(static_cast<size_t>(count)), from_group(from_rows.size());
            k->pack_tile(type, w.data(), static_cast<size_t>(count * KBlockBytes(type)),
                         kInterleaveRows, count, from_rows.data());
            k->pack_tile_interleaved(type, g.data(), count, from_group.data());
            CHECK(std::memcmp(from_rows.data(), from_group.data(), count * sizeof(KTile)) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("K-family: LoadWeight's interleaved weights give the row-order bits on every ISA",
          "[backend][kquant]") {
  std::mt19937 rng(29);
  const int64_t count = 17, cols = count * 256, rows = 37;  // two groups and 5 rows
  std::vector<float> x(static_cast<size_t>(9 * cols));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  for (DType type : kKTypes) {
    const std::vector<uint8_t> w = RandomBlocks(type, rows * count, rng);
    const TensorView view = MatrixView(type, w.data(), rows, cols);
    const WeightRef plain{type, w.data(), rows, cols};
    // The interleaved bytes on every ISA (those without the decode kernel
    // put the rows back in order), as LoadWeight makes them where it does.
    const std::vector<uint8_t> g = Interleaved(type, w, rows, count);
    const WeightRef inter{type, g.data(), rows, cols, WeightLayout::kInterleaved16};
    for (CpuIsa isa : SupportedCpuIsas()) {
      CpuBackend be(2, isa);
      const CpuKQuantKernels& k = CpuKQuantKernelsFor(be.isa());
      const bool kernel = k.interleaved != nullptr && k.interleaved(type);
      const bool kept = kernel && InterleavedDecodePays(type, g.size());  // as LoadWeight decides
      absl::StatusOr<BackendWeight> loaded = be.LoadWeight(view);
      REQUIRE(loaded.ok());
      INFO(Name(type) << " " << CpuIsaName(isa));
      CHECK((loaded->ref.layout == WeightLayout::kInterleaved16) == kept);
      CHECK((loaded->storage != nullptr) == kept);
      if (kept) CHECK(std::memcmp(loaded->ref.data, g.data(), g.size()) == 0);
      // 1-3 activation rows: the decode kernel row after row; 4 and more:
      // tiles packed from the groups (where the ISA has both); elsewhere the
      // rows put back in order.
      for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{9}}) {
        std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size()), got2(want.size());
        be.MatMul(plain, ConstMat(x.data(), n, cols), Mat{want.data(), n, rows});
        be.MatMul(inter, ConstMat(x.data(), n, cols), Mat{got.data(), n, rows});
        be.MatMul(loaded->ref, ConstMat(x.data(), n, cols), Mat{got2.data(), n, rows});
        INFO("n " << n);
        CHECK(SameBits(got, want));
        CHECK(SameBits(got2, want));
      }
      const std::vector<int32_t> ids = {0, 15, 16, 31, 32, 36, 7};
      std::vector<float> want(ids.size() * cols), got(want.size());
      be.GetRows(plain, ids.data(), Mat{want.data(), static_cast<int64_t>(ids.size()), cols});
      be.GetRows(inter, ids.data(), Mat{got.data(), static_cast<int64_t>(ids.size()), cols});
      CHECK(SameBits(got, want));
      be.set_repack_weights(false);
      absl::StatusOr<BackendWeight> view_only = be.LoadWeight(view);
      REQUIRE(view_only.ok());
      CHECK(view_only->ref.layout == WeightLayout::kRows);
      CHECK(view_only->ref.data == w.data());
    }
  }
}

TEST_CASE("cpu K-family weights stay in row order where their interleaved decode does not pay",
          "[backend][kquant]") {
  // Q5_K and Q6_K weights beyond kInCacheWeightBytes on CPUs that split
  // 512-bit instructions (AMD Zen 4); every other K weight wherever the ISA
  // has the kernels.
  INFO("CpuSplitsAvx512 " << CpuSplitsAvx512());
  const int64_t cols = 4096;
  for (DType type : kKTypes) {
    const bool high_bits = type == DType::kQ5_K || type == DType::kQ6_K;
    CpuBackend be(1);
    const CpuKQuantKernels& k = CpuKQuantKernelsFor(be.isa());
    const bool kernel = k.interleaved != nullptr && k.interleaved(type);
    for (const int64_t rows : {int64_t{64}, int64_t{4096}}) {
      const size_t bytes = static_cast<size_t>(rows) * RowBytes(type, cols);
      INFO(Name(type) << " " << rows << " rows, " << bytes << " bytes");
      const bool big = bytes > kInCacheWeightBytes;
      CHECK(big == (rows == 4096));  // one shape on each side of the bound
      CHECK(InterleavedDecodePays(type, bytes) == !(high_bits && big && CpuSplitsAvx512()));
      CHECK((be.SlotLayout(type, rows, cols) == WeightLayout::kInterleaved16) ==
            (kernel && InterleavedDecodePays(type, bytes)));
    }
  }
}

}  // namespace
}  // namespace odmoe::test

namespace odmoe::test {
namespace {

// Rows that reach every branch of the Q8_K quantizer: random magnitudes,
// exact ties after scaling (x = (k + 0.5) / 127 * max), equal magnitudes of
// both signs (the first wins), NaN and infinities, zeros, subnormals.
std::vector<std::vector<float>> QuantizerRows(int64_t count, std::mt19937& rng) {
  const size_t n = static_cast<size_t>(count * 256);
  std::vector<std::vector<float>> rows;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float scale : {1.0f, 1e-30f, 3e4f}) {
    std::vector<float>& r = rows.emplace_back(n);
    for (float& v : r) v = scale * u(rng);
  }
  std::vector<float>& ties = rows.emplace_back(n);
  for (size_t i = 0; i < n; ++i) {
    ties[i] = (i % 256 == 7) ? -1.0f : (static_cast<float>(i % 254) - 126.5f) / 127.0f;
  }
  std::vector<float>& signs = rows.emplace_back(n, 0.25f);
  for (size_t i = 0; i < n; i += 256) {
    signs[i + 40] = 2.0f;  // the first of magnitude 2 sets the sign of max
    signs[i + 41] = -2.0f;
    signs[i + 200] = 2.0f;
  }
  std::vector<float>& special = rows.emplace_back(n);
  for (size_t i = 0; i < n; ++i) special[i] = u(rng);
  special[3] = std::numeric_limits<float>::quiet_NaN();
  if (count > 1) {
    for (size_t i = 256; i < 512; ++i) special[i] = 0.0f;  // a block of zeros
    special[300] = -0.0f;
  }
  if (count > 2) special[512 + 9] = std::numeric_limits<float>::infinity();
  if (count > 3) {
    for (size_t i = 768; i < 1024; ++i) {
      special[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 5);
    }
  }
  std::vector<float>& nans = rows.emplace_back(n, std::numeric_limits<float>::quiet_NaN());
  nans[n - 1] = 0.5f;
  return rows;
}

}  // namespace

TEST_CASE("K-family: the SIMD activation quantizer gives QuantizeRow's bits",
          "[backend][kquant]") {
  std::mt19937 rng(41);
  WarnIfNoTableHas(&CpuKQuantKernels::quantize_acts, "a SIMD activation quantizer");
  for (int64_t count : {1, 4, 17}) {
    for (const std::vector<float>& row : QuantizerRows(count, rng)) {
      std::vector<BlockQ8K> want(static_cast<size_t>(count));
      QuantizeRow(DType::kQ8_K, row.data(), want.data(), count * 256);
      for (const CpuKQuantKernels* k : AllTables()) {
        if (k->quantize_acts == nullptr) continue;
        std::vector<KActBlock> blocks(static_cast<size_t>(count));
        std::vector<float> d(static_cast<size_t>(count), -1.0f);
        k->quantize_acts(row.data(), count, blocks.data(), d.data());
        int mismatches = 0;
        for (int64_t s = 0; s < count; ++s) {
          const BlockQ8K& w = want[static_cast<size_t>(s)];
          const KActBlock& g = blocks[static_cast<size_t>(s)];
          mismatches += std::memcmp(g.qs, w.qs, sizeof(g.qs)) != 0;
          mismatches += std::memcmp(g.bsums, w.bsums, sizeof(g.bsums)) != 0;
          mismatches += std::memcmp(&d[static_cast<size_t>(s)], &w.d, sizeof(float)) != 0;
        }
        INFO(CpuIsaName(k->isa) << " super-blocks " << count);
        CHECK(mismatches == 0);
      }
    }
  }
}

}  // namespace odmoe::test
