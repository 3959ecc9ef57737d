#include "util/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/regular_file.h"

namespace odmoe {
namespace {

absl::Status ErrnoStatus(const std::string& path, absl::string_view what, int err) {
  std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

// Closes a file descriptor when it goes out of scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer forever;
  // the fstat below refuses anything but a regular file (util/regular_file.h).
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return ErrnoStatus(path, "cannot open", errno);
  if (absl::Status s = CheckRegularFd(fd.get(), path); !s.ok()) return s;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(path, "cannot stat", errno);
  if (st.st_size == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  const size_t size = static_cast<size_t>(st.st_size);
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (addr == MAP_FAILED) return ErrnoStatus(path, "cannot mmap", errno);
  MappedFile file;
  file.data_ = static_cast<const uint8_t*>(addr);
  file.size_ = size;
  return file;
}

void DropMappedPages(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end <= begin) return;
  // Advisory: a failure leaves the pages where they were, which is harmless.
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

bool PrefaultMappedPages(const void* p, size_t n) {
  if (n == 0) return false;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  // Advisory, as above: on failure the pages fault in when first read.
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) == 0;
}

}  // namespace odmoe
