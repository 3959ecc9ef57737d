// ExpertSlotArena over a fake SlotDevice that logs every device call: the
// slot sizing by budget, the accounting, eviction order, and the fences the
// CUDA device turns into events (a load waits for the slot's release, a
// compute waits for exactly its slot's load). No GPU needed.
#include "expert_slot_arena.h"
#include "fake_slot_device.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "catch2/catch.hpp"

namespace odmoe {
namespace {

using FakeSlotDevice = test::LoggingSlotDevice;

struct Fixture {
  std::vector<std::string> log;
  FakeSlotDevice* device = nullptr;
  std::unique_ptr<ExpertSlotArena> arena;
  std::vector<std::vector<uint8_t>> experts;  // host copies, expert i filled with i + 1

  Fixture(size_t expert_bytes, uint64_t budget, int max_slots = 0) {
    auto d = std::make_unique<FakeSlotDevice>(&log);
    device = d.get();
    auto a = ExpertSlotArena::Create(std::move(d), {expert_bytes, budget, max_slots});
    REQUIRE(a.ok());
    arena = std::move(a).value();
    for (int i = 0; i < 8; ++i) experts.emplace_back(expert_bytes, static_cast<uint8_t>(i + 1));
  }
  int Load(int layer, int expert) {
    auto s = arena->Load({layer, expert}, experts[static_cast<size_t>(expert)].data());
    REQUIRE(s.ok());
    return *s;
  }
};

TEST_CASE("arena sizes its slots by the budget", "[cuda][arena]") {
  CHECK(ExpertSlotArena::SlotStride(1000) == 1024);
  CHECK(ExpertSlotArena::SlotStride(1024) == 1024);
  CHECK(ExpertSlotArena::SlotsFor({1000, 3 * 1024 + 1023, 0}) == 3);
  CHECK(ExpertSlotArena::SlotsFor({1000, 3 * 1024, 2}) == 2);
  CHECK(ExpertSlotArena::SlotsFor({1000, 1023, 0}) == 0);
  Fixture f(1000, 3 * 1024);
  CHECK(f.arena->slots() == 3);
  REQUIRE(!f.log.empty());
  CHECK(f.log[0] == "reserve 3 x 1024");
  const ExpertSlotArena::Stats st = f.arena->stats();
  CHECK(st.bytes_reserved == 3 * 1024);
  CHECK(st.held == 0);
}

TEST_CASE("arena rejects bad options and a budget too small for one expert", "[cuda][arena]") {
  std::vector<std::string> log;
  auto small = ExpertSlotArena::Create(std::make_unique<FakeSlotDevice>(&log), {4096, 4000, 0});
  REQUIRE_FALSE(small.ok());
  CHECK(small.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(small.status().message()).find("4000") != std::string::npos);
  CHECK(ExpertSlotArena::Create(std::make_unique<FakeSlotDevice>(&log), {0, 1 << 20, 0})
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(ExpertSlotArena::Create(std::make_unique<FakeSlotDevice>(&log), {64, 1 << 20, -1})
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(ExpertSlotArena::Create(nullptr, {64, 1 << 20, 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("arena loads, hits, and fences compute on exactly its slot", "[cuda][arena]") {
  Fixture f(256, 2 * 256);
  const int a = f.Load(0, 3);
  const int b = f.Load(0, 5);
  CHECK(a != b);
  CHECK(f.Load(0, 3) == a);  // already held: a hit, no copy
  CHECK(f.arena->Find({0, 5}) == b);
  CHECK(f.arena->Find({1, 5}) == -1);
  f.log.clear();
  auto p = f.arena->Acquire(b);
  REQUIRE(p.ok());
  CHECK(static_cast<const uint8_t*>(*p)[0] == 6);  // expert 5's bytes
  CHECK(static_cast<const uint8_t*>(*p)[255] == 6);
  REQUIRE(f.arena->Release(b).ok());
  CHECK(f.log == std::vector<std::string>{"compute waits ready 1", "release 1"});
  const ExpertSlotArena::Stats st = f.arena->stats();
  CHECK(st.loads == 2);
  CHECK(st.hits == 1);
  CHECK(st.held == 2);
  CHECK(st.bytes_held == 512);
  CHECK(st.bytes_loaded == 512);
  auto secs = f.arena->WaitLoaded(a);
  REQUIRE(secs.ok());
  CHECK(*secs == 0.25);
}

TEST_CASE("arena overlaps the next load with the current compute", "[cuda][arena]") {
  // A worker's loop with two slots: while expert 0 computes, expert 1 loads;
  // expert 2 then goes into expert 0's slot, queued after its release.
  Fixture f(128, 2 * 256);
  const int cur = f.Load(0, 0);
  REQUIRE(f.arena->Acquire(cur).ok());
  const int next = f.Load(0, 1);
  REQUIRE(f.arena->Release(cur).ok());
  REQUIRE(f.arena->Acquire(next).ok());
  CHECK(f.Load(0, 2) == cur);
  REQUIRE(f.arena->Release(next).ok());
  CHECK(f.log == std::vector<std::string>{"reserve 2 x 256", "load 0", "compute waits ready 0",
                                          "load 1", "release 0", "compute waits ready 1", "load 0",
                                          "release 1"});
  CHECK(f.arena->stats().peak_held == 2);
  CHECK(f.arena->stats().evictions == 1);
}

TEST_CASE("arena evicts the least recently used slot, never an acquired or kept one",
          "[cuda][arena]") {
  Fixture f(100, 3 * 256);
  const int s0 = f.Load(0, 0);
  const int s1 = f.Load(0, 1);
  const int s2 = f.Load(0, 2);
  // Use s0 again (acquire/release refreshes it); keep s1 resident.
  REQUIRE(f.arena->Acquire(s0).ok());
  REQUIRE(f.arena->Release(s0).ok());
  REQUIRE(f.arena->Keep(s1, true).ok());
  CHECK(f.Load(1, 3) == s2);  // s2 is the least recently used evictable slot
  CHECK(f.arena->Find({0, 2}) == -1);
  CHECK(f.arena->KeyOf(s2) == ExpertKey{1, 3});
  // With s0 acquired and s1 kept, the next load replaces s2 again.
  REQUIRE(f.arena->Acquire(s0).ok());
  CHECK(f.Load(1, 4) == s2);
  // Now every slot is acquired or kept: no room.
  REQUIRE(f.arena->Acquire(s2).ok());
  auto full = f.arena->Load({2, 5}, f.experts[5].data());
  REQUIRE_FALSE(full.ok());
  CHECK(full.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(f.arena->Evict(s2).code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(f.arena->Release(s2).ok());
  REQUIRE(f.arena->Release(s0).ok());
  const ExpertSlotArena::Stats st = f.arena->stats();
  CHECK(st.evictions == 2);
  CHECK(st.held == 3);
  CHECK(st.peak_held == 3);
  CHECK(st.acquired == 0);
  CHECK(st.peak_bytes_held == 300);
}

TEST_CASE("arena keeps its books on misuse and device errors", "[cuda][arena]") {
  Fixture f(64, 2 * 256);
  CHECK(f.arena->Acquire(0).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.arena->Acquire(7).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(f.arena->Release(0).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.arena->Keep(1, true).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.arena->Load({0, 0}, nullptr).status().code() == absl::StatusCode::kInvalidArgument);
  f.device->fail_loads = true;
  auto failed = f.arena->Load({0, 0}, f.experts[0].data());
  CHECK(failed.status().code() == absl::StatusCode::kInternal);
  CHECK(f.arena->stats().held == 0);
  CHECK(f.arena->Find({0, 0}) == -1);
  f.device->fail_loads = false;
  const int s = f.Load(0, 0);
  REQUIRE(f.arena->Evict(s).ok());
  CHECK(f.arena->stats().held == 0);
  CHECK(f.arena->stats().peak_held == 1);
  CHECK(f.arena->KeyOf(s) == ExpertKey{});
}

}  // namespace
}  // namespace odmoe
