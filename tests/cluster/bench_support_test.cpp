// What odmoe-bench relies on in the nodes: per-request prediction
// experiments (the ablations on one running cluster), the LRU-cache baseline
// workers, the emulated load bandwidth, link byte counts, and timing spans
// from every node (Node.Trace). Every run still gives the reference tokens.
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cluster/delay_line.h"
#include "cluster/grpc_util.h"
#include "cluster/main_client.h"
#include "cluster/trace_client.h"
#include "engine/reference_engine.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

constexpr int kTokens = 24;

GenerateRequest Request() {
  GenerateRequest req;
  req.prompt = HeldOutPrompts(1)[0];
  req.max_tokens = kTokens;
  req.ignore_eos = true;
  return req;
}

const std::vector<int32_t>& ReferenceTokens() {
  static const std::vector<int32_t> ref = [] {
    auto engine = ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
    return engine->Generate(Request()).value().output_ids;
  }();
  return ref;
}

Experiment Aligned(int token_period, int kv_period) {
  Experiment e;
  e.prediction = PredictionMode::kShadow;
  e.token_period = token_period;
  e.kv_period = kv_period;
  return e;
}

TEST_CASE("cluster: per-request experiments keep the tokens and use the setup asked for",
          "[cluster][bench]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  auto cluster = TestCluster::Start(cfg).value();
  struct Case {
    Experiment experiment;
    PredictionMode mode;
    int token_period, kv_period;
  };
  Experiment none, random;
  none.prediction = PredictionMode::kNone;
  random.prediction = PredictionMode::kRandom;
  const std::vector<Case> cases = {{Aligned(1, 1), PredictionMode::kShadow, 1, 1},
                                   {Aligned(1, 0), PredictionMode::kShadow, 1, 0},
                                   {Aligned(0, 1), PredictionMode::kShadow, 0, 1},
                                   {Aligned(0, 0), PredictionMode::kShadow, 0, 0},
                                   {Aligned(2, 4), PredictionMode::kShadow, 2, 4},
                                   {random, PredictionMode::kRandom, 0, 0},
                                   {none, PredictionMode::kNone, 0, 0}};
  double aligned_recall = 0, unaligned_recall = 1;
  for (const Case& c : cases) {
    INFO(PredictionModeName(c.mode) << " " << c.token_period << "/" << c.kv_period);
    // A shadow run in which none of the shadow's predictions arrived in time
    // (a loaded machine under a sanitizer: ASan in CI saw it with the shadow
    // 0/1) is run again; one of three must have scored slots.
    auto generate = [&] {
      return cluster->main().Generate(Request(), nullptr, {}, "grpc", c.experiment);
    };
    const absl::StatusOr<ClusterGenerateResult> r =
        c.mode == PredictionMode::kShadow ? GenerateUntilPredicted(generate) : generate();
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == ReferenceTokens());
    CHECK(r->prediction == c.mode);
    CHECK(r->token_period == c.token_period);
    CHECK(r->kv_period == c.kv_period);
    CHECK(r->bytes.to_workers > 0);
    CHECK(r->bytes.from_workers > 0);
    if (c.mode == PredictionMode::kShadow) {
      CHECK(r->bytes.to_shadow > 0);
      CHECK(r->bytes.from_shadow > 0);
      CHECK(r->recall.slots > 0);
    } else {
      CHECK(r->bytes.to_shadow == 0);
    }
    if (c.token_period == 1 && c.kv_period == 1) aligned_recall = r->recall.overall;
    if (c.mode == PredictionMode::kShadow && c.token_period == 0 && c.kv_period == 0) {
      unaligned_recall = r->recall.overall;
    }
  }
  CHECK(aligned_recall >= 0.9);
  CHECK(aligned_recall >= unaligned_recall);

  // Over gRPC too, and bad experiments are refused with a reason.
  v1::GenerateRequest req;
  req.set_prompt(Request().prompt);
  req.set_max_tokens(4);
  req.mutable_experiment()->set_prediction("psychic");
  auto bad = GenerateOnMain(cluster->main_address(), req, nullptr);
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad.status().message()).find("psychic") != std::string::npos);
  req.mutable_experiment()->set_prediction("none");
  auto good = GenerateOnMain(cluster->main_address(), req, nullptr);
  REQUIRE(good.ok());
  CHECK(good->prediction() == "none");
  Experiment one_sided;
  one_sided.token_period = 1;
  auto r = cluster->main().Generate(Request(), nullptr, {}, "grpc", one_sided);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cluster: a shadow experiment on a cluster without a shadow is refused",
          "[cluster][bench]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg).value();
  auto r = cluster->main().Generate(Request(), nullptr, {}, "grpc", Aligned(1, 1));
  REQUIRE(!r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(r.status().message()).find("shadow") != std::string::npos);
}

