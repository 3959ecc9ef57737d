// A shadow whose Follow stream is open but silent (it answers the handshake,
// takes the stream, and never replies: what a stolen channel looked like
// before issue 18) does not disable prediction for good: after two silent
// requests the main node reopens the stream, and meanwhile the last recall
// reads 0 (metrics_test.cpp: not the value of an earlier request).
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "model/model_file.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

class SilentShadow final : public v1::Node::Service, public v1::Shadow::Service {
 public:
  explicit SilentShadow(uint64_t fingerprint) : fingerprint_(fingerprint) {}
  grpc::Status Handshake(grpc::ServerContext*, const v1::Hello*, v1::Welcome* w) override {
    w->set_protocol_version(kProtocolVersion);
    w->set_role(v1::ROLE_SHADOW);
    w->set_node_id("shadow");
    w->set_model_fingerprint(fingerprint_);
    return grpc::Status::OK;
  }
  grpc::Status Follow(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ShadowReply, v1::ShadowRequest>* stream) override {
    ++streams;
    v1::ShadowRequest req;
    while (stream->Read(&req)) {
    }
    return grpc::Status::OK;
  }
  std::atomic<int> streams{0};

 private:
  const uint64_t fingerprint_;
};

std::string StatusValue(MainNode& main, const std::string& key) {
  v1::NodeStatus status;
  main.FillStatus(&status);
  for (const auto& e : status.entries()) {
    if (e.key() == key) return e.value();
  }
  return "";
}

}  // namespace

TEST_CASE("streams: a silent shadow stream is reopened and recall reads 0 meanwhile",
          "[cluster][streams][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.group_size = 2;
  Topology t = MakeTopology(cfg);
  auto model = ModelFile::Open(t.model).value();
  SilentShadow shadow(model->fingerprint());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(static_cast<v1::Node::Service*>(&shadow));
  builder.RegisterService(static_cast<v1::Shadow::Service*>(&shadow));
  std::unique_ptr<grpc::Server> shadow_server = builder.BuildAndStart();
  REQUIRE(shadow_server);
  t.shadow->address = absl::StrCat("127.0.0.1:", port);

  std::vector<std::unique_ptr<WorkerNode>> workers;
  std::vector<std::unique_ptr<NodeServer>> servers;
  for (WorkerSpec& w : t.workers) {
    auto node = WorkerNode::Create(t, w.id);
    REQUIRE(node.ok());
    auto server = NodeServer::Start("127.0.0.1:0", **node);
    REQUIRE(server.ok());
    w.address = absl::StrCat("127.0.0.1:", (*server)->port());
    REQUIRE((*node)->Start().ok());
    workers.push_back(std::move(*node));
    servers.push_back(std::move(*server));
  }
  auto main = MainNode::Create(t, "main");
  REQUIRE(main.ok());
  auto main_server = NodeServer::Start("127.0.0.1:0", **main);
  REQUIRE(main_server.ok());
  REQUIRE((*main)->Start().ok());
  for (int i = 0; i < 500 && (*main)->state() != v1::NODE_STATE_READY; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE((*main)->state() == v1::NODE_STATE_READY);
  REQUIRE(shadow.streams == 1);

  GenerateRequest req;
  req.prompt = "Once upon a time";
  req.max_tokens = 4;
  req.ignore_eos = true;
  for (int i = 0; i < 2; ++i) {
    auto r = (*main)->Generate(req, nullptr);
    REQUIRE(r.ok());
    CHECK(r->prediction == PredictionMode::kShadow);
    CHECK(r->recall.slots == 0);  // nothing predicted
    CHECK(StatusValue(**main, "last_recall") == "0.0000");
  }
  // After the second silent request the stream is ended and reopened.
  for (int i = 0; i < 100 && shadow.streams < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(shadow.streams >= 2);

  (*main)->Shutdown();
  (*main_server)->Shutdown(absl::Seconds(1));
  for (auto& w : workers) w->Shutdown();
  for (auto& s : servers) s->Shutdown(absl::Seconds(1));
  shadow_server->Shutdown();
}

}  // namespace odmoe::test
