#include "test_cluster.h"

#include "absl/strings/numbers.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "model/expert_pack.h"
#include "model/model_file.h"
#include "util/status_macros.h"

namespace odmoe::test {

GenerateRequest TestRequest(const std::string& prompt, int max_tokens, float temperature,
                            uint64_t seed) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  return r;
}

ReferenceEngine& TinyReference() {
  static std::unique_ptr<ReferenceEngine> engine =
      ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  return *engine;
}

absl::StatusOr<ClusterGenerateResult> GenerateOnNewCluster(const ClusterConfig& config,
                                                           const GenerateRequest& request) {
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<TestCluster> cluster, TestCluster::Start(config));
  return cluster->main().Generate(request, nullptr);
}

std::vector<GenerateRequest> PolicyRequests() {
  return {TestRequest("Once upon a time", 24), TestRequest("The sea", 16, 0.8f, 3)};
}

void ExpectPolicyKeepsTokens(const ClusterConfig& config,
                             const std::function<void(const ClusterGenerateResult&)>& check) {
  auto cluster = TestCluster::Start(config);
  REQUIRE(cluster.ok());
  for (const GenerateRequest& req : PolicyRequests()) {
    INFO(PredictionModeName(config.prediction) << ": " << req.prompt);
    absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(req, nullptr);
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == TinyReference().Generate(req).value().output_ids);
    if (check) check(*r);
  }
}

absl::StatusOr<ClusterGenerateResult> GenerateUntilPredicted(
    const std::function<absl::StatusOr<ClusterGenerateResult>()>& generate,
    const std::function<void(const ClusterGenerateResult&)>& check) {
  absl::StatusOr<ClusterGenerateResult> r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = generate();
    if (!r.ok()) return r;
    if (check) check(*r);
    if (r->recall.slots > 0) break;
  }
  return r;
}

std::vector<absl::StatusOr<ClusterGenerateResult>> GenerateConcurrently(
    MainNode& main, const std::vector<GenerateRequest>& requests) {
  std::vector<absl::StatusOr<ClusterGenerateResult>> got(requests.size(),
                                                         absl::UnknownError("not run"));
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back([&, i] { got[i] = main.Generate(requests[i], nullptr); });
  }
  for (std::thread& t : clients) t.join();
  return got;
}

double MetricValue(const MainNode& main, const std::string& series) {
  const std::string text = main.RenderMetrics();
  const size_t at = text.find("\n" + series + " ");
  double v = 0;
  if (at != std::string::npos) {
    const size_t from = at + series.size() + 2;
    absl::SimpleAtod(text.substr(from, text.find('\n', from) - from), &v);
  }
  return v;
}

ClusterConfig HttpClusterConfig() {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  return cfg;
}

std::vector<std::string> HeldOutPrompts(int n) {
  std::ifstream in(SourcePath("tests/data/heldout.txt"));
  std::vector<std::string> prompts;
  std::string line;
  while (static_cast<int>(prompts.size()) < n && std::getline(in, line)) {
    if (line.size() >= 24) prompts.push_back(line.substr(0, 80));
  }
  return prompts;
}

const std::string& TestSecretFile() {
  static const std::string* path = [] {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / absl::StrCat("odmoe_test_secret_", getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto* p = new std::string((dir / kGeneratedSecretName).string());
    if (absl::Status s = WriteNewClusterSecret(*p); !s.ok()) {
      FAIL("cannot write the test cluster secret: " << s.message());
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(std::filesystem::path(TestSecretFile()).parent_path(), ignored);
    });
    return p;
  }();
  return *path;
}

std::shared_ptr<const PeerAuth> TestAuth(const Topology& topology, PeerRole role,
                                         const std::string& id) {
  absl::StatusOr<std::string> secret = LoadClusterSecret(topology.cluster_secret_file);
  REQUIRE(secret.ok());
  return std::make_shared<const PeerAuth>(*secret, role, id, topology.main.id,
                                          topology.shadow ? topology.shadow->id : "");
}

