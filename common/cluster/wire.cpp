#include "cluster/wire.h"

#include <bit>
#include <cstring>
#include <tuple>

#include "absl/strings/str_format.h"
#include "util/fp16.h"

namespace odmoe {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; big-endian hosts need byte swapping");

v1::WireDType ToWire(WireDType dtype) {
  return dtype == WireDType::kF16 ? v1::WIRE_DTYPE_F16 : v1::WIRE_DTYPE_F32;
}

void EncodeRows(const float* data, int64_t rows, int64_t cols, v1::WireDType dtype,
                v1::Rows* out) {
  const size_t n = static_cast<size_t>(rows * cols);
  out->set_dtype(dtype);
  out->set_rows(static_cast<uint32_t>(rows));
  out->set_cols(static_cast<uint32_t>(cols));
  std::string* bytes = out->mutable_data();
  if (dtype == v1::WIRE_DTYPE_F16) {
    bytes->resize(n * sizeof(uint16_t));
    auto* dst = reinterpret_cast<uint16_t*>(bytes->data());
    for (size_t i = 0; i < n; ++i) dst[i] = F32ToF16(data[i]);
  } else {
    bytes->assign(reinterpret_cast<const char*>(data), n * sizeof(float));
  }
}

absl::StatusOr<int64_t> DecodeRows(const v1::Rows& in, int64_t expected_cols, int64_t max_rows,
                                   std::vector<float>* out, const char* what) {
  size_t elem = 0;
  if (in.dtype() == v1::WIRE_DTYPE_F32) {
    elem = sizeof(float);
  } else if (in.dtype() == v1::WIRE_DTYPE_F16) {
    elem = sizeof(uint16_t);
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: unknown wire dtype %d", what, static_cast<int>(in.dtype())));
  }
  const int64_t rows = in.rows();
  if (static_cast<int64_t>(in.cols()) != expected_cols) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %d columns, expected %d", what,
                                                      in.cols(), expected_cols));
  }
  if (rows < 1 || rows > max_rows) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d rows, expected 1..%d", what, rows, max_rows));
  }
  const size_t n = static_cast<size_t>(rows * expected_cols);
  if (in.data().size() != n * elem) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d bytes of data for %d x %d elements of %d bytes (expected %d)", what,
        in.data().size(), rows, expected_cols, elem, n * elem));
  }
  out->resize(n);
  if (elem == sizeof(float)) {
    std::memcpy(out->data(), in.data().data(), n * sizeof(float));
  } else {
    const char* src = in.data().data();
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + i * sizeof(h), sizeof(h));
      (*out)[i] = F16ToF32(h);
    }
  }
  return rows;
}

absl::Status ValidateStepKey(const v1::StepKey& key, const ModelConfig& config) {
  if (key.layer() >= static_cast<uint32_t>(config.n_layer)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layer %d out of range (the model has %d layers)", key.layer(),
                        config.n_layer));
  }
  if (!config.has_experts(static_cast<int>(key.layer()))) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layer %d has no experts (a dense layer runs on the main node)",
                        key.layer()));
  }
  return absl::OkStatus();
}

absl::Status ValidateExpert(uint32_t expert, const ModelConfig& config) {
  if (expert >= static_cast<uint32_t>(config.n_expert)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "expert %d out of range (the model has %d experts)", expert, config.n_expert));
  }
  return absl::OkStatus();
}

absl::Status ValidateExpertList(const google::protobuf::RepeatedField<uint32_t>& experts,
                                const ModelConfig& config, bool allow_union) {
  if (!allow_union && experts.size() != config.n_expert_used) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d experts listed, expected top-k = %d", experts.size(), config.n_expert_used));
  }
  if (allow_union && (experts.size() < config.n_expert_used || experts.size() > config.n_expert)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d experts listed, expected top-k = %d to the model's %d", experts.size(),
        config.n_expert_used, config.n_expert));
  }
  for (int i = 0; i < experts.size(); ++i) {
    if (absl::Status s = ValidateExpert(experts[i], config); !s.ok()) return s;
    for (int j = 0; j < i; ++j) {
      if (experts[j] == experts[i]) {
        return absl::InvalidArgumentError(
            absl::StrFormat("expert %d listed twice", experts[i]));
      }
    }
  }
  return absl::OkStatus();
}

bool KeyLess(const v1::StepKey& a, const v1::StepKey& b) {
  return std::make_tuple(a.request(), a.token(), a.layer()) <
         std::make_tuple(b.request(), b.token(), b.layer());
}

bool KeyEqual(const v1::StepKey& a, const v1::StepKey& b) {
  return a.request() == b.request() && a.token() == b.token() && a.layer() == b.layer();
}

}  // namespace odmoe
