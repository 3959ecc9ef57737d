// Files that configuration names (a topology's model, its TLS files, the
// cluster secret, the topology file itself) must be regular files. Opening a
// FIFO for reading blocks until some process opens it for writing, so a FIFO
// given as `model:` used to hang `odmoe-cluster up` and every daemon in
// open() with no output; a directory or a device is no better. These helpers
// refuse anything but a regular file (symlinks to one are fine) at once and
// say what the path is instead.
//
//   ODMOE_RETURN_IF_ERROR(CheckRegularFile("models/m.gguf"));   // stat only
//   ODMOE_ASSIGN_OR_RETURN(std::string pem, ReadRegularFile("ca.pem", 1 << 20));
//   int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // then fstat +
//   ODMOE_RETURN_IF_ERROR(CheckRegularFd(fd, path));                   // S_ISREG, race-free
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace odmoe {

/// What a file of this st_mode is, for messages: "a regular file",
/// "a FIFO (named pipe)", "a directory", "a character device",
/// "a block device", "a socket", "a symbolic link", "an unknown kind of file".
std::string FileKindName(mode_t mode);

/// OK when `path` names a regular file (following symbolic links).
/// NOT_FOUND when nothing is there; INVALID_ARGUMENT "<path> is a FIFO (named
/// pipe), not a regular file" and the like otherwise. Never opens the file.
absl::Status CheckRegularFile(const std::string& path);

/// OK when the open descriptor `fd` (of `path`, for the message) is a regular
/// file; INVALID_ARGUMENT as CheckRegularFile otherwise. Open with O_NONBLOCK
/// so that the open itself cannot block on a FIFO, then call this: no race
/// between the check and the open.
absl::Status CheckRegularFd(int fd, const std::string& path);

/// The whole contents of the regular file `path`, at most `max_bytes` of it
/// (a larger file is INVALID_ARGUMENT naming its size and the bound). Opened
/// with O_NONBLOCK and checked with fstat: never blocks on a FIFO or device.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes);

}  // namespace odmoe