Topology MakeTopology(const ClusterConfig& c) {
  Topology t;
  t.path = "(test)";
  t.cluster_secret_file = TestSecretFile();
  t.model = c.model;
  t.prediction = c.prediction;
  t.prefill_mini_batch = c.mini_batch;
  t.wire_dtype = c.wire;
  t.group_size = c.group_size;
  if (t.group_size == 0) {  // the model's top-k
    absl::StatusOr<std::unique_ptr<ModelFile>> model = ModelFile::Open(c.model);
    t.group_size = model.ok() ? (*model)->config().n_expert_used : 2;
  }
  t.worker_mode = c.worker_mode;
  t.cache_experts = c.cache_experts;
  t.host_compute = c.host_compute;
  t.host_compute_slowdown = c.host_compute_slowdown;
  t.sub_expert = c.sub_expert;
  t.degrade = c.degrade;
  t.mixed_precision = c.mixed_precision;
  t.wire_delay_us = c.wire_delay_us;
  t.main.id = "main";
  t.main.host = "127.0.0.1";
  t.main.address = "127.0.0.1:0";
  t.main.backend = c.backend;
  t.main.batch = c.batch;
  t.main.context = c.context;
  t.main.max_queue = c.max_queue;
  t.main.max_running = c.max_running;
  t.main.worker_timeout_ms = c.worker_timeout_ms;
  t.main.api_key = c.api_key;
  if (c.max_body_bytes > 0) t.main.max_body_bytes = c.max_body_bytes;
  t.main.http_limits = c.http_limits;
  if (c.http) {
    t.main.http = "127.0.0.1:0";
    t.main.http_host = "127.0.0.1";
  }
  if (c.prediction == PredictionMode::kShadow || c.shadow || c.draft_tokens > 0) {
    ShadowSpec s;
    s.id = "shadow";
    s.host = "127.0.0.1";
    s.address = "127.0.0.1:0";
    s.backend = c.backend;
    s.quantization = c.quantization;
    s.token_period = c.token_period;
    s.kv_period = c.kv_period;
    s.draft_tokens = c.draft_tokens;
    s.draft_wait_us = c.draft_wait_us;
    t.shadow = s;
  }
  for (int i = 0; i < c.workers; ++i) {
    WorkerSpec w;
    w.id = absl::StrCat("w", i);
    w.host = "127.0.0.1";
    w.address = "127.0.0.1:0";
    w.backend = c.backend;
    w.load_bandwidth = c.load_bandwidth;
    w.memory_budget = c.memory_budget;
    t.workers.push_back(w);
  }
  return t;
}

uint64_t WorkerBudgetForSlots(const ClusterConfig& config, int slots) {
  auto model = ModelFile::Open(config.model);
  if (!model.ok()) return 0;
  const ModelConfig& c = (*model)->config();
  return WorkerCore::WorkspaceBytes(c, config.mini_batch) +
         static_cast<uint64_t>(slots) * LargestPackedExpert(c);
}

