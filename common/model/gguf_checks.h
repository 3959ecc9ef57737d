// Reading a model file's hyperparameters and tensors with checks: each
// helper returns INVALID_ARGUMENT naming the file and the key or tensor.
// Shared by the parts of ModelFile (model_file.cpp, model_mla.cpp).
//
//   ODMOE_ASSIGN_OR_RETURN(int n, ReadInt(f, "llama.block_count", 1, 4096));
//   ODMOE_ASSIGN_OR_RETURN(TensorView t, Expect(f, "blk.0.attn_norm.weight", {4096}, true));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gguf/gguf_reader.h"
#include "tensor/tensor_view.h"

namespace odmoe {

/// INVALID_ARGUMENT "<path>: <what>".
absl::Status Invalid(const std::string& path, const std::string& what);

/// Reads an integer hyperparameter in [lo, hi]; `fallback` < 0 means required.
absl::StatusOr<int> ReadInt(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi,
                            int64_t fallback = -1);

/// Reads a finite number in [lo, hi], or `fallback` when absent.
absl::StatusOr<float> ReadFloat(const GgufFile& f, const std::string& key, double lo, double hi,
                                double fallback);

/// "[a, b, c]".
std::string ShapeString(const std::vector<int64_t>& ne);

/// Finds a tensor and checks its shape (GGML order) and, for norms, its type.
absl::StatusOr<TensorView> Expect(const GgufFile& f, const std::string& name,
                                  const std::vector<int64_t>& ne, bool must_be_f32 = false);

/// Row `i` of a 2-D F32 tensor as a 1-D view (zero copy).
TensorView RowOf(const TensorView& t, int64_t i);

}  // namespace odmoe
