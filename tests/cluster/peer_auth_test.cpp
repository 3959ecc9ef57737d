// Node credentials (cluster/peer_auth.h): the secret file's checks, the
// credential's checks (MAC, replay, role, id), then through real gRPC calls:
// Main.Scale and Node.Trace take an operator's credential only, and a refused
// call changes nothing.
#include "cluster/peer_auth.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cluster/main_client.h"
#include "cluster/trace_client.h"
#include "process_testbed.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef";

PeerAuth Auth(PeerRole role, const std::string& id, const std::string& secret = kSecret) {
  return PeerAuth(secret, role, id, "main", "shadow");
}

}  // namespace

TEST_CASE("peer auth: the secret file", "[cluster][auth]") {
  TempDir dir("odmoe_secret");
  const std::string path = dir / "cluster.secret";
  CHECK(absl::IsNotFound(LoadClusterSecret(path).status()));
  REQUIRE(WriteNewClusterSecret(path).ok());
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  absl::StatusOr<std::string> secret = LoadClusterSecret(path);
  REQUIRE(secret.ok());
  CHECK(secret->size() == 64);
  CHECK(absl::IsAlreadyExists(WriteNewClusterSecret(path)));  // never overwritten
  CHECK(*LoadClusterSecret(path) == *secret);

  chmod(path.c_str(), 0644);
  absl::Status open = LoadClusterSecret(path).status();
  CHECK(absl::IsPermissionDenied(open));
  CHECK(open.message().find("chmod 600") != std::string::npos);

  const std::string short_path = dir / "short.secret";
  std::ofstream(short_path) << "tooshort\n";
  chmod(short_path.c_str(), 0600);
  CHECK(absl::IsInvalidArgument(LoadClusterSecret(short_path).status()));

  Topology t;
  t.path = "x.yaml";
  absl::Status none = PeerAuth::ForNode(t, PeerRole::kWorker, "w0").status();
  CHECK(absl::IsFailedPrecondition(none));
  CHECK(none.message().find("cluster_secret_file") != std::string::npos);
}

TEST_CASE("peer auth: a node without the secret does not start, and says why", "[cluster][auth]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  Topology t = MakeTopology(cfg);
  t.cluster_secret_file.clear();
  for (absl::Status s :
       {WorkerNode::Create(t, "w0").status(), ShadowNode::Create(t, "shadow").status(),
        MainNode::Create(t, "main").status()}) {
    INFO(s);
    CHECK(absl::IsFailedPrecondition(s));
    CHECK(s.message().find("cluster_secret_file") != std::string::npos);
  }
  TempDir dir("odmoe_open_secret");
  t.cluster_secret_file = dir / "cluster.secret";
  std::ofstream(t.cluster_secret_file) << std::string(64, 'a');
  chmod(t.cluster_secret_file.c_str(), 0640);
  CHECK(absl::IsPermissionDenied(WorkerNode::Create(t, "w0").status()));
}

