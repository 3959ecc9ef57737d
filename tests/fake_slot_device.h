// A SlotDevice (backend/slot_device.h) for tests on any machine: host vectors
// stand for device and pinned memory, a copy happens at once, and every call
// is logged in order, so tests can check which fence a load or a compute
// waited for and which bytes reached a slot.
//
//   std::vector<std::string> log;
//   auto device = std::make_unique<test::LoggingSlotDevice>(&log);
//   ... log == {"reserve 2 x 256", "load 0", "compute waits ready 0", "release 0"}
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend/slot_device.h"

namespace odmoe::test {

class LoggingSlotDevice final : public SlotDevice {
 public:
  explicit LoggingSlotDevice(std::vector<std::string>* log) : log_(log) {}
  std::string name() const override { return "fake"; }
  absl::StatusOr<uint8_t*> Reserve(int slots, size_t slot_bytes) override {
    log_->push_back(absl::StrFormat("reserve %d x %d", slots, slot_bytes));
    memory_.assign(static_cast<size_t>(slots) * slot_bytes, 0);
    return memory_.data();
  }
  absl::StatusOr<uint8_t*> ReserveHost(size_t bytes) override {
    log_->push_back(absl::StrFormat("reserve host %d", bytes));
    if (bytes > max_host) return absl::ResourceExhaustedError("out of pinnable memory");
    host_.assign(bytes, 0);
    return host_.data();
  }
  absl::Status QueueLoad(int slot, void* dst, const void* src, size_t bytes) override {
    if (fail_loads) return absl::InternalError("copy engine on fire");
    const auto* s = static_cast<const uint8_t*>(src);
    if (host_.empty() || s < host_.data() || s + bytes > host_.data() + host_.size()) {
      ++loads_from_elsewhere;
    }
    log_->push_back(absl::StrFormat("load %d", slot));
    last_load_bytes = bytes;
    bytes_copied += bytes;
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status ComputeWaitForLoad(int slot) override {
    log_->push_back(absl::StrFormat("compute waits ready %d", slot));
    return absl::OkStatus();
  }
  absl::Status RecordRelease(int slot) override {
    log_->push_back(absl::StrFormat("release %d", slot));
    return absl::OkStatus();
  }
  absl::Status WaitLoadDone(int slot) override {
    log_->push_back(absl::StrFormat("host waits ready %d", slot));
    return absl::OkStatus();
  }
  absl::StatusOr<double> LoadSeconds(int) override { return 0.25; }

  /// The area ReserveHost gave (null before).
  uint8_t* host() { return host_.empty() ? nullptr : host_.data(); }

  bool fail_loads = false;
  size_t max_host = SIZE_MAX;    // ReserveHost fails above this
  int loads_from_elsewhere = 0;  // loads whose source was not the host area
  size_t last_load_bytes = 0;    // bytes of the last QueueLoad
  size_t bytes_copied = 0;       // bytes of every QueueLoad

 private:
  std::vector<std::string>* log_;
  std::vector<uint8_t> memory_, host_;
};

}  // namespace odmoe::test
