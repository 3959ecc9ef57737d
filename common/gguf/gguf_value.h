// Metadata values of a GGUF file (the key/value section).
//
// GGUF v3 value types: UINT8 INT8 UINT16 INT16 UINT32 INT32 FLOAT32 BOOL
// STRING ARRAY UINT64 INT64 FLOAT64 (ids 0..12). Arrays hold values of one
// type (arrays of arrays are rejected). A GgufValue owns its data.
//
//   GgufValue v = GgufValue::U32(4096);
//   std::optional<uint64_t> n = v.AsUInt();          // 4096
//   GgufValue names = GgufValue::StringArray({"a", "b"});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace odmoe {

enum class GgufType : uint32_t {
  kUInt8 = 0,
  kInt8 = 1,
  kUInt16 = 2,
  kInt16 = 3,
  kUInt32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUInt64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufTypeName(GgufType type);

class GgufValue {
 public:
  // Scalars are stored widened; `type()` keeps the exact on-disk type.
  using Storage = std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<uint64_t>,
                               std::vector<int64_t>, std::vector<double>, std::vector<bool>,
                               std::vector<std::string>>;

  GgufValue() = default;
  GgufValue(GgufType type, GgufType elem_type, Storage storage)
      : type_(type), elem_type_(elem_type), storage_(std::move(storage)) {}

  static GgufValue U32(uint32_t v) { return {GgufType::kUInt32, GgufType::kUInt32, uint64_t{v}}; }
  static GgufValue I32(int32_t v) { return {GgufType::kInt32, GgufType::kInt32, int64_t{v}}; }
  static GgufValue U64(uint64_t v) { return {GgufType::kUInt64, GgufType::kUInt64, v}; }
  static GgufValue F32(float v) { return {GgufType::kFloat32, GgufType::kFloat32, double{v}}; }
  static GgufValue Bool(bool v) { return {GgufType::kBool, GgufType::kBool, v}; }
  static GgufValue String(std::string v) {
    return {GgufType::kString, GgufType::kString, std::move(v)};
  }
  static GgufValue StringArray(std::vector<std::string> v) {
    return {GgufType::kArray, GgufType::kString, std::move(v)};
  }
  static GgufValue F32Array(const std::vector<float>& v);
  static GgufValue I32Array(const std::vector<int32_t>& v);

  GgufType type() const { return type_; }
  /// Element type of an array (equal to type() for scalars).
  GgufType elem_type() const { return elem_type_; }
  const Storage& storage() const { return storage_; }

  /// Scalar accessors: empty when the value is of another kind or out of range.
  std::optional<uint64_t> AsUInt() const;
  std::optional<int64_t> AsInt() const;
  std::optional<double> AsFloat() const;  // also accepts integer types
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;

  /// Array accessors (nullptr / empty when not an array of that kind).
  const std::vector<std::string>* AsStringArray() const;
  std::optional<std::vector<float>> AsF32Array() const;    // from any numeric array
  std::optional<std::vector<int32_t>> AsI32Array() const;  // from any integer array in range
  size_t ArraySize() const;

 private:
  GgufType type_ = GgufType::kUInt8;
  GgufType elem_type_ = GgufType::kUInt8;
  Storage storage_ = uint64_t{0};
};

}  // namespace odmoe
