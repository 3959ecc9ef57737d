// MatMul with K-family weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) on the
// CPU: data layouts and the per-ISA kernel table (internal to the backend).
//
// As in the GGUF engines, every activation row is quantized once per MatMul
// to Q8_K super-blocks (QuantizeRow of tensor/quant.h, the one scalar
// routine) and the dot of a weight row with it takes, per 256-element
// super-block s, two exact int32 sums A_s and B_s and the shared float step
// of the canonical order (cpu_backend.h, "MatMul with K-family weights").
//
// Layouts:
//   KActBlock   one Q8_K super-block of an activation row: the 256 codes in
//               element order, the 16 sums of 16 consecutive codes; the f32
//               scales of a row live apart (KActs::d), zero-padded to a
//               multiple of 16 super-blocks (one canonical lane each).
//   KUnpacked   one weight super-block unpacked for the integer dot, the same
//               bytes on every ISA (CpuKQuantUnpackReference is the
//               definition): a code per element in element order (`q`), a
//               scale, min and offset correction per 16-element sub-block
//               (the 32-element sub-blocks of Q4_K, Q5_K, IQ4_XS repeat theirs
//               twice) and the decoded f16 scales. Then
//                 A_s = sum_j sc[j] * (sum_{i in j} q_i * qx_i) + sum_j corr[j] * bsum_j
//                 B_s = sum_j mn[j] * bsum_j
//               where q_i is the unsigned byte (Q2_K..Q6_K: the code plus an
//               offset that corr = -offset * sc removes) or, for IQ4_XS, the
//               signed byte kIq4nlValues[code].
//
//   KInterleave16 (WeightLayout::kInterleaved16) the decode layout the backend
//               keeps K-family weights in where the ISA has a kernel for it
//               (LoadWeight repacks them; the same bytes, moved): rows
//               16g .. 16g + 15 fill the byte range they fill in row order,
//               super-block s of the 16 rows at offset s * 16 * B (B: the
//               stored super-block's bytes) as, for each 4-byte word w <
//               B / 4 of the stored super-block, word w of rows 0 .. 15 (64
//               bytes: one 512-bit register whose 32-bit lanes are the rows),
//               then, where B % 4 == 2 (Q3_K, Q6_K: the f16 scale at the end),
//               the last 2 bytes of rows 0 .. 15. dot_interleaved computes the
//               16 dots with the rows in the lanes: each super-block's exact
//               A_s / B_s of all 16 rows at once, the float step of lane s % 16
//               on 16 transposed accumulators, and the lane tree as vertical
//               adds between them: the same bits as dot_rows.
//
//   CpuKQuantScratch scratch;
//   const CpuKQuantKernels& k = CpuKQuantKernelsFor(CpuIsa::kAvx2);
//   KActs x = QuantizeKActivations(x_f32, k, &scratch, &pool);  // once per MatMul
//   k.dot_rows(DType::kQ4_K, w, row_bytes, /*nw=*/4, superblocks, x, /*nx=*/1, y, ldy);
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "cpu_isa.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "util/thread_pool.h"

