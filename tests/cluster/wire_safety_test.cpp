// Bad input on the wire is rejected with a status and never crashes a node:
// malformed tasks, hints, shadow requests, refused handshakes.
#include <catch2/catch.hpp>

#include <thread>

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "cluster/wire.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

v1::ExpertTask GoodTask(int n_embd, uint32_t layer, uint32_t expert, uint32_t token) {
  v1::ExpertTask t;
  t.set_task_id(7);
  t.mutable_key()->set_request(1);
  t.mutable_key()->set_token(token);
  t.mutable_key()->set_layer(layer);
  t.set_expert(expert);
  std::vector<float> x(static_cast<size_t>(n_embd), 0.5f);
  EncodeRows(x.data(), 1, n_embd, v1::WIRE_DTYPE_F32, t.mutable_input());
  return t;
}

}  // namespace

TEST_CASE("worker: malformed tasks and hints get an error, the worker carries on",
          "[cluster]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  Topology t = MakeTopology(cfg);
  auto worker = WorkerNode::Create(t, "w0");
  REQUIRE(worker.ok());
  WorkerCore& core = (*worker)->core();
  std::mutex mu;
  std::vector<v1::ExpertResult> results;
  core.AttachSink(1, [&](const v1::ExpertResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(r);
  });
  const int d = 128;
  std::vector<v1::ExpertTask> bad;
  bad.push_back(GoodTask(d, 8, 0, 1));   // layer out of range
  bad.push_back(GoodTask(d, 0, 8, 1));   // expert out of range
  bad.push_back(GoodTask(d, 0, 0, 1));
  bad.back().mutable_input()->set_cols(64);  // wrong width
  bad.push_back(GoodTask(d, 0, 0, 1));
  bad.back().mutable_input()->mutable_data()->resize(10);  // truncated data
  bad.push_back(GoodTask(d, 0, 0, 1));
  bad.back().mutable_input()->set_rows(1000);  // more rows than a task may carry
  bad.push_back(GoodTask(d, 0, 0, 0));
  bad.back().set_mini_batch(3);  // mini-batch 3 of 2
  bad.back().set_mini_batches(2);
  bad.push_back(v1::ExpertTask());  // empty
  for (const v1::ExpertTask& task : bad) CHECK(!core.SubmitTask(task).ok());
  CHECK(core.SubmitTask(GoodTask(d, 3, 5, 1)).ok());
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (results.size() == bad.size() + 1) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<v1::ExpertResult> got;
  {
    // A copy: mu is not held past here (the worker calls the sink under its
    // own lock, and DetachSink below takes that lock).
    std::lock_guard<std::mutex> lock(mu);
    got = results;
  }
  REQUIRE(got.size() == bad.size() + 1);
  for (size_t i = 0; i < bad.size(); ++i) {
    CHECK(got[i].error_code() == static_cast<int>(absl::StatusCode::kInvalidArgument));
    CHECK(!got[i].error_message().empty());
  }
  CHECK(got.back().error_code() == 0);
  CHECK(got.back().output().rows() == 1);
  CHECK(got.back().output().data().size() == d * sizeof(float));

  v1::Hint hint;
  hint.mutable_key()->set_token(1);
  hint.add_experts(1);
  CHECK(!core.AddHint(hint).ok());  // one expert for top-2
  hint.add_experts(1);
  CHECK(!core.AddHint(hint).ok());  // repeated
  hint.set_experts(1, 2);
  hint.mutable_key()->set_layer(99);
  CHECK(!core.AddHint(hint).ok());  // bad layer
  hint.mutable_key()->set_layer(1);
  hint.mutable_key()->set_token(0);
  CHECK(!core.AddHint(hint).ok());  // prefill has no hints
  hint.mutable_key()->set_token(2);
  CHECK(core.AddHint(hint).ok());
  const WorkerStats s = core.stats();
  CHECK(s.hints_rejected == 4);
  CHECK(s.task_errors == bad.size());
  core.DetachSink(1);
}

TEST_CASE("worker: a one-expert budget that cannot hold an expert is refused", "[cluster]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  Topology t = MakeTopology(cfg);
  t.workers[0].memory_budget = 1000;
  auto w = WorkerNode::Create(t, "w0");
  REQUIRE(!w.ok());
  CHECK(w.status().message().find("budget") != std::string::npos);
}

