#include "gguf/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gguf/gguf_reader.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

// Debian's Abseil has its own string_view type; this bridges std's.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr size_t kMaxKeyBytes = 65'535;
constexpr size_t kMaxTensorNameBytes = 1'024;

// Little-endian serialization into a growing buffer.
class ByteSink {
 public:
  template <typename T>
  void Put(T value) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void PadTo(size_t alignment) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

absl::Status RangeError(absl::string_view key, GgufType type, absl::string_view value) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF metadata key '", key, "': value ", value,
                                                 " does not fit in ", Sv(GgufTypeName(type))));
}

absl::Status PutUnsigned(ByteSink& out, GgufType type, uint64_t v, absl::string_view key) {
  switch (type) {
    case GgufType::kUInt8:
      if (v > std::numeric_limits<uint8_t>::max()) return RangeError(key, type, absl::StrCat(v));
      out.Put<uint8_t>(static_cast<uint8_t>(v));
      return absl::OkStatus();
    case GgufType::kUInt16:
      if (v > std::numeric_limits<uint16_t>::max()) return RangeError(key, type, absl::StrCat(v));
      out.Put<uint16_t>(static_cast<uint16_t>(v));
      return absl::OkStatus();
    case GgufType::kUInt32:
      if (v > std::numeric_limits<uint32_t>::max()) return RangeError(key, type, absl::StrCat(v));
      out.Put<uint32_t>(static_cast<uint32_t>(v));
      return absl::OkStatus();
    default:
      out.Put<uint64_t>(v);
      return absl::OkStatus();
  }
}

template <typename T>
absl::Status PutSignedAs(ByteSink& out, GgufType type, int64_t v, absl::string_view key) {
  if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
    return RangeError(key, type, absl::StrCat(v));
  }
  out.Put<T>(static_cast<T>(v));
  return absl::OkStatus();
}

absl::Status PutSigned(ByteSink& out, GgufType type, int64_t v, absl::string_view key) {
  switch (type) {
    case GgufType::kInt8:
      return PutSignedAs<int8_t>(out, type, v, key);
    case GgufType::kInt16:
      return PutSignedAs<int16_t>(out, type, v, key);
    case GgufType::kInt32:
      return PutSignedAs<int32_t>(out, type, v, key);
    default:
      out.Put<int64_t>(v);
      return absl::OkStatus();
  }
}

absl::Status PutFloat(ByteSink& out, GgufType type, double v, absl::string_view key) {
  if (type == GgufType::kFloat64) {
    out.Put<double>(v);
    return absl::OkStatus();
  }
  if (std::isfinite(v) && std::fabs(v) > FLT_MAX) return RangeError(key, type, absl::StrCat(v));
  out.Put<float>(static_cast<float>(v));
  return absl::OkStatus();
}

// Which Storage alternative holds values (or array elements) of `type`.
enum class Kind { kUnsigned, kSigned, kFloat, kBool, kString, kInvalid };

Kind KindOf(GgufType type) {
  switch (type) {
    case GgufType::kUInt8:
    case GgufType::kUInt16:
    case GgufType::kUInt32:
    case GgufType::kUInt64:
      return Kind::kUnsigned;
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      return Kind::kSigned;
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return Kind::kFloat;
    case GgufType::kBool:
      return Kind::kBool;
    case GgufType::kString:
      return Kind::kString;
    case GgufType::kArray:
      return Kind::kInvalid;
  }
  return Kind::kInvalid;
}

absl::Status StorageMismatch(absl::string_view key, const GgufValue& value) {
  return absl::InvalidArgumentError(absl::StrCat(
      "GGUF metadata key '", key, "': value of type ", Sv(GgufTypeName(value.type())),
      " (elements ", Sv(GgufTypeName(value.elem_type())), ") holds storage of another kind"));
}

// The Kind of values held in Storage alternative T (a scalar or an element).
template <typename T>
constexpr Kind KindOfStorage() {
  if constexpr (std::is_same_v<T, uint64_t>) return Kind::kUnsigned;
  if constexpr (std::is_same_v<T, int64_t>) return Kind::kSigned;
  if constexpr (std::is_same_v<T, double>) return Kind::kFloat;
  if constexpr (std::is_same_v<T, bool>) return Kind::kBool;
  if constexpr (std::is_same_v<T, std::string>) return Kind::kString;
  return Kind::kInvalid;
}

// Writes one scalar or array element `v` (a Storage scalar type) as `type`.
template <typename T>
absl::Status PutElement(ByteSink& out, GgufType type, const T& v, absl::string_view key) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return PutUnsigned(out, type, v, key);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return PutSigned(out, type, v, key);
  } else if constexpr (std::is_same_v<T, double>) {
    return PutFloat(out, type, v, key);
  } else if constexpr (std::is_same_v<T, bool>) {
    out.Put<uint8_t>(v ? 1 : 0);
    return absl::OkStatus();
  } else {
    out.PutString(v);
    return absl::OkStatus();
  }
}

