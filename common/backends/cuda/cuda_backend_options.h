// How a CUDA backend is chosen by name, and how it multiplies by float
// weights (plain C++: usable and tested without a GPU).
//
// Names (the part after "cuda:" goes to ParseCudaBackendArg):
//   "cuda"          device 0, exact float MatMul
//   "cuda:N"        device N, exact float MatMul
//   "cuda:N:cublas" device N, cuBLAS for float-weight MatMuls of at least
//                   kCublasMinRows activation rows
//
//   ODMOE_ASSIGN_OR_RETURN(CudaBackendOptions o, ParseCudaBackendArg("1:cublas"));
//   CudaBackendName(o);   // "cuda:1:cublas"
//
// Why exact is the default. backend/backend.h promises that y[t][o] of a
// MatMul depends on row t of x and row o of w only, never on how many rows
// a call has: the cluster relies on it to split and regroup tokens across
// workers and still match the single-process result bit for bit. The
// backend's own kernels keep that promise (and give the CPU backend's bits,
// see cuda_backend.h). cuBLAS chooses its kernels, tiles and split-K by the
// shape, so with kCublas the last bits of a float-weight product may depend
// on the number of rows in the call (they are still the same from run to run
// for the same shapes on the same GPU and library). Q8_0 / Q4_0 weights
// always use the backend's kernels.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace odmoe {

enum class FloatMatMulPolicy {
  kExact,   // the canonical kernels for every F32 / F16 / BF16 MatMul
  kCublas,  // cuBLAS from kCublasMinRows activation rows on
};

struct CudaBackendOptions {
  int device = 0;
  FloatMatMulPolicy float_matmul = FloatMatMulPolicy::kExact;
};

/// Largest device number accepted in a name (a guard against typos).
inline constexpr int kMaxCudaDevice = 255;

/// Parses "", "N" or "N:cublas". INVALID_ARGUMENT (naming the full backend
/// name and what was expected) for anything else.
absl::StatusOr<CudaBackendOptions> ParseCudaBackendArg(std::string_view arg);

/// The name that ParseCudaBackendArg maps back to `options`.
std::string CudaBackendName(const CudaBackendOptions& options);

}  // namespace odmoe
