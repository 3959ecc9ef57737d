// Fuzz target: the GGUF reader and the model validation on top of it. Any
// byte string is written to a file and opened as a model; an error is fine,
// a crash, hang or sanitizer report is not. A file that opens is walked
// (every metadata value and tensor view, every expert of every layer).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "fuzz_support.h"
#include "gguf/gguf_reader.h"
#include "model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = odmoe::fuzz::ScratchFile("gguf");
  if (!odmoe::fuzz::WriteFile(path, data, size)) return 0;
  if (auto f = odmoe::GgufFile::Open(path); f.ok()) {
    size_t sum = 0;
    for (const auto& [key, value] : (*f)->metadata()) {
      sum += key.size() + value.ArraySize();
      if (const std::string* s = value.AsString()) sum += s->size();
      if (auto x = value.AsFloat()) sum += static_cast<size_t>(*x != 0);
    }
    for (const odmoe::TensorView& t : (*f)->tensors()) sum += t.bytes() > 0 ? t.Row(0)[0] : 0;
    odmoe::fuzz::Consume(sum);
  }
  if (auto m = odmoe::ModelFile::Open(path); m.ok()) {
    const odmoe::ModelConfig& c = (*m)->config();
    size_t sum = 0;
    for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
      for (int e = 0; e < c.n_expert; ++e) sum += (*m)->Expert(l, e).down.bytes();
    }
    odmoe::fuzz::Consume(sum);
  }
  return 0;
}
