// The tokenizer against llama.cpp's own test vectors: its models/ggml-vocab-*.gguf
// vocabularies with the texts (.inp) and the reference tokenizer's ids (.out)
// that llama.cpp's test-tokenizer-0 checks. Other projects' files: fetched at
// test time (scripts/fetch_chat_templates.sh, from llama-cpp-python's source
// on PyPI, cached, never committed); without them the case passes with a warning.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

namespace fs = std::filesystem;

fs::path VocabDir() {
  if (const char* d = std::getenv("ODMOE_LLAMA_VOCABS"); d != nullptr && *d != 0) return d;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path cache = xdg != nullptr && *xdg != 0 ? fs::path(xdg)
                         : home != nullptr           ? fs::path(home) / ".cache"
                                                     : fs::path(".cache");
  return cache / "odmoe" / "llama-vocabs";
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("tokenizer: llama.cpp's test vectors on every vocabulary it ships", "[tokenizer]") {
  const fs::path dir = VocabDir();
  std::vector<fs::path> vocabs;
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const fs::path p = e.path();
      if (p.extension() == ".gguf" && fs::exists(p.string() + ".inp") &&
          fs::exists(p.string() + ".out")) {
        vocabs.push_back(p);
      }
    }
  }
  std::sort(vocabs.begin(), vocabs.end());
  if (vocabs.empty()) {
    WARN("no llama.cpp vocabularies in "
         << dir << " (scripts/fetch_chat_templates.sh fetches them): skipped");
    return;
  }
  for (const fs::path& v : vocabs) {
    const std::string name = v.filename().string();
    auto file = GgufFile::Open(v.string());
    REQUIRE(file.ok());
    auto tok = Tokenizer::FromGguf(**file);
    if (!tok.ok()) {
      WARN(name << ": refused: " << tok.status().message());
      continue;
    }
    std::vector<std::string> texts =
        absl::StrSplit(Slurp(v.string() + ".inp"), "\n__ggml_vocab_test__\n");
    // The file ends with a separator line.
    if (!texts.empty() && texts.back().empty()) texts.pop_back();
    std::vector<std::string> lines = absl::StrSplit(Slurp(v.string() + ".out"), '\n');
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    INFO(name);
    REQUIRE(texts.size() == lines.size());
    int equal = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      std::vector<int32_t> expected;
      for (absl::string_view id : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
        expected.push_back(std::stoi(std::string(id)));
      }
      Tokenizer::EncodeOptions opt;
      opt.add_bos = false;
      auto ids = (*tok)->Encode(texts[i], opt);
      REQUIRE(ids.ok());
      INFO("text " << i << ": '" << texts[i] << "'");
      CHECK(*ids == expected);
      equal += *ids == expected;
    }
    WARN(name << ": " << equal << " of " << texts.size() << " texts equal");
    if (name == "ggml-vocab-llama-bpe.gguf") {
      // Llama 3's ignore_merges: a word that is one token stays one token.
      Tokenizer::EncodeOptions opt;
      opt.add_bos = false;
      CHECK((*tok)->Encode("Cửa Việt", opt).value() == std::vector<int32_t>{34, 91163, 101798});
    }
  }
}

}  // namespace
}  // namespace odmoe
