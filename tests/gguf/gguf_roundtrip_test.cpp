// GgufWriter -> GgufFile round trips: every value type, every tensor type and
// rank, alignment, ordering, and the writer's own validation.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "gguf/gguf_fixture.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace odmoe {
namespace {

using test::GgufSpec;
using test::TempFile;
using test::TensorSpec;

GgufValue Scalar(GgufType type, GgufValue::Storage s) {
  return GgufValue(type, type, std::move(s));
}
GgufValue Array(GgufType elem, GgufValue::Storage s) {
  return GgufValue(GgufType::kArray, elem, std::move(s));
}

// One value of every scalar type at its extremes, and an array of each.
std::vector<std::pair<std::string, GgufValue>> AllValueTypes() {
  using V = std::vector<std::pair<std::string, GgufValue>>;
  return V{
      {"t.u8", Scalar(GgufType::kUInt8, uint64_t{255})},
      {"t.i8", Scalar(GgufType::kInt8, int64_t{-128})},
      {"t.u16", Scalar(GgufType::kUInt16, uint64_t{65535})},
      {"t.i16", Scalar(GgufType::kInt16, int64_t{-32768})},
      {"t.u32", GgufValue::U32(4000000000u)},
      {"t.i32", GgufValue::I32(-2000000000)},
      {"t.f32", GgufValue::F32(1e-5f)},
      {"t.bool", GgufValue::Bool(true)},
      {"t.string", GgufValue::String("héllo\nworld")},
      {"t.empty_string", GgufValue::String("")},
      {"t.u64", GgufValue::U64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", Scalar(GgufType::kInt64, std::numeric_limits<int64_t>::min())},
      {"t.f64", Scalar(GgufType::kFloat64, 3.141592653589793)},
      {"a.u8", Array(GgufType::kUInt8, std::vector<uint64_t>{0, 1, 255})},
      {"a.i8", Array(GgufType::kInt8, std::vector<int64_t>{-128, 0, 127})},
      {"a.u16", Array(GgufType::kUInt16, std::vector<uint64_t>{65535})},
      {"a.i16", Array(GgufType::kInt16, std::vector<int64_t>{-32768, 32767})},
      {"a.u32", Array(GgufType::kUInt32, std::vector<uint64_t>{7, 4294967295u})},
      {"a.i32", GgufValue::I32Array({-1, 0, 2147483647})},
      {"a.f32", GgufValue::F32Array({0.5f, -1e30f, 0.0f})},
      {"a.bool", Array(GgufType::kBool, std::vector<bool>{true, false, true})},
      {"a.string", GgufValue::StringArray({"a", "", "ccc"})},
      {"a.u64", Array(GgufType::kUInt64, std::vector<uint64_t>{1ull << 63})},
      {"a.i64", Array(GgufType::kInt64, std::vector<int64_t>{-(1ll << 62)})},
      {"a.f64", Array(GgufType::kFloat64, std::vector<double>{1e300, -0.25})},
      {"a.empty", Array(GgufType::kUInt32, std::vector<uint64_t>{})},
  };
}

TEST_CASE("Metadata of every type survives a round trip in insertion order", "[gguf]") {
  GgufSpec spec;
  spec.metadata = AllValueTypes();
  TempFile file("values");
  REQUIRE(test::WriteGguf(spec, file.path()).ok());
  auto opened = GgufFile::Open(file.path());
  REQUIRE(opened.ok());
  const GgufFile& f = **opened;
  CHECK(f.version() == 3);
  CHECK(f.tensors().empty());
  REQUIRE(f.metadata().size() == spec.metadata.size());
  REQUIRE(f.metadata_keys().size() == spec.metadata.size());
  for (size_t i = 0; i < spec.metadata.size(); ++i) {
    const auto& [key, value] = spec.metadata[i];
    INFO("key " << key);
    CHECK(f.metadata_keys()[i] == key);
    const GgufValue* read = f.Find(key);
    REQUIRE(read != nullptr);
    CHECK(read->type() == value.type());
    CHECK(read->elem_type() == value.elem_type());
    CHECK(read->storage() == value.storage());
  }
  CHECK(f.GetUInt("t.u32") == 4000000000u);
  CHECK(f.GetUInt("t.i32") == std::nullopt);  // negative
  CHECK(f.GetFloat("t.f32") == Approx(1e-5).epsilon(1e-6));
  CHECK(f.GetBool("t.bool") == true);
  CHECK(f.GetString("t.string") == "héllo\nworld");
  CHECK(f.GetString("t.u8") == std::nullopt);
  CHECK(f.Find("missing") == nullptr);
  CHECK(f.Find("a.string")->AsStringArray()->size() == 3);
  CHECK(f.Find("a.i32")->AsI32Array() == std::vector<int32_t>{-1, 0, 2147483647});
  CHECK(f.Find("a.f32")->AsF32Array() == std::vector<float>{0.5f, -1e30f, 0.0f});
}

TEST_CASE("Tensors of every type and rank survive a round trip", "[gguf]") {
  GgufSpec spec;
  spec.metadata.emplace_back("general.architecture", GgufValue::String("llama"));
  uint32_t seed = 100;
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    const std::string tn(Traits(type).name);
    const std::vector<std::vector<int64_t>> shapes = {{64}, {32, 3}, {64, 2, 3}, {32, 1, 2, 2}};
    for (const auto& ne : shapes) {
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      spec.tensors.push_back({tn + ".r" + std::to_string(ne.size()), type, ne,
                              test::RandomFloats(static_cast<size_t>(n), seed++)});
    }
  }
  spec.tensors.push_back({"odd.f16", DType::kF16, {3, 5}, test::RandomFloats(15, 7)});
  TempFile file("tensors");
  REQUIRE(test::WriteGguf(spec, file.path()).ok());
  auto opened = GgufFile::Open(file.path());
  REQUIRE(opened.ok());
  const GgufFile& f = **opened;
  REQUIRE(f.tensors().size() == spec.tensors.size());
  for (size_t i = 0; i < spec.tensors.size(); ++i) {
    const TensorSpec& t = spec.tensors[i];
    INFO("tensor " << t.name);
    const TensorView& v = f.tensors()[i];
    CHECK(v.name == t.name);
    CHECK(f.HasTensor(t.name));
    CHECK(v.type == t.type);
    CHECK(v.n_dims == static_cast<int>(t.ne.size()));
    for (int d = 0; d < 4; ++d) CHECK(v.ne[d] == (d < v.n_dims ? t.ne[d] : 1));
    CHECK(f.DataOffset(v) % 32 == 0);
    const std::vector<uint8_t> expect = test::EncodeTensor(t);
    REQUIRE(v.bytes() == expect.size());
    CHECK(std::memcmp(v.data, expect.data(), expect.size()) == 0);
    std::vector<float> values(static_cast<size_t>(v.elements()));
    for (int64_t r = 0; r < v.rows(); ++r) {
      DequantizeRow(v.type, v.Row(r), values.data() + r * v.ne[0], v.ne[0]);
    }
    CHECK(values == test::ExpectedValues(t));
  }
  auto missing = f.Tensor("nope");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("nope") != std::string::npos);
  CHECK(f.Tensor("q8_0.r3").ok());
}