TEST_CASE("cluster: LRU-cache workers keep their last experts and give the same tokens",
          "[cluster][bench]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.worker_mode = WorkerMode::kLruCache;
  cfg.cache_experts = 12;  // more than the 8 layers: below that, LRU thrashes (no hits)
  auto cluster = TestCluster::Start(cfg).value();
  auto r = cluster->main().Generate(Request(), nullptr);
  REQUIRE(r.ok());
  CHECK(r->result.output_ids == ReferenceTokens());
  uint64_t hits = 0, misses = 0;
  for (int i = 0; i < 2; ++i) {
    const WorkerStats s = cluster->worker(i).core().stats();
    CHECK(s.slots == 12);
    CHECK(s.peak_held <= 12);
    CHECK(s.held == s.peak_held);  // nothing is evicted after a task: the cache stays full
    hits += s.hits;
    misses += s.misses;
  }
  CHECK(hits > 0);    // repeats of a recent expert
  CHECK(misses > 0);  // 64 experts do not fit in 12 slots
  CHECK(r->experts.hits == hits);

  // An LRU cluster takes no prediction experiments.
  Experiment random;
  random.prediction = PredictionMode::kRandom;
  auto refused = cluster->main().Generate(Request(), nullptr, {}, "grpc", random);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cluster: an emulated load bandwidth makes every load take its time",
          "[cluster][bench]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  // 96 KiB experts at 48 MB/s: >= 2 ms a load.
  cfg.load_bandwidth = 48'000'000;
  auto cluster = TestCluster::Start(cfg).value();
  GenerateRequest req = Request();
  req.max_tokens = 4;
  auto r = cluster->main().Generate(req, nullptr);
  REQUIRE(r.ok());
  for (int i = 0; i < 2; ++i) {
    const WorkerStats s = cluster->worker(i).core().stats();
    REQUIRE(s.loads > 0);
    CHECK(s.load_bandwidth == cfg.load_bandwidth);
    CHECK(s.load_seconds / s.loads >= 0.95 * s.expert_bytes / 48e6);
  }
  // Load after the gate: every decode task waits for its load.
  CHECK(r->experts.stall_seconds >= 3 * 2 * 8 * 0.9 * 98304 / 48e6);
}

TEST_CASE("cluster: an emulated link delay slows every hop and keeps the tokens",
          "[cluster][bench]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.wire_delay_us = 2000;  // 2 ms each way
  auto cluster = TestCluster::Start(cfg).value();
  GenerateRequest req = Request();
  req.max_tokens = 6;
  auto r = cluster->main().Generate(req, nullptr);
  REQUIRE(r.ok());
  std::vector<int32_t> want = ReferenceTokens();
  want.resize(6);
  CHECK(r->result.output_ids == want);
  // Each decode iteration sends 8 layers' tasks and waits for their results:
  // at least 8 round trips of 2 x 2 ms.
  const double per_token = r->result.stats.decode_seconds / 5;
  CHECK(per_token >= 8 * 2 * 0.002);
}

