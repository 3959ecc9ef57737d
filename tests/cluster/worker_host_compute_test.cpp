// DAOP's compute on a miss (workers.host_compute): a decode task whose expert
// is not loaded is computed on the worker's host from the model's weights when
// that is estimated quicker than the load plus the compute. Same bits as the
// loaded expert's result; no load; counted as its own kind (neither a hit nor
// a miss); a host estimated slower than the load loads as before; a
// prefetched expert is a hit as always. Through the cluster the tokens stay
// the single process's.
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <thread>

#include "test_cluster.h"
#include "test_worker.h"

namespace odmoe::test {
namespace {

// A worker with DAOP's compute on a miss (or without: the reference).
struct HostWorker : TestWorker {
  HostWorker(bool host_compute, int slowdown, uint64_t load_bandwidth)
      : TestWorker([&](WorkerCore::Options& o) {
          o.load_bandwidth = load_bandwidth;
          o.host_compute = host_compute;
          o.host_compute_slowdown = slowdown;
        }) {}
};

}  // namespace

TEST_CASE("worker: host compute on a miss gives the loaded expert's bits without a load",
          "[cluster][worker][policy]") {
  // Loads at 2 MB/s: a 96 KiB expert takes ~49 ms, far longer than computing
  // it even on a loaded machine (a first compute that faults the weights in
  // included).
  constexpr uint64_t kSlowLink = 2'000'000;
  HostWorker plain(false, 1, kSlowLink), host(true, 1, kSlowLink);
  const v1::ExpertResult want = plain.Task(1, 0, 3, 0);
  REQUIRE(want.error_code() == 0);
  CHECK(!want.computed_on_host());
  const v1::ExpertResult got = host.Task(1, 0, 3, 0);
  REQUIRE(got.error_code() == 0);
  CHECK(got.computed_on_host());
  CHECK(!got.prefetched());
  CHECK(got.output().data() == want.output().data());  // bit for bit
  CHECK(got.stall_seconds() == 0);
  // A second expert of another layer too, and nothing was ever loaded.
  const v1::ExpertResult got2 = host.Task(1, 1, 5, 1);
  CHECK(got2.computed_on_host());
  CHECK(got2.output().data() == plain.Task(1, 1, 5, 1).output().data());
  WorkerStats s = host.core->stats();
  CHECK(s.host_computes == 2);
  CHECK(s.hits == 0);
  CHECK(s.misses == 0);
  CHECK(s.loads == 0);
  // A prefetched expert is a hit, computed where it was loaded.
  host.Hint(2, 0, {1, 6});
  host.WaitLoads(2);
  const v1::ExpertResult hit = host.Task(2, 0, 1, 0);
  CHECK(hit.prefetched());
  CHECK(!hit.computed_on_host());
  CHECK(hit.output().data() == plain.Task(2, 0, 1, 0).output().data());
  // Prefill tasks (token 0) are never computed on the host.
  const v1::ExpertResult prefill = host.Task(0, 1, 2, 0);
  CHECK(!prefill.computed_on_host());
}

TEST_CASE("worker: a host slower than the load loads instead", "[cluster][worker][policy]") {
  // A fast link (4 GB/s: 25 us a load) and a host 10000x slower than the
  // device: once a device compute is measured the host never wins.
  HostWorker w(true, 10000, 4'000'000'000);
  w.Hint(1, 0, {2, 4});
  w.WaitLoads(1);
  const v1::ExpertResult first = w.Task(1, 0, 2, 0);  // a hit: measures the device
  REQUIRE(first.prefetched());
  const v1::ExpertResult miss = w.Task(1, 1, 7, 0);
  CHECK(!miss.computed_on_host());
  CHECK(w.core->stats().host_computes == 0);
  CHECK(w.core->stats().misses >= 1);
}

TEST_CASE("cluster: host compute on a miss keeps every token the single process's",
          "[cluster][policy]") {
  const PredictionMode mode = GENERATE(PredictionMode::kShadow, PredictionMode::kNone);
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = mode;
  // Slow loads (~49 ms an expert): a miss is computed on the host, even when
  // a host compute is slowed down now and then on a loaded machine.
  cfg.load_bandwidth = 2'000'000;
  cfg.host_compute = true;
  ExpectPolicyKeepsTokens(cfg, [&](const ClusterGenerateResult& r) {
    // Without prediction every decode task is a miss, each computed on the
    // host; with the shadow's the wrong ones are.
    if (mode == PredictionMode::kNone) {
      CHECK(r.experts.host_computes > 0);
      CHECK(r.experts.misses == 0);
    }
    CHECK(r.experts.hits + r.experts.misses + r.experts.host_computes > 0);
  });
}

}  // namespace odmoe::test
