// When the backend's kernels may use programmatic dependent launch
// (cuda_kernel_util.h: Launch, AfterPriorKernels).
#include <atomic>
#include <cstdint>

#include "cuda_kernel_util.h"
#include "util/env_flag.h"

namespace odmoe::cuda {

namespace {

/// Compiled with this target's architectures like every kernel of the
/// backend: the PTX version of its code on a device is theirs.
__global__ void LaunchProbeKernel() { AfterPriorKernels(); }

}  // namespace

bool ProgrammaticLaunchOn() {
  static const bool allowed = EnvFlagOn("ODMOE_CUDA_PDL");
  if (!allowed) return false;
  constexpr int kDevices = 64;
  // Per device: 0 not asked yet, 1 on, 2 off.
  static std::atomic<int8_t> state[kDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
  int8_t known = state[device].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    cudaFuncAttributes probe{};
    const bool on = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
                        cudaSuccess &&
                    major >= 9 &&
                    cudaFuncGetAttributes(&probe, LaunchProbeKernel) == cudaSuccess &&
                    probe.ptxVersion >= 90;
    known = on ? 1 : 2;
    state[device].store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

}  // namespace odmoe::cuda
