#include "cuda_slot_device.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "cuda_backend.h"
#include "util/status_macros.h"

namespace odmoe {

namespace {

class CudaSlotDevice final : public SlotDevice {
 public:
  CudaSlotDevice(CudaBackend& backend, cuda::StreamPtr copy)
      : backend_(backend), copy_(std::move(copy)) {}
  ~CudaSlotDevice() override {
    if (backend_.UseDevice().ok()) cudaStreamSynchronize(copy_.get());
  }

  std::string name() const override { return backend_.name(); }

  absl::StatusOr<uint8_t*> Reserve(int slots, size_t slot_bytes) override {
    if (slots < 1 || slot_bytes == 0 || slot_bytes > SIZE_MAX / static_cast<size_t>(slots)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: bad slot reservation (%d x %d bytes)", name(), slots, slot_bytes));
    }
    ODMOE_RETURN_IF_ERROR(backend_.UseDevice());
    ODMOE_ASSIGN_OR_RETURN(memory_,
                           cuda::DeviceMemory::Allocate(static_cast<size_t>(slots) * slot_bytes));
    for (int i = 0; i < slots; ++i) {
      ODMOE_ASSIGN_OR_RETURN(cuda::EventPtr start, cuda::CreateEvent(/*timing=*/true));
      ODMOE_ASSIGN_OR_RETURN(cuda::EventPtr ready, cuda::CreateEvent(/*timing=*/true));
      ODMOE_ASSIGN_OR_RETURN(cuda::EventPtr release, cuda::CreateEvent(/*timing=*/false));
      start_.push_back(std::move(start));
      ready_.push_back(std::move(ready));
      release_.push_back(std::move(release));
    }
    return static_cast<uint8_t*>(memory_.data());
  }

  absl::StatusOr<uint8_t*> ReserveHost(size_t bytes) override {
    if (bytes == 0 || host_.size() != 0) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: host area reserved twice or empty (%d bytes)", name(), bytes));
    }
    ODMOE_RETURN_IF_ERROR(backend_.UseDevice());
    ODMOE_ASSIGN_OR_RETURN(host_, cuda::PinnedHostBuffer::Allocate(bytes));
    return static_cast<uint8_t*>(host_.data());
  }

  absl::Status QueueLoad(int slot, void* dst, const void* src, size_t bytes) override {
    if (!cuda::IsPinnedHost(src)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: expert source %p is not pinned host memory (use PinnedExpertStore)", name(), src));
    }
    ODMOE_RETURN_IF_ERROR(backend_.UseDevice());
    const size_t i = static_cast<size_t>(slot);
    // Behind the last compute that read the slot (a no-op before the first).
    ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamWaitEvent(copy_.get(), release_[i].get(), 0),
                                           "expert load: wait for release"));
    ODMOE_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaEventRecord(start_[i].get(), copy_.get()), "expert load: start"));
    ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy_.get()), "expert load"));
    return cuda::CudaStatus(cudaEventRecord(ready_[i].get(), copy_.get()), "expert load: ready");
  }

  absl::Status ComputeWaitForLoad(int slot) override {
    ODMOE_RETURN_IF_ERROR(backend_.UseDevice());
    return cuda::CudaStatus(
        cudaStreamWaitEvent(backend_.stream(), ready_[static_cast<size_t>(slot)].get(), 0),
        "expert acquire: wait for load");
  }

  absl::Status RecordRelease(int slot) override {
    ODMOE_RETURN_IF_ERROR(backend_.UseDevice());
    return cuda::CudaStatus(
        cudaEventRecord(release_[static_cast<size_t>(slot)].get(), backend_.stream()),
        "expert release");
  }

  absl::Status WaitLoadDone(int slot) override {
    return cuda::CudaStatus(cudaEventSynchronize(ready_[static_cast<size_t>(slot)].get()),
                            "expert load: wait");
  }

  absl::StatusOr<double> LoadSeconds(int slot) override {
    float ms = 0.0f;
    const size_t i = static_cast<size_t>(slot);
    ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(
        cudaEventElapsedTime(&ms, start_[i].get(), ready_[i].get()), "expert load: timing"));
    return ms / 1000.0;
  }

 private:
  CudaBackend& backend_;
  cuda::StreamPtr copy_;
  cuda::DeviceMemory memory_;
  cuda::PinnedHostBuffer host_;
  std::vector<cuda::EventPtr> start_, ready_, release_;
};

}  // namespace

absl::StatusOr<PinnedExpertStore> PinnedExpertStore::Create(int count, size_t entry_bytes) {
  if (count < 1 || entry_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pinned expert store: need at least one entry of at least one byte (got %d x %d)", count,
        entry_bytes));
  }
  PinnedExpertStore s;
  s.count_ = count;
  s.entry_bytes_ = entry_bytes;
  s.stride_ = ExpertSlotStride(entry_bytes);
  if (s.stride_ > SIZE_MAX / static_cast<size_t>(count)) {
    return absl::ResourceExhaustedError("pinned expert store: size overflows");
  }
  ODMOE_ASSIGN_OR_RETURN(s.buffer_,
                         cuda::PinnedHostBuffer::Allocate(s.stride_ * static_cast<size_t>(count)));
  return s;
}

absl::StatusOr<std::unique_ptr<SlotDevice>> MakeCudaSlotDevice(Backend& backend) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend);
  if (cuda_backend == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CUDA expert slots need a CUDA backend, not '%s'", backend.name()));
  }
  ODMOE_RETURN_IF_ERROR(cuda_backend->UseDevice());
  ODMOE_ASSIGN_OR_RETURN(cuda::StreamPtr copy, cuda::CreateStream());
  return std::unique_ptr<SlotDevice>(
      std::make_unique<CudaSlotDevice>(*cuda_backend, std::move(copy)));
}

}  // namespace odmoe
