#include "model/model_quantizer.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/model_file.h"
#include "tensor/quant.h"
#include "util/status_macros.h"
#include "util/thread_pool.h"

namespace odmoe {

uint32_t GgufFileTypeFor(DType target) {
  switch (target) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ8_0:
      return 7;
    case DType::kBF16:
      return 32;
  }
  return 0;
}

uint64_t SourceFingerprint(const ModelFile& model) {
  return model.gguf().GetUInt(kSourceFingerprintKey).value_or(model.fingerprint());
}

absl::StatusOr<QuantizeReport> QuantizeModelFile(const std::string& in_path,
                                                 const std::string& out_path,
                                                 const QuantizeOptions& options) {
  // Opening as a model validates that this is a complete MoE model file.
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(in_path));
  const GgufFile& in = model->gguf();
  GgufWriter writer;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == kSourceFingerprintKey) continue;
    writer.SetMetadata(key, value);
  }
  // The identity of the original model survives re-quantization: the shadow
  // node checks it against the main node's model.
  writer.SetMetadata(kSourceFingerprintKey,
                     GgufValue::U64(SourceFingerprint(*model)));
  writer.SetMetadata("general.file_type", GgufValue::U32(GgufFileTypeFor(options.target)));
  writer.SetMetadata("general.quantized_by", GgufValue::String("odmoe-quantize"));

  ThreadPool pool(options.threads);
  QuantizeReport report;
  for (const TensorView& t : in.tensors()) {
    report.bytes_in += t.bytes();
    const bool convert = t.n_dims >= 2 && !absl::StrContains(t.name, "ffn_gate_inp") &&
                         RowSizeValid(options.target, t.ne[0]) && t.type != options.target;
    if (!convert) {
      ODMOE_RETURN_IF_ERROR(writer.AddTensorView(t));
      report.bytes_out += t.bytes();
      ++report.tensors_kept;
      continue;
    }
    const size_t out_row = RowBytes(options.target, t.ne[0]);
    std::vector<uint8_t> data(out_row * static_cast<size_t>(t.rows()));
    pool.ParallelFor(t.rows(), 16, [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(t.ne[0]));
      for (int64_t r = begin; r < end; ++r) {
        DequantizeRow(t.type, t.Row(r), row.data(), t.ne[0]);
        QuantizeRow(options.target, row.data(), data.data() + static_cast<size_t>(r) * out_row,
                    t.ne[0]);
      }
    });
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    report.bytes_out += data.size();
    ODMOE_RETURN_IF_ERROR(writer.AddTensor(t.name, options.target, ne, std::move(data)));
    ++report.tensors_converted;
  }
  ODMOE_RETURN_IF_ERROR(writer.WriteFile(out_path));
  return report;
}

}  // namespace odmoe
