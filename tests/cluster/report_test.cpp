// Measurements for the docs and closing notes, not assertions: hidden from the
// default run ([.report]); run with
//   build/bin/odmoe_cluster_tests "[report]"
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "test_cluster.h"

namespace odmoe::test {
TEST_CASE("report: recall and decode speed per deployment (8 prompts x 128 tokens)",
          "[.report]") {
  struct Row {
    const char* name;
    ClusterConfig cfg;
  };
  std::vector<Row> rows;
  for (DType q : {DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    for (int period : {1, 0}) {
      ClusterConfig c;
      c.quantization = q;
      c.token_period = c.kv_period = period;
      rows.push_back({period ? "shadow aligned" : "shadow unaligned", c});
    }
  }
  ClusterConfig random;
  random.prediction = PredictionMode::kRandom;
  rows.push_back({"random", random});
  ClusterConfig none;
  none.prediction = PredictionMode::kNone;
  rows.push_back({"none", none});
  ClusterConfig resident;
  resident.prediction = PredictionMode::kNone;
  resident.worker_mode = WorkerMode::kResident;
  rows.push_back({"resident", resident});
  std::printf("| deployment | shadow | recall | hits | misses | reloads | stall ms/token | "
              "decode tok/s |\n|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    auto cluster = TestCluster::Start(row.cfg);
    REQUIRE(cluster.ok());
    uint64_t correct = 0, slots = 0, hits = 0, misses = 0, reloads = 0, tokens = 0;
    double stall = 0, decode_seconds = 0;
    for (const std::string& p : HeldOutPrompts(8)) {
      GenerateRequest req;
      req.prompt = p;
      req.max_tokens = 128;
      req.ignore_eos = true;
      auto r = (*cluster)->main().Generate(req, nullptr);
      REQUIRE(r.ok());
      correct += r->recall.correct;
      slots += r->recall.slots;
      hits += r->experts.hits;
      misses += r->experts.misses;
      reloads += r->experts.reloads;
      stall += r->experts.stall_seconds;
      tokens += r->result.output_ids.size() - 1;
      decode_seconds += r->result.stats.decode_seconds;
    }
    std::printf("| %s | %s | %.4f | %llu | %llu | %llu | %.3f | %.1f |\n", row.name,
                row.cfg.prediction == PredictionMode::kShadow
                    ? std::string(GgmlTypeName(static_cast<uint32_t>(row.cfg.quantization))).c_str()
                    : "-",
                slots ? static_cast<double>(correct) / slots : 0.0,
                static_cast<unsigned long long>(hits), static_cast<unsigned long long>(misses),
                static_cast<unsigned long long>(reloads), 1e3 * stall / tokens,
                tokens / decode_seconds);
    std::fflush(stdout);
  }
}

}  // namespace odmoe::test
