// Reads a file written by another GGUF implementation (the `gguf` Python
// package 0.19.0, GGUFWriter), embedded below, to pin the on-disk layout to
// the ecosystem's rather than only to our own writer. It was made with:
//
//   w = gguf.GGUFWriter(path, "llama")
//   w.add_uint32("llama.block_count", 2)
//   w.add_float32("llama.rope.freq_base", 10000.0)
//   w.add_array("tokenizer.ggml.tokens", ["<s>", "hi"])
//   w.add_bool("flag", True)
//   w.add_tensor("a", np.arange(8, dtype=np.float32).reshape(2, 4) / 4)
//   w.add_tensor("b", (np.arange(8, dtype=np.float32) - 4).astype(np.float16))
//   x = (np.arange(32, dtype=np.float32) - 16) / 8    # stored as Q8_0
//   q = gguf.quants.quantize(x.reshape(1, 32), GGMLQuantizationType.Q8_0)
//   w.add_tensor("c", q, raw_shape=q.shape, raw_dtype=GGMLQuantizationType.Q8_0)
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf_fixture.h"
#include "gguf/gguf_reader.h"
#include "tensor/quant.h"

namespace odmoe {
namespace {

constexpr const char* kPythonWrittenGguf =
    "474755460300000003000000000000000500000000000000140000000000000067656e6572616c2e61726368697465"
    "63"
    "747572650800000005000000000000006c6c616d6111000000000000006c6c616d612e626c6f636b5f636f756e7404"
    "00"
    "00000200000014000000000000006c6c616d612e726f70652e667265715f626173650600000000401c461500000000"
    "00"
    "0000746f6b656e697a65722e67676d6c2e746f6b656e73090000000800000002000000000000000300000000000000"
    "3c"
    "733e020000000000000068690400000000000000666c61670700000001010000000000000061020000000400000000"
    "00"
    "0000020000000000000000000000000000000000000001000000000000006201000000080000000000000001000000"
    "20"
    "0000000000000001000000000000006302000000200000000000000001000000000000000800000040000000000000"
    "00"
    "00000000000000000000000000000000000000000000803e0000003f0000403f0000803f0000a03f0000c03f0000e0"
    "3f"
    "00c400c200c000bc0000003c0040004200000000000000000000000000000000082481899199a1a9b1b9c0c8d0d8e0"
    "e8"
    "f0f8000810182028303840474f575f676f770000000000000000000000000000000000000000000000000000000000"
    "00";

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<float> Values(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.elements()));
  for (int64_t r = 0; r < t.rows(); ++r) {
    DequantizeRow(t.type, t.Row(r), out.data() + r * t.ne[0], t.ne[0]);
  }
  return out;
}

TEST_CASE("A file written by the gguf Python package reads back", "[gguf][interop]") {
  const std::vector<uint8_t> bytes = FromHex(kPythonWrittenGguf);
  REQUIRE(bytes.size() == 480);
  test::TempFile file("interop");
  test::WriteBytes(file.path(), bytes.data(), bytes.size());
  auto opened = GgufFile::Open(file.path());
  REQUIRE(opened.ok());
  const GgufFile& f = **opened;

  CHECK(f.version() == 3);
  CHECK(f.metadata_keys() == std::vector<std::string>{"general.architecture", "llama.block_count",
                                                      "llama.rope.freq_base",
                                                      "tokenizer.ggml.tokens", "flag"});
  CHECK(f.GetString("general.architecture") == "llama");
  CHECK(f.GetUInt("llama.block_count") == 2u);
  CHECK(f.Find("llama.block_count")->type() == GgufType::kUInt32);
  CHECK(f.GetFloat("llama.rope.freq_base") == 10000.0);
  CHECK(*f.Find("tokenizer.ggml.tokens")->AsStringArray() == std::vector<std::string>{"<s>", "hi"});
  CHECK(f.GetBool("flag") == true);

  REQUIRE(f.tensors().size() == 3);
  const TensorView a = f.Tensor("a").value();
  CHECK(a.type == DType::kF32);
  CHECK(a.n_dims == 2);
  CHECK(a.ne == std::array<int64_t, 4>{4, 2, 1, 1});  // numpy shape (2, 4)
  CHECK(f.DataOffset(a) == 352);
  CHECK(Values(a) == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f});

  const TensorView b = f.Tensor("b").value();
  CHECK(b.type == DType::kF16);
  CHECK(Values(b) == std::vector<float>{-4, -3, -2, -1, 0, 1, 2, 3});

  const TensorView c = f.Tensor("c").value();
  CHECK(c.type == DType::kQ8_0);
  CHECK(c.ne == std::array<int64_t, 4>{32, 1, 1, 1});
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) / 8;
  std::vector<uint8_t> ours(34);
  QuantizeRow(DType::kQ8_0, x.data(), ours.data(), 32);
  CHECK(std::memcmp(c.data, ours.data(), 34) == 0);
  const std::vector<float> back = Values(c);
  for (int j = 0; j < 32; ++j) CHECK(back[j] == Approx(x[j]).margin(2.0 / 127 / 2 + 1e-3));
}

}  // namespace
}  // namespace odmoe
