// A worker's counters travel as typed WorkerStats fields (proto/odmoe.proto):
// every field arrives at the main node with the worker's value, every field
// is written out for people, and an impossible or foreign answer is refused.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cluster/node_probe.h"
#include "cluster/node_stats.h"
#include "cluster/protocol.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

using google::protobuf::FieldDescriptor;

// A field of a WorkerStats as a number (int32, uint64, double or enum).
double FieldValue(const v1::WorkerStats& s, const FieldDescriptor* f) {
  const auto* r = s.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return r->GetInt32(s, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return static_cast<double>(r->GetUInt64(s, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return r->GetDouble(s, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return r->GetEnumValue(s, f);
    default:
      FAIL("WorkerStats." << f->name() << " has a type this test does not know");
      return 0;
  }
}

void SetField(v1::WorkerStats* s, const FieldDescriptor* f, int v) {
  const auto* r = s->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      r->SetInt32(s, f, v);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->SetUInt64(s, f, static_cast<uint64_t>(v));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      r->SetDouble(s, f, v + 0.5);
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      r->SetEnumValue(s, f, v);
      break;
    default:
      FAIL("WorkerStats." << f->name() << " has a type this test does not know");
  }
}

// A worker's status that passes the check: 2 of 4 slots held, slot 1 of 2.
v1::NodeStatus ValidWorkerStatus() {
  v1::NodeStatus st;
  st.set_protocol_version(kProtocolVersion);
  st.set_role(v1::ROLE_WORKER);
  st.set_node_id("w1");
  v1::WorkerStats* w = st.mutable_worker();
  w->set_group_size(2);
  w->set_index_in_group(1);
  w->set_slots(4);
  w->set_experts_held(2);
  w->set_experts_held_peak(3);
  w->set_mode(v1::WORKER_MEMORY_MODE_ON_DEMAND);
  w->set_stall_seconds(0.25);
  return st;
}

std::string Text(const StatusText& entries) {
  std::string out;
  for (const auto& [k, v] : entries) absl::StrAppend(&out, k, "=", v, "\n");
  return out;
}

}  // namespace

TEST_CASE("worker stats: every field is written out for people", "[stats]") {
  const auto* d = v1::WorkerStats::descriptor();
  const v1::WorkerStats base = ValidWorkerStatus().worker();
  const std::string before = Text(WorkerStatsEntries(base));
  std::set<std::string> keys;
  for (const auto& [k, v] : WorkerStatsEntries(base)) CHECK(keys.insert(k).second);
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    INFO("WorkerStats." << f->name());
    v1::WorkerStats changed = base;
    SetField(&changed, f, static_cast<int>(FieldValue(base, f)) + 1);
    REQUIRE(FieldValue(changed, f) != FieldValue(base, f));
    CHECK(Text(WorkerStatsEntries(changed)) != before);
  }
  CHECK(WorkerMemoryModeName(v1::WORKER_MEMORY_MODE_LRU_CACHE) == "lru_cache");
  CHECK(Text(ProcessStatsEntries(v1::ProcessStats())) ==
        "process_rss_bytes=0\nprocess_peak_rss_bytes=0\nprocess_cpu_seconds=0.000000\n");
}

TEST_CASE("worker stats: a status is checked before its counters are used", "[stats]") {
  REQUIRE(ValidateNodeStatus(ValidWorkerStatus(), "a:1").ok());
  auto refused = [](const v1::NodeStatus& st, const std::string& why) {
    const absl::Status s = ValidateNodeStatus(st, "a:1");
    INFO(s.message());
    CHECK(!s.ok());
    CHECK(s.message().find(why) != std::string::npos);
    return s.code();
  };
  v1::NodeStatus st = ValidWorkerStatus();
  st.set_protocol_version(kProtocolVersion - 1);
  CHECK(refused(st, "protocol version") == absl::StatusCode::kFailedPrecondition);
  st = ValidWorkerStatus();
  st.clear_worker();
  CHECK(refused(st, "without its worker stats") == absl::StatusCode::kInvalidArgument);
  st = ValidWorkerStatus();
  st.set_role(v1::ROLE_SHADOW);
  refused(st, "not a worker");
  st = ValidWorkerStatus();
  st.mutable_worker()->set_experts_held(5);
  refused(st, "worker.experts_held is 5");
  st = ValidWorkerStatus();
  st.mutable_worker()->set_experts_held_peak(-1);
  refused(st, "worker.experts_held_peak");
  st = ValidWorkerStatus();
  st.mutable_worker()->set_index_in_group(2);
  refused(st, "worker.index_in_group is 2");
  st = ValidWorkerStatus();
  st.mutable_worker()->set_group_size(0);
  refused(st, "worker.group_size");
  st = ValidWorkerStatus();
  st.mutable_worker()->set_mode(v1::WORKER_MEMORY_MODE_UNSPECIFIED);
  refused(st, "worker.mode");
  st = ValidWorkerStatus();
  st.mutable_worker()->set_stall_seconds(std::nan(""));
  refused(st, "worker.stall_seconds");
  st = ValidWorkerStatus();
  st.mutable_worker()->set_compute_seconds(-1);
  refused(st, "worker.compute_seconds");
  st = ValidWorkerStatus();
  st.mutable_process()->set_cpu_seconds(INFINITY);
  refused(st, "process.cpu_seconds");
}