absl::StatusOr<std::unique_ptr<TestCluster>> TestCluster::Start(const ClusterConfig& config) {
  std::unique_ptr<TestCluster> c(new TestCluster());
  c->topology_ = MakeTopology(config);
  Topology& t = c->topology_;
  for (int i = 0; i < config.workers; ++i) {
    ODMOE_ASSIGN_OR_RETURN(auto w, WorkerNode::Create(t, t.workers[static_cast<size_t>(i)].id));
    ODMOE_ASSIGN_OR_RETURN(auto s, NodeServer::Start("127.0.0.1:0", *w));
    t.workers[static_cast<size_t>(i)].port = s->port();
    t.workers[static_cast<size_t>(i)].address = absl::StrCat("127.0.0.1:", s->port());
    ODMOE_RETURN_IF_ERROR(w->Start());
    c->workers_.push_back(std::move(w));
    c->worker_servers_.push_back(std::move(s));
  }
  if (t.shadow) {
    ODMOE_ASSIGN_OR_RETURN(c->shadow_, ShadowNode::Create(t, t.shadow->id));
    ODMOE_ASSIGN_OR_RETURN(c->shadow_server_, NodeServer::Start("127.0.0.1:0", *c->shadow_));
    t.shadow->port = c->shadow_server_->port();
    t.shadow->address = absl::StrCat("127.0.0.1:", t.shadow->port);
    ODMOE_RETURN_IF_ERROR(c->shadow_->Start());
  }
  ODMOE_ASSIGN_OR_RETURN(c->main_, MainNode::Create(t, t.main.id));
  ODMOE_ASSIGN_OR_RETURN(c->main_server_,
                         NodeServer::Start(config.main_listen_host + ":0", *c->main_));
  t.main.port = c->main_server_->port();
  t.main.address = absl::StrCat("127.0.0.1:", t.main.port);
  ODMOE_RETURN_IF_ERROR(c->main_->Start());
  for (int i = 0; i < 600; ++i) {
    const bool shadow_ready = !c->shadow_ || c->shadow_->state() == v1::NODE_STATE_READY;
    if (c->main_->state() == v1::NODE_STATE_READY && shadow_ready) return c;
    if (c->main_->state() == v1::NODE_STATE_FAILED) {
      return absl::UnavailableError("main failed: " + c->main_->state_detail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("test cluster did not become ready");
}

TestCluster::~TestCluster() {
  if (main_) main_->Shutdown();
  if (main_server_) main_server_->Shutdown(absl::Seconds(1));
  main_.reset();
  if (shadow_) shadow_->Shutdown();
  if (shadow_server_) shadow_server_->Shutdown(absl::Seconds(1));
  shadow_.reset();
  for (auto& w : workers_) {
    if (w) w->Shutdown();
  }
  for (auto& s : worker_servers_) {
    if (s) s->Shutdown(absl::Seconds(1));
  }
  workers_.clear();
}

std::string TestCluster::main_address() const { return topology_.main.address; }

void TestCluster::KillWorker(int i) {
  const size_t k = static_cast<size_t>(i);
  workers_[k]->Shutdown();
  worker_servers_[k]->Shutdown(absl::ZeroDuration());
  worker_servers_[k].reset();
  workers_[k].reset();
}

absl::Status TestCluster::RestartWorker(int i) {
  const size_t k = static_cast<size_t>(i);
  ODMOE_ASSIGN_OR_RETURN(workers_[k], WorkerNode::Create(topology_, topology_.workers[k].id));
  ODMOE_ASSIGN_OR_RETURN(worker_servers_[k],
                         NodeServer::Start(topology_.workers[k].address, *workers_[k]));
  return workers_[k]->Start();
}

void TestCluster::KillShadow() {
  shadow_->Shutdown();
  shadow_server_->Shutdown(absl::ZeroDuration());
  shadow_server_.reset();
  shadow_.reset();
}

absl::Status TestCluster::RestartMain() {
  main_->Shutdown();
  main_server_->Shutdown(absl::ZeroDuration());
  main_server_.reset();
  main_.reset();
  ODMOE_ASSIGN_OR_RETURN(main_, MainNode::Create(topology_, topology_.main.id));
  ODMOE_ASSIGN_OR_RETURN(main_server_, NodeServer::Start(topology_.main.address, *main_));
  ODMOE_RETURN_IF_ERROR(main_->Start());
  for (int i = 0; i < 600; ++i) {
    if (main_->state() == v1::NODE_STATE_READY) return absl::OkStatus();
    if (main_->state() == v1::NODE_STATE_FAILED) {
      return absl::UnavailableError("main failed: " + main_->state_detail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("the restarted main node did not become ready");
}

absl::Status TestCluster::RestartShadow() {
  ODMOE_ASSIGN_OR_RETURN(shadow_, ShadowNode::Create(topology_, topology_.shadow->id));
  ODMOE_ASSIGN_OR_RETURN(shadow_server_, NodeServer::Start(topology_.shadow->address, *shadow_));
  return shadow_->Start();
}

}  // namespace odmoe::test
