// The source tree's model files, opened for the fuzz targets that need a
// tokenizer or a chat template (a missing file ends the run: the seeds and
// fixtures are part of the repository).
//
//   odmoe::fuzz::OpenedModel m = odmoe::fuzz::Open("models/tiny-mixtral-f16.gguf");
//   m.tokenizer->Encode("text");
#pragma once

#include <memory>
#include <string>

#include "fuzz_support.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace odmoe::fuzz {

struct OpenedModel {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline OpenedModel Open(const std::string& rel) {
  auto f = GgufFile::Open(SourcePath(rel));
  if (!f.ok()) Die("cannot open " + rel);
  auto t = Tokenizer::FromGguf(**f);
  if (!t.ok()) Die("no tokenizer in " + rel);
  return {std::move(*f), std::move(*t)};
}

}  // namespace odmoe::fuzz
