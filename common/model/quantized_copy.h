// A model file's copy with every weight matrix quantized to one type (rows
// the type cannot hold fall back: model/quant_mix.h), made once per machine
// and cached as <cache>/odmoe-<prefix>-<source fingerprint>-<type>.gguf. The
// shadow node runs such a copy (prefix "shadow"); workers with
// workers.mixed_precision load their sub-critical experts from one (prefix
// "experts"). A cached file made from another model, or by another recipe,
// is ignored and remade; the copy is written under a temporary name and
// renamed, and makers on one machine take turns (a lock file beside it while
// one is at work), so the workers of a testbed starting together make it once.
//
//   ODMOE_ASSIGN_OR_RETURN(std::string path,
//                          CachedQuantizedCopy(model_path, SourceFingerprint(*model),
//                                              DType::kQ4_0, "experts", "low-precision experts"));
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/dtype.h"

namespace odmoe {

/// `purpose` names the copy in the log ("the shadow"); `on_progress` (may be
/// empty) is called with the fraction done; `cancel` (may be null) stops it
/// (CANCELLED).
absl::StatusOr<std::string> CachedQuantizedCopy(const std::string& model_path,
                                                uint64_t fingerprint, DType type,
                                                const std::string& prefix,
                                                const std::string& purpose,
                                                const std::function<void(double)>& on_progress = {},
                                                const std::atomic<bool>* cancel = nullptr);

}  // namespace odmoe
