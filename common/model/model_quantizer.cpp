#include "model/model_quantizer.h"

#include <filesystem>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/model_file.h"
#include "tensor/quant.h"
#include "util/status_macros.h"
#include "util/thread_pool.h"

namespace odmoe {

uint64_t SourceFingerprint(const ModelFile& model) {
  return model.gguf().GetUInt(kSourceFingerprintKey).value_or(model.fingerprint());
}

std::vector<PlannedTensor> PlanQuantization(const ModelFile& model, const QuantRecipe& recipe) {
  std::unordered_map<std::string, MixTensor> roles;
  for (NamedMixTensor& t : MixTensorsOf(model.arch(), model.config())) {
    roles.emplace(std::move(t.name), t.tensor);
  }
  const MixModel mix_model = MixModelOf(model.config());
  std::vector<PlannedTensor> plan;
  for (const TensorView& t : model.gguf().tensors()) {
    MixTensor role;
    if (auto it = roles.find(t.name); it != roles.end()) {
      role = it->second;
    } else {
      role.role = t.n_dims >= 2 ? MixRole::kOther : MixRole::kKept;
    }
    role.row_length = t.ne[0];
    PlannedTensor p;
    p.source = &t;
    p.choice = ChooseType(recipe, mix_model, role);
    plan.push_back(p);
  }
  return plan;
}

absl::StatusOr<QuantizeReport> QuantizeModelFile(const std::string& in_path,
                                                 const std::string& out_path,
                                                 const QuantizeOptions& options) {
  // Opening as a model validates that this is a complete MoE model file.
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(in_path));
  const GgufFile& in = model->gguf();
  const std::vector<PlannedTensor> plan = PlanQuantization(*model, options.recipe);

  GgufWriter writer;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == kSourceFingerprintKey || key == kQuantizationKey) {
      continue;
    }
    writer.SetMetadata(key, value);
  }
  // The identity of the original model survives re-quantization: the shadow
  // node checks it against the main node's model.
  writer.SetMetadata(kSourceFingerprintKey, GgufValue::U64(SourceFingerprint(*model)));
  writer.SetMetadata("general.file_type", GgufValue::U32(options.recipe.FileType()));
  writer.SetMetadata(kQuantizationKey, GgufValue::String(options.recipe.Name()));
  writer.SetMetadata("general.quantized_by", GgufValue::String("odmoe-quantize"));

  QuantizeReport report;
  uint64_t bytes_total = 0;
  for (const PlannedTensor& p : plan) {
    bytes_total += RowBytes(p.output_type(), p.source->ne[0]) * p.source->rows();
  }
  ThreadPool pool(options.threads);
  uint64_t bytes_done = 0;  // WriteFile calls the generators in order, on this thread
  const int n = static_cast<int>(plan.size());
  for (int i = 0; i < n; ++i) {
    const PlannedTensor& p = plan[static_cast<size_t>(i)];
    const TensorView& t = *p.source;
    const DType out_type = p.output_type();
    const size_t in_row = RowBytes(t.type, t.ne[0]);
    const size_t out_row = RowBytes(out_type, t.ne[0]);
    const uint64_t out_bytes = out_row * static_cast<uint64_t>(t.rows());
    report.bytes_in += t.bytes();
    report.bytes_out += out_bytes;
    QuantizeReport::TypeTotal& total = report.by_type[out_type];
    ++total.tensors;
    total.bytes += out_bytes;
    const bool convert = out_type != t.type;
    ++(convert ? report.tensors_converted : report.tensors_kept);
    if (p.choice.fell_back()) {
      report.fallbacks.push_back({t.name, t.ne[0], p.choice.wanted, p.choice.type});
    }
    auto generate = [&, i, convert, in_row, out_row, out_type, out_bytes, tensor = &t](
                        uint64_t offset, uint8_t* dst, size_t bytes) {
      const int64_t first = static_cast<int64_t>(offset / out_row);
      const int64_t rows = static_cast<int64_t>(bytes / out_row);
      const auto* src = static_cast<const uint8_t*>(tensor->data) + first * in_row;
      if (options.cancel != nullptr && options.cancel->load()) {
        std::memset(dst, 0, bytes);  // the file is removed below
      } else if (!convert) {
        std::memcpy(dst, src, bytes);
      } else {
        pool.ParallelFor(rows, 16, [&](int64_t begin, int64_t end) {
          std::vector<float> row(static_cast<size_t>(tensor->ne[0]));
          for (int64_t r = begin; r < end; ++r) {
            DequantizeRow(tensor->type, src + r * in_row, row.data(), tensor->ne[0]);
            QuantizeRow(out_type, row.data(), dst + r * out_row, tensor->ne[0]);
          }
        });
      }
      bytes_done += bytes;
      if (options.progress) {
        options.progress(
            {i, n, tensor->name, out_type, offset + bytes == out_bytes, bytes_done, bytes_total});
      }
    };
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (out_bytes == 0) {
      ODMOE_RETURN_IF_ERROR(writer.AddTensor(t.name, out_type, ne, {}));
    } else {
      ODMOE_RETURN_IF_ERROR(writer.AddTensorGenerated(t.name, out_type, ne, generate));
    }
  }
  ODMOE_RETURN_IF_ERROR(writer.WriteFile(out_path));
  if (options.cancel != nullptr && options.cancel->load()) {
    std::error_code ignored;
    std::filesystem::remove(out_path, ignored);
    return absl::CancelledError(absl::StrCat("quantizing ", in_path, ": cancelled"));
  }
  return report;
}

}  // namespace odmoe
