// Writing GGUF v3 files (used by odmoe-quantize and by test fixtures).
//
//   GgufWriter w;
//   w.SetMetadata("general.architecture", GgufValue::String("llama"));
//   w.AddTensor("token_embd.weight", DType::kF16, {n_embd, n_vocab}, bytes);
//   ODMOE_RETURN_IF_ERROR(w.WriteFile("out.gguf"));
//
// Tensor data is copied into the writer (AddTensor) or referenced
// (AddTensorView, the caller keeps the memory alive until WriteFile returns).
// Data offsets are aligned to `general.alignment` (default 32).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gguf/gguf_value.h"
#include "tensor/tensor_view.h"

namespace odmoe {

class GgufWriter {
 public:
  /// Sets (or replaces) a metadata key; keys are written in insertion order.
  void SetMetadata(const std::string& key, GgufValue value);

  /// Adds a tensor whose bytes are copied. `ne` in GGML order (ne[0] innermost),
  /// 1 to 4 dims. INVALID_ARGUMENT if the byte size does not match.
  absl::Status AddTensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                         std::vector<uint8_t> data);

  /// Adds a tensor referencing caller-owned memory (e.g. a mapped input file).
  absl::Status AddTensorView(const TensorView& view);

  /// Fills `bytes` bytes of tensor data at `offset` into `dst` (whole rows:
  /// offset and bytes are multiples of the row size).
  using Generator = std::function<void(uint64_t offset, uint8_t* dst, size_t bytes)>;
  /// Adds a tensor whose bytes are produced while the file is written, a
  /// chunk at a time (files larger than memory: odmoe-synth).
  absl::Status AddTensorGenerated(const std::string& name, DType type,
                                  const std::vector<int64_t>& ne, Generator generate);

  /// Bytes WriteFile would write (header, data, padding).
  absl::StatusOr<uint64_t> FileSize() const;

  /// Writes the whole file (to a temporary name, then renamed into place).
  /// `progress`, when given, hears the bytes written so far and the total
  /// after every tensor and every generated chunk (about 16 MiB).
  absl::Status WriteFile(
      const std::string& path,
      const std::function<void(uint64_t written, uint64_t total)>& progress = {}) const;

 private:
  absl::Status BuildHeader(uint32_t alignment, std::vector<uint8_t>* header,
                           uint64_t* data_bytes) const;
  struct PendingTensor {
    std::string name;
    DType type;
    int n_dims;
    std::array<int64_t, 4> ne;
    std::vector<uint8_t> owned;
    const void* data;
    size_t bytes;
    Generator generate;  // set for generated tensors (data is null)
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace odmoe
