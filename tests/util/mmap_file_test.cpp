// MappedFile: contents, error codes, and move-only ownership.
#include "util/mmap_file.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

namespace odmoe {
namespace {

std::string TempPath(const std::string& stem) {
  return (std::filesystem::temp_directory_path() /
          ("odmoe_mmap_" + stem + "_" + std::to_string(::getpid())))
      .string();
}

struct ScopedPath {
  std::string path;
  ~ScopedPath() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

TEST_CASE("MappedFile maps a file's bytes", "[mmap]") {
  ScopedPath p{TempPath("data")};
  const std::string content = std::string("hello\0world", 11) + std::string(5000, 'x');
  std::ofstream(p.path, std::ios::binary) << content;
  auto m = MappedFile::Open(p.path);
  REQUIRE(m.ok());
  REQUIRE(m->size() == content.size());
  CHECK(std::string(reinterpret_cast<const char*>(m->data()), m->size()) == content);
}

// kB of file-backed memory mapped into this process (/proc/self/status).
long RssFileKb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long kb = -1;
  while (status >> key) {
    if (key == "RssFile:") {
      status >> kb;
      break;
    }
  }
  return kb;
}

// 16 MiB of patterned bytes (byte i = i * step % 251) written to `path`.
std::string WritePatternFile(const std::string& path, size_t step) {
  std::string content(16 << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * step % 251);
  std::ofstream(path, std::ios::binary) << content;
  return content;
}

TEST_CASE("DropMappedPages gives pages back and keeps the bytes", "[mmap]") {
  ScopedPath p{TempPath("drop")};
  const std::string content = WritePatternFile(p.path, 131);
  auto m = MappedFile::Open(p.path);
  REQUIRE(m.ok());
  long sum = 0;
  for (size_t i = 0; i < m->size(); i += 4096) sum += m->data()[i];  // fault every page in
  const long before = RssFileKb();
  REQUIRE(before > 0);
  DropMappedPages(m->data() + 100, m->size() - 200);  // partial first and last pages stay
  const long after = RssFileKb();
  CHECK(before - after >= 15 * 1024);  // ~16 MiB given back
  // The same bytes come back from the file when read again.
  CHECK(std::string(reinterpret_cast<const char*>(m->data()), m->size()) == content);
  // A range holding no whole page is a no-op.
  DropMappedPages(m->data() + 10, 100);
  CHECK(sum > 0);
}

TEST_CASE("PrefaultMappedPages maps a range's pages ahead of use", "[mmap]") {
  ScopedPath p{TempPath("prefault")};
  const std::string content = WritePatternFile(p.path, 7);
  auto m = MappedFile::Open(p.path);
  REQUIRE(m.ok());
  const long before = RssFileKb();
  // An unaligned range: its first and last partial pages are mapped too.
  if (!PrefaultMappedPages(m->data() + 100, m->size() - 200)) {
    WARN("MADV_POPULATE_READ refused by this kernel (before Linux 5.14): nothing to check");
    return;
  }
  CHECK(RssFileKb() - before >= 15 * 1024);  // ~16 MiB mapped without a read
  CHECK(std::string(reinterpret_cast<const char*>(m->data()), m->size()) == content);
  CHECK_FALSE(PrefaultMappedPages(m->data(), 0));
}

TEST_CASE("MappedFile error codes", "[mmap]") {
  auto missing = MappedFile::Open("/nonexistent/file.bin");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("/nonexistent/file.bin") != std::string::npos);

  ScopedPath empty{TempPath("empty")};
  std::ofstream(empty.path).close();
  auto e = MappedFile::Open(empty.path);
  CHECK(e.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(e.status().message()).find("empty") != std::string::npos);

  ScopedPath dir{TempPath("dir")};
  std::filesystem::create_directory(dir.path);
  auto d = MappedFile::Open(dir.path);
  CHECK(d.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(d.status().message()).find("not a regular file") != std::string::npos);
}

TEST_CASE("MappedFile moves ownership and unmaps once", "[mmap]") {
  ScopedPath a{TempPath("a")};
  ScopedPath b{TempPath("b")};
  std::ofstream(a.path) << "aaaa";
  std::ofstream(b.path) << "bbbbbb";
  MappedFile fa = std::move(MappedFile::Open(a.path)).value();
  MappedFile fb = std::move(MappedFile::Open(b.path)).value();
  const uint8_t* pa = fa.data();

  MappedFile moved(std::move(fa));
  CHECK(fa.data() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is defined
  CHECK(fa.size() == 0);
  CHECK(moved.data() == pa);
  CHECK(moved.size() == 4);

  moved = std::move(fb);  // releases the mapping of a
  CHECK(moved.size() == 6);
  CHECK(moved.data()[0] == 'b');
  CHECK(fb.data() == nullptr);  // NOLINT(bugprone-use-after-move)

  MappedFile empty;
  CHECK(empty.data() == nullptr);
  empty = std::move(moved);
  CHECK(empty.size() == 6);
}

}  // namespace
}  // namespace odmoe
