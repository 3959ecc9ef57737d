// The backend registry: how a node gets a Backend from a name.
//
// Names: "cpu", "cpu:N" (N threads), "cuda", "cuda:N" (device N). The
// built-in families are registered on first use by backend_registry.cpp, the
// only file outside a backend's folder that knows which backends were
// compiled in.
//
//   ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, CreateBackend("cpu"));
//   for (const std::string& n : AvailableBackends()) ...   // {"cpu", "cuda:0"}
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/slot_device.h"

namespace odmoe {

/// A backend family ("cpu", "cuda").
struct BackendFactory {
  std::string family;
  /// Creates a backend for the part of the name after "family:" (may be "").
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(std::string_view arg)> create;
  /// Instance names usable on this machine right now (e.g. {"cuda:0"}; empty
  /// when a CUDA build runs without a usable GPU).
  std::function<std::vector<std::string>()> available;
  /// The asynchronous expert-slot device of a backend of this family (may be
  /// empty: a family whose memory is host memory needs none).
  std::function<absl::StatusOr<std::unique_ptr<SlotDevice>>(Backend&)> slot_device;
};

/// Registers an extra family (built-in ones are registered automatically).
void RegisterBackend(BackendFactory factory);

/// Creates the backend named `name`. INVALID_ARGUMENT for an unknown family
/// or malformed argument, UNAVAILABLE when the family is compiled in but the
/// hardware is missing (e.g. no GPU).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view name);

/// CreateBackend(name), or, when that is UNAVAILABLE (the family is compiled
/// in but its hardware is missing, e.g. "cuda:0" on a machine without a
/// usable GPU) and `fallback` is not empty, CreateBackend(fallback) with a
/// warning that names both and the reason. Any other error is returned as
/// is: a malformed name never falls back. For nodes whose configuration
/// allows running on the CPU when the GPU is missing.
///
///   ODMOE_ASSIGN_OR_RETURN(auto be, CreateBackendOrFallback("cuda:0", "cpu"));
absl::StatusOr<std::unique_ptr<Backend>> CreateBackendOrFallback(std::string_view name,
                                                                 std::string_view fallback);

/// The SlotDevice a worker loads experts through on `backend`
/// (backend/slot_device.h), or nullptr when the backend's memory is host
/// memory (the CPU: a load is a pack into the slot, nothing to overlap).
/// INVALID_ARGUMENT for a device backend whose family offers none.
absl::StatusOr<std::unique_ptr<SlotDevice>> CreateSlotDevice(Backend& backend);

/// All backend instances usable on this machine (always includes "cpu").
std::vector<std::string> AvailableBackends();

/// All compiled-in families ("cpu", and "cuda" in CUDA builds).
std::vector<std::string> CompiledBackendFamilies();

}  // namespace odmoe