namespace odmoe {

/// Super-blocks per float-step group: one per canonical lane.
inline constexpr int kKGroupBlocks = 16;

/// One Q8_K super-block of an activation row (scale kept in KActs::d).
struct alignas(64) KActBlock {
  int8_t qs[kSuperBlockElems];  // codes in [-127, 127], element order (biased: see KActs)
  int16_t bsums[16];            // sum of codes 16j .. 16j + 15 (always the signed codes')
};
static_assert(sizeof(KActBlock) == 320);

/// Quantized activation rows: row t has `stride` super-blocks (the row's
/// count rounded up to a multiple of 16, 16 more where rows would lie a
/// multiple of 4 KiB apart; the padding is never read) at
/// blocks + t * stride and as many scales at d + t * stride, the padding 0.
/// `biased`: the codes are stored as unsigned bytes code + 128 (the signed
/// byte XOR 0x80), as the tile kernels of the types with a code offset take
/// them (TileTakesBiasedActs); the bsums stay the signed codes' sums.
struct KActs {
  const KActBlock* blocks = nullptr;
  const float* d = nullptr;
  int64_t stride = 0;
  bool biased = false;
  const KActBlock* Row(int64_t t) const { return blocks + t * stride; }
  const float* Scales(int64_t t) const { return d + t * stride; }
};

/// One weight super-block unpacked for the integer dot (see the top).
struct alignas(64) KUnpacked {
  uint8_t q[kSuperBlockElems];
  int16_t sc[16];
  int16_t mn[16];
  int16_t corr[16];
  float d;     // F16ToF32 of the super-block scale
  float dmin;  // F16ToF32 of dmin (0 for the types without mins)
};
static_assert(sizeof(KUnpacked) == 384);

/// Weight rows per KTile (the 16 int32 / f32 lanes of a 512-bit register).
inline constexpr int kKTileRows = 16;

/// One super-block of 16 weight rows laid out for VNNI prefill (the tile
/// kernels, optional per ISA): element group g (4 consecutive elements) of
/// row r at q[g][4r .. 4r + 3], so one vpdpbusd with 4 broadcast activation
/// codes yields the 4-element dot of all 16 rows.
///   Types with mins (Q2_K, Q4_K, Q5_K): q holds the unsigned codes of
///   KUnpacked::q against signed activation codes, `mn` the mins in pairs:
///   A_s = sum_j sc_j * (q . x)_j, B_s = sum_j mn_j * bsum_j.
///   Types with a code offset (Q3_K, Q6_K; IQ4_XS: its signed values) take
///   biased activations (KActs::biased, x + 128 unsigned) against the signed
///   weight values w (the code minus the offset), so the offset needs no
///   per-activation correction: (x + 128) . w = x . w + 128 * sum(w), and
///   `bias` holds -128 * sum_j sc_j * sum_{i in j} w_i per row, a constant of
///   the weights: A_s = bias + sum_j sc_j * ((x + 128) . w)_j. `mn` is zero.
/// sc[j][r] and the f32 scales per row. Rows past the matrix's end are all
/// zero. Every sum is the exact int32 of the canonical step in any order.
struct alignas(64) KTile {
  uint8_t q[kSuperBlockElems / 4][4 * kKTileRows];
  int32_t sc[16][kKTileRows];    // 16-element sub-block j's scale
  int16_t mn[8][kKTileRows][2];  // mins of 16-element sub-blocks 2k, 2k + 1
  int32_t bias[kKTileRows];      // the offset types' weight constant (above)
  float d[kKTileRows];
  float dmin[kKTileRows];
};
static_assert(sizeof(KTile) == 5824);

/// Whether the tile kernels of `type` take biased activations (KActs::biased):
/// the K-family types without mins (Q3_K, Q6_K, IQ4_XS).
constexpr bool TileTakesBiasedActs(DType type) {
  return type == DType::kQ3_K || type == DType::kQ6_K || type == DType::kIQ4_XS;
}

/// Buffers of the K-family MatMul: grown when a call needs more, never shrunk.
struct CpuKQuantScratch {
  std::vector<BlockQ8K> raw;  // QuantizeRow output
  std::vector<KActBlock> blocks;
  std::vector<float> d;
};

/// True for the weight types the K-family kernels compute.
bool IsKQuantWeightType(DType type);

/// Stored bytes of one super-block of `type` (a K-family weight type).
int KBlockBytes(DType type);

/// Quantizes every row of x (x.cols a multiple of 256) to Q8_K with
/// QuantizeRow (or the table's quantize_acts: the same bits) into
/// `scratch`, the codes biased (KActs::biased) if asked; rows are spread
/// over `pool`. Valid until the next call on `scratch`.
struct CpuKQuantKernels;
KActs QuantizeKActivations(ConstMat x, const CpuKQuantKernels& kernels, CpuKQuantScratch* scratch,
                           ThreadPool* pool, bool biased = false);

/// Flips the codes of `count` super-blocks between signed and biased.
void FlipKActCodes(KActBlock* blocks, int64_t count);

/// The scalar definition of the unpacked layout: `count` stored super-blocks
/// of `type` to out[0 .. count).
void CpuKQuantUnpackReference(DType type, const uint8_t* blocks, int64_t count, KUnpacked* out);

/// Rows per interleaved group (KInterleave16 at the top).
inline constexpr int kInterleaveRows = 16;

/// Rows 0 .. 15 (row r at rows + r * row_bytes, row_bytes a whole number of
/// super-blocks of `type`) to one KInterleave16 group of 16 * row_bytes bytes.
void InterleaveKRows(DType type, const uint8_t* rows, size_t row_bytes, uint8_t* out);

/// Row r < 16 of a KInterleave16 group back in stored order (row_bytes bytes).
void DeinterleaveKRow(DType type, const uint8_t* group, size_t row_bytes, int r, uint8_t* out);

/// All 16 rows of a KInterleave16 group back in stored order (row r at
/// rows + r * row_bytes): the inverse of InterleaveKRows.
void DeinterleaveKRows(DType type, const uint8_t* group, size_t row_bytes, uint8_t* rows);

/// Weights up to this size count as read from cache in InterleavedDecodePays.
inline constexpr size_t kInCacheWeightBytes = size_t{2} << 20;

/// Whether LoadWeight keeps a `type` weight of `bytes` bytes in KInterleave16
/// on this CPU, given an ISA whose kernels compute it there: everywhere,
/// except Q5_K and Q6_K weights larger than kInCacheWeightBytes where 512-bit
/// instructions run as two halves (CpuSplitsAvx512: AMD Zen 4). There their
/// interleaved decode, 2x faster than row order from cache, ran 1.5x slower
/// from memory (docs/benchmarks.md, "K-family decode on AMD Zen 4").
bool InterleavedDecodePays(DType type, size_t bytes);

/// The K-family kernels of one ISA level; all levels give the same bits.
struct CpuKQuantKernels {
  CpuIsa isa;

