// GgufFile::Open on malformed files: one crafted file per rule, then every
// truncation and many seeded byte mutations of a valid file. Open must return
// an error naming the file, or a file whose every tensor lies inside it.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_fixture.h"
#include "gguf/gguf_reader.h"

namespace odmoe {
namespace {

using test::TempFile;

// Assembles GGUF bytes field by field, valid or not.
class RawGguf {
 public:
  RawGguf& U8(uint8_t v) { return Put(v); }
  RawGguf& U32(uint32_t v) { return Put(v); }
  RawGguf& U64(uint64_t v) { return Put(v); }
  RawGguf& Str(const std::string& s) {
    U64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return U32(kGgufMagic).U32(version).U64(n_tensors).U64(n_kv);
  }
  RawGguf& KvU32(const std::string& key, uint32_t v) {
    return Str(key).U32(static_cast<uint32_t>(GgufType::kUInt32)).U32(v);
  }
  RawGguf& Tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
                  uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) U64(n);
    return U32(type).U64(offset);
  }
  RawGguf& PadTo(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  RawGguf& Zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
  std::vector<uint8_t> bytes;

 private:
  template <typename T>
  RawGguf& Put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
};

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;

// Opens `bytes` written to a temporary file; the error message (empty if OK).
struct OpenResult {
  absl::Status status;
  std::string path;
  std::string message() const { return std::string(status.message()); }
};

OpenResult OpenBytes(const std::vector<uint8_t>& bytes) {
  TempFile file("raw");
  test::WriteBytes(file.path(), bytes.data(), bytes.size());
  auto opened = GgufFile::Open(file.path());
  return {opened.status(), file.path()};
}

// Expects INVALID_ARGUMENT with a message naming the file and `what`.
void ExpectRejected(const std::vector<uint8_t>& bytes, const std::string& what) {
  const OpenResult r = OpenBytes(bytes);
  INFO("message: " << r.message());
  CHECK(r.status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.message().find(r.path) != std::string::npos);
  CHECK(r.message().find(what) != std::string::npos);
}

// A one-tensor file: F32 {4} at offset 0.
RawGguf OneTensorFile() {
  RawGguf g;
  g.Header(1, 1).KvU32("general.alignment", 32).Tensor("w", {4}, kF32, 0).PadTo(32).Zeros(16);
  return g;
}

TEST_CASE("A hand-assembled file opens, in versions 2 and 3", "[gguf][corrupt]") {
  for (uint32_t version : {2u, 3u}) {
    RawGguf g;
    g.Header(1, 1, version).KvU32("k", 9).Tensor("w", {4}, kF32, 0).PadTo(32);
    const float values[4] = {1, 2, 3, 4};
    g.bytes.insert(g.bytes.end(), reinterpret_cast<const uint8_t*>(values),
                   reinterpret_cast<const uint8_t*>(values) + 16);
    TempFile file("v");
    test::WriteBytes(file.path(), g.bytes.data(), g.bytes.size());
    auto f = GgufFile::Open(file.path());
    REQUIRE(f.ok());
    CHECK((*f)->version() == version);
    CHECK((*f)->GetUInt("k") == 9u);
    CHECK(static_cast<const float*>((*f)->Tensor("w")->data)[3] == 4.0f);
    CHECK((*f)->file_size() == g.bytes.size());
  }
  CHECK(OpenBytes(OneTensorFile().bytes).status.ok());
}

TEST_CASE("Header errors", "[gguf][corrupt]") {
  ExpectRejected(RawGguf().U32(0x4c4d4747).U32(3).U64(0).U64(0).bytes, "bad magic");
  ExpectRejected(RawGguf().Header(0, 0, 1).bytes, "version 1 is not supported");
  ExpectRejected(RawGguf().Header(0, 0, 4).bytes, "version 4 is not supported");
  ExpectRejected(RawGguf().Header(0, 0, 0x03000000).bytes, "big-endian");
  ExpectRejected(RawGguf().Header(1ull << 40, 0).bytes, "tensor count");
  ExpectRejected(RawGguf().Header(2'000'000, 0).Zeros(100'000'000 / 1000).bytes, "tensor count");
  ExpectRejected(RawGguf().Header(0, ~0ull).bytes, "metadata count");
  ExpectRejected(RawGguf().Header(0, 1000).bytes, "metadata count");
  ExpectRejected(RawGguf().U32(kGgufMagic).U32(3).U64(0).bytes, "truncated");
  ExpectRejected(RawGguf().U8('G').bytes, "truncated");

  const OpenResult empty = OpenBytes({});
  CHECK(empty.status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(empty.message().find("empty") != std::string::npos);
  auto missing = GgufFile::Open("/nonexistent/model.gguf");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("/nonexistent/model.gguf") !=
        std::string::npos);
}

TEST_CASE("Metadata errors", "[gguf][corrupt]") {
  // Key length far beyond the file.
  ExpectRejected(RawGguf().Header(0, 1).U64(1ull << 62).Zeros(16).bytes, "string length");
  // String value longer than what is left.
  ExpectRejected(RawGguf().Header(0, 1).Str("k").U32(8).U64(1000).Zeros(10).bytes, "truncated");
  ExpectRejected(RawGguf().Header(0, 1).Str("").U32(4).U32(1).bytes, "empty key");
  ExpectRejected(RawGguf().Header(0, 1).Str("k").U32(13).U32(1).bytes, "unknown value type id 13");
  ExpectRejected(RawGguf().Header(0, 1).Str("k").U32(9).U32(9).U64(1).U32(4).U64(1).U32(1).bytes,
                 "arrays of arrays");
  ExpectRejected(RawGguf().Header(0, 1).Str("k").U32(9).U32(4).U64(1ull << 61).Zeros(64).bytes,
                 "cannot fit");
  ExpectRejected(RawGguf().Header(0, 1).Str("k").U32(9).U32(8).U64(100).Zeros(64).bytes,
                 "cannot fit");
  ExpectRejected(RawGguf().Header(0, 1).Str("k").U32(9).U32(99).U64(1).Zeros(8).bytes,
                 "unknown value type id 99");
  ExpectRejected(RawGguf().Header(0, 1).Str("flag").U32(7).U8(2).bytes, "neither 0 nor 1");
  ExpectRejected(RawGguf().Header(0, 2).KvU32("dup", 1).KvU32("dup", 2).bytes, "duplicate key");
  ExpectRejected(RawGguf().Header(0, 1).KvU32("general.alignment", 48).bytes, "power of two");
  ExpectRejected(RawGguf().Header(0, 1).KvU32("general.alignment", 0).bytes, "power of two");
  ExpectRejected(RawGguf().Header(0, 1).Str("general.alignment").U32(8).Str("32").bytes,
                 "unsigned integer");
  // The error names the key.
  ExpectRejected(RawGguf()
                     .Header(0, 1)
                     .Str("tokenizer.ggml.tokens")
                     .U32(9)
                     .U32(8)
                     .U64(2)
                     .Str("a")
                     .U64(99)
                     .bytes,
                 "'tokenizer.ggml.tokens'");
}

TEST_CASE("Tensor info errors", "[gguf][corrupt]") {
  auto one = [](const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    RawGguf g;
    g.Header(1, 0).Tensor("blk.0.w", ne, type, offset).PadTo(32).Zeros(4096);
    return g.bytes;
  };
  // iq2_xxs (id 16): a GGML type odmoe does not read.
  ExpectRejected(one({256}, 16, 0), "iq2_xxs");
  ExpectRejected(one({256}, 16, 0), "'blk.0.w'");
  ExpectRejected(one({256}, 16, 0), "not supported");
  ExpectRejected(one({128}, 12, 0), "not a multiple of the q4_K block size 256");
  ExpectRejected(one({16}, 7777, 0), "unknown");
  ExpectRejected(one({33}, kQ8_0, 0), "not a multiple of the q8_0 block size 32");
  ExpectRejected(one({}, kF32, 0), "n_dims 0");
  ExpectRejected(one({1, 1, 1, 1, 1}, kF32, 0), "n_dims 5");
  ExpectRejected(one({4, 0}, kF32, 0), "ne[1] = 0");
  ExpectRejected(one({1ull << 63, 2}, kF32, 0), "out of range");
  ExpectRejected(one({1ull << 40, 1ull << 40}, kF32, 0), "overflows");
  ExpectRejected(one({1ull << 62}, kF32, 0), "overflows");  // 2^64 bytes in one row
  ExpectRejected(one({4}, kF32, 16), "not a multiple of the alignment 32");
  ExpectRejected(one({4}, kF32, 4096), "outside the data section");
  ExpectRejected(one({2048}, kF32, 0), "outside the data section");
  ExpectRejected(one({4}, kF32, ~0ull - 31), "outside the data section");
  ExpectRejected(
      RawGguf().Header(1, 0).Str("").U32(1).U64(4).U32(0).U64(0).PadTo(32).Zeros(16).bytes,
      "empty tensor name");
  ExpectRejected(RawGguf().Header(1, 0).U64(5000).Zeros(5000).bytes, "string length 5000");

  RawGguf overlap;
  overlap.Header(2, 0).Tensor("a", {64}, kF32, 0).Tensor("b", {8}, kF32, 224).PadTo(32).Zeros(512);
  ExpectRejected(overlap.bytes, "overlaps tensor 'a'");

  RawGguf dup;
  dup.Header(2, 0).Tensor("a", {8}, kF32, 0).Tensor("a", {8}, kF32, 32).PadTo(32).Zeros(64);
  ExpectRejected(dup.bytes, "duplicate name");

  RawGguf no_data;  // tensor infos end exactly at the end of the file
  no_data.Header(1, 0).Tensor("a", {8}, kF32, 0);
  while (no_data.bytes.size() % 32 == 0) no_data.U8(0);
  ExpectRejected(no_data.bytes, "past the end");
}

// Every invariant a caller may rely on after a successful Open, exercised so
// that an out-of-bounds view would be caught (or crash) here.
void CheckConsistent(const GgufFile& f, const std::string& path) {
  const size_t size = f.file_size();
  std::set<std::string> names;
  for (const TensorView& t : f.tensors()) {
    REQUIRE(names.insert(t.name).second);
    REQUIRE(IsKnownGgmlType(static_cast<uint32_t>(t.type)));
    REQUIRE(RowSizeValid(t.type, t.ne[0]));
    const uint64_t offset = f.DataOffset(t);
    REQUIRE(offset % f.alignment() == 0);
    REQUIRE(offset <= size);
    REQUIRE(t.bytes() <= size - offset);
    std::vector<float> row(static_cast<size_t>(t.ne[0]));
    for (int64_t r = 0; r < t.rows(); ++r) DequantizeRow(t.type, t.Row(r), row.data(), t.ne[0]);
  }
  REQUIRE(f.metadata_keys().size() == f.metadata().size());
  for (const std::string& key : f.metadata_keys()) {
    const GgufValue* v = f.Find(key);
    REQUIRE(v != nullptr);
    if (const auto* s = v->AsStringArray()) {
      for (const std::string& e : *s) REQUIRE(e.size() <= size);
    }
  }
  (void)path;
}

// A small but varied valid file: several value kinds and three tensor types.
std::vector<uint8_t> ValidFileBytes() {
  test::GgufSpec spec;
  spec.metadata.emplace_back("general.architecture", GgufValue::String("llama"));
  spec.metadata.emplace_back("general.alignment", GgufValue::U32(32));
  spec.metadata.emplace_back("llama.block_count", GgufValue::U32(2));
  spec.metadata.emplace_back("tokenizer.ggml.tokens", GgufValue::StringArray({"<s>", "a", "bc"}));
  spec.metadata.emplace_back("tokenizer.ggml.scores", GgufValue::F32Array({0.0f, -1.5f, 2.0f}));
  spec.metadata.emplace_back("flag", GgufValue::Bool(true));
  spec.tensors.push_back({"tok", DType::kF16, {4, 3}, test::RandomFloats(12, 1)});
  spec.tensors.push_back({"q8", DType::kQ8_0, {32, 2}, test::RandomFloats(64, 2)});
  spec.tensors.push_back({"q4", DType::kQ4_0, {32}, test::RandomFloats(32, 3)});
  TempFile file("valid");
  REQUIRE(test::WriteGguf(spec, file.path()).ok());
  return test::ReadBytes(file.path());
}

// Opens mutated bytes; returns true if Open succeeded (then checks it).
bool OpenMutated(const std::vector<uint8_t>& bytes, size_t len, TempFile& file) {
  test::WriteBytes(file.path(), bytes.data(), len);
  auto f = GgufFile::Open(file.path());
  if (!f.ok()) {
    REQUIRE(!f.status().message().empty());
    REQUIRE(std::string(f.status().message()).find(file.path()) != std::string::npos);
    return false;
  }
  CheckConsistent(**f, file.path());
  return true;
}

TEST_CASE("Every truncation of a valid file is rejected", "[gguf][corrupt]") {
  const std::vector<uint8_t> bytes = ValidFileBytes();
  REQUIRE(bytes.size() > 300);
  TempFile file("trunc");
  // The file is only complete once the last tensor's data is in.
  test::WriteBytes(file.path(), bytes.data(), bytes.size());
  auto full = GgufFile::Open(file.path());
  REQUIRE(full.ok());
  uint64_t data_end = 0;
  for (const TensorView& t : (*full)->tensors()) {
    data_end = std::max<uint64_t>(data_end, (*full)->DataOffset(t) + t.bytes());
  }
  full->reset();
  int accepted = 0;
  for (size_t len = 1; len < bytes.size(); ++len) {
    INFO("truncated to " << len << " of " << bytes.size() << " bytes");
    const bool ok = OpenMutated(bytes, len, file);
    if (len < data_end) REQUIRE_FALSE(ok);
    accepted += ok ? 1 : 0;
  }
  CHECK(accepted == static_cast<int>(bytes.size() - data_end));  // only trailing padding
}

TEST_CASE("Byte mutations never crash the reader", "[gguf][corrupt]") {
  const std::vector<uint8_t> bytes = ValidFileBytes();
  TempFile file("flip");
  int rejected = 0;
  // Every byte inverted, then set to 0x00 and 0xff.
  for (uint8_t mode = 0; mode < 3; ++mode) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::vector<uint8_t> m = bytes;
      m[i] = mode == 0 ? static_cast<uint8_t>(~m[i]) : (mode == 1 ? 0x00 : 0xff);
      INFO("mode " << int(mode) << " byte " << i);
      rejected += OpenMutated(m, m.size(), file) ? 0 : 1;
    }
  }
  // Seeded random multi-byte mutations, some with a truncation.
  std::mt19937 rng(0x6767);
  std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> m = bytes;
    const int flips = 1 + iter % 4;
    for (int k = 0; k < flips; ++k) m[pos(rng)] = static_cast<uint8_t>(byte(rng));
    const size_t len = iter % 5 == 0 ? 1 + pos(rng) : m.size();
    INFO("iteration " << iter);
    rejected += OpenMutated(m, len, file) ? 0 : 1;
  }
  // The header and metadata are most of the bytes: many mutations must be caught.
  CHECK(rejected > 2000);
}

}  // namespace
}  // namespace odmoe