TEST_CASE("shadow: malformed requests are rejected", "[cluster]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  Topology t = MakeTopology(cfg);
  auto shadow = ShadowNode::Create(t, "shadow");
  REQUIRE(shadow.ok());
  // Reach the core through a Follow stream of a real server, once the shadow
  // has prepared its model (it then waits for workers that do not exist).
  auto server = NodeServer::Start("127.0.0.1:0", **shadow);
  REQUIRE(server.ok());
  REQUIRE((*shadow)->Start().ok());
  for (int i = 0; i < 3000 && !(*shadow)->ReadyForPeers().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE((*shadow)->ReadyForPeers().ok());
  auto channel = MakeChannel(absl::StrCat("127.0.0.1:", (*server)->port()));
  auto stub = v1::Shadow::NewStub(channel);
  grpc::ClientContext ctx;
  AttachCredential(ctx, TestAuth(t, PeerRole::kMain, "main").get());
  auto stream = stub->Follow(&ctx);
  std::vector<v1::ShadowRequest> bad(6);
  bad[0].mutable_begin()->set_request(5);  // no prompt
  bad[1].mutable_begin()->set_request(5);
  bad[1].mutable_begin()->add_prompt_ids(99999);  // outside the vocabulary
  bad[1].mutable_begin()->set_max_tokens(4);
  bad[2].mutable_begin()->set_request(5);
  bad[2].mutable_begin()->add_prompt_ids(1);
  bad[2].mutable_begin()->set_max_tokens(100000);  // beyond the context
  bad[3].mutable_align()->set_request(5);
  bad[3].mutable_align()->set_token(1);
  bad[3].mutable_align()->mutable_kv()->set_count(3);  // no rows for 3 positions
  bad[4].mutable_align()->set_request(5);
  bad[4].mutable_align()->set_token(1);
  bad[4].mutable_align()->set_has_token(true);
  bad[4].mutable_align()->set_token_id(-4);
  // bad[5] is empty
  for (const auto& r : bad) REQUIRE(stream->Write(r));
  int errors = 0;
  v1::ShadowReply reply;
  while (errors < 6 && stream->Read(&reply)) {
    if (reply.has_done() && reply.done().error_code() != 0) ++errors;
  }
  CHECK(errors == 6);
  stream->WritesDone();
  CHECK(stream->Finish().ok());
  (*shadow)->Shutdown();
  (*server)->Shutdown(absl::Seconds(1));
}

TEST_CASE("handshake: a worker with another model or protocol is refused", "[cluster]") {
  ClusterConfig other;
  other.workers = 2;
  other.prediction = PredictionMode::kNone;
  other.model = SourcePath("tests/data/tiny-mixtral-2layer.gguf");
  Topology wt = MakeTopology(other);
  auto w0 = WorkerNode::Create(wt, "w0");
  REQUIRE(w0.ok());
  auto server = NodeServer::Start("127.0.0.1:0", **w0);
  REQUIRE(server.ok());
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());
  auto channel = MakeChannel(address);

  v1::Hello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_role(v1::ROLE_MAIN);
  hello.set_node_id("main");
  hello.set_model_fingerprint(12345);
  auto auth = TestAuth(wt, PeerRole::kMain, "main");
  auto refused = CallHandshake(*channel, hello, absl::Seconds(5), auth.get());
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("model mismatch") != std::string::npos);

  hello.set_model_fingerprint((*w0)->model_fingerprint());
  hello.set_protocol_version(kProtocolVersion + 1);
  auto version = CallHandshake(*channel, hello, absl::Seconds(5), auth.get());
  REQUIRE(!version.ok());
  CHECK(version.status().message().find("protocol") != std::string::npos);

  hello.set_protocol_version(kProtocolVersion);
  auto ok = CallHandshake(*channel, hello, absl::Seconds(5), auth.get());
  REQUIRE(ok.ok());
  CHECK(ok->worker().worker_index() == 0);
  CHECK(ok->worker().slots() == 1);

  // A main node with the shipped model fails to start against it, saying why.
  ClusterConfig mine;
  mine.workers = 2;
  mine.prediction = PredictionMode::kNone;
  Topology mt = MakeTopology(mine);
  mt.workers[0].address = address;
  mt.workers[1].address = address;
  auto main = MainNode::Create(mt, "main");
  REQUIRE(main.ok());
  REQUIRE((*main)->Start().ok());
  for (int i = 0; i < 500 && (*main)->state() != v1::NODE_STATE_FAILED; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK((*main)->state() == v1::NODE_STATE_FAILED);
  CHECK((*main)->state_detail().find("model mismatch") != std::string::npos);
  GenerateRequest req;
  req.prompt = "hello";
  auto r = (*main)->Generate(req, nullptr);
  CHECK(absl::IsUnavailable(r.status()));
  (*main)->Shutdown();
  (*w0)->Shutdown();
  (*server)->Shutdown(absl::Seconds(1));
}

}  // namespace odmoe::test
