// ExpertSlots, the worker's expert memory, on both of its paths: packing
// straight into host slots (CPU), and asynchronous copies from a pinned host
// copy through a SlotDevice (a GPU). The device here is a fake that logs
// every call and copies at once, so the order of the calls and the bytes that
// reach a slot can be checked on any machine; the same path on a real GPU is
// covered by "cluster: identical tokens with every node on the GPU".
#include "worker_node/expert_slots.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/backend_registry.h"
#include "fake_slot_device.h"
#include "model/model_file.h"
#include "retyped_model.h"
#include "test_paths.h"

namespace odmoe::test {
namespace {

std::vector<uint8_t> Packed(const ModelFile& model, int layer, int expert) {
  const ExpertPackLayout layout = ExpertPackLayout::For(model.config(), layer);
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

// The shipped model and a CPU backend (slots live in host memory here; the
// fake device stands for a GPU).
struct Env {
  std::unique_ptr<ModelFile> model;
  std::unique_ptr<Backend> cpu;
  std::vector<std::string> log;  // the fake device's calls
  std::unique_ptr<LoggingSlotDevice> device = std::make_unique<LoggingSlotDevice>(&log);
  Env() {
    auto m = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf"));
    REQUIRE(m.ok());
    model = std::move(m).value();
    auto c = CreateBackend("cpu:1");
    REQUIRE(c.ok());
    cpu = std::move(c).value();
  }
};

}  // namespace

TEST_CASE("expert slots on a device: pinned host copy, async loads, fences",
          "[worker][slots][tsan]") {
  Env env;
  const ModelFile& model = *env.model;
  Backend& cpu = *env.cpu;
  std::vector<std::string>& log = env.log;
  LoggingSlotDevice* dev = env.device.get();
  auto slots = ExpertSlots::Create(model, cpu, 2, std::move(env.device),
                                   {{1, 3}, {0, 5}, {1, 3}});  // a duplicate is kept once
  REQUIRE(slots.ok());
  CHECK(slots->device());
  const size_t bytes = slots->slot_bytes();
  const size_t stride = (bytes + 255) / 256 * 256;
  // Two experts of the set and two staging entries, pinned; set packed in key order.
  CHECK(slots->pinned_host_bytes() == 4 * stride);
  REQUIRE(log.size() == 2);
  CHECK(log[0] == absl::StrFormat("reserve 2 x %d", stride));
  CHECK(log[1] == absl::StrFormat("reserve host %d", 4 * stride));
  uint8_t* host = dev->host();
  CHECK(std::memcmp(host, Packed(model, 0, 5).data(), bytes) == 0);
  CHECK(std::memcmp(host + stride, Packed(model, 1, 3).data(), bytes) == 0);
  log.clear();

  // A load of an expert of the set is one copy from its pinned entry and
  // returns before it is known to be done.
  REQUIRE(slots->Load(0, 1, 3, /*prefetched=*/true).ok());
  CHECK(log == std::vector<std::string>{"load 0"});
  CHECK(dev->loads_from_elsewhere == 0);  // from the pinned area
  CHECK_FALSE(slots->slot(0).ready);
  CHECK(slots->held() == 1);
  CHECK(slots->load_seconds() == 0.0);
  auto done = slots->WaitLoaded(0);
  REQUIRE(done.ok());
  CHECK(slots->slot(0).ready);
  CHECK(slots->load_seconds() == 0.25);   // the device's time of the copy
  CHECK(*slots->WaitLoaded(0) == *done);  // waiting again does not wait
  log.clear();

  // Compute waits for exactly that slot's copy; release after it.
  CHECK(SlotHolds(*slots, 0, Packed(model, 1, 3)));
  REQUIRE(slots->Release(0).ok());
  CHECK(log == std::vector<std::string>{"compute waits ready 0", "release 0"});
  log.clear();

  // Experts outside the set go through the two staging entries, alternately;
  // an entry is reused only after the copy that read it is done.
  REQUIRE(slots->Load(1, 7, 2, false).ok());
  slots->Evict(0);
  REQUIRE(slots->Load(0, 6, 1, false).ok());
  CHECK(log == std::vector<std::string>{"load 1", "load 0"});
  CHECK(SlotHolds(*slots, 1, Packed(model, 7, 2)));
  CHECK(SlotHolds(*slots, 0, Packed(model, 6, 1)));
  log.clear();
  slots->Evict(1);
  REQUIRE(slots->Load(1, 4, 4, false).ok());  // staging entry 0 again: wait for slot 1's copy
  CHECK(log == std::vector<std::string>{"host waits ready 1", "load 1"});
  CHECK(SlotHolds(*slots, 1, Packed(model, 4, 4)));
  CHECK(slots->peak_held() == 2);
  CHECK(slots->loads() == 4);

  // Errors: a full slot, an empty one, a failing copy.
  CHECK(slots->Load(1, 0, 0, false).code() == absl::StatusCode::kFailedPrecondition);
  slots->Evict(1);
  CHECK(slots->WaitLoaded(1).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(slots->Acquire(1).status().code() == absl::StatusCode::kFailedPrecondition);
  dev->fail_loads = true;
  CHECK(slots->Load(1, 1, 3, false).code() == absl::StatusCode::kInternal);
  CHECK(slots->slot(1).loaded == false);
}

TEST_CASE("expert slots on a device stage every load when pinned memory runs out",
          "[worker][slots]") {
  Env env;
  const ModelFile& model = *env.model;
  Backend& cpu = *env.cpu;
  std::vector<std::string>& log = env.log;
  LoggingSlotDevice* dev = env.device.get();
  const size_t stride = (LargestPackedExpert(model.config()) + 255) / 256 * 256;
  dev->max_host = 2 * stride;  // the staging entries fit, the set does not
  auto slots = ExpertSlots::Create(model, cpu, 1, std::move(env.device), {{0, 1}, {0, 2}});
  REQUIRE(slots.ok());
  CHECK(slots->pinned_host_bytes() == 2 * stride);
  REQUIRE(slots->Load(0, 0, 2, false).ok());
  CHECK(log.back() == "load 0");
  CHECK(dev->loads_from_elsewhere == 0);
  CHECK(SlotHolds(*slots, 0, Packed(model, 0, 2)));
  // Not even the staging entries: the worker cannot start, and says why.
  std::vector<std::string> log2;
  auto tiny = std::make_unique<LoggingSlotDevice>(&log2);
  tiny->max_host = stride;
  CHECK(ExpertSlots::Create(model, cpu, 1, std::move(tiny), {{0, 1}}).status().code() ==
        absl::StatusCode::kResourceExhausted);
}

TEST_CASE("expert slots on the host: packed in place, emulated bandwidth", "[worker][slots]") {
  Env env;
  const ModelFile& model = *env.model;
  Backend& cpu = *env.cpu;
  REQUIRE(CreateSlotDevice(cpu).ok());
  CHECK(*CreateSlotDevice(cpu) == nullptr);  // host memory: no device needed
  auto slots = ExpertSlots::Create(model, cpu, 1);
  REQUIRE(slots.ok());
  CHECK_FALSE(slots->device());
  CHECK(slots->pinned_host_bytes() == 0);
  // 100 MB/s: a 96 KiB expert takes about a millisecond.
  slots->set_load_bandwidth(100'000'000);
  REQUIRE(slots->Load(0, 2, 6, false).ok());
  CHECK(slots->slot(0).ready);
  CHECK(slots->load_seconds() >= static_cast<double>(slots->expert_bytes(2)) / 100e6);
  CHECK(SlotHolds(*slots, 0, Packed(model, 2, 6)));
  CHECK(slots->Release(0).ok());
  CHECK(ExpertSlots::Create(model, cpu, 0).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("expert slots: layers whose experts differ in size", "[worker][slots]") {
  // Layer 0's experts in Q8_0 (smaller), layer 1's in F16.
  const std::string path =
      (std::filesystem::temp_directory_path() / "odmoe_slots_layer_types.gguf").string();
  REQUIRE(WriteRetypedModel(SourcePath("tests/data/tiny-mixtral-2layer.gguf"), path,
                            [](const TensorView& t) -> std::optional<DType> {
                              if (ExpertsOfLayer(t, 0)) return DType::kQ8_0;
                              return std::nullopt;
                            })
              .ok());
  auto m = ModelFile::Open(path);
  REQUIRE(m.ok());
  const ModelFile& model = **m;
  auto cpu = CreateBackend("cpu:1");
  REQUIRE(cpu.ok());
  const ExpertPackLayout l0 = ExpertPackLayout::For(model.config(), 0);
  const ExpertPackLayout l1 = ExpertPackLayout::For(model.config(), 1);
  REQUIRE(l0.total_bytes < l1.total_bytes);
  auto stride = [](size_t bytes) { return (bytes + 255) / 256 * 256; };

  SECTION("device path: pinned entries in each layer's size, loads of each size") {
    std::vector<std::string> log;
    auto device = std::make_unique<LoggingSlotDevice>(&log);
    LoggingSlotDevice* dev = device.get();
    auto slots = ExpertSlots::Create(model, **cpu, 2, std::move(device), {{1, 2}, {0, 3}, {0, 1}});
    REQUIRE(slots.ok());
    CHECK(slots->slot_bytes() == l1.total_bytes);
    CHECK(slots->expert_bytes(0) == l0.total_bytes);
    CHECK(log[0] == absl::StrFormat("reserve 2 x %d", stride(l1.total_bytes)));
    // (0,1), (0,3) at layer 0's size, (1,2) at layer 1's, two staging entries for any.
    const size_t host_bytes = 2 * stride(l0.total_bytes) + 3 * stride(l1.total_bytes);
    CHECK(slots->pinned_host_bytes() == host_bytes);
    const uint8_t* host = dev->host();
    CHECK(std::memcmp(host, Packed(model, 0, 1).data(), l0.total_bytes) == 0);
    CHECK(std::memcmp(host + stride(l0.total_bytes), Packed(model, 0, 3).data(), l0.total_bytes) ==
          0);
    CHECK(std::memcmp(host + 2 * stride(l0.total_bytes), Packed(model, 1, 2).data(),
                      l1.total_bytes) == 0);

    REQUIRE(slots->Load(0, 0, 3, false).ok());
    CHECK(dev->last_load_bytes == l0.total_bytes);
    CHECK(dev->loads_from_elsewhere == 0);
    absl::StatusOr<ExpertWeights> w = slots->Acquire(0);
    REQUIRE(w.ok());
    CHECK(w->gate.type == DType::kQ8_0);
    CHECK(w->down.type == DType::kQ8_0);
    CHECK(SlotHolds(*slots, 0, Packed(model, 0, 3)));
    REQUIRE(slots->Load(1, 1, 5, false).ok());  // outside the set: staged
    CHECK(dev->last_load_bytes == l1.total_bytes);
    w = slots->Acquire(1);
    REQUIRE(w.ok());
    CHECK(w->gate.type == DType::kF16);
    CHECK(SlotHolds(*slots, 1, Packed(model, 1, 5)));
    CHECK(slots->bytes_loaded() == l0.total_bytes + l1.total_bytes);
    CHECK(slots->bytes_held() == 2 * l1.total_bytes);  // a held expert takes a whole slot
    CHECK(slots->Load(0, 2, 0, false).code() == absl::StatusCode::kFailedPrecondition);
    slots->Evict(0);
    CHECK(slots->Load(0, 2, 0, false).code() == absl::StatusCode::kInvalidArgument);  // no layer 2
  }

  SECTION("host path: packed in place in the layer's layout, emulated time by its size") {
    auto slots = ExpertSlots::Create(model, **cpu, 1);
    REQUIRE(slots.ok());
    slots->set_load_bandwidth(50'000'000);
    REQUIRE(slots->Load(0, 0, 6, false).ok());
    CHECK(SlotHolds(*slots, 0, Packed(model, 0, 6)));
    CHECK(slots->load_seconds() >= static_cast<double>(l0.total_bytes) / 50e6);
    CHECK(slots->load_seconds() < static_cast<double>(l1.total_bytes) / 50e6 + 0.05);
    slots->Evict(0);
    REQUIRE(slots->Load(0, 1, 6, false).ok());
    CHECK(SlotHolds(*slots, 0, Packed(model, 1, 6)));
    CHECK(slots->bytes_loaded() == l0.total_bytes + l1.total_bytes);
  }
  std::filesystem::remove(path);
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("expert slots: a streamed load on a device copies each unit before the compute reading it",
          "[worker][slots]") {
  Env env;
  const ModelFile& model = *env.model;
  std::vector<std::string>& log = env.log;
  LoggingSlotDevice* dev = env.device.get();
  auto slots = ExpertSlots::Create(model, *env.cpu, 1, std::move(env.device), {{2, 4}});
  REQUIRE(slots.ok());
  log.clear();
  REQUIRE(slots->LoadStreamed(0, 2, 4).ok());
  CHECK(log == std::vector<std::string>{"load 0"});  // the gate unit only
  CHECK(slots->loads() == 1);
  double waited = 0;
  for (int u = 0; u < ExpertSlots::kUnits; ++u) {
    log.clear();
    REQUIRE(slots->AcquireUnit(0, u, &waited).ok());
    // Unit 0 was queued by the load; each later one right before the
    // compute that reads it, which waits for it.
    if (u == 0) {
      CHECK(log == std::vector<std::string>{"compute waits ready 0"});
    } else {
      CHECK(log == std::vector<std::string>{"load 0", "compute waits ready 0"});
    }
  }
  CHECK(waited == 0);  // the host never waits on a device
  CHECK(dev->bytes_copied == slots->expert_bytes(2));  // every byte once
  CHECK(SlotHolds(*slots, 0, Packed(model, 2, 4)));
  REQUIRE(slots->Release(0).ok());
  REQUIRE(slots->WaitLoaded(0).ok());
  CHECK(slots->slot(0).ready);

  // WaitLoaded before compute asked for every unit queues the rest first.
  slots->Evict(0);
  dev->bytes_copied = 0;
  REQUIRE(slots->LoadStreamed(0, 1, 6).ok());
  log.clear();
  REQUIRE(slots->WaitLoaded(0).ok());
  CHECK(log == std::vector<std::string>{"load 0", "load 0", "host waits ready 0"});
  CHECK(dev->bytes_copied == slots->expert_bytes(1));
  CHECK(SlotHolds(*slots, 0, Packed(model, 1, 6)));
  CHECK(slots->LoadStreamed(0, 1, 6).code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("expert slots: a streamed load on the host delivers its units one after the other",
          "[worker][slots]") {
  Env env;
  auto slots = ExpertSlots::Create(*env.model, *env.cpu, 1);
  REQUIRE(slots.ok());
  // 400 KB/s: the 96 KiB expert takes ~250 ms, its gate unit ~80 ms.
  constexpr double kRate = 400e3;
  slots->set_load_bandwidth(static_cast<uint64_t>(kRate));
  const double whole = static_cast<double>(slots->expert_bytes(3)) / kRate;
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(slots->LoadStreamed(0, 3, 2).ok());
  // It returns at once (a copy in memory), long before the link is done.
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < whole / 2);
  CHECK_FALSE(slots->slot(0).ready);
  double waited = 0;
  REQUIRE(slots->AcquireUnit(0, 0, &waited).ok());
  const double gate_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The gate arrived after its third of the bytes, long before the rest.
  CHECK(gate_at >= whole / 3 * 0.99);
  CHECK(waited > 0);
  CHECK_FALSE(slots->slot(0).ready);
  REQUIRE(slots->AcquireUnit(0, 2, &waited).ok());
  const double all_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(all_at >= whole * 0.99);
  CHECK(slots->slot(0).ready);
  CHECK(waited <= all_at);
  CHECK(slots->load_seconds() >= whole * 0.99);
  CHECK(SlotHolds(*slots, 0, Packed(*env.model, 3, 2)));
  INFO("gate unit at " << gate_at << " s, whole expert at " << all_at << " s");
  CHECK(gate_at < all_at);
}

}  // namespace odmoe::test