// Writes type, [element type, count,] and value; INVALID_ARGUMENT when the
// value's storage does not match its declared type or a number does not fit.
absl::Status PutValue(ByteSink& out, absl::string_view key, const GgufValue& value) {
  const bool is_array = value.type() == GgufType::kArray;
  const GgufType elem = value.elem_type();
  const Kind kind = KindOf(elem);
  if (kind == Kind::kInvalid || (!is_array && elem != value.type())) {
    return StorageMismatch(key, value);
  }
  out.Put<uint32_t>(static_cast<uint32_t>(value.type()));
  if (is_array) {
    out.Put<uint32_t>(static_cast<uint32_t>(elem));
    out.Put<uint64_t>(value.ArraySize());
  }
  return std::visit(
      [&](const auto& s) -> absl::Status {
        using S = std::decay_t<decltype(s)>;
        if constexpr (KindOfStorage<S>() == Kind::kInvalid) {
          using E = typename S::value_type;
          if (!is_array || KindOfStorage<E>() != kind) return StorageMismatch(key, value);
          for (const E& e : s) ODMOE_RETURN_IF_ERROR(PutElement<E>(out, elem, e, key));
          return absl::OkStatus();
        } else {
          if (is_array || KindOfStorage<S>() != kind) return StorageMismatch(key, value);
          return PutElement<S>(out, elem, s, key);
        }
      },
      value.storage());
}

absl::StatusOr<size_t> ValidateTensor(const std::string& name, DType type, int n_dims,
                                      const std::array<int64_t, 4>& ne) {
  const std::string what = absl::StrCat("GGUF tensor '", name, "': ");
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "name must be 1..", kMaxTensorNameBytes, " bytes"));
  }
  if (!IsKnownGgmlType(static_cast<uint32_t>(type))) {
    return absl::InvalidArgumentError(absl::StrCat(what, "unsupported type"));
  }
  if (n_dims < 1 || n_dims > 4) {
    return absl::InvalidArgumentError(absl::StrCat(what, n_dims, " dims (must be 1..4)"));
  }
  int64_t elements = 1;
  for (int d = 0; d < 4; ++d) {
    if (ne[d] < 1 || (d >= n_dims && ne[d] != 1)) {
      return absl::InvalidArgumentError(absl::StrCat(what, "ne[", d, "] = ", ne[d], " is invalid"));
    }
    if (__builtin_mul_overflow(elements, ne[d], &elements)) {
      return absl::InvalidArgumentError(absl::StrCat(what, "element count overflows"));
    }
  }
  if (!RowSizeValid(type, ne[0])) {
    return absl::InvalidArgumentError(absl::StrCat(what, "ne[0] = ", ne[0],
                                                   " is not a multiple of the block size ",
                                                   Traits(type).block_elems));
  }
  const DTypeTraits& traits = Traits(type);
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(ne[0] / traits.block_elems),
                             static_cast<size_t>(traits.block_bytes), &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<size_t>(elements / ne[0]), &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(what, "byte size overflows"));
  }
  return bytes;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Removes the temporary file unless the write completed.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::string path) : path_(std::move(path)) {}
  ~TempFileGuard() {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

absl::Status IoError(const std::string& path, absl::string_view what) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

absl::StatusOr<uint32_t> AlignmentOf(
    const std::vector<std::pair<std::string, GgufValue>>& metadata) {
  for (const auto& [key, value] : metadata) {
    if (key != "general.alignment") continue;
    const std::optional<uint64_t> v = value.AsUInt();
    if (!v.has_value() || *v == 0 || !std::has_single_bit(*v) ||
        *v > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(
          "GGUF metadata key 'general.alignment' must be a power of two that fits in uint32");
    }
    return static_cast<uint32_t>(*v);
  }
  return kGgufDefaultAlignment;
}

}  // namespace

void GgufWriter::SetMetadata(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

absl::Status GgufWriter::AddTensor(const std::string& name, DType type,
                                   const std::vector<int64_t>& ne, std::vector<uint8_t> data) {
  if (ne.empty() || ne.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF tensor '", name, "': ", ne.size(), " dims (must be 1..4)"));
  }
  TensorView view;
  view.name = name;
  view.type = type;
  view.n_dims = static_cast<int>(ne.size());
  for (size_t d = 0; d < ne.size(); ++d) view.ne[d] = ne[d];
  ODMOE_ASSIGN_OR_RETURN(size_t bytes, ValidateTensor(name, type, view.n_dims, view.ne));
  if (data.size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", name, "': ", data.size(),
                                                   " bytes of data, expected ", bytes));
  }
  view.data = data.data();
  ODMOE_RETURN_IF_ERROR(AddTensorView(view));
  tensors_.back().owned = std::move(data);  // the vector's buffer does not move
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensorView(const TensorView& view) {
  ODMOE_ASSIGN_OR_RETURN(size_t bytes, ValidateTensor(view.name, view.type, view.n_dims, view.ne));
  if (view.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", view.name, "': no data"));
  }
  for (const PendingTensor& t : tensors_) {
    if (t.name == view.name) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", view.name, "': added twice"));
    }
  }
  tensors_.push_back({view.name, view.type, view.n_dims, view.ne, {}, view.data, bytes, {}});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensorGenerated(const std::string& name, DType type,
                                            const std::vector<int64_t>& ne, Generator generate) {
  if (ne.empty() || ne.size() > 4 || !generate) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF tensor '", name, "': needs 1..4 dims and a generator"));
  }
  std::array<int64_t, 4> dims{1, 1, 1, 1};
  for (size_t d = 0; d < ne.size(); ++d) dims[d] = ne[d];
  ODMOE_ASSIGN_OR_RETURN(size_t bytes,
                         ValidateTensor(name, type, static_cast<int>(ne.size()), dims));
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", name, "': added twice"));
    }
  }
  tensors_.push_back(
      {name, type, static_cast<int>(ne.size()), dims, {}, nullptr, bytes, std::move(generate)});
  return absl::OkStatus();
}

