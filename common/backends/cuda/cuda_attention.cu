// Causal attention with grouped KV heads over an F32 KV cache in device
// memory, in the CPU backend's order (cpu_attention.cpp), over the visible
// rows j = first..p (AttentionFirstRow: the sliding window):
//   s_j = canonical dot(k_j, q_h) * scale          (one half-warp per j)
//   m   = max_j s_j, then max(m, sink)             (exact max: any order)
//   p_j = ExpF(s_j - m)
//   sum = canonical sum of p (the first half-warp), + ExpF(sink - m)
//   out[d] = (fma over j in order of p_j * v_j[d]) / sum   (one thread per d,
//            eight rows' values loaded ahead of their fmas)
// One block per (query head, query row) (more threads a block for a few
// rows: the same operations per element). Decode's blocks (up to 4 query
// rows) load more at once, with the same chains: a lane keeps q's elements
// and those of two cache rows in registers (heads up to 256 wide), and the
// block stages V in shared-memory tiles of 32 KiB that thread d's chain
// reads (V heads up to 512 wide). The scores of a block live in a
// row of `scratch`, indexed from the first visible row. Blocks walk query
// rows with a stride of gridDim.y, which LaunchAttention bounds so that the
// scratch stays within its size.
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"
#include "util/env_flag.h"

