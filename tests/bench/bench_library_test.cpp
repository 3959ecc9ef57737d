// odmoe-bench's pieces that need no cluster: prompts from the held-out text,
// the Eq. 1 timing model and the Perfetto trace from recorded spans, the
// statistics and the Markdown summary.
#include <catch2/catch.hpp>

#include "bench/experiments.h"
#include "bench/report.h"
#include "bench/timing_trace.h"
#include "bench/workload.h"
#include "gguf/gguf_reader.h"
#include "model/model_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace odmoe::bench {
namespace {

std::unique_ptr<Tokenizer> Tok() {
  auto model = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf")).value();
  return Tokenizer::FromGguf(model->gguf()).value();
}

TEST_CASE("bench: held-out prompts have the exact length and differ", "[bench]") {
  auto tok = Tok();
  for (int n : {16, 128}) {
    auto prompts = HeldoutPrompts(*tok, test::SourcePath("tests/data/heldout.txt"), n, 3);
    REQUIRE(prompts.ok());
    REQUIRE(prompts->size() == 3);
    for (const auto& p : *prompts) CHECK(static_cast<int>(p.size()) == n);
    CHECK((*prompts)[0] != (*prompts)[1]);
    CHECK((*prompts)[1] != (*prompts)[2]);
  }
  CHECK(Table2Configs().size() == 4);
  CHECK(Table2Configs()[3].name() == "128x256");
  CHECK(!HeldoutPrompts(*tok, "/nonexistent/heldout.txt", 16, 1).ok());
  CHECK(!HeldoutPrompts(*tok, test::SourcePath("tests/data/heldout.txt"), 1, 1).ok());
  auto too_long = HeldoutPrompts(*tok, test::SourcePath("tests/data/heldout.txt"), 1 << 22, 1);
  REQUIRE(!too_long.ok());
  CHECK(std::string(too_long.status().message()).find("cannot be cut") != std::string::npos);
}

v1::TraceEvent Span(const std::string& name, uint32_t token, int layer, int64_t start,
                    int64_t dur, int expert = -1) {
  v1::TraceEvent e;
  e.set_name(name);
  e.set_lane(name == "EL" ? "load" : "compute");
  e.set_request(7);
  e.set_token(token);
  e.set_layer(layer);
  e.set_expert(expert);
  e.set_start_us(start);
  e.set_duration_us(dur);
  return e;
}

// Two groups, two layers: M = 10 us, experts window = 30 us; one layer of
// token 3 waited 20 us for an on-demand load.
ClusterTrace SyntheticTrace() {
  ClusterTrace t;
  NodeSpans main{"main", "main", 0, 10, {}, 0};
  NodeSpans worker{"w0", "worker", 0, 10, {}, 0};
  int64_t now = 1000;
  for (uint32_t token = 1; token <= 4; ++token) {
    for (int layer = 0; layer < 2; ++layer) {
      main.events.push_back(Span("M", token, layer, now, 10));
      now += 10;
      const bool stalled = token == 3 && layer == 1;
      main.events.push_back(Span("experts", token, layer, now, stalled ? 50 : 30));
      worker.events.push_back(Span("EL", token, layer, stalled ? now - 5 : now - 200, 25, 1));
      worker.events.push_back(Span("EC", token, layer, now + (stalled ? 25 : 5), 4, 1));
      now += stalled ? 50 : 30;
    }
    main.events.push_back(Span("head", token, -1, now, 15));
    now += 15;
  }
  t.nodes = {main, worker};
  return t;
}

TEST_CASE("bench: the Eq. 1 timing model from spans", "[bench]") {
  const TimingModel m = MeasureTimingModel(SyntheticTrace(), 2);
  CHECK(m.groups == 2);
  CHECK(m.layers == 6);  // tokens 2..4 x 2 layers
  CHECK(m.t_main_us == Approx(10));
  CHECK(m.t_worker_us == Approx(30));  // the stalled window less its 20 us wait
  CHECK(m.t_load_us == Approx(25));
  CHECK(m.t_compute_us == Approx(4));
  CHECK(m.t_head_us == Approx(15));
  CHECK(m.t_maxload_us == Approx(2 * 10 + 1 * 30));
  CHECK(!m.io_bound);
  CHECK(m.verdict.find("not I/O-bound") != std::string::npos);
  const TimingModel tight = MeasureTimingModel(SyntheticTrace(), 1);
  CHECK(tight.t_maxload_us == Approx(10));
  CHECK(tight.io_bound);
}

TEST_CASE("bench: Perfetto trace of chosen iterations", "[bench]") {
  const nlohmann::json j = ToPerfetto(SyntheticTrace(), 2, 3);
  REQUIRE(j.contains("traceEvents"));
  int spans = 0, names = 0;
  int64_t min_ts = 1 << 30;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      ++spans;
      CHECK(e["args"]["token"].get<int>() >= 2);
      CHECK(e["args"]["token"].get<int>() <= 3);
      min_ts = std::min<int64_t>(min_ts, e["ts"].get<int64_t>());
      CHECK(e["dur"].get<int64_t>() >= 1);
    }
    if (e["name"] == "process_name") ++names;
  }
  CHECK(spans == 2 * (2 * 2 + 1) + 2 * 2 * 2);  // main: M, experts x2 + head; worker: EL, EC x2
  CHECK(names == 2);
  CHECK(min_ts == 0);
}

