// The main node's outgoing channels accept replies only as large as a reply
// can legitimately be: a worker that answers with more than an expert result
// of a prefill mini-batch loses its stream (gRPC RESOURCE_EXHAUSTED) instead
// of making the main node take up to 256 MiB. A stand-in worker (a real gRPC
// server answering the handshake) sends one normal and one oversized result.
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "main_node/cluster_links.h"
#include "model/model_file.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

class FakeNode final : public v1::Node::Service {
 public:
  explicit FakeNode(uint64_t fingerprint) : fingerprint_(fingerprint) {}
  grpc::Status Handshake(grpc::ServerContext*, const v1::Hello*, v1::Welcome* w) override {
    w->set_protocol_version(kProtocolVersion);
    w->set_role(v1::ROLE_WORKER);
    w->set_node_id("w0");
    w->set_model_fingerprint(fingerprint_);
    w->mutable_worker()->set_worker_index(0);
    return grpc::Status::OK;
  }

 private:
  const uint64_t fingerprint_;
};

// Answers each task with a result whose output carries `bytes_for(task_id)` bytes.
class FakeWorker final : public v1::Worker::Service {
 public:
  grpc::Status Experts(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ExpertResult, v1::WorkerRequest>* stream) override {
    v1::WorkerRequest req;
    while (stream->Read(&req)) {
      v1::ExpertResult r;
      r.set_task_id(req.task().task_id());
      r.mutable_output()->set_data(std::string(req.task().task_id() == 1 ? 1024 : 8 << 20, 'x'));
      stream->Write(r);
    }
    return grpc::Status::OK;
  }
};

}  // namespace

TEST_CASE("links: a worker's reply larger than an expert result is refused", "[cluster][limits]") {
  ClusterConfig cfg;
  cfg.workers = 1;
  cfg.group_size = 1;
  cfg.prediction = PredictionMode::kNone;
  Topology t = MakeTopology(cfg);
  auto model = ModelFile::Open(t.model).value();
  FakeNode node(model->fingerprint());
  FakeWorker worker;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&node);
  builder.RegisterService(&worker);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server);
  t.workers[0].address = absl::StrCat("127.0.0.1:", port);

  auto auth = TestAuth(t, PeerRole::kMain, "main");
  auto links = ClusterLinks::Create(t, model->config(), "main", model->fingerprint(), *auth);
  std::atomic<bool> cancel{false};
  REQUIRE(links->Connect(cancel).ok());
  v1::WorkerRequest task;
  task.mutable_task()->set_task_id(1);
  REQUIRE(links->SendToWorker(0, task).ok());
  absl::StatusOr<v1::ExpertResult> small = links->TakeResult(1, 0, absl::Seconds(10));
  REQUIRE(small.ok());
  CHECK(small->output().data().size() == 1024);

  task.mutable_task()->set_task_id(2);
  REQUIRE(links->SendToWorker(0, task).ok());
  absl::StatusOr<v1::ExpertResult> big = links->TakeResult(2, 0, absl::Seconds(10));
  INFO(big.status());
  CHECK(absl::IsUnavailable(big.status()));
  CHECK(big.status().message().find("dropped its stream") != std::string::npos);
  CHECK(!links->worker_connected(0));
  links->Close();
  server->Shutdown();
}

}  // namespace odmoe::test
