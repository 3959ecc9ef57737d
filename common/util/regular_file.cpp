#include "util/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace odmoe {
namespace {

absl::Status ErrnoError(const std::string& path, const char* what, int err) {
  const std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
}

absl::Status CheckMode(mode_t mode, const std::string& path) {
  if (S_ISREG(mode)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is ", FileKindName(mode), ", not a regular file"));
}

}  // namespace

std::string FileKindName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "an unknown kind of file";
}

absl::Status CheckRegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(path, "cannot stat", errno);
  return CheckMode(st.st_mode, path);
}

absl::Status CheckRegularFd(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoError(path, "cannot stat", errno);
  return CheckMode(st.st_mode, path);
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError(path, "cannot open", errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoError(path, "cannot stat", errno);
  if (absl::Status s = CheckMode(st.st_mode, path); !s.ok()) return s;
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", st.st_size, " bytes is more than this file may hold (", max_bytes, " bytes)"));
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(path, "cannot read", errno);
    if (n == 0) break;  // shrank while read
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace odmoe
