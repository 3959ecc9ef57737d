// RAII owners of CUDA and cuBLAS handles, and the one place where their
// error codes become absl::Status values.
//
//   ODMOE_ASSIGN_OR_RETURN(cuda::StreamPtr stream, cuda::CreateStream());
//   ODMOE_ASSIGN_OR_RETURN(cuda::DeviceMemory buf, cuda::DeviceMemory::Allocate(1 << 20));
//   ODMOE_ASSIGN_OR_RETURN(cuda::PinnedHostBuffer host, cuda::PinnedHostBuffer::Allocate(1 << 20));
//   ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(
//       cudaMemcpyAsync(buf.data(), host.data(), 1 << 20, cudaMemcpyHostToDevice, stream.get()),
//       "upload"));
//
// Every owner frees its handle when destroyed and is move-only. Streams are
// created non-blocking: they never synchronise implicitly with the legacy
// default stream, so all ordering in this backend is explicit (the stream an
// op is issued on, and events between streams).
//
// Status codes: cudaErrorMemoryAllocation -> RESOURCE_EXHAUSTED; a missing
// GPU or driver (no device, insufficient driver, no kernel image for this
// GPU...) -> UNAVAILABLE; anything else -> INTERNAL. The message names the
// operation and carries CUDA's own error name and text.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace odmoe::cuda {

/// OK for cudaSuccess, otherwise an error naming `what`.
absl::Status CudaStatus(cudaError_t err, std::string_view what);
/// OK for CUBLAS_STATUS_SUCCESS, otherwise an error naming `what`.
absl::Status CublasStatus(cublasStatus_t st, std::string_view what);

struct StreamDeleter {
  void operator()(cudaStream_t s) const;
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const;
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const;
};
using StreamPtr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using EventPtr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using CublasPtr = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDeleter>;

/// A non-blocking stream on the current device.
absl::StatusOr<StreamPtr> CreateStream();
/// An event; `timing` = false makes recording and waiting cheaper.
absl::StatusOr<EventPtr> CreateEvent(bool timing);
/// A cuBLAS handle on the current device.
absl::StatusOr<CublasPtr> CreateCublas();

/// Device memory from cudaMalloc (256-byte aligned).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  /// RESOURCE_EXHAUSTED when the device cannot satisfy it; 0 bytes gives an
  /// empty object with a null pointer.
  static absl::StatusOr<DeviceMemory> Allocate(size_t bytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

/// Page-locked host memory from cudaHostAlloc (portable: pinned for every
/// device), the source that lets cudaMemcpyAsync run on a copy engine while
/// the host and the compute stream go on.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  static absl::StatusOr<PinnedHostBuffer> Allocate(size_t bytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

/// True when `p` is page-locked (cudaHostAlloc'd or cudaHostRegister'ed) host
/// memory, so an async copy from it does not go through a staging buffer.
bool IsPinnedHost(const void* p);

/// Number of usable CUDA devices, or the reason there is none (UNAVAILABLE:
/// cudaGetDeviceCount failed or found 0 devices).
absl::StatusOr<int> UsableDeviceCount();

/// Makes `device` current on the calling thread when it is not already.
absl::Status UseDevice(int device);

}  // namespace odmoe::cuda
