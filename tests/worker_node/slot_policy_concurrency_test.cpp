// Each slot policy's thread-safety as slot_policy.h states it: WorkerCore
// asks its policy under its mutex, OnHint from the threads that deliver hints
// and everything else from its executor thread. Here hints arrive on one
// thread while tasks are submitted on another and a third reads the counters,
// for every built-in mode; run under TSan (scripts/sanitize.sh tsan, or the
// build-tsan target odmoe_worker_node_tests), a race in a policy's state (the
// LFU counts, the utilities) or in the core's plans is a report.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "cluster/test_worker.h"
#include "worker_node/slot_policy.h"

namespace odmoe {

TEST_CASE("slot policy: hints on one thread, tasks on another, counters on a third",
          "[worker][policy][tsan]") {
  for (WorkerMode mode : {WorkerMode::kOnDemand, WorkerMode::kResident, WorkerMode::kLruCache,
                          WorkerMode::kLfuCache, WorkerMode::kUtilityCache}) {
    INFO(mode.name());
    test::TestWorker w([&](WorkerCore::Options& o) {
      o.mode = mode;
      o.cache_experts = 3;
      o.utility = {.window = 2, .levels = 4, .threshold = 1};
      o.memory_budget = 0;
    });
    const ModelConfig& c = w.model->config();
    const int layers = std::min(c.n_layer, 4);
    constexpr uint32_t kTokens = 24;
    auto expert = [&](uint32_t token, int layer, int position) {
      return static_cast<uint32_t>(
          (token * 3 + static_cast<uint32_t>(layer) * 5 + static_cast<uint32_t>(position) * 2) %
          static_cast<uint32_t>(c.n_expert));
    };
    std::atomic<int> hint_errors{0}, task_errors{0};
    std::atomic<bool> done{false};
    int hints = 0;
    std::thread hinter([&] {
      for (uint32_t t = 1; t <= kTokens; ++t) {
        for (int l = 0; l < layers; ++l) {
          if (!w.core
                   ->AddHint(test::TestHint(t, static_cast<uint32_t>(l),
                                            {expert(t, l, 0), expert(t, l, 1)}))
                   .ok()) {
            ++hint_errors;
          }
        }
        // Paced, so that hints keep arriving while tasks run and counters are read.
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    hints = static_cast<int>(kTokens) * layers;
    int tasks = 0;
    std::thread submitter([&] {
      const std::vector<float> x(static_cast<size_t>(c.n_embd), 0.01f);
      uint64_t id = 1;
      for (uint32_t t = 0; t <= kTokens; ++t) {
        for (int l = 0; l < layers; ++l) {
          for (int p = 0; p < 2; ++p) {
            // Every third task of position 1 asks for another expert than
            // hinted (a wrong prediction: a reload).
            const uint32_t e = p == 1 && t % 3 == 0 ? expert(t, l, 1) ^ 1u : expert(t, l, p);
            if (!w.core
                     ->SubmitTask(test::TestTask(id++, t, static_cast<uint32_t>(l), e,
                                                 static_cast<uint32_t>(p), x))
                     .ok()) {
              ++task_errors;
            }
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    tasks = static_cast<int>(kTokens + 1) * layers * 2;
    // (Catch2's assertions are not thread-safe: the threads count, the test checks.)
    std::atomic<int> bad_reads{0};
    std::thread reader([&] {
      while (!done.load()) {
        const WorkerStats s = w.core->stats();
        if (s.held > s.slots) ++bad_reads;
        for (int l = 0; l < layers; ++l) {
          for (int e = 0; e < c.n_expert; ++e) {
            if (w.core->utility(l, e) < 0) ++bad_reads;
          }
        }
        std::this_thread::yield();
      }
    });
    hinter.join();
    submitter.join();
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard<std::mutex> lock(w.mu);
        if (static_cast<int>(w.results.size()) >= tasks) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    done = true;
    reader.join();
    CHECK(bad_reads.load() == 0);
    CHECK(hint_errors.load() == 0);
    CHECK(task_errors.load() == 0);
    std::lock_guard<std::mutex> lock(w.mu);
    REQUIRE(static_cast<int>(w.results.size()) == tasks);
    for (const v1::ExpertResult& r : w.results) CHECK(r.error_code() == 0);
    const WorkerStats s = w.core->stats();
    CHECK(s.tasks == static_cast<uint64_t>(tasks));
    CHECK(s.hints_received == static_cast<uint64_t>(hints));
    CHECK(s.hits + s.misses == static_cast<uint64_t>(kTokens) * layers * 2);
    CHECK(s.peak_held <= s.slots);
  }
}

}  // namespace odmoe
