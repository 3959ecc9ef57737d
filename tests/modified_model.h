// Test fixtures: a copy of a model file with one metadata key set (or added)
// and one tensor left out, opened as a ModelFile; for tests of the errors a
// file odmoe cannot run gets.
//
//   std::string why = test::OpenModifiedModel(test::SourcePath("tests/data/x.gguf"),
//                                             "llama.expert_count", GgufValue::U32(0));
//   CHECK_THAT(why, Catch::Contains("expert_count"));   // "" when it opens
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/model_file.h"

namespace odmoe::test {

/// Opens `path` with `key` set to `value` (unless key is empty) and the tensor
/// `drop` left out: the error message, or "" when the copy opens.
inline std::string OpenModifiedModel(const std::string& path, const std::string& key,
                                     const GgufValue& value, const std::string& drop = "") {
  auto src = GgufFile::Open(path);
  if (!src.ok()) return std::string(src.status().message());
  GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) w.SetMetadata(k, k == key ? value : v);
  if (!key.empty() && !(*src)->Find(key)) w.SetMetadata(key, value);
  for (const TensorView& t : (*src)->tensors()) {
    if (t.name == drop) continue;
    if (absl::Status s = w.AddTensorView(t); !s.ok()) return std::string(s.message());
  }
  static std::atomic<int> serial{0};  // a name of its own per call and process (ctest -j)
  const std::string copy = (std::filesystem::temp_directory_path() /
                            ("odmoe_modified_model_" + std::to_string(getpid()) + "_" +
                             std::to_string(serial++) + ".gguf"))
                               .string();
  if (absl::Status s = w.WriteFile(copy); !s.ok()) return std::string(s.message());
  auto m = ModelFile::Open(copy);
  std::remove(copy.c_str());  // the open file (if any) stays readable
  return m.ok() ? std::string() : std::string(m.status().message());
}

}  // namespace odmoe::test
