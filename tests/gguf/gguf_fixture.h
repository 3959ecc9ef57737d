// Small GGUF files for tests: describe metadata and tensors in memory, get a
// file on disk (written with GgufWriter), removed again when the fixture dies.
//
//   odmoe::test::GgufSpec spec;
//   spec.metadata.emplace_back("general.architecture", GgufValue::String("llama"));
//   spec.tensors.push_back({"w", DType::kQ8_0, {64, 3}, RandomFloats(64 * 3, /*seed=*/1)});
//   odmoe::test::TempFile file("w");
//   REQUIRE(WriteGguf(spec, file.path()).ok());
//   auto gguf = GgufFile::Open(file.path());
//
// Tensor values are given as floats and stored in the tensor's type with
// QuantizeRow, so a test can compare what it reads against
// ExpectedValues(tensor) (the floats after a quantize/dequantize round trip).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gguf/gguf_value.h"
#include "gguf/gguf_writer.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace odmoe::test {

/// A unique path in the system's temporary directory; the file (if any) is
/// deleted on destruction.
class TempFile {
 public:
  explicit TempFile(const std::string& stem) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("odmoe_" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
              ".gguf"))
                .string();
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// One tensor of a fixture: values in row-major GGML order (ne[0] fastest).
struct TensorSpec {
  std::string name;
  DType type = DType::kF32;
  std::vector<int64_t> ne;
  std::vector<float> values;
};

struct GgufSpec {
  std::vector<std::pair<std::string, GgufValue>> metadata;  // written in this order
  std::vector<TensorSpec> tensors;
};

/// `n` floats drawn from N(0, scale^2) with a fixed seed.
inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

/// The tensor's values stored in its type (QuantizeRow), row by row.
inline std::vector<uint8_t> EncodeTensor(const TensorSpec& t) {
  const int64_t row = t.ne.at(0);
  const int64_t rows = row == 0 ? 0 : static_cast<int64_t>(t.values.size()) / row;
  std::vector<uint8_t> bytes(RowBytes(t.type, row) * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(t.type, t.values.data() + r * row, bytes.data() + r * RowBytes(t.type, row), row);
  }
  return bytes;
}

/// What reading the tensor back should give: its values after a round trip
/// through its stored type.
inline std::vector<float> ExpectedValues(const TensorSpec& t) {
  const std::vector<uint8_t> bytes = EncodeTensor(t);
  const int64_t row = t.ne.at(0);
  std::vector<float> out(t.values.size());
  for (size_t r = 0; r * row < out.size(); ++r) {
    DequantizeRow(t.type, bytes.data() + r * RowBytes(t.type, row), out.data() + r * row, row);
  }
  return out;
}

/// Writes the spec as a GGUF v3 file at `path`.
inline absl::Status WriteGguf(const GgufSpec& spec, const std::string& path) {
  GgufWriter writer;
  for (const auto& [key, value] : spec.metadata) writer.SetMetadata(key, value);
  for (const TensorSpec& t : spec.tensors) {
    int64_t elements = 1;
    for (int64_t n : t.ne) elements *= n;
    if (t.ne.empty() || elements != static_cast<int64_t>(t.values.size()) ||
        !RowSizeValid(t.type, t.ne[0])) {
      return absl::InvalidArgumentError("fixture tensor '" + t.name + "': bad shape");
    }
    absl::Status s = writer.AddTensor(t.name, t.type, t.ne, EncodeTensor(t));
    if (!s.ok()) return s;
  }
  return writer.WriteFile(path);
}

/// The bytes of a file (for corruption tests); empty if it cannot be read.
inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

/// Writes raw bytes to `path` (overwriting it).
inline void WriteBytes(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace odmoe::test