  /// y[t * ldy + r] = canonical K-family dot of weight row r (r < nw, 1..4;
  /// row r at w + r * row_bytes, `superblocks` stored super-blocks of
  /// `type`) with activation row t < nx. Reads the weights as stored.
  void (*dot_rows)(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks,
                   const KActs& x, int64_t nx, float* y, int64_t ldy);

  /// Unpacks nw rows as dot_rows reads them: row r to out + r * superblocks.
  void (*unpack_rows)(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks,
                      KUnpacked* out);

  /// dot_rows on rows unpacked by unpack_rows (bitwise the same results); the
  /// weights are reused from registers across activation rows.
  void (*dot_unpacked)(DType type, const KUnpacked* w, int nw, int64_t superblocks, const KActs& x,
                       int64_t nx, float* y, int64_t ldy);

  /// Optional (null where the ISA has no such kernels): nw <= kKTileRows
  /// rows to `superblocks` KTiles, and the canonical dot of those rows with
  /// every activation row from them (bitwise dot_rows' results); x biased
  /// where TileTakesBiasedActs(type).
  void (*pack_tile)(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks,
                    KTile* out) = nullptr;
  void (*dot_tile)(DType type, const KTile* w, int nw, int64_t superblocks, const KActs& x,
                   int64_t nx, float* y, int64_t ldy) = nullptr;

  /// Optional: true for the types dot_interleaved computes on this ISA (the
  /// backend keeps only those in KInterleave16; null: none).
  bool (*interleaved)(DType type) = nullptr;
  /// y[r] = canonical dot of row r < 16 of a KInterleave16 group of
  /// `superblocks` super-blocks with activation row 0 of x (decode).
  void (*dot_interleaved)(DType type, const uint8_t* group, int64_t superblocks, const KActs& x,
                          float* y) = nullptr;
  /// Optional (with dot_tile): pack_tile of the 16 rows of a KInterleave16
  /// group (prefill reads interleaved weights without putting them back in
  /// row order first).
  void (*pack_tile_interleaved)(DType type, const uint8_t* group, int64_t superblocks,
                                KTile* out) = nullptr;
  /// Optional: InterleaveKRows with SIMD (the same bytes).
  void (*interleave_rows)(DType type, const uint8_t* rows, size_t row_bytes,
                          uint8_t* group) = nullptr;
  /// Optional: QuantizeRow(DType::kQ8_K) of one activation row of
  /// `superblocks` super-blocks with SIMD, straight into KActBlocks and
  /// their scales (the same bits as the scalar quantizer).
  void (*quantize_acts)(const float* x, int64_t superblocks, KActBlock* blocks,
                        float* d) = nullptr;
};

/// The table of `isa`; the caller makes sure the CPU supports it.
const CpuKQuantKernels& CpuKQuantKernelsFor(CpuIsa isa);

// One table per ISA (cpu_kquant_<isa>.cpp); the SIMD ones return null in
// builds for other architectures.
const CpuKQuantKernels* CpuKQuantKernelsScalar();
const CpuKQuantKernels* CpuKQuantKernelsAvx2();
const CpuKQuantKernels* CpuKQuantKernelsAvx512();
const CpuKQuantKernels* CpuKQuantKernelsAvx512Vnni();

}  // namespace odmoe
