#include "gguf/gguf_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF reading assumes a little-endian host");

constexpr uint64_t kMaxTensorCount = 1'000'000;
constexpr uint64_t kMaxKvCount = 1'000'000;
constexpr uint64_t kMaxKeyBytes = 65'535;
constexpr uint64_t kMaxTensorNameBytes = 1'024;
constexpr uint32_t kMaxDims = 4;
// String values are limited only by the bytes left in the file.
constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();
// Smallest encodings: a key/value pair (1-byte key, bool value) and a tensor
// info (1-byte name, one dimension). Counts that cannot fit are rejected early.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

// Debian's Abseil has its own string_view type; this bridges std's.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// A name read from the file, quoted and escaped for an error message.
std::string Quote(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string shown = absl::CHexEscape(Sv(s.substr(0, kMaxShown)));
  return absl::StrCat("'", shown, s.size() > kMaxShown ? "...'" : "'");
}

// Bounds-checked little-endian reads over the mapped bytes.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }

  /// INVALID_ARGUMENT "<path>: <what>: <detail> (at byte offset <at>)".
  absl::Status Error(size_t at, absl::string_view what, absl::string_view detail) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", what, ": ", detail, " (at byte offset ", at, ")"));
  }

  absl::Status Need(uint64_t bytes, absl::string_view what) const {
    if (bytes <= remaining()) return absl::OkStatus();
    return Error(pos_, what,
                 absl::StrCat("file truncated: needs ", bytes, " bytes but only ", remaining(),
                              " remain of ", size_));
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    ODMOE_RETURN_IF_ERROR(Need(sizeof(T), what));
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  absl::StatusOr<std::string> ReadString(absl::string_view what, uint64_t max_bytes) {
    const size_t at = pos_;
    ODMOE_ASSIGN_OR_RETURN(uint64_t length, Read<uint64_t>(what));
    if (length > max_bytes) {
      return Error(
          at, what,
          absl::StrCat("string length ", length, " exceeds the limit of ", max_bytes, " bytes"));
    }
    ODMOE_RETURN_IF_ERROR(Need(length, what));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

enum class ValueKind { kUnsigned, kSigned, kFloat, kBool, kString };

ValueKind KindOf(GgufType type) {
  switch (type) {
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      return ValueKind::kSigned;
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return ValueKind::kFloat;
    case GgufType::kBool:
      return ValueKind::kBool;
    case GgufType::kString:
      return ValueKind::kString;
    default:
      return ValueKind::kUnsigned;
  }
}

// Encoded size of one element (strings: their 8-byte length prefix).
uint64_t MinEncodedBytes(GgufType type) {
  switch (type) {
    case GgufType::kUInt8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUInt16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUInt32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

absl::StatusOr<GgufType> ReadType(Cursor& c, absl::string_view what) {
  const size_t at = c.pos();
  ODMOE_ASSIGN_OR_RETURN(uint32_t raw, c.Read<uint32_t>(what));
  if (raw > static_cast<uint32_t>(GgufType::kFloat64)) {
    return c.Error(at, what, absl::StrCat("unknown value type id ", raw));
  }
  return static_cast<GgufType>(raw);
}

absl::StatusOr<uint64_t> ReadUnsigned(Cursor& c, GgufType type, absl::string_view what) {
  switch (type) {
    case GgufType::kUInt8:
      return c.Read<uint8_t>(what);
    case GgufType::kUInt16:
      return c.Read<uint16_t>(what);
    case GgufType::kUInt32:
      return c.Read<uint32_t>(what);
    default:
      return c.Read<uint64_t>(what);
  }
}

absl::StatusOr<int64_t> ReadSigned(Cursor& c, GgufType type, absl::string_view what) {
  switch (type) {
    case GgufType::kInt8:
      return c.Read<int8_t>(what);
    case GgufType::kInt16:
      return c.Read<int16_t>(what);
    case GgufType::kInt32:
      return c.Read<int32_t>(what);
    default:
      return c.Read<int64_t>(what);
  }
}

absl::StatusOr<double> ReadFloat(Cursor& c, GgufType type, absl::string_view what) {
  if (type == GgufType::kFloat32) return c.Read<float>(what);
  return c.Read<double>(what);
}

absl::StatusOr<bool> ReadBool(Cursor& c, absl::string_view what) {
  const size_t at = c.pos();
  ODMOE_ASSIGN_OR_RETURN(uint8_t raw, c.Read<uint8_t>(what));
  if (raw > 1) return c.Error(at, what, absl::StrCat("bool value ", raw, " is neither 0 nor 1"));
  return raw == 1;
}

// Reads `count` elements with `read` (a callable returning StatusOr<T>).
template <typename T, typename ReadFn>
absl::StatusOr<GgufValue::Storage> ReadElements(uint64_t count, ReadFn read) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    ODMOE_ASSIGN_OR_RETURN(T v, read());
    out.push_back(std::move(v));
  }
  return GgufValue::Storage(std::move(out));
}

absl::StatusOr<GgufValue::Storage> ReadArrayStorage(Cursor& c, GgufType elem, uint64_t count,
                                                    absl::string_view what) {
  switch (KindOf(elem)) {
    case ValueKind::kUnsigned:
      return ReadElements<uint64_t>(count, [&] { return ReadUnsigned(c, elem, what); });
    case ValueKind::kSigned:
      return ReadElements<int64_t>(count, [&] { return ReadSigned(c, elem, what); });
    case ValueKind::kFloat:
      return ReadElements<double>(count, [&] { return ReadFloat(c, elem, what); });
    case ValueKind::kBool:
      return ReadElements<bool>(count, [&] { return ReadBool(c, what); });
    case ValueKind::kString:
      return ReadElements<std::string>(count, [&] { return c.ReadString(what, kNoLimit); });
  }
  return c.Error(c.pos(), what, "unreachable value kind");
}

absl::StatusOr<GgufValue> ReadArray(Cursor& c, absl::string_view what) {
  const size_t at = c.pos();
  ODMOE_ASSIGN_OR_RETURN(GgufType elem, ReadType(c, what));
  if (elem == GgufType::kArray) return c.Error(at, what, "arrays of arrays are not supported");
  ODMOE_ASSIGN_OR_RETURN(uint64_t count, c.Read<uint64_t>(what));
  if (count > c.remaining() / MinEncodedBytes(elem)) {
    return c.Error(
        at, what,
        absl::StrCat("array of ", count, " ", Sv(GgufTypeName(elem)),
                     " elements cannot fit in the ", c.remaining(), " bytes left in the file"));
  }
  ODMOE_ASSIGN_OR_RETURN(GgufValue::Storage storage, ReadArrayStorage(c, elem, count, what));
  return GgufValue(GgufType::kArray, elem, std::move(storage));
}

absl::StatusOr<GgufValue> ReadValue(Cursor& c, GgufType type, absl::string_view what) {
  if (type == GgufType::kArray) return ReadArray(c, what);
  switch (KindOf(type)) {
    case ValueKind::kUnsigned: {
      ODMOE_ASSIGN_OR_RETURN(uint64_t v, ReadUnsigned(c, type, what));
      return GgufValue(type, type, v);
    }
    case ValueKind::kSigned: {
      ODMOE_ASSIGN_OR_RETURN(int64_t v, ReadSigned(c, type, what));
      return GgufValue(type, type, v);
    }
    case ValueKind::kFloat: {
      ODMOE_ASSIGN_OR_RETURN(double v, ReadFloat(c, type, what));
      return GgufValue(type, type, v);
    }
    case ValueKind::kBool: {
      ODMOE_ASSIGN_OR_RETURN(bool v, ReadBool(c, what));
      return GgufValue(type, type, v);
    }
    case ValueKind::kString: {
      ODMOE_ASSIGN_OR_RETURN(std::string v, c.ReadString(what, kNoLimit));
      return GgufValue(type, type, std::move(v));
    }
  }
  return c.Error(c.pos(), what, "unreachable value kind");
}

// A tensor info as read, before its offset is resolved against the data section.
struct TensorInfo {
  TensorView view;
  uint64_t offset = 0;  // relative to the data section
  uint64_t bytes = 0;
  size_t info_pos = 0;  // where the info starts in the file, for messages
};

// Everything Open() validates, before it is moved into a GgufFile.
struct ParsedGguf {
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  std::map<std::string, GgufValue> metadata;
  std::vector<std::string> metadata_keys;
  std::vector<TensorInfo> tensors;
  uint64_t data_start = 0;
};

absl::Status ReadHeader(Cursor& c, ParsedGguf& out, uint64_t& tensor_count, uint64_t& kv_count) {
  ODMOE_ASSIGN_OR_RETURN(uint32_t magic, c.Read<uint32_t>("header"));
  if (magic != kGgufMagic) {
    return c.Error(0, "header", absl::StrFormat("bad magic 0x%08x: not a GGUF file", magic));
  }
  ODMOE_ASSIGN_OR_RETURN(out.version, c.Read<uint32_t>("header"));
  if (out.version != 2 && out.version != 3) {
    const uint32_t swapped = __builtin_bswap32(out.version);
    if (swapped == 2 || swapped == 3) {
      return c.Error(4, "header", "big-endian GGUF files are not supported");
    }
    return c.Error(
        4, "header",
        absl::StrCat("GGUF version ", out.version, " is not supported (only versions 2 and 3)"));
  }
  ODMOE_ASSIGN_OR_RETURN(tensor_count, c.Read<uint64_t>("header"));
  ODMOE_ASSIGN_OR_RETURN(kv_count, c.Read<uint64_t>("header"));
  if (tensor_count > kMaxTensorCount || tensor_count > c.remaining() / kMinTensorInfoBytes) {
    return c.Error(8, "header",
                   absl::StrCat("tensor count ", tensor_count, " is too large (limit ",
                                kMaxTensorCount, ", file has ", c.size(), " bytes)"));
  }
  if (kv_count > kMaxKvCount || kv_count > c.remaining() / kMinKvBytes) {
    return c.Error(16, "header",
                   absl::StrCat("metadata count ", kv_count, " is too large (limit ", kMaxKvCount,
                                ", file has ", c.size(), " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckAlignmentValue(Cursor& c, size_t at, const GgufValue& value,
                                 uint32_t& alignment) {
  const std::string what = "metadata key 'general.alignment'";
  const std::optional<uint64_t> v = value.AsUInt();
  if (!v.has_value()) {
    return c.Error(
        at, what,
        absl::StrCat("must be an unsigned integer, found ", Sv(GgufTypeName(value.type()))));
  }
  if (*v == 0 || !std::has_single_bit(*v) || *v > std::numeric_limits<uint32_t>::max()) {
    return c.Error(at, what, absl::StrCat("alignment ", *v, " is not a power of two"));
  }
  alignment = static_cast<uint32_t>(*v);
  return absl::OkStatus();
}

absl::Status ReadMetadata(Cursor& c, uint64_t kv_count, ParsedGguf& out) {
  for (uint64_t i = 0; i < kv_count; ++i) {
    const size_t at = c.pos();
    const std::string entry = absl::StrCat("metadata entry #", i);
    ODMOE_ASSIGN_OR_RETURN(std::string key, c.ReadString(entry + " key", kMaxKeyBytes));
    if (key.empty()) return c.Error(at, entry, "empty key");
    const std::string what = absl::StrCat("metadata key ", Quote(key));
    ODMOE_ASSIGN_OR_RETURN(GgufType type, ReadType(c, what));
    ODMOE_ASSIGN_OR_RETURN(GgufValue value, ReadValue(c, type, what));
    if (key == "general.alignment") {
      ODMOE_RETURN_IF_ERROR(CheckAlignmentValue(c, at, value, out.alignment));
    }
    if (!out.metadata.emplace(key, std::move(value)).second) {
      return c.Error(at, what, "duplicate key");
    }
    out.metadata_keys.push_back(std::move(key));
  }
  return absl::OkStatus();
}

absl::Status ReadShape(Cursor& c, size_t at, const std::string& what, TensorView& view) {
  ODMOE_ASSIGN_OR_RETURN(uint32_t n_dims, c.Read<uint32_t>(what));
  if (n_dims < 1 || n_dims > kMaxDims) {
    return c.Error(at, what, absl::StrCat("n_dims ", n_dims, " is outside 1..", kMaxDims));
  }
  view.n_dims = static_cast<int>(n_dims);
  int64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    ODMOE_ASSIGN_OR_RETURN(uint64_t ne, c.Read<uint64_t>(what));
    if (ne < 1 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return c.Error(at, what, absl::StrCat("ne[", d, "] = ", ne, " is out of range"));
    }
    view.ne[d] = static_cast<int64_t>(ne);
    if (__builtin_mul_overflow(elements, view.ne[d], &elements)) {
      return c.Error(at, what, "element count overflows");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorInfo> ReadTensorInfo(Cursor& c, uint64_t index, uint32_t alignment) {
  TensorInfo info;
  info.info_pos = c.pos();
  const size_t at = info.info_pos;
  const std::string entry = absl::StrCat("tensor info #", index);
  ODMOE_ASSIGN_OR_RETURN(info.view.name, c.ReadString(entry + " name", kMaxTensorNameBytes));
  if (info.view.name.empty()) return c.Error(at, entry, "empty tensor name");
  const std::string what = absl::StrCat("tensor ", Quote(info.view.name));
  ODMOE_RETURN_IF_ERROR(ReadShape(c, at, what, info.view));
  ODMOE_ASSIGN_OR_RETURN(uint32_t type, c.Read<uint32_t>(what));
  if (!IsKnownGgmlType(type)) {
    return c.Error(at, what,
                   absl::StrCat("type ", Sv(GgmlTypeName(type)), " (id ", type,
                                ") is not supported (supported: ", SupportedTypeNames(), ")"));
  }
  info.view.type = static_cast<DType>(type);
  const DTypeTraits& traits = Traits(info.view.type);
  if (!RowSizeValid(info.view.type, info.view.ne[0])) {
    return c.Error(at, what,
                   absl::StrCat("ne[0] = ", info.view.ne[0], " is not a multiple of the ",
                                Sv(traits.name), " block size ", traits.block_elems));
  }
  ODMOE_ASSIGN_OR_RETURN(info.offset, c.Read<uint64_t>(what));
  if (info.offset % alignment != 0) {
    return c.Error(at, what,
                   absl::StrCat("data offset ", info.offset, " is not a multiple of the alignment ",
                                alignment));
  }
  const uint64_t blocks = static_cast<uint64_t>(info.view.ne[0]) / traits.block_elems;
  const uint64_t rows = static_cast<uint64_t>(info.view.rows());
  uint64_t row_bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(traits.block_bytes), &row_bytes) ||
      __builtin_mul_overflow(row_bytes, rows, &info.bytes)) {
    return c.Error(at, what, "byte size overflows");
  }
  return info;
}

absl::Status ReadTensorInfos(Cursor& c, uint64_t tensor_count, ParsedGguf& out) {
  std::set<std::string_view> names;
  out.tensors.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    ODMOE_ASSIGN_OR_RETURN(TensorInfo info, ReadTensorInfo(c, i, out.alignment));
    out.tensors.push_back(std::move(info));
  }
  for (const TensorInfo& t : out.tensors) {
    if (!names.insert(t.view.name).second) {
      return c.Error(t.info_pos, absl::StrCat("tensor ", Quote(t.view.name)), "duplicate name");
    }
  }
  return absl::OkStatus();
}

// Places the data section and checks every tensor's byte range against the
// file and against the others.
absl::Status CheckDataRanges(Cursor& c, ParsedGguf& out) {
  const uint64_t end_of_infos = c.pos();
  out.data_start = (end_of_infos + out.alignment - 1) / out.alignment * out.alignment;
  if (out.tensors.empty()) return absl::OkStatus();
  if (out.data_start > c.size()) {
    return c.Error(end_of_infos, "data section",
                   absl::StrCat("starts at byte ", out.data_start, ", past the end of the ",
                                c.size(), "-byte file"));
  }
  const uint64_t data_size = c.size() - out.data_start;
  for (const TensorInfo& t : out.tensors) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return c.Error(t.info_pos, absl::StrCat("tensor ", Quote(t.view.name)),
                     absl::StrCat("data [", t.offset, ", +", t.bytes,
                                  ") lies outside the data section of ", data_size, " bytes"));
    }
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : out.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (prev.offset + prev.bytes > cur.offset) {
      return c.Error(
          cur.info_pos, absl::StrCat("tensor ", Quote(cur.view.name)),
          absl::StrCat("data at offset ", cur.offset, " overlaps tensor ", Quote(prev.view.name),
                       " [", prev.offset, ", +", prev.bytes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedGguf> Parse(const uint8_t* data, size_t size, const std::string& path) {
  Cursor c(data, size, path);
  ParsedGguf out;
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  ODMOE_RETURN_IF_ERROR(ReadHeader(c, out, tensor_count, kv_count));
  ODMOE_RETURN_IF_ERROR(ReadMetadata(c, kv_count, out));
  ODMOE_RETURN_IF_ERROR(ReadTensorInfos(c, tensor_count, out));
  ODMOE_RETURN_IF_ERROR(CheckDataRanges(c, out));
  for (TensorInfo& t : out.tensors) t.view.data = data + out.data_start + t.offset;
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ODMOE_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  ODMOE_ASSIGN_OR_RETURN(ParsedGguf parsed, Parse(map.data(), map.size(), path));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->map_ = std::move(map);
  file->version_ = parsed.version;
  file->alignment_ = parsed.alignment;
  file->metadata_ = std::move(parsed.metadata);
  file->metadata_keys_ = std::move(parsed.metadata_keys);
  file->tensors_.reserve(parsed.tensors.size());
  for (TensorInfo& t : parsed.tensors) {
    file->tensor_index_.emplace(t.view.name, file->tensors_.size());
    file->tensors_.push_back(std::move(t.view));
  }
  return file;
}

size_t GgufFile::file_size() const { return map_.size(); }

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(std::string(key));
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> GgufFile::GetUInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v == nullptr ? std::nullopt : v->AsUInt();
}

std::optional<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v == nullptr ? std::nullopt : v->AsFloat();
}

std::optional<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v == nullptr ? std::nullopt : v->AsBool();
}

std::optional<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr || v->AsString() == nullptr) return std::nullopt;
  return *v->AsString();
}

bool GgufFile::HasTensor(std::string_view name) const {
  return tensor_index_.find(name) != tensor_index_.end();
}

absl::StatusOr<TensorView> GgufFile::Tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor named ", Quote(name)));
  }
  return tensors_[it->second];
}

uint64_t GgufFile::DataOffset(const TensorView& t) const {
  return static_cast<uint64_t>(static_cast<const uint8_t*>(t.data) - map_.data());
}

}  // namespace odmoe
