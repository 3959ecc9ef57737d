#include "gguf/gguf_value.h"

#include <limits>

namespace odmoe {
namespace {

template <typename T>
const T* Get(const GgufValue::Storage& storage) {
  return std::get_if<T>(&storage);
}

}  // namespace

std::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUInt8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUInt16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUInt32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUInt64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown";
}

GgufValue GgufValue::F32Array(const std::vector<float>& v) {
  return {GgufType::kArray, GgufType::kFloat32, std::vector<double>(v.begin(), v.end())};
}

GgufValue GgufValue::I32Array(const std::vector<int32_t>& v) {
  return {GgufType::kArray, GgufType::kInt32, std::vector<int64_t>(v.begin(), v.end())};
}

std::optional<uint64_t> GgufValue::AsUInt() const {
  if (type_ == GgufType::kArray) return std::nullopt;
  if (const auto* u = Get<uint64_t>(storage_)) return *u;
  if (const auto* i = Get<int64_t>(storage_); i != nullptr && *i >= 0) {
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<int64_t> GgufValue::AsInt() const {
  if (type_ == GgufType::kArray) return std::nullopt;
  if (const auto* i = Get<int64_t>(storage_)) return *i;
  if (const auto* u = Get<uint64_t>(storage_);
      u != nullptr && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::AsFloat() const {
  if (type_ == GgufType::kArray) return std::nullopt;
  if (const auto* d = Get<double>(storage_)) return *d;
  if (const auto* i = Get<int64_t>(storage_)) return static_cast<double>(*i);
  if (const auto* u = Get<uint64_t>(storage_)) return static_cast<double>(*u);
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ == GgufType::kArray) return std::nullopt;
  if (const auto* b = Get<bool>(storage_)) return *b;
  return std::nullopt;
}

const std::string* GgufValue::AsString() const {
  if (type_ == GgufType::kArray) return nullptr;
  return Get<std::string>(storage_);
}

const std::vector<std::string>* GgufValue::AsStringArray() const {
  if (type_ != GgufType::kArray) return nullptr;
  return Get<std::vector<std::string>>(storage_);
}

std::optional<std::vector<float>> GgufValue::AsF32Array() const {
  if (type_ != GgufType::kArray) return std::nullopt;
  if (const auto* d = Get<std::vector<double>>(storage_)) {
    return std::vector<float>(d->begin(), d->end());
  }
  if (const auto* i = Get<std::vector<int64_t>>(storage_)) {
    return std::vector<float>(i->begin(), i->end());
  }
  if (const auto* u = Get<std::vector<uint64_t>>(storage_)) {
    return std::vector<float>(u->begin(), u->end());
  }
  return std::nullopt;
}

std::optional<std::vector<int32_t>> GgufValue::AsI32Array() const {
  if (type_ != GgufType::kArray) return std::nullopt;
  std::vector<int32_t> out;
  if (const auto* i = Get<std::vector<int64_t>>(storage_)) {
    out.reserve(i->size());
    for (int64_t v : *i) {
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return std::nullopt;
      }
      out.push_back(static_cast<int32_t>(v));
    }
    return out;
  }
  if (const auto* u = Get<std::vector<uint64_t>>(storage_)) {
    out.reserve(u->size());
    for (uint64_t v : *u) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return std::nullopt;
      out.push_back(static_cast<int32_t>(v));
    }
    return out;
  }
  return std::nullopt;
}

size_t GgufValue::ArraySize() const {
  if (type_ != GgufType::kArray) return 0;
  return std::visit(
      [](const auto& s) -> size_t {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, std::string>) {
          return 0;
        } else if constexpr (requires { s.size(); }) {
          return s.size();
        } else {
          return 0;
        }
      },
      storage_);
}

}  // namespace odmoe
