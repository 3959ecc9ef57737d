// Reading GGUF v3 model files (memory-mapped, zero-copy tensors).
//
// Open() validates everything before anything is used: magic and version,
// counts against sane limits, every key and string length, every value type,
// every tensor's type (F32 F16 BF16 Q8_0 Q4_0), dimensions, row size against
// the block size, offset alignment, and that each tensor's bytes lie inside
// the file without overlapping another. A truncated or corrupt file gives
// INVALID_ARGUMENT (or NOT_FOUND for a missing file) naming the file and what
// is wrong; nothing reads out of bounds.
//
//   ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
//   std::optional<uint64_t> n = f->GetUInt("llama.block_count");
//   ODMOE_ASSIGN_OR_RETURN(TensorView w, f->Tensor("blk.0.attn_q.weight"));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gguf/gguf_value.h"
#include "tensor/tensor_view.h"
#include "util/mmap_file.h"

namespace odmoe {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kGgufDefaultAlignment = 32;

class GgufFile {
 public:
  /// Maps and validates the file at `path`.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t file_size() const;

  /// All metadata, keyed by name (see metadata_keys() for the file order).
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  /// The metadata keys in the order the file stores them.
  const std::vector<std::string>& metadata_keys() const { return metadata_keys_; }
  const GgufValue* Find(std::string_view key) const;
  std::optional<uint64_t> GetUInt(std::string_view key) const;
  std::optional<double> GetFloat(std::string_view key) const;
  std::optional<bool> GetBool(std::string_view key) const;
  std::optional<std::string> GetString(std::string_view key) const;

  /// Tensors in file order.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  bool HasTensor(std::string_view name) const;
  /// NOT_FOUND naming the tensor and file when absent.
  absl::StatusOr<TensorView> Tensor(std::string_view name) const;

  /// Byte offset of a tensor's data from the start of the file.
  uint64_t DataOffset(const TensorView& t) const;

 private:
  GgufFile() = default;
  std::string path_;
  MappedFile map_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::map<std::string, GgufValue> metadata_;
  std::vector<std::string> metadata_keys_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace odmoe
