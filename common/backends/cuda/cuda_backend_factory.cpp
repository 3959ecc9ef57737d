// The "cuda" family of the backend registry (backends/backend_registry.cpp
// declares MakeCudaBackendFactory in CUDA builds and registers it).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/backend_registry.h"
#include "cuda_backend.h"
#include "cuda_slot_device.h"
#include "util/status_macros.h"

namespace odmoe {

BackendFactory MakeCudaBackendFactory() {
  BackendFactory f;
  f.family = "cuda";
  f.create = [](std::string_view arg) -> absl::StatusOr<std::unique_ptr<Backend>> {
    ODMOE_ASSIGN_OR_RETURN(const CudaBackendOptions options, ParseCudaBackendArg(arg));
    ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> be, CudaBackend::Create(options));
    return std::unique_ptr<Backend>(std::move(be));
  };
  f.available = [] {
    std::vector<std::string> names;
    const absl::StatusOr<int> count = cuda::UsableDeviceCount();
    for (int i = 0; count.ok() && i < *count; ++i) names.push_back(absl::StrFormat("cuda:%d", i));
    return names;
  };
  f.slot_device = &MakeCudaSlotDevice;
  return f;
}

}  // namespace odmoe
