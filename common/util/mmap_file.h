// A read-only memory mapping of a whole file (RAII).
//
//   ODMOE_ASSIGN_OR_RETURN(MappedFile m, MappedFile::Open("model.gguf"));
//   const uint8_t* p = m.data(); size_t n = m.size();
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace odmoe {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// NOT_FOUND if the file does not exist, INVALID_ARGUMENT if it is not a
  /// regular file or is empty, INTERNAL for other system errors.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

/// Lets the kernel drop this process's pages of [p, p + n) inside a
/// read-only file mapping (the whole pages within the range): the memory is
/// no longer counted to the process, and the next read faults the same bytes
/// back in from the file. For data copied elsewhere once (a worker's packed
/// experts). A no-op where the range holds no whole page.
void DropMappedPages(const void* p, size_t n);

/// Maps the pages of [p, p + n) into this process ahead of use
/// (MADV_POPULATE_READ: read from the file now, where it is not in the page
/// cache yet), so that the first pass over a weight kept as a view of the
/// file does not take a page fault every few pages in the middle of
/// generation. Advisory: where the kernel refuses (before Linux 5.14), the
/// pages fault in on first use as before; returns whether it populated.
bool PrefaultMappedPages(const void* p, size_t n);

}  // namespace odmoe
