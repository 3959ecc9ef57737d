#include "cuda_resources.h"

#include "absl/strings/str_format.h"

namespace odmoe::cuda {

absl::Status CudaStatus(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrFormat("%s: CUDA error %s (%s)", what, cudaGetErrorName(err),
                                          cudaGetErrorString(err));
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status CublasStatus(cublasStatus_t st, std::string_view what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrFormat("%s: cuBLAS error %s (%s)", what, cublasGetStatusName(st),
                                          cublasGetStatusString(st));
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  if (st == CUBLAS_STATUS_NOT_INITIALIZED || st == CUBLAS_STATUS_ARCH_MISMATCH) {
    return absl::UnavailableError(msg);
  }
  return absl::InternalError(msg);
}

void StreamDeleter::operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
void EventDeleter::operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
void CublasDeleter::operator()(cublasHandle_t h) const { cublasDestroy(h); }

absl::StatusOr<StreamPtr> CreateStream() {
  cudaStream_t s = nullptr;
  if (absl::Status st = CudaStatus(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                                   "cudaStreamCreateWithFlags");
      !st.ok()) {
    return st;
  }
  return StreamPtr(s);
}

absl::StatusOr<EventPtr> CreateEvent(bool timing) {
  cudaEvent_t e = nullptr;
  const unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  if (absl::Status st = CudaStatus(cudaEventCreateWithFlags(&e, flags), "cudaEventCreate");
      !st.ok()) {
    return st;
  }
  return EventPtr(e);
}

absl::StatusOr<CublasPtr> CreateCublas() {
  cublasHandle_t h = nullptr;
  if (absl::Status st = CublasStatus(cublasCreate(&h), "cublasCreate"); !st.ok()) return st;
  return CublasPtr(h);
}

void DeviceMemory::Free::operator()(void* p) const { cudaFree(p); }

absl::StatusOr<DeviceMemory> DeviceMemory::Allocate(size_t bytes) {
  DeviceMemory m;
  if (bytes == 0) return m;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it
    return CudaStatus(err, absl::StrFormat("cudaMalloc of %d bytes", bytes));
  }
  m.ptr_.reset(p);
  m.size_ = bytes;
  return m;
}

void PinnedHostBuffer::Free::operator()(void* p) const { cudaFreeHost(p); }

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(size_t bytes) {
  PinnedHostBuffer b;
  if (bytes == 0) return b;
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(err, absl::StrFormat("cudaHostAlloc of %d pinned bytes", bytes));
  }
  b.ptr_.reset(p);
  b.size_ = bytes;
  return b;
}

bool IsPinnedHost(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

absl::StatusOr<int> UsableDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    // Whatever the reason (no driver, no device, a broken install), this
    // process cannot use a GPU.
    return absl::UnavailableError(
        CudaStatus(err, "no usable CUDA device (cudaGetDeviceCount)").message());
  }
  if (count <= 0) return absl::UnavailableError("no usable CUDA device: none found");
  return count;
}

absl::Status UseDevice(int device) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return absl::OkStatus();
  return CudaStatus(cudaSetDevice(device), absl::StrFormat("cudaSetDevice(%d)", device));
}

}  // namespace odmoe::cuda
