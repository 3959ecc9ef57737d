// Fuzz target: the tokenizers. Each input is encoded as text (with and
// without special-token parsing) by a SentencePiece vocabulary (the shipped
// model's) and by byte-level BPE vocabularies with several pre-tokenizers
// (GPT-2, Qwen2, DeepSeek, gpt-4o); the same bytes read as token ids are
// decoded whole and streamed, and the two decodings must agree.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_models.h"

namespace {

std::vector<std::unique_ptr<odmoe::Tokenizer>>& Tokenizers() {
  static std::vector<std::unique_ptr<odmoe::Tokenizer>> toks = [] {
    std::vector<std::unique_ptr<odmoe::Tokenizer>> v;
    for (const char* file : {"models/tiny-mixtral-f16.gguf", "tests/data/gpt2-tokenizer.gguf",
                             "tests/data/arch/tiny-qwen3moe.gguf",
                             "tests/data/arch/tiny-deepseek2.gguf",
                             "tests/data/arch/tiny-gpt-oss.gguf"}) {
      v.push_back(odmoe::fuzz::Open(file).tokenizer);
    }
    return v;
  }();
  return toks;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : Tokenizers()) {
    for (bool special : {false, true}) {
      odmoe::Tokenizer::EncodeOptions o;
      o.parse_special = special;
      auto ids = tok->Encode(text, o);
      if (ids.ok()) odmoe::fuzz::Consume(ids->size());
    }
    // The bytes as token ids, some out of range on purpose.
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 2 <= size; i += 2) {
      uint16_t v;
      std::memcpy(&v, data + i, 2);
      ids.push_back(static_cast<int32_t>(v % (tok->n_vocab() + 8)) - 4);
    }
    const std::string whole = tok->Decode(ids);
    odmoe::IncrementalDecoder dec(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += dec.Push(id);
    streamed += dec.Flush();
    if (streamed != whole) odmoe::fuzz::Die("streamed decoding differs from Decode");
  }
  return 0;
}
