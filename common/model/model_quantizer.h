// Converting a model file's weights to another storage type (odmoe-quantize;
// the shadow node's smaller copy of the model comes from here).
//
// Which tensors change: every 2-D and 3-D weight whose rows are a whole
// number of blocks of the target type. 1-D tensors (norms) stay F32 and the
// router (ffn_gate_inp) keeps its type, as the GGUF ecosystem's quantizers
// do: routing decisions are what the shadow must predict, and the router is
// tiny. Metadata is copied; general.file_type is set to the target.
//
//   QuantizeOptions opt{.target = DType::kQ8_0, .threads = 2};
//   ODMOE_ASSIGN_OR_RETURN(QuantizeReport r, QuantizeModelFile(in, out, opt));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/model_file.h"
#include "tensor/dtype.h"

namespace odmoe {

struct QuantizeOptions {
  DType target = DType::kQ8_0;  // f16, bf16, q8_0 or q4_0
  int threads = 0;              // 0 = all cores
};

struct QuantizeReport {
  int tensors_converted = 0;
  int tensors_kept = 0;
  uint64_t bytes_in = 0;   // tensor data before
  uint64_t bytes_out = 0;  // tensor data after
};

/// Reads `in_path` (a valid model GGUF), writes `out_path`. INVALID_ARGUMENT
/// for an unsupported target (f32 is allowed: it dequantizes).
absl::StatusOr<QuantizeReport> QuantizeModelFile(const std::string& in_path,
                                                 const std::string& out_path,
                                                 const QuantizeOptions& options);

/// Metadata key that records the fingerprint of the model a quantized file
/// was made from (ModelFile::fingerprint() of the original).
inline constexpr char kSourceFingerprintKey[] = "odmoe.source_fingerprint";

/// The fingerprint of the original model behind `model`: its
/// odmoe.source_fingerprint when present, else its own fingerprint.
uint64_t SourceFingerprint(const ModelFile& model);

/// The general.file_type value (llama.cpp's "mostly X" enum) for a target.
uint32_t GgufFileTypeFor(DType target);

}  // namespace odmoe
