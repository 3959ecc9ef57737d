// PeerLink (common/cluster/peer_link.h), the one link type of every node
// that dials another: against real workers, its handshake and Welcome check,
// errors that name the peer, Reset, the rejoin loop, and writes after Close.
#include "cluster/peer_link.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "test_cluster.h"

namespace odmoe::test {
namespace {

using ExpertStream = grpc::ClientReaderWriter<v1::WorkerRequest, v1::ExpertResult>;

PeerLink<ExpertStream>::Open OpenExperts() {
  return [](const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx) {
    return v1::Worker::NewStub(channel)->Experts(ctx);
  };
}

// Waits up to 10 s for `done`.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 200; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

}  // namespace

TEST_CASE("peer link: handshake, welcome check, reset, rejoin, close", "[cluster][links][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const Topology& t = c.topology();
  auto auth = TestAuth(t, PeerRole::kMain, t.main.id);
  const PeerDialer dialer{MakeHello(v1::ROLE_MAIN, t.main.id, c.worker(0).model_fingerprint()),
                          auth.get()};
  const std::atomic<bool> cancel{false};
  const WorkerSpec& w0 = t.workers[0];

  SECTION("a peer that is not the one expected is refused") {
    PeerTarget target{.kind = "worker", .id = w0.id, .address = w0.address, .stream = "expert"};
    target.check_welcome = [](const v1::Welcome& w) {
      return w.worker().worker_index() == 1 ? absl::OkStatus()
                                            : absl::FailedPreconditionError("not worker 1");
    };
    PeerLink<ExpertStream> link(target, dialer, OpenExperts(), [](ExpertStream& s) {
      v1::ExpertResult r;
      while (s.Read(&r)) {
      }
    });
    const absl::Status s = link.Connect(cancel, absl::Seconds(5));
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(s.message() == "not worker 1");
    CHECK(!link.connected());
    CHECK(link.Write(v1::WorkerRequest()) == PeerWrite::kNotConnected);
  }

  SECTION("a peer that does not answer is named in the error") {
    PeerTarget target{.kind = "worker", .id = "w9", .address = "127.0.0.1:1", .stream = "expert"};
    PeerLink<ExpertStream> link(target, dialer, OpenExperts(), [](ExpertStream& s) {
      v1::ExpertResult r;
      while (s.Read(&r)) {
      }
    });
    const absl::Status s = link.Connect(cancel, absl::Milliseconds(300));
    INFO(s.message());
    CHECK(!s.ok());
    CHECK(s.message().find("worker w9 at 127.0.0.1:1: ") == 0);
  }

  SECTION("a reset link is reopened by the rejoin loop, a closed one is not") {
    PeerTarget target{.kind = "worker", .id = w0.id, .address = w0.address, .stream = "expert"};
    std::atomic<int> ended{0};
    PeerLink<ExpertStream> link(
        target, dialer, OpenExperts(),
        [](ExpertStream& s) {
          v1::ExpertResult r;
          while (s.Read(&r)) {
          }
        },
        [&ended] { ++ended; });
    REQUIRE(link.Connect(cancel, absl::Seconds(5)).ok());
    CHECK(link.connected());
    CHECK(!link.NeedsRejoin());
    CHECK(link.Reset("test"));
    CHECK(!link.Reset("again"));  // already broken: nothing to do
    CHECK(link.NeedsRejoin());
    CHECK(Eventually([&] { return ended.load() == 1; }));  // the reader saw the end
    {
      PeerRejoin rejoin({&link});
      CHECK(Eventually([&] { return link.connected(); }));
    }
    CHECK(ended.load() == 1);  // the reopened stream still runs
    link.Close();
    CHECK(!link.connected());
    CHECK(ended.load() == 2);
    CHECK(link.Write(v1::WorkerRequest()) == PeerWrite::kNotConnected);
  }
}

}  // namespace odmoe::test
