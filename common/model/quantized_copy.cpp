#include "model/quantized_copy.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/model_file.h"
#include "model/model_quantizer.h"
#include "model/quant_mix.h"
#include "util/logging.h"
#include "util/cache_dir.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<std::string> CachedQuantizedCopy(const std::string& model_path,
                                                uint64_t fingerprint, DType type,
                                                const std::string& prefix,
                                                const std::string& purpose,
                                                const std::function<void(double)>& on_progress,
                                                const std::atomic<bool>* cancel) {
  ODMOE_ASSIGN_OR_RETURN(const std::string dir, CacheDir());
  // Every converted tensor in the one type, by the quantizer odmoe-quantize
  // uses.
  const QuantRecipe recipe = QuantRecipe::Pure(type);
  const std::string path =
      absl::StrFormat("%s/odmoe-%s-%016x-%s.gguf", dir, prefix, fingerprint,
                      GgmlTypeName(static_cast<uint32_t>(type)));
  // One maker at a time per machine (the workers of a testbed start
  // together): the others wait here, then find the copy made.
  const std::string lock_path = absl::StrCat(path, ".lock");
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return absl::InternalError(absl::StrFormat("cannot open %s: %s", lock_path,
                                               std::strerror(errno)));
  }
  // Done (or failed): the lock file goes, then the lock. A maker still
  // waiting on it finds the copy made (or, after a failure, makes its own:
  // partial files are per process and the rename is atomic).
  struct Unlock {
    int fd;
    const std::string& path;
    ~Unlock() {
      unlink(path.c_str());
      close(fd);
    }
  } unlock{lock_fd, lock_path};
  while (flock(lock_fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrFormat("cannot lock %s: %s", lock_path,
                                                 std::strerror(errno)));
    }
  }
  if (std::filesystem::exists(path)) {
    absl::StatusOr<std::unique_ptr<ModelFile>> cached = ModelFile::Open(path);
    if (cached.ok() && SourceFingerprint(**cached) == fingerprint &&
        (*cached)->gguf().GetString(kQuantizationKey) == recipe.Name()) {
      ODMOE_LOG_INFO("using the cached quantized model {}", path);
      return path;
    }
    ODMOE_LOG_WARN("ignoring the unusable cached file {}", path);
  }
  const std::string partial = absl::StrCat(path, ".", getpid(), ".partial");
  QuantizeOptions opt;
  opt.recipe = recipe;
  opt.threads = 1;
  opt.cancel = cancel;
  // The log shows the quantization going (at most every 5 s), so a start-up
  // of tens of seconds is not an empty log.
  ODMOE_LOG_INFO("quantizing {} to {} for {} (once; cached as {})", model_path, recipe.Name(),
                 purpose, path);
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  opt.progress = [&](const QuantizeProgress& p) {
    if (on_progress && p.bytes_total > 0) {
      on_progress(static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(5) || p.bytes_total == 0) return;
    last = now;
    ODMOE_LOG_INFO("quantizing: {:.0f} % ({} of {} tensors, {:.0f} s)",
                   100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total),
                   p.tensor + 1, p.tensors, std::chrono::duration<double>(now - t0).count());
  };
  ODMOE_ASSIGN_OR_RETURN(QuantizeReport r, QuantizeModelFile(model_path, partial, opt));
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) {
    return absl::InternalError(absl::StrFormat("cannot write %s: %s", path, ec.message()));
  }
  ODMOE_LOG_INFO("quantized {} tensors to {}: {} -> {} bytes ({})", r.tensors_converted,
                 recipe.Name(), r.bytes_in, r.bytes_out, path);
  for (const QuantizeReport::FellBack& f : r.fallbacks) {
    ODMOE_LOG_INFO("  {}: rows of {} cannot be {}: stored as {}", f.name, f.row_length,
                   Traits(f.wanted).name, Traits(f.used).name);
  }
  return path;
}

}  // namespace odmoe
