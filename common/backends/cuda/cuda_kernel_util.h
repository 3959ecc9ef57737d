// Device-side helpers shared by the .cu files of the CUDA backend (internal;
// include only from .cu files).
//
//   float acc = cuda_numerics::LaneDot<DType::kF32>(w, x, k, threadIdx.x % 16);
//   float dot = HalfWarpTree(acc);        // valid in lane 0 of the half-warp
//   for (int64_t i = GlobalThread(); i < total; i += GridThreads()) ...
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "cuda_numerics.h"
#include "cuda_numerics_dequant.h"

namespace odmoe::cuda {

// ---- Kernel launches ----------------------------------------------------------
// Every kernel of the backend starts with AfterPriorKernels() and is launched
// with Launch(). On Hopper and later (ProgrammaticLaunchOn) a launch allows
// programmatic dependent launch: the kernel may be scheduled while the kernel
// before it in the stream still runs, and its first statement waits until that
// kernel has finished and its writes are visible, so every kernel still sees
// exactly what a plain launch would show it; what overlaps is the launch and
// the scheduling of its blocks, instead of following the previous kernel's end.
// After the wait it lets the next kernel be scheduled in turn (one kernel
// ahead, never more). Elsewhere (older GPUs, ODMOE_CUDA_PDL=0) launches are
// plain and both instructions are no-ops.

__device__ __forceinline__ void AfterPriorKernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Whether kernels launched now on the current device may use programmatic
/// dependent launch: a GPU of compute capability 9.0 or later whose code for
/// this build's kernels came from PTX of 9.0 or later (so AfterPriorKernels
/// waits: a build for older architectures only, JIT-compiled on a Hopper GPU,
/// launches plainly), unless the environment says ODMOE_CUDA_PDL=0 (read once
/// per process). Asked once per device (cuda_launch.cu).
bool ProgrammaticLaunchOn();

/// kernel<<<grid, block, shared_bytes, stream>>>(args...), with programmatic
/// stream serialization allowed when ProgrammaticLaunchOn(). Errors are
/// returned and, like a <<<>>> launch's, left for cudaGetLastError.
template <class... Params, class... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = ProgrammaticLaunchOn() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

inline constexpr unsigned kFullMask = 0xffffffffu;

/// Rows up to this size are staged in dynamic shared memory by the kernels
/// that walk a row in the canonical lane order (8192 floats: every model's
/// hidden size; well inside the 48 KiB a block may take without opting in,
/// static shared memory included).
inline constexpr size_t kStagedRowMaxBytes = 32 * 1024;

/// The canonical tree of cuda_numerics::TreeReduce16 over the 16 lanes of a
/// half-warp (lane i holding l[i]); the result is valid in lane 0 of each
/// half-warp. Every thread of the warp must call it.
__device__ __forceinline__ float HalfWarpTree(float v) {
  v = v + __shfl_down_sync(kFullMask, v, 8, 16);  // s8[i] = l[i] + l[i + 8]
  v = v + __shfl_down_sync(kFullMask, v, 4, 16);  // s4[i] = s8[i] + s8[i + 4]
  v = v + __shfl_down_sync(kFullMask, v, 2, 16);  // s2[i] = s4[i] + s4[i + 2]
  v = v + __shfl_down_sync(kFullMask, v, 1, 16);  // s2[0] + s2[1]
  return v;
}

/// The maximum over the block with NaN skipped (exact, so any order gives
/// the same value). `red` is shared memory of blockDim.x / 32 floats;
/// every thread of the block must call it.
__device__ __forceinline__ float BlockMaxSkipNan(float v, float* red) {
  for (int off = 16; off > 0; off /= 2) {
    v = cuda_numerics::MaxSkipNan(v, __shfl_xor_sync(kFullMask, v, off));
  }
  const int warps = static_cast<int>(blockDim.x / 32);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < warps; ++w) v = cuda_numerics::MaxSkipNan(v, red[w]);
  __syncthreads();  // `red` may be reused at once
  return v;
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// The runtime-DType-to-template dispatch (cuda_numerics_dequant.h, shared
// with the host tests).
using cuda_numerics::TypeTag;
using cuda_numerics::VisitWeightType;

/// The floats an activation quantizer reads: x itself, or SwiGLU(gate, up)
/// formed on the way, element by element as the SwiGlu kernel does, and
/// stored back into gate (as SwiGlu(gate, up, gate) would). Get(i) is called
/// once per element.
struct PlainRows {
  const float* x;
  __device__ __forceinline__ float Get(int64_t i) const { return x[i]; }
};
struct SwiGluRows {
  float* gate;
  const float* up;
  __device__ __forceinline__ float Get(int64_t i) const {
    const float v = cuda_numerics::Silu(gate[i]) * up[i];
    gate[i] = v;
    return v;
  }
};

/// Blocks of `threads` for a grid-stride loop over `total` items.
inline unsigned GridFor(int64_t total, int threads) {
  constexpr int64_t kMaxBlocks = 65535;
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace odmoe::cuda
