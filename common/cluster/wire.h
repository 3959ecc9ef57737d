// Hidden states and KV rows on the wire: encoding host floats into the
// protocol's Rows message and decoding them back, validating everything that
// arrives (dtype, shape, byte count, against what the receiver expects).
//
//   v1::Rows msg;
//   EncodeRows(x.data(), 1, n_embd, v1::WIRE_DTYPE_F32, &msg);
//   std::vector<float> back;
//   ODMOE_ASSIGN_OR_RETURN(int64_t rows, DecodeRows(msg, n_embd, max_rows, &back));
//
// F32 is a bit-exact copy (little-endian hosts only, checked at compile time);
// F16 halves the bytes and rounds (the cluster's output is then no longer
// identical to the single-process run).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/protocol.h"
#include "model/model_config.h"
#include "topology/topology.h"

namespace odmoe {

v1::WireDType ToWire(WireDType dtype);

/// Fills `out` with rows x cols floats from `data` (host memory).
void EncodeRows(const float* data, int64_t rows, int64_t cols, v1::WireDType dtype, v1::Rows* out);

/// Checks `in` (known dtype, cols == expected_cols, 1 <= rows <= max_rows,
/// data size == rows * cols * element size) and decodes it into `out`
/// (resized to rows * cols). Returns the row count; INVALID_ARGUMENT with the
/// reason otherwise. `what` names the field in errors ("task input").
absl::StatusOr<int64_t> DecodeRows(const v1::Rows& in, int64_t expected_cols, int64_t max_rows,
                                   std::vector<float>* out, const char* what = "rows");

/// A step key refers to a layer of this model.
absl::Status ValidateStepKey(const v1::StepKey& key, const ModelConfig& config);
/// An expert id of this model.
absl::Status ValidateExpert(uint32_t expert, const ModelConfig& config);
/// A predicted / hinted expert list: exactly k distinct valid experts, or,
/// with `allow_union` (a hint for a step of several rows), k to n_expert.
absl::Status ValidateExpertList(const google::protobuf::RepeatedField<uint32_t>& experts,
                                const ModelConfig& config, bool allow_union = false);

/// Lexicographic (request, token, layer) order of step keys.
bool KeyLess(const v1::StepKey& a, const v1::StepKey& b);
bool KeyEqual(const v1::StepKey& a, const v1::StepKey& b);

}  // namespace odmoe