TEST_CASE("peer auth: a credential proves role and id once", "[cluster][auth]") {
  const PeerAuth worker = Auth(PeerRole::kWorker, "w0");
  const PeerAuth main = Auth(PeerRole::kMain, "main");
  const std::string cred = main.Credential();

  absl::StatusOr<PeerIdentity> who = worker.Authorize(cred, {PeerRole::kMain}, "Worker.Experts");
  REQUIRE(who.ok());
  CHECK(who->role == PeerRole::kMain);
  CHECK(who->node_id == "main");
  // The same credential again: a replay.
  CHECK(absl::IsUnauthenticated(worker.Authorize(cred, {PeerRole::kMain}, "x").status()));

  // None, garbage, another secret, a changed field.
  CHECK(absl::IsUnauthenticated(worker.Authorize(std::nullopt, {PeerRole::kMain}, "x").status()));
  CHECK(absl::IsUnauthenticated(worker.Authorize("", {PeerRole::kMain}, "x").status()));
  CHECK(absl::IsUnauthenticated(worker.Authorize("odmoe1:main", {PeerRole::kMain}, "x").status()));
  CHECK(absl::IsUnauthenticated(
      worker.Authorize(std::string(600, 'a'), {PeerRole::kMain}, "x").status()));
  const PeerAuth stranger = Auth(PeerRole::kMain, "main", std::string(32, 'z'));
  CHECK(absl::IsUnauthenticated(
      worker.Authorize(stranger.Credential(), {PeerRole::kMain}, "x").status()));
  const std::string shadow_cred = Auth(PeerRole::kShadow, "shadow").Credential();
  const std::string forged =
      absl::StrReplaceAll(shadow_cred, {{":shadow:shadow:", ":main:shadow:"}});
  REQUIRE(forged != shadow_cred);
  CHECK(absl::IsUnauthenticated(worker.Authorize(forged, {PeerRole::kMain}, "x").status()));

  // A valid credential of the wrong role, or of a main node with another id.
  absl::Status role = worker.Authorize(shadow_cred, {PeerRole::kMain}, "Worker.Experts").status();
  CHECK(absl::IsPermissionDenied(role));
  CHECK(role.message().find("Worker.Experts") != std::string::npos);
  CHECK(absl::IsPermissionDenied(
      worker.Authorize(Auth(PeerRole::kMain, "main2").Credential(), {PeerRole::kMain}, "x")
          .status()));
  CHECK(worker
            .Authorize(Auth(PeerRole::kOperator, "alice").Credential(), {PeerRole::kOperator},
                       "Main.Scale")
            .ok());
}

TEST_CASE("peer auth: Main.Scale takes an operator's credential only",
          "[cluster][auth][admin][scaling]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = PredictionMode::kNone;
  cfg.api_key = "s3cret";  // the HTTP API's key is no admin credential
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const std::string address = c.main_address();
  MainNode& main = c.main();
  const uint64_t version = main.engine().schedule().version;

  absl::StatusOr<v1::ScaleReply> r = ScaleOnMain(address, 2, nullptr);
  INFO(r.status());
  CHECK(absl::IsUnauthenticated(r.status()));
  const PeerAuth stranger(std::string(40, 'x'), PeerRole::kOperator, "op", "main", "");
  CHECK(absl::IsUnauthenticated(ScaleOnMain(address, 2, &stranger).status()));
  for (auto [role, id] : {std::pair{PeerRole::kMain, "main"}, std::pair{PeerRole::kWorker, "w0"}}) {
    auto node = TestAuth(c.topology(), role, id);
    CHECK(absl::IsPermissionDenied(ScaleOnMain(address, 2, node.get()).status()));
  }
  CHECK(main.engine().active_workers() == 4);  // refused calls change nothing
  CHECK(main.engine().schedule().version == version);

  auto op = TestAuth(c.topology(), PeerRole::kOperator, "operator");
  r = ScaleOnMain(address, 2, op.get());
  INFO(r.status());
  REQUIRE(r.ok());
  CHECK(r->workers() == 2);
  CHECK(main.engine().active_workers() == 2);
  // The credential does not bypass the argument checks.
  CHECK(absl::IsInvalidArgument(ScaleOnMain(address, 3, op.get()).status()));
}

TEST_CASE("peer auth: Node.Trace takes an operator's credential only", "[cluster][auth]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const std::string worker = c.topology().workers[0].address;
  CHECK(absl::IsUnauthenticated(TraceNode(worker, v1::TraceRequest::START, nullptr).status()));
  auto main_auth = TestAuth(c.topology(), PeerRole::kMain, "main");
  CHECK(absl::IsPermissionDenied(
      TraceNode(worker, v1::TraceRequest::START, main_auth.get()).status()));
  CHECK(!c.worker(0).trace().enabled());  // refused: recording did not start
  auto op = TestAuth(c.topology(), PeerRole::kOperator, "operator");
  REQUIRE(TraceNode(worker, v1::TraceRequest::START, op.get()).ok());
  CHECK(c.worker(0).trace().enabled());
  CHECK(CollectTrace(worker, op.get()).ok());
}

}  // namespace odmoe::test
