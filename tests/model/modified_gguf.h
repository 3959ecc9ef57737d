// A model file rewritten with one metadata key changed (or added) or one
// tensor dropped, opened: the error ModelFile::Open gives (the test fails
// when it opens).
//
//   CHECK_THAT(OpenModifiedError(path, "llama.expert_count", GgufValue::U32(0)),
//              Catch::Contains("expert_count"));
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "gguf/gguf_writer.h"
#include "model/model_file.h"

namespace odmoe::test {

inline std::string OpenModifiedError(const std::string& source, const std::string& key,
                                     GgufValue value, const std::string& drop = "") {
  auto src = GgufFile::Open(source);
  REQUIRE(src.ok());
  GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) w.SetMetadata(k, k == key ? value : v);
  if (!key.empty() && !(*src)->Find(key)) w.SetMetadata(key, value);
  for (const TensorView& t : (*src)->tensors()) {
    if (t.name != drop) REQUIRE(w.AddTensorView(t).ok());
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "odmoe_model_test_modified.gguf").string();
  REQUIRE(w.WriteFile(path).ok());
  auto m = ModelFile::Open(path);
  std::remove(path.c_str());  // the open file (if any) stays readable
  REQUIRE_FALSE(m.ok());
  return std::string(m.status().message());
}

}  // namespace odmoe::test