TEST_CASE("bench: statistics and the Markdown summary", "[bench]") {
  const MeanStd s = Summarize({1, 2, 3, std::nan("")});
  CHECK(s.n == 3);
  CHECK(s.mean == Approx(2));
  CHECK(s.std == Approx(1));
  CHECK(Summarize({}).n == 0);

  nlohmann::json results = {
      {"meta", {{"model", "m.gguf"}, {"topology", "t.yaml"}, {"quick", true}, {"seconds", 12}}},
      {"emulation",
       {{"load_bandwidth_bytes_per_s", 1e9}, {"expert_bytes", 98304}, {"load_over_compute", 4}}},
      {"deployments",
       {{"results",
         {{"odmoe", {{"16x64", {{"decode_tps", 100.0}, {"recall", 0.99}, {"exact", true}}}}},
          {"resident", {{"16x64", {{"decode_tps", 120.0}, {"exact", false}}}}}}},
        {"memory", {{"odmoe", {{{"node", "w0"}, {"role", "worker"}, {"experts_held_peak", 1}}}}}},
        {"headline", {{"odmoe_over_resident", 100.0 / 120.0}}}}},
      {"ablation", {{"config", "16x64"}, {"cases", {{{"case", "1: x"}, {"decode_tps", 5.0}}}}}},
      {"periods",
       {{"periods", {1, 2}},
        {"config", "16x64"},
        {"decode_tps", {{1.0, 2.0}, {3.0, 4.0}}},
        {"recall", {{1.0, 0.9}, {0.8, 0.7}}}}},
  };
  const std::string md = MarkdownSummary(results);
  CHECK(md.find("odmoe_over_resident: **0.833**") != std::string::npos);
  CHECK(md.find("| odmoe | 16x64 |") != std::string::npos);
  CHECK(md.find("**NO**") != std::string::npos);  // resident's tokens differed
  CHECK(md.find("| token 2 | 3.0 (0.80) | 4.0 (0.70) |") != std::string::npos);
  CHECK(md.find("1: x") != std::string::npos);

  // A failed experiment (as odmoe-bench records it) is reported, never a crash.
  results["deployments"] = {{"error", "tests/data/heldout.txt: cannot read the held-out text"}};
  results["recall"] = {{"error", "shadow did not start"}};
  const std::string failed = MarkdownSummary(results);
  CHECK(failed.find("## deployments: failed\n\ntests/data/heldout.txt: cannot read") !=
        std::string::npos);
  CHECK(failed.find("## recall: failed") != std::string::npos);
  CHECK(failed.find("1: x") != std::string::npos);  // the others still reported

  // A cell that was not measured (null) is a "-", not a crash.
  results["periods"]["decode_tps"][1][1] = nullptr;
  results["periods"]["recall"][1][1] = nullptr;
  const std::string gaps = MarkdownSummary(results);
  CHECK(gaps.find("| token 2 | 3.0 (0.80) | - (-) |") != std::string::npos);
}

}  // namespace
}  // namespace odmoe::bench
