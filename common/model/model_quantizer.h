// Converting a model file's weights to other storage types (odmoe-quantize;
// the shadow node's smaller copy of the model comes from here).
//
// Which type each tensor gets is a QuantRecipe (model/quant_mix.h): a
// file-level mix ("Q4_K_M": per-tensor rules) or one type for every
// converted tensor (pure: the shadow's copy). Norms (1-D) and the router
// (ffn_gate_inp) are copied as they are: routing decisions are what the
// shadow must predict, and the router is tiny. A type a tensor's rows cannot
// hold falls back (quant_mix.h's fallback table) and the report says so.
// Metadata is copied; general.file_type is set to the recipe's llama.cpp
// ftype id, odmoe.quantization to its name.
//
// Tensors are converted while the output file is written, a chunk of rows at
// a time (memory stays bounded for files larger than RAM); `progress` is
// called after each chunk.
//
//   QuantizeOptions opt;
//   opt.recipe = *ParseQuantRecipe("Q4_K_M");
//   opt.progress = [](const QuantizeProgress& p) { ... p.bytes_done / p.bytes_total ... };
//   ODMOE_ASSIGN_OR_RETURN(QuantizeReport r, QuantizeModelFile(in, out, opt));
//   for (const auto& [type, total] : r.by_type) ...   // per-type summary
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_file.h"
#include "model/quant_mix.h"
#include "tensor/dtype.h"

namespace odmoe {

struct QuantizeProgress {
  int tensor = 0;  // index of the tensor being written, in [0, tensors)
  int tensors = 0;
  std::string_view name;     // its name
  DType type = DType::kF32;  // its output type
  bool tensor_done = false;  // the last chunk of this tensor
  uint64_t bytes_done = 0;   // output bytes written so far (all tensors)
  uint64_t bytes_total = 0;  // output tensor bytes in all
};

struct QuantizeOptions {
  QuantRecipe recipe = QuantRecipe::Mix(QuantMix::kQ8_0);
  int threads = 0;                                        // 0 = all cores
  std::function<void(const QuantizeProgress&)> progress;  // may be empty
  /// When set and true, the rest is skipped and QuantizeModelFile returns
  /// CANCELLED with the output file removed (may be null).
  const std::atomic<bool>* cancel = nullptr;
};

struct QuantizeReport {
  int tensors_converted = 0;
  int tensors_kept = 0;
  uint64_t bytes_in = 0;   // tensor data before
  uint64_t bytes_out = 0;  // tensor data after
  struct TypeTotal {
    int tensors = 0;
    uint64_t bytes = 0;
  };
  std::map<DType, TypeTotal> by_type;  // the output file's tensors per type
  struct FellBack {
    std::string name;
    int64_t row_length = 0;
    DType wanted = DType::kF32, used = DType::kF32;
  };
  std::vector<FellBack> fallbacks;  // tensors whose rows the wanted type cannot hold
};

/// The output type of every tensor of `model` under `recipe`, in file order
/// (what QuantizeModelFile writes; for dry runs and tests).
struct PlannedTensor {
  const TensorView* source = nullptr;
  TypeChoice choice;
  DType output_type() const { return choice.convert ? choice.type : source->type; }
};
std::vector<PlannedTensor> PlanQuantization(const ModelFile& model, const QuantRecipe& recipe);

/// Reads `in_path` (a valid model GGUF), writes `out_path`.
absl::StatusOr<QuantizeReport> QuantizeModelFile(const std::string& in_path,
                                                 const std::string& out_path,
                                                 const QuantizeOptions& options);

/// Metadata key that records the fingerprint of the model a quantized file
/// was made from (ModelFile::fingerprint() of the original).
inline constexpr char kSourceFingerprintKey[] = "odmoe.source_fingerprint";
/// Metadata key naming the recipe a file was made with ("Q4_K_M", "pure q4_K").
inline constexpr char kQuantizationKey[] = "odmoe.quantization";

/// The fingerprint of the original model behind `model`: its
/// odmoe.source_fingerprint when present, else its own fingerprint.
uint64_t SourceFingerprint(const ModelFile& model);

}  // namespace odmoe