TEST_CASE("general.alignment is honoured by writer and reader", "[gguf]") {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    INFO("alignment " << alignment);
    GgufSpec spec;
    spec.metadata.emplace_back("general.alignment", GgufValue::U32(alignment));
    spec.tensors.push_back({"a", DType::kF16, {3}, {1, 2, 3}});
    spec.tensors.push_back({"b", DType::kQ4_0, {32}, test::RandomFloats(32, 1)});
    spec.tensors.push_back({"c", DType::kF32, {1}, {5}});
    TempFile file("align");
    REQUIRE(test::WriteGguf(spec, file.path()).ok());
    auto opened = GgufFile::Open(file.path());
    REQUIRE(opened.ok());
    CHECK((*opened)->alignment() == alignment);
    for (const TensorView& t : (*opened)->tensors()) {
      CHECK((*opened)->DataOffset(t) % alignment == 0);
    }
    CHECK(*static_cast<const float*>((*opened)->Tensor("c")->data) == 5.0f);
  }
}

TEST_CASE("SetMetadata replaces a key in place", "[gguf]") {
  GgufWriter w;
  w.SetMetadata("x", GgufValue::U32(1));
  w.SetMetadata("y", GgufValue::U32(2));
  w.SetMetadata("x", GgufValue::String("three"));
  TempFile file("replace");
  REQUIRE(w.WriteFile(file.path()).ok());
  auto f = GgufFile::Open(file.path());
  REQUIRE(f.ok());
  CHECK((*f)->metadata_keys() == std::vector<std::string>{"x", "y"});
  CHECK((*f)->GetString("x") == "three");
  CHECK_FALSE(std::filesystem::exists(file.path() + ".tmp"));
}

TEST_CASE("AddTensorView references caller memory", "[gguf]") {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  TensorView v;
  v.name = "view";
  v.type = DType::kF32;
  v.n_dims = 2;
  v.ne = {3, 2, 1, 1};
  v.data = data.data();
  GgufWriter w;
  REQUIRE(w.AddTensorView(v).ok());
  TempFile file("view");
  REQUIRE(w.WriteFile(file.path()).ok());
  auto f = GgufFile::Open(file.path());
  REQUIRE(f.ok());
  const TensorView read = (*f)->Tensor("view").value();
  CHECK(std::memcmp(read.data, data.data(), 24) == 0);
  CHECK(read.ne == v.ne);
}

bool MessageHas(const absl::Status& s, const std::string& what) {
  return !s.ok() && std::string(s.message()).find(what) != std::string::npos;
}

