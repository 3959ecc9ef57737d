// Test fixtures: a copy of a model file with some tensors stored in other
// types (converted through F32 with the reference row converters), e.g. the
// experts of layer 0 as Q8_0 and of layer 1 as F16: a model whose layers
// store their experts differently, as llama-quantize's mixes do.
//
//   ODMOE_RETURN_IF_ERROR(WriteRetypedModel(in, out, [](const TensorView& t) {
//     return ExpertsOfLayer(t, 0) ? std::optional(DType::kQ8_0) : std::nullopt;
//   }));
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/quant.h"
#include "util/status_macros.h"

namespace odmoe::test {

/// True for the expert matrices of `layer` (stacked or per expert).
inline bool ExpertsOfLayer(const TensorView& t, int layer) {
  const std::string prefix = "blk." + std::to_string(layer) + ".";
  return absl::StartsWith(t.name, prefix) &&
         (absl::StrContains(t.name, ".ffn_gate_exps") ||
          absl::StrContains(t.name, ".ffn_up_exps") ||
          absl::StrContains(t.name, ".ffn_down_exps") || absl::StrContains(t.name, ".ffn_gate.") ||
          absl::StrContains(t.name, ".ffn_up.") || absl::StrContains(t.name, ".ffn_down."));
}

/// Writes `out`: `in` with each tensor for which `retype` names a type stored
/// in that type (metadata and the other tensors unchanged).
inline absl::Status WriteRetypedModel(
    const std::string& in, const std::string& out,
    const std::function<std::optional<DType>(const TensorView&)>& retype) {
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(in));
  GgufWriter w;
  for (const auto& [key, value] : f->metadata()) w.SetMetadata(key, value);
  for (const TensorView& t : f->tensors()) {
    const std::optional<DType> type = retype(t);
    if (!type || *type == t.type) {
      ODMOE_RETURN_IF_ERROR(w.AddTensorView(t));
      continue;
    }
    const size_t in_row = RowBytes(t.type, t.ne[0]), out_row = RowBytes(*type, t.ne[0]);
    std::vector<uint8_t> data(out_row * static_cast<size_t>(t.rows()));
    std::vector<float> row(static_cast<size_t>(t.ne[0]));
    for (int64_t r = 0; r < t.rows(); ++r) {
      DequantizeRow(t.type, static_cast<const uint8_t*>(t.data) + r * in_row, row.data(), t.ne[0]);
      QuantizeRow(*type, row.data(), data.data() + r * out_row, t.ne[0]);
    }
    ODMOE_RETURN_IF_ERROR(w.AddTensor(t.name, *type,
                                      std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                                      std::move(data)));
  }
  return w.WriteFile(out);
}

}  // namespace odmoe::test
