#include "cluster/protocol.h"

#include "absl/strings/str_format.h"

namespace odmoe {

std::string RoleName(v1::Role role) {
  switch (role) {
    case v1::ROLE_MAIN:
      return "main";
    case v1::ROLE_SHADOW:
      return "shadow";
    case v1::ROLE_WORKER:
      return "worker";
    case v1::ROLE_CLIENT:
      return "client";
    default:
      return "unspecified";
  }
}

std::string NodeStateName(v1::NodeState state) {
  switch (state) {
    case v1::NODE_STATE_STARTING:
      return "starting";
    case v1::NODE_STATE_READY:
      return "ready";
    case v1::NODE_STATE_DRAINING:
      return "draining";
    case v1::NODE_STATE_FAILED:
      return "failed";
    default:
      return "unspecified";
  }
}

void AddStatusEntry(v1::NodeStatus* status, const std::string& key, const std::string& value) {
  v1::StatusEntry* e = status->add_entries();
  e->set_key(key);
  e->set_value(value);
}

std::string FingerprintHex(uint64_t fingerprint) { return absl::StrFormat("%016x", fingerprint); }

}  // namespace odmoe
