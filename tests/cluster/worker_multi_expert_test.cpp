// A worker that computes several experts of a layer (group size G < top-k):
// with one slot it loads them one after another and never holds two; with
// two it has the next one loaded before it computes the current. Its own
// accounting (ExpertSlots, WorkerStats) and its EL / EC trace spans show it.
// On a device (a fake SlotDevice here, standing for a GPU) it queues the copy
// of the next task's expert while the current one computes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend/slot_device.h"
#include "backends/backend_registry.h"
#include "cluster/assignment.h"
#include "cluster/wire.h"
#include "model/expert_pack.h"
#include "model/model_file.h"
#include "test_paths.h"
#include "worker_messages.h"
#include "worker_node/worker_core.h"

namespace odmoe::test {
namespace {

constexpr int kRows = 4;

// One worker alone in a group of one (G = 1, k = 2): it computes both experts
// of every layer.
struct Worker {
  std::unique_ptr<ModelFile> model;
  std::unique_ptr<Backend> backend;
  TraceRecorder trace;
  std::unique_ptr<WorkerCore> core;
  std::mutex mu;
  std::vector<v1::ExpertResult> results;

  explicit Worker(int slots) {
    model = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf")).value();
    backend = CreateBackend("cpu:1").value();
    const ModelConfig& c = model->config();
    REQUIRE(c.n_expert_used == 2);
    WorkerCore::Options opt;
    opt.placement = WorkerPlacement{.worker_index = 0, .n_workers = 1, .group_size = 1};
    opt.max_rows = kRows;
    opt.memory_budget = WorkerCore::WorkspaceBytes(c, kRows) +
                        static_cast<uint64_t>(slots) * LargestPackedExpert(c);
    opt.trace = &trace;
    trace.Start(1000);
    core = WorkerCore::Create(*model, *backend, opt).value();
    REQUIRE(core->stats().slots == slots);
    core->AttachSink(1, [this](const v1::ExpertResult& r) {
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(r);
    });
  }
  ~Worker() { core->Stop(); }

