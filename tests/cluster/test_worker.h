// One WorkerCore of the shipped tiny model on a CPU backend, alone in a group
// of one (it computes every position), for driving a worker directly in
// tests: hints and single-row tasks in, results out.
//
//   TestWorker w([](WorkerCore::Options& o) { o.load_bandwidth = 2'000'000; });
//   w.Hint(/*token=*/1, /*layer=*/0, {3, 5});
//   w.WaitLoads(1);
//   v1::ExpertResult r = w.Task(/*token=*/1, /*layer=*/0, /*expert=*/3, /*position=*/0);
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend_registry.h"
#include "model/model_file.h"
#include "test_paths.h"
#include "worker_messages.h"
#include "worker_node/worker_core.h"

namespace odmoe::test {

struct TestWorker {
  static constexpr int kRows = 4;
  std::unique_ptr<ModelFile> model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<WorkerCore> core;
  std::mutex mu;
  std::vector<v1::ExpertResult> results;

  explicit TestWorker(const std::function<void(WorkerCore::Options&)>& configure,
                      const std::string& path = SourcePath("models/tiny-mixtral-f16.gguf")) {
    model = ModelFile::Open(path).value();
    backend = CreateBackend("cpu:1").value();
    WorkerCore::Options opt;
    opt.placement = WorkerPlacement{.worker_index = 0, .n_workers = 1, .group_size = 1};
    opt.max_rows = kRows;
    configure(opt);
    core = WorkerCore::Create(*model, *backend, opt).value();
    core->AttachSink(1, [this](const v1::ExpertResult& r) {
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(r);
    });
  }
  ~TestWorker() { core->Stop(); }

  /// `ranked`: the experts are listed likeliest first (Hint.ranked).
  void Hint(uint32_t token, uint32_t layer, std::vector<uint32_t> experts, bool ranked = false) {
    v1::Hint h = TestHint(token, layer, experts);
    h.set_ranked(ranked);
    REQUIRE(core->AddHint(h).ok());
  }
  /// Waits (up to 2 s) until the worker has loaded `n` experts in all.
  void WaitLoads(uint64_t n) {
    for (int i = 0; i < 400 && core->stats().loads < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  /// Runs one task (a fixed row) and returns its result.
  v1::ExpertResult Task(uint32_t token, uint32_t layer, uint32_t expert, uint32_t position,
                        bool degradable = false, bool low_precision = false) {
    const int d = model->config().n_embd;
    std::vector<float> x(static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) x[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 13 - 6);
    v1::ExpertTask t = TestTask(token * 100 + layer * 10 + expert, token, layer, expert,
                                position, x);
    t.set_degradable(degradable);
    t.set_low_precision(low_precision);
    size_t before = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      before = results.size();
    }
    REQUIRE(core->SubmitTask(t).ok());
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (results.size() > before) return results.back();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL("no result");
    return {};
  }
};

}  // namespace odmoe::test