absl::Status GgufWriter::BuildHeader(uint32_t alignment, std::vector<uint8_t>* header,
                                     uint64_t* data_bytes) const {
  ByteSink head;
  head.Put<uint32_t>(kGgufMagic);
  head.Put<uint32_t>(kGgufVersion);
  head.Put<uint64_t>(tensors_.size());
  head.Put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    if (key.empty() || key.size() > kMaxKeyBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF metadata key '", key, "': must be 1..", kMaxKeyBytes, " bytes"));
    }
    head.PutString(key);
    ODMOE_RETURN_IF_ERROR(PutValue(head, key, value));
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    head.PutString(t.name);
    head.Put<uint32_t>(static_cast<uint32_t>(t.n_dims));
    for (int d = 0; d < t.n_dims; ++d) head.Put<uint64_t>(static_cast<uint64_t>(t.ne[d]));
    head.Put<uint32_t>(static_cast<uint32_t>(t.type));
    head.Put<uint64_t>(offset);
    offset += (t.bytes + alignment - 1) / alignment * alignment;
  }
  head.PadTo(alignment);
  *header = head.bytes();
  *data_bytes = offset;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> GgufWriter::FileSize() const {
  ODMOE_ASSIGN_OR_RETURN(uint32_t alignment, AlignmentOf(metadata_));
  std::vector<uint8_t> header;
  uint64_t data = 0;
  ODMOE_RETURN_IF_ERROR(BuildHeader(alignment, &header, &data));
  return header.size() + data;
}

absl::Status GgufWriter::WriteFile(
    const std::string& path,
    const std::function<void(uint64_t written, uint64_t total)>& progress) const {
  ODMOE_ASSIGN_OR_RETURN(uint32_t alignment, AlignmentOf(metadata_));
  std::vector<uint8_t> header;
  uint64_t data_bytes = 0;
  ODMOE_RETURN_IF_ERROR(BuildHeader(alignment, &header, &data_bytes));

  const std::string tmp_path = path + ".tmp";
  TempFileGuard guard(tmp_path);
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(tmp_path.c_str(), "wb"));
  if (file == nullptr) return IoError(tmp_path, "cannot create");
  const std::vector<uint8_t> padding(alignment, 0);
  bool ok = std::fwrite(header.data(), 1, header.size(), file.get()) == header.size();
  const uint64_t total = header.size() + data_bytes;
  uint64_t written = header.size();
  auto report = [&](uint64_t n) {
    written += n;
    if (progress) progress(written, total);
  };
  for (size_t i = 0; ok && i < tensors_.size(); ++i) {
    const PendingTensor& t = tensors_[i];
    const size_t pad = (alignment - t.bytes % alignment) % alignment;
    if (t.generate) {
      // A chunk of whole rows at a time (about 16 MiB).
      const size_t row = RowBytes(t.type, t.ne[0]);
      const size_t chunk = std::max<size_t>(1, (16u << 20) / row) * row;
      std::vector<uint8_t> buf(std::min(chunk, t.bytes));
      for (size_t done = 0; ok && done < t.bytes; done += buf.size()) {
        const size_t n = std::min(buf.size(), t.bytes - done);
        t.generate(done, buf.data(), n);
        ok = std::fwrite(buf.data(), 1, n, file.get()) == n;
        report(n);
      }
    } else {
      ok = std::fwrite(t.data, 1, t.bytes, file.get()) == t.bytes;
      report(t.bytes);
    }
    ok = ok && std::fwrite(padding.data(), 1, pad, file.get()) == pad;
    written += pad;
  }
  if (!ok) return IoError(tmp_path, "write failed");
  if (std::fclose(file.release()) != 0) return IoError(tmp_path, "close failed");
  if (std::rename(tmp_path.c_str(), path.c_str()) != 0) {
    return IoError(path, "cannot rename the temporary file into place");
  }
  guard.Release();
  return absl::OkStatus();
}

}  // namespace odmoe