namespace odmoe::cuda {

namespace {

namespace num = cuda_numerics;

/// Threads per block: 128 when many blocks share the GPU (prefill), 512 for
/// a few query rows (decode: one block per head, so the scores of 32 cache
/// rows are in flight per step instead of 8; the output loop, a thread per
/// element of a head, leaves the rest idle either way).
constexpr int kThreadsMany = 128;
constexpr int kThreadsFew = 512;
/// Query rows up to which a launch takes kThreadsFew.
constexpr int64_t kFewRows = 4;
constexpr int64_t kMaxGridY = 65535;
/// V rows whose values a thread loads ahead of its fma chain (prefill).
constexpr int kValuesInFlight = 8;
/// Decode (kThreadsFew): heads up to this wide keep each lane's q and K
/// elements in registers, kRowsPerHalf cache rows per half-warp a step with
/// all their loads issued before the chains.
constexpr int kRegHeadDim = 256;
constexpr int kRegPerLane = kRegHeadDim / num::kLanes;
constexpr int kRowsPerHalf = 2;
/// Decode: V floats the whole block stages in shared memory at a time (32
/// KiB: 64 rows of a 128-wide head), for V heads up to kThreadsFew wide.
constexpr int kVTileFloats = 8192;

struct AttentionArgs {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  float* scratch;
  const float* sinks;  // n_head logits, or null
  int64_t n;           // query rows
  int64_t ldq;         // n_head * head_dim
  int64_t ldo;         // n_head * v_head_dim
  int64_t ldk;         // n_head_kv * head_dim
  int64_t ldv;         // the V rows' stride (>= n_head_kv * v_head_dim)
  int64_t score_ld;    // floats per scratch row: pos0 + n
  int n_head;
  int group;  // query heads per KV head
  int head_dim;
  int v_head_dim;
  int pos0;
  int window;  // 0: none
  float scale;
  bool ahead;  // decode may load ahead (ScoresAhead, ValuesTiled)
};

/// Decode's scores (head_dim <= kRegHeadDim): s[j] = LaneDot(k_j, q) tree
/// * scale for j < len, each half-warp (`half` = threadIdx.x / 16) taking
/// kRowsPerHalf rows a step; lane l holds q's elements l, l + 16, ... and
/// loads its elements of those rows before its fma chains, which are
/// LaneDot's. Every thread of the block calls it.
template <int kThreads>
__device__ __forceinline__ void ScoresAhead(const AttentionArgs& a, const float* kg,
                                            const float* qh, int64_t len, float* s) {
  constexpr int kHalves = kThreads / num::kLanes;
  const int lane = static_cast<int>(threadIdx.x % num::kLanes);
  const int half = static_cast<int>(threadIdx.x / num::kLanes);
  float qr[kRegPerLane];
#pragma unroll
  for (int u = 0; u < kRegPerLane; ++u) {
    const int i = lane + num::kLanes * u;
    qr[u] = i < a.head_dim ? qh[i] : 0.0f;
  }
  for (int64_t j0 = 0; j0 < len; j0 += static_cast<int64_t>(kHalves) * kRowsPerHalf) {
    float kr[kRowsPerHalf][kRegPerLane];
#pragma unroll
    for (int r = 0; r < kRowsPerHalf; ++r) {
      const int64_t j = j0 + half + static_cast<int64_t>(r) * kHalves;
      const float* kj = kg + (j < len ? j : 0) * a.ldk;
#pragma unroll
      for (int u = 0; u < kRegPerLane; ++u) {
        const int i = lane + num::kLanes * u;
        kr[r][u] = j < len && i < a.head_dim ? kj[i] : 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerHalf; ++r) {
      const int64_t j = j0 + half + static_cast<int64_t>(r) * kHalves;
      float acc = 0.0f;
#pragma unroll
      for (int u = 0; u < kRegPerLane; ++u) {
        if (lane + num::kLanes * u < a.head_dim) acc = num::Fma(kr[r][u], qr[u], acc);
      }
      const float dot = HalfWarpTree(acc);  // every lane of the warp takes part
      if (j < len && lane == 0) s[j] = dot * a.scale;
    }
  }
}

/// Decode's output (v_head_dim <= kThreads): o[d] = (fma over j in order of
/// p_j * v_j[d]) / sum, thread d's chain as the plain loop's, reading the V
/// rows from tiles of kVTileFloats that the whole block stages in shared
/// memory (each thread's loads of a tile in flight together). Every thread
/// of the block calls it.
template <int kThreads>
__device__ __forceinline__ void ValuesTiled(const AttentionArgs& a, const float* vg,
                                            const float* s, int64_t len, float sum, float* o) {
  constexpr int kPerThread = kVTileFloats / kThreads;
  __shared__ float tile[kVTileFloats];
  const int vd = a.v_head_dim;
  const int tile_rows = kVTileFloats / vd;
  const int d = static_cast<int>(threadIdx.x);
  // Tile element d + u * kThreads is row r0 + u * dr + carries, column c:
  // kept by counters (no division per element).
  const int r0 = d / vd, c0 = d % vd, dr = kThreads / vd, dc = kThreads % vd;
  float acc = 0.0f;
  for (int64_t j0 = 0; j0 < len; j0 += tile_rows) {
    const int rows = static_cast<int>(len - j0 < tile_rows ? len - j0 : tile_rows);
    const int count = rows * vd;
    float reg[kPerThread];
    int r = r0, c = c0;
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
      const int idx = d + u * kThreads;
      reg[u] = idx < count ? vg[(j0 + r) * a.ldv + c] : 0.0f;
      r += dr;
      c += dc;
      if (c >= vd) {
        c -= vd;
        ++r;
      }
    }
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
      const int idx = d + u * kThreads;
      if (idx < count) tile[idx] = reg[u];
    }
    __syncthreads();
    if (d < vd) {
      for (int r = 0; r < rows; ++r) acc = num::Fma(s[j0 + r], tile[r * vd + d], acc);
    }
    __syncthreads();  // the tile is rewritten next
  }
  if (d < vd) o[d] = acc / sum;
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads) AttentionKernel(AttentionArgs a) {
  AfterPriorKernels();
  constexpr int kWarps = kThreads / 32;
  __shared__ float red[kWarps];
  __shared__ float sum_sh;
  const int h = static_cast<int>(blockIdx.x);
  const int lane = static_cast<int>(threadIdx.x % num::kLanes);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int half_in_warp = static_cast<int>((threadIdx.x / num::kLanes) % 2);
  const int64_t kv_head = h / a.group;
  const bool has_sink = a.sinks != nullptr;
  const float sink = has_sink ? a.sinks[h] : 0.0f;
  float* s = a.scratch + (static_cast<int64_t>(blockIdx.y) * a.n_head + h) * a.score_ld;
  for (int64_t t = blockIdx.y; t < a.n; t += gridDim.y) {
    const int64_t p = a.pos0 + t;
    const int64_t first = num::AttentionFirstRow(p, a.window);
    const int64_t len = p + 1 - first;
    const float* kg = a.k + first * a.ldk + kv_head * a.head_dim;
    const float* qh = a.q + t * a.ldq + static_cast<int64_t>(h) * a.head_dim;
    constexpr bool kDecode = kThreads == kThreadsFew;
    bool ahead_scores = false;
    if constexpr (kDecode) ahead_scores = a.ahead && a.head_dim <= kRegHeadDim;
    if (ahead_scores) {
      if constexpr (kDecode) ScoresAhead<kThreads>(a, kg, qh, len, s);
    } else {
      // Scores: each warp takes two cache rows per step, one per half-warp.
      for (int64_t j0 = 2 * warp; j0 < len; j0 += 2 * kWarps) {
        const int64_t j = j0 + half_in_warp;
        float acc = 0.0f;
        if (j < len) acc = num::LaneDot<DType::kF32>(kg + j * a.ldk, qh, a.head_dim, lane);
        const float dot = HalfWarpTree(acc);
        if (j < len && lane == 0) s[j] = dot * a.scale;
      }
    }
    __syncthreads();
    float m = num::NegInfinity();
    for (int64_t j = threadIdx.x; j < len; j += kThreads) m = num::MaxSkipNan(m, s[j]);
    m = num::AttentionMax(BlockMaxSkipNan(m, red), has_sink, sink);
    for (int64_t j = threadIdx.x; j < len; j += kThreads) s[j] = num::ExpF(s[j] - m);
    __syncthreads();
    if (warp == 0) {
      const float sum = HalfWarpTree(num::LaneSum(s, len, lane));
      if (threadIdx.x == 0) sum_sh = num::AttentionDenominator(sum, has_sink, sink, m);
    }
    __syncthreads();
    const float sum = sum_sh;
    const float* vg = a.v + first * a.ldv + kv_head * a.v_head_dim;
    float* o = a.out + t * a.ldo + static_cast<int64_t>(h) * a.v_head_dim;
    if constexpr (kDecode) {
      if (a.ahead && a.v_head_dim <= kThreads) {
        ValuesTiled<kThreads>(a, vg, s, len, sum, o);
        continue;  // ValuesTiled ends with a barrier: s and sum_sh may be rewritten
      }
    }
    for (int d = static_cast<int>(threadIdx.x); d < a.v_head_dim; d += kThreads) {
      const float* vd = vg + d;
      float acc = 0.0f;
      int64_t j = 0;
      // kValuesInFlight rows' values loaded before their fmas: the chain keeps
      // its order, the loads no longer wait for each other.
      for (; j + kValuesInFlight <= len; j += kValuesInFlight) {
        float vj[kValuesInFlight];
#pragma unroll
        for (int u = 0; u < kValuesInFlight; ++u) vj[u] = vd[(j + u) * a.ldv];
#pragma unroll
        for (int u = 0; u < kValuesInFlight; ++u) acc = num::Fma(s[j + u], vj[u], acc);
      }
      for (; j < len; ++j) acc = num::Fma(s[j], vd[j * a.ldv], acc);
      o[d] = acc / sum;
    }
    __syncthreads();  // s and sum_sh are rewritten for the next row
  }
}

/// Query rows processed at once (the grid's y extent).
int64_t RowsAtOnce(int64_t n, int n_head, int pos0, int64_t max_scratch_floats) {
  const int64_t per_row = static_cast<int64_t>(n_head) * (pos0 + n);
  int64_t rows = per_row > 0 ? max_scratch_floats / per_row : n;
  if (rows > n) rows = n;
  if (rows > kMaxGridY) rows = kMaxGridY;
  return rows < 1 ? 1 : rows;
}

}  // namespace