TEST_CASE("worker stats: every field arrives at the main node with the worker's value",
          "[stats][cluster]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  // Shadow predictions leave experts held; random hints make the workers
  // prefetch experts the gate then does not pick (misses, reloads): between
  // the two runs every counter but task_errors, hints_rejected and
  // hints_stale (and host_computes, admissions, substitutions: policies
  // these workers do not run) is not 0, so one that is not carried shows.
  cfg.prediction = GENERATE(PredictionMode::kShadow, PredictionMode::kRandom);
  INFO("prediction " << PredictionModeName(cfg.prediction));
  cfg.load_bandwidth = 4'000'000'000;  // so that field is not 0 either (a 96 KiB load: 25 us)
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  GenerateRequest req;
  req.prompt = "Once upon a time";
  req.max_tokens = 6;
  req.ignore_eos = true;
  REQUIRE(c.main().Generate(req, nullptr).ok());
  const auto* d = v1::WorkerStats::descriptor();
  for (int i = 0; i < c.n_workers(); ++i) {
    const WorkerCore& core = c.worker(i).core();
    const WorkerPlacement& p = core.placement();
    // What the worker has, field by field (the name is the proto field's).
    auto expected_now = [&core, &p](WorkerStats* s) {
      *s = core.stats();
      return std::map<std::string, double>{
          {"group", p.group()},
          {"index_in_group", p.index_in_group()},
          {"group_size", p.group_size},
          {"experts_per_layer",
           static_cast<double>(p.positions(core.model().config().n_expert_used).size())},
          {"mode", v1::WORKER_MEMORY_MODE_ON_DEMAND},
          {"load_bandwidth_bytes_per_second", static_cast<double>(s->load_bandwidth)},
          {"memory_budget_bytes", static_cast<double>(s->memory_budget)},
          {"expert_bytes", static_cast<double>(s->expert_bytes)},
          {"slots", s->slots},
          {"experts_held", s->held},
          {"experts_held_peak", s->peak_held},
          {"memory_peak_bytes", static_cast<double>(s->peak_bytes)},
          {"tasks", static_cast<double>(s->tasks)},
          {"task_errors", static_cast<double>(s->task_errors)},
          {"hits", static_cast<double>(s->hits)},
          {"misses", static_cast<double>(s->misses)},
          {"reloads", static_cast<double>(s->reloads)},
          {"step_experts_peak", static_cast<double>(s->step_experts_peak)},
          {"loads", static_cast<double>(s->loads)},
          {"bytes_loaded", static_cast<double>(s->bytes_loaded)},
          {"load_seconds", s->load_seconds},
          {"compute_seconds", s->compute_seconds},
          {"stall_seconds", s->stall_seconds},
          {"hints_received", static_cast<double>(s->hints_received)},
          {"hints_rejected", static_cast<double>(s->hints_rejected)},
          {"hints_stale", static_cast<double>(s->hints_stale)},
          {"host_computes", static_cast<double>(s->host_computes)},
          {"admissions", static_cast<double>(s->admissions)},
          {"substitutions", static_cast<double>(s->substitutions)},
      };
    };
    // What the main node reads (its metrics poller probes the same way). Hints of
    // the shadow running ahead may still arrive: compare a quiet moment.
    const std::string& address = c.topology().workers[static_cast<size_t>(i)].address;
    WorkerStats s;
    std::map<std::string, double> expected;
    absl::StatusOr<NodeProbe> probe;
    for (int attempt = 0; attempt < 100; ++attempt) {
      expected = expected_now(&s);
      probe = ProbeNode(address, absl::Seconds(5));
      REQUIRE(probe.ok());
      REQUIRE(probe->worker.has_value());
      bool same = true;
      for (int k = 0; k < d->field_count(); ++k) {
        const FieldDescriptor* f = d->field(k);
        same = same && expected.count(f->name()) == 1 &&
               FieldValue(*probe->worker, f) == expected.at(f->name());
      }
      if (same) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // The worker did something, so a counter left at 0 would show.
    CHECK(s.tasks > 0);
    CHECK(s.bytes_loaded > 0);
    CHECK(s.compute_seconds > 0);
    CHECK(probe->process.peak_rss_bytes() > 0);
    CHECK(s.load_bandwidth == cfg.load_bandwidth);
    REQUIRE(d->field_count() == static_cast<int>(expected.size()));
    for (int k = 0; k < d->field_count(); ++k) {
      const FieldDescriptor* f = d->field(k);
      INFO("worker " << i << ": WorkerStats." << f->name());
      REQUIRE(expected.count(f->name()) == 1);
      CHECK(FieldValue(*probe->worker, f) == expected.at(f->name()));
    }
    const std::string id = c.topology().workers[static_cast<size_t>(i)].id;
    // The main node's series as a probe now finds them (its poller's next
    // refresh, made at once), compared at a quiet moment: a shadow's late
    // hints may still change the counters between the two.
    std::string metrics;
    WorkerStats now;
    for (int attempt = 0; attempt < 100; ++attempt) {
      now = core.stats();
      c.main().RefreshWorkerMetrics();
      metrics = c.main().RenderMetrics();
      const WorkerStats after = core.stats();
      if (after.hits == now.hits && after.bytes_loaded == now.bytes_loaded &&
          after.held == now.held) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    INFO(metrics);
    CHECK(metrics.find(absl::StrCat("odmoe_worker_hits_total{worker=\"", id, "\"} ", now.hits,
                                    "\n")) != std::string::npos);
    CHECK(metrics.find(absl::StrCat("odmoe_worker_bytes_loaded_total{worker=\"", id, "\"} ",
                                    now.bytes_loaded, "\n")) != std::string::npos);
    CHECK(metrics.find(absl::StrCat("odmoe_worker_memory_in_use_bytes{worker=\"", id, "\"} ",
                                    now.expert_bytes * static_cast<uint64_t>(now.held), "\n")) !=
          std::string::npos);
  }
}

}  // namespace odmoe::test