TEST_CASE("delay line: in order, late by the delay, not cumulative, dropped at close",
          "[cluster][bench]") {
  using Clock = std::chrono::steady_clock;
  std::mutex mu;
  std::vector<std::pair<int, Clock::time_point>> seen;
  const auto t0 = Clock::now();
  {
    DelayLine line(absl::Milliseconds(20));
    CHECK(line.active());
    for (int i = 0; i < 5; ++i) {
      line.Push([&, i] {
        std::lock_guard<std::mutex> lock(mu);
        seen.emplace_back(i, Clock::now());
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    line.Push([&] {  // still in flight when the line closes: dropped
      std::lock_guard<std::mutex> lock(mu);
      seen.emplace_back(99, Clock::now());
    });
  }
  REQUIRE(seen.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(seen[static_cast<size_t>(i)].first == i);
    const double ms = std::chrono::duration<double, std::milli>(seen[i].second - t0).count();
    CHECK(ms >= 19.9);
    CHECK(ms < 150);  // five pushed together arrive together, not 5 x 20 ms apart
  }
  DelayLine none(absl::ZeroDuration());
  CHECK(!none.active());
  bool ran = false;
  none.Push([&] { ran = true; });
  CHECK(ran);
}

TEST_CASE("cluster: every node records its timing spans over Node.Trace", "[cluster][bench]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  auto cluster = TestCluster::Start(cfg).value();
  std::vector<std::string> addresses = {cluster->main_address()};
  // In-process nodes: the main node's spans through the RPC, the others' directly.
  auto op = TestAuth(cluster->topology(), PeerRole::kOperator, "operator");
  REQUIRE(TraceNode(cluster->main_address(), v1::TraceRequest::START, op.get()).ok());
  cluster->shadow()->trace().Start(10000);
  for (int i = 0; i < 4; ++i) cluster->worker(i).trace().Start(10000);
  GenerateRequest req = Request();
  req.max_tokens = 6;
  auto r = cluster->main().Generate(req, nullptr);
  REQUIRE(r.ok());
  auto main_trace = CollectTrace(cluster->main_address(), op.get());
  REQUIRE(main_trace.ok());
  CHECK(main_trace->reply.node_id() == "main");
  CHECK(main_trace->rtt_us >= 0);
  CHECK(std::abs(main_trace->offset_us) < 1'000'000);  // one machine, one clock
  std::set<std::pair<uint32_t, int32_t>> m_spans;
  int heads = 0, waits = 0;
  for (const v1::TraceEvent& e : main_trace->reply.events()) {
    CHECK(e.request() == r->request_id);
    CHECK(e.duration_us() >= 0);
    if (e.name() == "M") m_spans.insert({e.token(), e.layer()});
    if (e.name() == "head") ++heads;
    if (e.name() == "experts") ++waits;
  }
  // Prefill (token 0) and decode iterations 1..5: every layer once.
  CHECK(m_spans.size() == 6 * 8);
  CHECK(waits == 6 * 8);
  CHECK(heads >= 5);
  // Tracing stopped: nothing more is recorded.
  CHECK(!cluster->main().trace().enabled());

  // The shadow ends its side of the request on its own time: wait for it,
  // then every iteration it computed has one S span per layer. How many it
  // computed depends on its speed (a shadow slower than the main node skips
  // the iterations the main node already finished, as under a sanitizer).
  std::map<std::string, std::string> shadow_status;
  for (int i = 0; i < 1000; ++i) {
    v1::NodeStatus status;
    cluster->shadow()->FillStatus(&status);
    shadow_status.clear();
    for (const auto& entry : status.entries()) shadow_status[entry.key()] = entry.value();
    if (shadow_status["requests_finished"] == "1") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(shadow_status["requests_finished"] == "1");
  const std::vector<TraceEvent> shadow = cluster->shadow()->trace().Stop();
  int s_events = 0;
  for (const TraceEvent& e : shadow) {
    if (e.name != "S") continue;
    ++s_events;
    CHECK(e.request == r->request_id);
    CHECK(e.token >= 1);
    CHECK(e.token <= static_cast<uint32_t>(req.max_tokens));
    CHECK(e.layer >= 0);
    CHECK(e.layer < 8);
  }
  CHECK(std::to_string(s_events / 8) == shadow_status["iterations"]);
  CHECK(s_events % 8 == 0);
  int loads = 0, computes = 0;
  for (int i = 0; i < 4; ++i) {
    for (const TraceEvent& e : cluster->worker(i).trace().Stop()) {
      CHECK(e.expert >= 0);
      CHECK(e.layer >= 0);
      if (e.name == "EL") ++loads;
      if (e.name == "EC") ++computes;
    }
  }
  CHECK(computes >= 5 * 8 * 2);  // decode: 2 experts per layer
  CHECK(loads >= 1);
}

}  // namespace
}  // namespace odmoe::test