int64_t AttentionScratchFloats(int64_t n, int n_head, int pos0, int64_t max_scratch_floats) {
  return RowsAtOnce(n, n_head, pos0, max_scratch_floats) * n_head * (pos0 + n);
}

cudaError_t LaunchAttention(cudaStream_t stream, ConstMat q, ConstMat k_cache, ConstMat v_cache,
                            int n_head, int n_head_kv, int head_dim, int pos0, float scale,
                            const AttentionOptions& options, Mat out, float* scratch,
                            int64_t scratch_floats) {
  if (q.rows == 0) return cudaSuccess;
  AttentionArgs a{};
  a.q = q.data;
  a.k = k_cache.data;
  a.v = v_cache.data;
  a.out = out.data;
  a.scratch = scratch;
  a.sinks = options.sinks;
  a.n = q.rows;
  a.ldq = q.cols;
  a.ldo = out.cols;
  a.ldk = k_cache.cols;
  a.ldv = v_cache.cols;
  a.score_ld = pos0 + q.rows;
  a.n_head = n_head;
  a.group = n_head / n_head_kv;
  a.head_dim = head_dim;
  a.v_head_dim = options.v_head_dim > 0 ? options.v_head_dim : head_dim;
  a.pos0 = pos0;
  a.window = options.window;
  a.scale = scale;
  // ODMOE_CUDA_ATTENTION_AHEAD=0: decode's plain loops (the same bits; for
  // timing and for telling the two apart on a new GPU).
  static const bool ahead = EnvFlagOn("ODMOE_CUDA_ATTENTION_AHEAD");
  a.ahead = ahead;
  const int64_t rows = RowsAtOnce(q.rows, n_head, pos0, scratch_floats);
  const dim3 grid(static_cast<unsigned>(n_head), static_cast<unsigned>(rows));
  if (q.rows <= kFewRows) {
    Launch(AttentionKernel<kThreadsFew>, grid, kThreadsFew, 0, stream, a);
  } else {
    Launch(AttentionKernel<kThreadsMany>, grid, kThreadsMany, 0, stream, a);
  }
  return cudaGetLastError();
}

}  // namespace odmoe::cuda