TEST_CASE("GgufWriter rejects invalid tensors and values", "[gguf]") {
  GgufWriter w;
  CHECK(MessageHas(w.AddTensor("a", DType::kF32, {4}, std::vector<uint8_t>(15)), "15 bytes"));
  CHECK(MessageHas(w.AddTensor("a", DType::kQ8_0, {33}, std::vector<uint8_t>(34)), "block size"));
  CHECK(MessageHas(w.AddTensor("a", DType::kF32, {}, {}), "dims"));
  CHECK(
      MessageHas(w.AddTensor("a", DType::kF32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), "dims"));
  CHECK(MessageHas(w.AddTensor("a", DType::kF32, {0}, {}), "ne[0]"));
  CHECK(MessageHas(w.AddTensor("", DType::kF32, {1}, std::vector<uint8_t>(4)), "name"));
  CHECK(MessageHas(w.AddTensor("big", DType::kF32, {1ll << 40, 1ll << 40}, {}), "overflow"));
  REQUIRE(w.AddTensor("a", DType::kF32, {1}, std::vector<uint8_t>(4)).ok());
  CHECK(MessageHas(w.AddTensor("a", DType::kF32, {1}, std::vector<uint8_t>(4)), "twice"));

  TempFile file("bad");
  auto write_with = [&](const std::string& key, GgufValue value) {
    GgufWriter bad;
    bad.SetMetadata(key, std::move(value));
    return bad.WriteFile(file.path());
  };
  CHECK(MessageHas(write_with("general.alignment", GgufValue::U32(48)), "power of two"));
  CHECK(MessageHas(write_with("general.alignment", GgufValue::U32(0)), "power of two"));
  CHECK(MessageHas(write_with("k", Scalar(GgufType::kUInt8, uint64_t{256})), "does not fit"));
  CHECK(MessageHas(write_with("k", Array(GgufType::kInt16, std::vector<int64_t>{1 << 20})),
                   "does not fit"));
  CHECK(MessageHas(write_with("k", Scalar(GgufType::kFloat32, 1e300)), "does not fit"));
  CHECK(MessageHas(write_with("k", Scalar(GgufType::kUInt32, std::string("x"))), "storage"));
  CHECK(MessageHas(write_with("k", Array(GgufType::kString, std::vector<uint64_t>{1})), "storage"));
  CHECK(MessageHas(write_with("k", Array(GgufType::kArray, std::vector<uint64_t>{1})), "storage"));
  CHECK(MessageHas(write_with("k", GgufValue(GgufType::kUInt32, GgufType::kInt32, int64_t{1})),
                   "storage"));
  CHECK(MessageHas(write_with("", GgufValue::U32(1)), "key"));
  CHECK_FALSE(std::filesystem::exists(file.path()));
  CHECK_FALSE(std::filesystem::exists(file.path() + ".tmp"));

  GgufWriter ok;
  const absl::Status s = ok.WriteFile("/nonexistent-dir/x.gguf");
  CHECK(s.code() == absl::StatusCode::kInternal);
  CHECK(MessageHas(s, "/nonexistent-dir/x.gguf.tmp"));
}

TEST_CASE("GgufValue accessors convert only what fits", "[gguf]") {
  CHECK(GgufValue::U32(7).AsInt() == 7);
  CHECK(GgufValue::U64(std::numeric_limits<uint64_t>::max()).AsInt() == std::nullopt);
  CHECK(GgufValue::I32(-1).AsUInt() == std::nullopt);
  CHECK(GgufValue::I32(5).AsUInt() == 5u);
  CHECK(GgufValue::I32(5).AsFloat() == 5.0);
  CHECK(GgufValue::F32(0.5f).AsUInt() == std::nullopt);
  CHECK(GgufValue::Bool(true).AsUInt() == std::nullopt);
  CHECK(GgufValue::String("s").AsBool() == std::nullopt);
  CHECK(GgufValue::U32(1).AsString() == nullptr);
  CHECK(GgufValue::U32(1).ArraySize() == 0);
  const GgufValue arr = GgufValue::I32Array({1, 2});
  CHECK(arr.ArraySize() == 2);
  CHECK(arr.AsUInt() == std::nullopt);
  CHECK(arr.AsF32Array() == std::vector<float>{1, 2});
  CHECK(arr.AsStringArray() == nullptr);
  CHECK(Array(GgufType::kInt64, std::vector<int64_t>{1ll << 40}).AsI32Array() == std::nullopt);
  CHECK(Array(GgufType::kUInt32, std::vector<uint64_t>{3}).AsI32Array() == std::vector<int32_t>{3});
  CHECK(GgufValue::StringArray({"x"}).AsF32Array() == std::nullopt);
  CHECK(GgufValue::StringArray({"x", "y"}).ArraySize() == 2);
  CHECK(GgufTypeName(GgufType::kFloat64) == "float64");
}

}  // namespace
}  // namespace odmoe
