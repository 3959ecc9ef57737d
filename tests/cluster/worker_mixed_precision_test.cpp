// DyMoE's mixed precision by depth (workers.mixed_precision, LOSSY, off by
// default): the depth schedule (cluster/precision_schedule.h), a worker that
// loads sub-critical experts from a low-precision copy of the model (fewer
// bytes; the bits of that copy's expert), prefetches the sub-critical ranks
// of a ranked hint low, and replaces a low copy for a task that needs the
// model's own precision; and a cluster that marks tasks by the gate's ranks.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <thread>
#include <unistd.h>

#include "cluster/precision_schedule.h"
#include "model/model_quantizer.h"
#include "model/quantized_copy.h"
#include "test_cluster.h"
#include "test_worker.h"

namespace odmoe::test {
namespace {

// The shipped tiny model's experts in q4_0 (cached like the workers' copy).
const std::string& Q4Copy() {
  static const std::string* path = [] {
    const std::string tiny = SourcePath("models/tiny-mixtral-f16.gguf");
    auto m = ModelFile::Open(tiny).value();
    return new std::string(
        CachedQuantizedCopy(tiny, SourceFingerprint(*m), DType::kQ4_0, "experts", "the test")
            .value());
  }();
  return *path;
}

}  // namespace

TEST_CASE("mixed precision: DyMoE's depth schedule", "[cluster][policy]") {
  // The first layer keeps every expert critical, the last ceil(floor k).
  CHECK(CriticalExperts(0, 8, 2, 0.0) == 2);
  CHECK(CriticalExperts(7, 8, 2, 0.0) == 1);  // never below the top-1
  CHECK(CriticalExperts(7, 8, 2, 0.5) == 1);  // r = 0.5: ceil(1)
  CHECK(CriticalExperts(6, 8, 2, 0.5) == 2);  // r = 0.525
  CHECK(CriticalExperts(3, 8, 2, 0.0) == 2);  // r = 0.61
  CHECK(CriticalExperts(4, 8, 2, 0.0) == 1);  // r = 0.39
  CHECK(CriticalExperts(31, 32, 8, 0.25) == 2);
  CHECK(CriticalExperts(16, 32, 8, 0.25) == 5);  // r = 0.606: ceil(4.85)
  CHECK(CriticalExperts(5, 8, 2, 1.0) == 2);  // floor 1: lossless
  CHECK(CriticalExperts(0, 1, 4, 0.0) == 4);
  CHECK(CriticalExperts(3, 8, 1, 0.0) == 1);
}

TEST_CASE("worker: mixed precision loads sub-critical experts from the low-precision copy",
          "[cluster][worker][policy][tsan]") {
  auto low = ModelFile::Open(Q4Copy()).value();
  TestWorker w([&](WorkerCore::Options& o) {
    o.low_model = low.get();
    o.mixed_floor = 0.0;
  });
  TestWorker high([](WorkerCore::Options&) {});
  TestWorker q4([](WorkerCore::Options&) {}, Q4Copy());  // the copy's own bits
  // A task marked low: loaded from the copy, the copy's bits, fewer bytes.
  const v1::ExpertResult r = w.Task(1, 7, 2, 0, false, /*low_precision=*/true);
  REQUIRE(r.error_code() == 0);
  CHECK(r.low_precision());
  CHECK(r.output().data() == q4.Task(1, 7, 2, 0).output().data());
  CHECK(r.output().data() != high.Task(1, 7, 2, 0).output().data());
  CHECK(w.core->stats().bytes_loaded < high.core->stats().bytes_loaded / 3);
  // A ranked hint of the last layer (floor 0: one critical expert): the
  // second rank (expert 2, position 0) is prefetched low, the first (5,
  // position 1) high; both tasks hit, each in its precision.
  w.Hint(2, 7, {5, 2}, /*ranked=*/true);
  w.WaitLoads(2);
  const v1::ExpertResult sub = w.Task(2, 7, 2, 0, false, true);
  CHECK(sub.prefetched());
  CHECK(sub.low_precision());
  w.WaitLoads(3);
  const v1::ExpertResult top = w.Task(2, 7, 5, 1);
  CHECK(top.prefetched());
  CHECK(!top.low_precision());
  CHECK(top.output().data() == high.Task(2, 7, 5, 1).output().data());
  // A low copy does not serve a task that is not marked: it is replaced by
  // the model's own expert (one precision per expert), a miss.
  w.Hint(3, 7, {4, 2}, true);
  w.WaitLoads(4);
  const v1::ExpertResult full = w.Task(3, 7, 2, 0);
  CHECK(!full.prefetched());
  CHECK(!full.low_precision());
  CHECK(full.output().data() == high.Task(3, 7, 2, 0).output().data());
  // Unranked hints (a shared step's union) prefetch in the model's precision.
  w.Hint(4, 7, {1, 6});
  w.WaitLoads(7);
  CHECK(!w.Task(4, 7, 1, 0).low_precision());
}

TEST_CASE("cluster: mixed precision marks the gate's sub-critical experts", "[cluster][policy]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.mixed_precision = MixedPrecisionSpec{.type = DType::kQ4_0, .floor = 0.0};
  absl::StatusOr<ClusterGenerateResult> r =
      GenerateOnNewCluster(cfg, TestRequest("Once upon a time", 24));
  REQUIRE(r.ok());
  CHECK(r->result.output_ids.size() == 24);
  // Floor 0 on 8 layers of top-2: layers 4..7 compute their second expert
  // low, in prefill (where every row ranks it second) and decode.
  CHECK(r->experts.low_precision > 0);
  CHECK(r->experts.hits > 0);
  // With floor 1 every expert is critical: the single process's tokens.
  cfg.mixed_precision->floor = 1.0;
  absl::StatusOr<ClusterGenerateResult> l =
      GenerateOnNewCluster(cfg, TestRequest("Once upon a time", 24));
  REQUIRE(l.ok());
  CHECK(l->experts.low_precision == 0);
  CHECK(l->result.output_ids ==
        TinyReference().Generate(TestRequest("Once upon a time", 24)).value().output_ids);
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("mixed precision: workers starting together make the low-precision copy once",
          "[cluster][policy]") {
  // A fresh ODMOE_CACHE_DIR: four makers at once (a testbed's workers) take turns on
  // the lock; the first makes the copy, the others find it.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("odmoe_copy_test_", getpid());
  std::filesystem::create_directories(dir);
  const char* old = std::getenv("ODMOE_CACHE_DIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("ODMOE_CACHE_DIR", dir.c_str(), 1);
  const std::string tiny = SourcePath("models/tiny-mixtral-f16.gguf");
  const uint64_t fingerprint = SourceFingerprint(*ModelFile::Open(tiny).value());
  std::vector<absl::StatusOr<std::string>> got(4, absl::UnknownError("not run"));
  std::vector<std::thread> makers;
  for (size_t i = 0; i < got.size(); ++i) {
    makers.emplace_back([&, i] {
      got[i] = CachedQuantizedCopy(tiny, fingerprint, DType::kQ4_K, "experts", "the test");
    });
  }
  for (std::thread& t : makers) t.join();
  if (old != nullptr) {
    setenv("ODMOE_CACHE_DIR", saved.c_str(), 1);
  } else {
    unsetenv("ODMOE_CACHE_DIR");
  }
  for (const auto& g : got) {
    REQUIRE(g.ok());
    CHECK(*g == *got[0]);
  }
  auto copy = ModelFile::Open(*got[0]);
  REQUIRE(copy.ok());
  CHECK(SourceFingerprint(**copy) == fingerprint);
  // Nothing half-made, and no lock, is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    files += e.path().extension() == ".gguf" ? 1 : 0;
    CHECK(e.path().string().find(".partial") == std::string::npos);
    CHECK(e.path().extension() != ".lock");  // the lock file goes with the last maker
  }
  CHECK(files == 1);
  std::filesystem::remove_all(dir);
}

}  // namespace odmoe::test