  void Hint(uint32_t token, uint32_t layer, std::vector<uint32_t> experts) {
    REQUIRE(core->AddHint(TestHint(token, layer, experts)).ok());
  }
  void Task(uint64_t id, uint32_t token, uint32_t layer, uint32_t expert, uint32_t position) {
    const int d = model->config().n_embd;
    std::vector<float> x(static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) x[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 17);
    REQUIRE(core->SubmitTask(TestTask(id, token, layer, expert, position, x)).ok());
  }
  // Waits until `pred(stats)` holds (or 5 s).
  template <typename Pred>
  bool WaitFor(Pred pred) {
    for (int i = 0; i < 500; ++i) {
      if (pred(core->stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::vector<v1::ExpertResult> Results(size_t n) {
    WaitFor([&](const WorkerStats&) {
      std::lock_guard<std::mutex> lock(mu);
      return results.size() >= n;
    });
    std::lock_guard<std::mutex> lock(mu);
    return results;
  }
};

// The span `name` of (layer, expert); fails the test when there is not
// exactly one.
TraceEvent Span(const std::vector<TraceEvent>& events, const std::string& name, int layer,
                int expert) {
  std::vector<TraceEvent> found;
  for (const TraceEvent& e : events) {
    if (e.name == name && e.layer == layer && e.expert == expert) found.push_back(e);
  }
  REQUIRE(found.size() == 1);
  return found[0];
}

// A SlotDevice whose memory is host vectors and whose copies happen at once,
// logging every call (and the results the test's sink sees) in order. The
// host waits for a copy only once the test opens the gate, so the test can
// queue tasks while the worker waits for its first load.
class GatedSlotDevice final : public SlotDevice {
 public:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    std::vector<std::string> log;
    void Log(std::string line) {
      std::lock_guard<std::mutex> lock(mu);
      log.push_back(std::move(line));
    }
  };
  explicit GatedSlotDevice(Shared* shared) : shared_(shared) {}
  std::string name() const override { return "gated"; }
  absl::StatusOr<uint8_t*> Reserve(int slots, size_t slot_bytes) override {
    memory_.assign(static_cast<size_t>(slots) * slot_bytes, 0);
    return memory_.data();
  }
  absl::StatusOr<uint8_t*> ReserveHost(size_t bytes) override {
    host_.assign(bytes, 0);
    return host_.data();
  }
  absl::Status QueueLoad(int slot, void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    shared_->Log(absl::StrFormat("load %d", slot));
    return absl::OkStatus();
  }
  absl::Status ComputeWaitForLoad(int slot) override {
    shared_->Log(absl::StrFormat("compute %d", slot));
    return absl::OkStatus();
  }
  absl::Status RecordRelease(int slot) override { return absl::OkStatus(); }
  absl::Status WaitLoadDone(int slot) override {
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->cv.wait(lock, [&] { return shared_->open; });
    return absl::OkStatus();
  }
  absl::StatusOr<double> LoadSeconds(int) override { return 0.0; }

 private:
  Shared* shared_;
  std::vector<uint8_t> memory_, host_;
};

}  // namespace

TEST_CASE("worker: one slot computes two experts of a layer one after another",
          "[cluster][worker]") {
  Worker w(/*slots=*/1);
  // Predicted {5, 2}: positions 0 and 1 of the hinted assignment are 2 and 5,
  // both this worker's (G = 1).
  w.Hint(1, 3, {5, 2});
  REQUIRE(w.WaitFor([](const WorkerStats& s) { return s.loads == 1; }));
  // Its only slot holds expert 2; expert 5 must wait for it to be computed.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(w.core->stats().loads == 1);
  CHECK(w.core->stats().held == 1);
  w.Task(1, 1, 3, 2, 0);
  w.Task(2, 1, 3, 5, 1);
  const std::vector<v1::ExpertResult> r = w.Results(2);
  REQUIRE(r.size() == 2);
  for (const v1::ExpertResult& x : r) CHECK(x.error_code() == 0);
  CHECK(r[0].expert() == 2);
  CHECK(r[0].prefetched());
  CHECK(r[1].expert() == 5);
  CHECK(!r[1].reloaded());  // the prediction was right: nothing was replaced
  const WorkerStats s = w.core->stats();
  CHECK(s.peak_held == 1);  // never two experts at once
  CHECK(s.peak_bytes == s.expert_bytes + s.workspace_bytes);
  CHECK(s.loads == 2);
  CHECK(s.hits + s.misses == 2);
  CHECK(s.hits >= 1);
  CHECK(s.reloads == 0);
  CHECK(s.step_experts_peak == 2);
  CHECK(s.task_errors == 0);
  // Expert 5 was loaded only after expert 2 was computed.
  const std::vector<TraceEvent> events = w.trace.Stop();
  const TraceEvent compute2 = Span(events, "EC", 3, 2);
  const TraceEvent load5 = Span(events, "EL", 3, 5);
  CHECK(load5.start_us >= compute2.start_us + compute2.duration_us);
}

TEST_CASE("worker: two slots hold the next expert before computing the current",
          "[cluster][worker][tsan]") {
  Worker w(/*slots=*/2);
  w.Hint(1, 3, {5, 2});
  REQUIRE(w.WaitFor([](const WorkerStats& s) { return s.loads == 2; }));
  CHECK(w.core->stats().held == 2);
  w.Task(1, 1, 3, 2, 0);
  w.Task(2, 1, 3, 5, 1);
  const std::vector<v1::ExpertResult> r = w.Results(2);
  REQUIRE(r.size() == 2);
  for (const v1::ExpertResult& x : r) {
    CHECK(x.error_code() == 0);
    CHECK(x.prefetched());
    CHECK(!x.reloaded());
  }
  const WorkerStats s = w.core->stats();
  CHECK(s.peak_held == 2);
  CHECK(s.peak_bytes == 2 * s.expert_bytes + s.workspace_bytes);
  CHECK(s.loads == 2);
  CHECK(s.hits == 2);
  CHECK(s.misses == 0);
  CHECK(s.step_experts_peak == 2);
  // Expert 5 was in memory before expert 2's compute began.
  const std::vector<TraceEvent> events = w.trace.Stop();
  const TraceEvent compute2 = Span(events, "EC", 3, 2);
  const TraceEvent load5 = Span(events, "EL", 3, 5);
  CHECK(load5.start_us + load5.duration_us <= compute2.start_us);

  // Both workers compute the same bits for the same expert and rows.
  Worker one(/*slots=*/1);
  one.Task(1, 1, 3, 2, 0);
  one.Task(2, 1, 3, 5, 1);
  const std::vector<v1::ExpertResult> r1 = one.Results(2);
  REQUIRE(r1.size() == 2);
  CHECK(r1[0].output().data() == r[0].output().data());
  CHECK(r1[1].output().data() == r[1].output().data());
  CHECK(one.core->stats().misses == 2);  // no hint: both loaded on demand
}

TEST_CASE("worker: a wrong prediction is reloaded in its own position's slot",
          "[cluster][worker]") {
  // Predicted {3, 1} (positions: 1, 3); the gate chose {6, 3}: 3 stays at
  // position 1, 6 takes position 0, whose prefetch (1) is replaced.
  const std::vector<int32_t> fin =
      FinalAssignment(std::vector<int32_t>{3, 1}, std::vector<int32_t>{6, 3});
  REQUIRE(fin == std::vector<int32_t>{6, 3});
  for (int slots : {1, 2}) {
    INFO("slots " << slots);
    Worker w(slots);
    w.Hint(2, 0, {3, 1});
    REQUIRE(
        w.WaitFor([&](const WorkerStats& s) { return s.loads == static_cast<uint64_t>(slots); }));
    w.Task(1, 2, 0, 6, 0);
    w.Task(2, 2, 0, 3, 1);
    const std::vector<v1::ExpertResult> r = w.Results(2);
    REQUIRE(r.size() == 2);
    CHECK(r[0].error_code() == 0);
    CHECK(r[1].error_code() == 0);
    CHECK(!r[0].prefetched());
    CHECK(r[0].reloaded());
    CHECK(!r[1].reloaded());
    if (slots == 2) CHECK(r[1].prefetched());  // loaded before anything came
    const WorkerStats s = w.core->stats();
    CHECK(s.reloads == 1);
    CHECK(s.peak_held == slots);
    CHECK(s.held == 0);  // nothing left behind once the step is done
  }
}

TEST_CASE("worker: a union hint of several rows prefetches its experts, task positions follow",
          "[cluster][worker][batching]") {
  // A decode step of several requests' rows: the main node hints the union of
  // their predictions (here 4 experts for top-2) and places each expert at its
  // position in the sorted union; with two slots the first two are loaded
  // before their tasks come (hits), the rest on demand.
  Worker w(2);
  w.Hint(1, 0, {6, 1, 4, 3});
  REQUIRE(w.WaitFor([](const WorkerStats& s) { return s.loads >= 2; }));
  w.Task(1, 1, 0, 1, 0);
  w.Task(2, 1, 0, 3, 1);
  w.Task(3, 1, 0, 4, 2);
  w.Task(4, 1, 0, 6, 3);
  const std::vector<v1::ExpertResult> r = w.Results(4);
  REQUIRE(r.size() == 4);
  for (const v1::ExpertResult& e : r) CHECK(e.error_code() == 0);
  CHECK(r[0].prefetched());
  CHECK(r[1].prefetched());
  CHECK(w.core->stats().hits >= 2);
  // A union is k to n_expert distinct experts: more, or a repeat, is refused.
  v1::Hint bad;
  bad.mutable_key()->set_request(1);
  bad.mutable_key()->set_token(2);
  bad.mutable_key()->set_layer(0);
  for (int e = 0; e <= w.model->config().n_expert; ++e) bad.add_experts(static_cast<uint32_t>(e % 8));
  CHECK(absl::IsInvalidArgument(w.core->AddHint(bad)));
  bad.clear_experts();
  for (uint32_t e : {1u, 2u, 1u}) bad.add_experts(e);
  CHECK(absl::IsInvalidArgument(w.core->AddHint(bad)));
}

TEST_CASE("worker: a worker beyond top-k in its group takes no hints", "[cluster][worker]") {
  // G = 3 with k = 2: worker 2 of the group computes nothing of a layer, so a
  // hint loads nothing.
  auto model = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf")).value();
  auto backend = CreateBackend("cpu:1").value();
  WorkerCore::Options opt;
  opt.placement = WorkerPlacement{.worker_index = 2, .n_workers = 3, .group_size = 3};
  opt.max_rows = kRows;
  auto core = WorkerCore::Create(*model, *backend, opt).value();
  CHECK(core->stats().slots == 1);
  CHECK(opt.placement.positions(2).empty());
  v1::Hint h;
  h.mutable_key()->set_request(1);
  h.mutable_key()->set_token(1);
  h.mutable_key()->set_layer(0);
  h.add_experts(4);
  h.add_experts(1);
  REQUIRE(core->AddHint(h).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(core->stats().loads == 0);
  // A position beyond the model's experts is refused (a step of several
  // rows places a union of predictions: positions up to n_expert - 1).
  v1::ExpertTask t;
  t.mutable_key()->set_token(1);
  t.set_expert(1);
  t.set_position(static_cast<uint32_t>(model->config().n_expert));
  std::vector<float> x(static_cast<size_t>(model->config().n_embd), 0.5f);
  EncodeRows(x.data(), 1, model->config().n_embd, v1::WIRE_DTYPE_F32, t.mutable_input());
  const absl::Status s = core->SubmitTask(t);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(s.message().find(absl::StrFormat("position %d", model->config().n_expert)) !=
        std::string::npos);
  core->Stop();
}

TEST_CASE("worker: on a device the next task's expert copies while the current computes",
          "[cluster][worker][tsan]") {
  auto model = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf")).value();
  auto backend = CreateBackend("cpu:1").value();
  const ModelConfig& c = model->config();
  for (int slots : {1, 2}) {
    INFO("slots " << slots);
    GatedSlotDevice::Shared shared;
    WorkerCore::Options opt;
    opt.placement = WorkerPlacement{.worker_index = 0, .n_workers = 1, .group_size = 1};
    opt.max_rows = kRows;
    opt.memory_budget = WorkerCore::WorkspaceBytes(c, kRows) +
                        static_cast<uint64_t>(slots) * LargestPackedExpert(c);
    opt.slot_device = [&] { return std::make_unique<GatedSlotDevice>(&shared); };
    auto core = WorkerCore::Create(*model, *backend, opt).value();
    REQUIRE(core->stats().slots == slots);
    std::mutex mu;
    std::vector<v1::ExpertResult> results;
    core->AttachSink(1, [&](const v1::ExpertResult& r) {
      shared.Log(absl::StrFormat("result %d", r.task_id()));
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(r);
    });
    // No hint: both experts are loaded for their tasks. The first task's load
    // waits at the gate until the second task is queued behind it.
    auto task = [&](uint64_t id, uint32_t expert, uint32_t position) {
      v1::ExpertTask t;
      t.set_task_id(id);
      t.mutable_key()->set_request(1);
      t.mutable_key()->set_token(1);
      t.mutable_key()->set_layer(2);
      t.set_expert(expert);
      t.set_position(position);
      std::vector<float> x(static_cast<size_t>(c.n_embd), 0.25f);
      EncodeRows(x.data(), 1, c.n_embd, v1::WIRE_DTYPE_F32, t.mutable_input());
      REQUIRE(core->SubmitTask(t).ok());
    };
    task(1, 3, 0);
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(shared.mu);
        if (!shared.log.empty()) break;  // the first load is queued
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    task(2, 6, 1);
    {
      std::lock_guard<std::mutex> lock(shared.mu);
      shared.open = true;
    }
    shared.cv.notify_all();
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (results.size() == 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    core->Stop();
    std::vector<std::string> log;
    {
      std::lock_guard<std::mutex> lock(shared.mu);
      log = shared.log;
    }
    INFO(absl::StrJoin(log, ", "));
    {
      std::lock_guard<std::mutex> lock(mu);
      REQUIRE(results.size() == 2);
      CHECK(results[0].error_code() == 0);
      CHECK(results[1].error_code() == 0);
    }
    auto at = [&](const std::string& line) {
      return std::find(log.begin(), log.end(), line) - log.begin();
    };
    REQUIRE(at("load 0") < static_cast<long>(log.size()));
    if (slots == 2) {
      // Expert 6 went to slot 1 after expert 3's compute was queued and
      // before its result came back.
      REQUIRE(at("load 1") < static_cast<long>(log.size()));
      CHECK(at("compute 0") < at("load 1"));
      CHECK(at("load 1") < at("result 1"));
      CHECK(core->stats().peak_held == 2);
    } else {
      // One slot: expert 6 is copied only once expert 3 is done.
      CHECK(std::count(log.begin(), log.end(), "load 0") == 2);
      CHECK(at("result 1") < static_cast<long>(log.size()));
      const auto second_load =
          std::find(log.begin() + at("load 0") + 1, log.end(), "load 0") - log.begin();
      CHECK(at("result 1") < second_load);
      CHECK(core->stats().peak_held == 1);
    }
    CHECK(core->stats().misses == 2);
  }
}

}  // namespace odmoe::test
