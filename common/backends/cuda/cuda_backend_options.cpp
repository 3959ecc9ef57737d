#include "cuda_backend_options.h"

#include <charconv>

#include "absl/strings/str_format.h"

namespace odmoe {

absl::StatusOr<CudaBackendOptions> ParseCudaBackendArg(std::string_view arg) {
  CudaBackendOptions o;
  if (arg.empty()) return o;
  std::string_view number = arg;
  const size_t colon = arg.find(':');
  if (colon != std::string_view::npos) {
    number = arg.substr(0, colon);
    if (arg.substr(colon + 1) != "cublas") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bad CUDA backend 'cuda:%s': the only option after the device is ':cublas'", arg));
    }
    o.float_matmul = FloatMatMulPolicy::kCublas;
  }
  const char* end = number.data() + number.size();
  const auto [ptr, ec] = std::from_chars(number.data(), end, o.device);
  if (number.empty() || ec != std::errc() || ptr != end || o.device < 0 ||
      o.device > kMaxCudaDevice) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad CUDA backend 'cuda:%s': expected a device number from 0 to %d, optionally "
        "followed by ':cublas'",
        arg, kMaxCudaDevice));
  }
  return o;
}

std::string CudaBackendName(const CudaBackendOptions& options) {
  return absl::StrFormat("cuda:%d%s", options.device,
                         options.float_matmul == FloatMatMulPolicy::kCublas ? ":cublas" : "");
}

}  // namespace odmoe
