// ExpertSlots, the worker's expert memory, on both of its paths: packing
// straight into host slots (CPU), and asynchronous copies from a pinned host
// copy through a SlotDevice (a GPU). The device here is a fake that logs
// every call and copies at once, so the order of the calls and the bytes that
// reach a slot can be checked on any machine; the same path on a real GPU is
// covered by "cluster: identical tokens with every node on the GPU".
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/backend_registry.h"
#include "model/model_file.h"
#include "test_paths.h"
#include "worker_node/expert_slots.h"

namespace odmoe::test {
namespace {

class LoggingSlotDevice final : public SlotDevice {
 public:
  LoggingSlotDevice(std::vector<std::string>* log, uint8_t** host) : log_(log), host_out_(host) {}
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
    *host_out_ = host_.data();
    return host_.data();
  }
  absl::Status QueueLoad(int slot, void* dst, const void* src, size_t bytes) override {
    if (fail) return absl::InternalError("copy engine on fire");
    const auto* s = static_cast<const uint8_t*>(src);
    const bool pinned = s >= host_.data() && s + bytes <= host_.data() + host_.size();
    log_->push_back(absl::StrFormat("load %d from %s", slot, pinned ? "pinned" : "PAGEABLE"));
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status ComputeWaitForLoad(int slot) override {
    log_->push_back(absl::StrFormat("compute waits %d", slot));
    return absl::OkStatus();
  }
  absl::Status RecordRelease(int slot) override {
    log_->push_back(absl::StrFormat("release %d", slot));
    return absl::OkStatus();
  }
  absl::Status WaitLoadDone(int slot) override {
    log_->push_back(absl::StrFormat("host waits %d", slot));
    return absl::OkStatus();
  }
  absl::StatusOr<double> LoadSeconds(int) override { return 0.125; }

  bool fail = false;
  size_t max_host = SIZE_MAX;

 private:
  std::vector<std::string>* log_;
  uint8_t** host_out_;
  std::vector<uint8_t> memory_, host_;
};

std::vector<uint8_t> Packed(const ModelFile& model, int layer, int expert) {
  const ExpertPackLayout layout = ExpertPackLayout::For(model.config());
  std::vector<uint8_t> out(layout.total_bytes);
  PackExpert(model.Expert(layer, expert), layout, out.data());
  return out;
}

bool SlotHolds(ExpertSlots& slots, int slot, const std::vector<uint8_t>& expected) {
  absl::StatusOr<ExpertWeights> w = slots.Acquire(slot);
  REQUIRE(w.ok());
  // The gate part starts the packed expert (offset 0 in the layout).
  const auto* base = static_cast<const uint8_t*>(w->gate.data);
  return std::memcmp(base, expected.data(), expected.size()) == 0;
}

}  // namespace

TEST_CASE("expert slots on a device: pinned host copy, async loads, fences", "[worker][slots]") {
  auto model = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  auto cpu = CreateBackend("cpu:1");
  REQUIRE(cpu.ok());
  std::vector<std::string> log;
  uint8_t* host = nullptr;
  auto device = std::make_unique<LoggingSlotDevice>(&log, &host);
  LoggingSlotDevice* dev = device.get();
  auto slots = ExpertSlots::Create(**model, **cpu, 2, std::move(device),
                                   {{1, 3}, {0, 5}, {1, 3}});  // a duplicate is kept once
  REQUIRE(slots.ok());
  CHECK(slots->device());
  const size_t bytes = slots->expert_bytes();
  const size_t stride = (bytes + 255) / 256 * 256;
  // Two experts of the set and two staging entries, pinned; set packed in key order.
  CHECK(slots->pinned_host_bytes() == 4 * stride);
  REQUIRE(log.size() == 2);
  CHECK(log[0] == absl::StrFormat("reserve 2 x %d", stride));
  CHECK(log[1] == absl::StrFormat("reserve host %d", 4 * stride));
  CHECK(std::memcmp(host, Packed(**model, 0, 5).data(), bytes) == 0);
  CHECK(std::memcmp(host + stride, Packed(**model, 1, 3).data(), bytes) == 0);
  log.clear();

  // A load of an expert of the set is one copy from its pinned entry and
  // returns before it is known to be done.
  REQUIRE(slots->Load(0, 1, 3, /*prefetched=*/true).ok());
  CHECK(log == std::vector<std::string>{"load 0 from pinned"});
  CHECK_FALSE(slots->slot(0).ready);
  CHECK(slots->held() == 1);
  CHECK(slots->load_seconds() == 0.0);
  auto done = slots->WaitLoaded(0);
  REQUIRE(done.ok());
  CHECK(slots->slot(0).ready);
  CHECK(slots->load_seconds() == 0.125);  // the device's time of the copy
  CHECK(*slots->WaitLoaded(0) == *done);  // waiting again does not wait
  log.clear();

  // Compute waits for exactly that slot's copy; release after it.
  CHECK(SlotHolds(*slots, 0, Packed(**model, 1, 3)));
  REQUIRE(slots->Release(0).ok());
  CHECK(log == std::vector<std::string>{"compute waits 0", "release 0"});
  log.clear();

  // Experts outside the set go through the two staging entries, alternately;
  // an entry is reused only after the copy that read it is done.
  REQUIRE(slots->Load(1, 7, 2, false).ok());
  slots->Evict(0);
  REQUIRE(slots->Load(0, 6, 1, false).ok());
  CHECK(log == std::vector<std::string>{"load 1 from pinned", "load 0 from pinned"});
  CHECK(SlotHolds(*slots, 1, Packed(**model, 7, 2)));
  CHECK(SlotHolds(*slots, 0, Packed(**model, 6, 1)));
  log.clear();
  slots->Evict(1);
  REQUIRE(slots->Load(1, 4, 4, false).ok());  // staging entry 0 again: wait for slot 1's copy
  CHECK(log == std::vector<std::string>{"host waits 1", "load 1 from pinned"});
  CHECK(SlotHolds(*slots, 1, Packed(**model, 4, 4)));
  CHECK(slots->peak_held() == 2);
  CHECK(slots->loads() == 4);

  // Errors: a full slot, an empty one, a failing copy.
  CHECK(slots->Load(1, 0, 0, false).code() == absl::StatusCode::kFailedPrecondition);
  slots->Evict(1);
  CHECK(slots->WaitLoaded(1).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(slots->Acquire(1).status().code() == absl::StatusCode::kFailedPrecondition);
  dev->fail = true;
  CHECK(slots->Load(1, 1, 3, false).code() == absl::StatusCode::kInternal);
  CHECK(slots->slot(1).loaded == false);
}

TEST_CASE("expert slots on a device stage every load when pinned memory runs out",
          "[worker][slots]") {
  auto model = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  auto cpu = CreateBackend("cpu:1");
  REQUIRE(cpu.ok());
  std::vector<std::string> log;
  uint8_t* host = nullptr;
  auto device = std::make_unique<LoggingSlotDevice>(&log, &host);
  const size_t stride = (ExpertPackLayout::For((*model)->config()).total_bytes + 255) / 256 * 256;
  device->max_host = 2 * stride;  // the staging entries fit, the set does not
  auto slots = ExpertSlots::Create(**model, **cpu, 1, std::move(device), {{0, 1}, {0, 2}});
  REQUIRE(slots.ok());
  CHECK(slots->pinned_host_bytes() == 2 * stride);
  REQUIRE(slots->Load(0, 0, 2, false).ok());
  CHECK(log.back() == "load 0 from pinned");
  CHECK(SlotHolds(*slots, 0, Packed(**model, 0, 2)));
  // Not even the staging entries: the worker cannot start, and says why.
  std::vector<std::string> log2;
  auto tiny = std::make_unique<LoggingSlotDevice>(&log2, &host);
  tiny->max_host = stride;
  CHECK(ExpertSlots::Create(**model, **cpu, 1, std::move(tiny), {{0, 1}}).status().code() ==
        absl::StatusCode::kResourceExhausted);
}

TEST_CASE("expert slots on the host: packed in place, emulated bandwidth", "[worker][slots]") {
  auto model = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  auto cpu = CreateBackend("cpu:1");
  REQUIRE(cpu.ok());
  REQUIRE(CreateSlotDevice(**cpu).ok());
  CHECK(*CreateSlotDevice(**cpu) == nullptr);  // host memory: no device needed
  auto slots = ExpertSlots::Create(**model, **cpu, 1);
  REQUIRE(slots.ok());
  CHECK_FALSE(slots->device());
  CHECK(slots->pinned_host_bytes() == 0);
  // 100 MB/s: a 96 KiB expert takes about a millisecond.
  slots->set_load_bandwidth(100'000'000);
  REQUIRE(slots->Load(0, 2, 6, false).ok());
  CHECK(slots->slot(0).ready);
  CHECK(slots->load_seconds() >= static_cast<double>(slots->expert_bytes()) / 100e6);
  CHECK(SlotHolds(*slots, 0, Packed(**model, 2, 6)));
  CHECK(slots->Release(0).ok());
  CHECK(ExpertSlots::Create(**model, **cpu, 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace odmoe::test
