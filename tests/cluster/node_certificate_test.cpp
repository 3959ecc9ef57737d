// Node certificates that name a role (cluster/node_certificate.h): what
// `odmoe-cluster certs` issues, how a certificate's identity is read and
// checked against a call's credential, and, with real nodes over mutual TLS,
// that a machine holding one worker's key and the cluster secret cannot act
// as the main node or the operator.
#include "cluster/node_certificate.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "cluster/main_client.h"
#include "process_testbed.h"

namespace odmoe::test {
namespace {

namespace fs = std::filesystem;

const char kPerNodeTls[] =
    "node_tls: { ca: certs/ca.pem, cert: \"certs/{id}.pem\", key: \"certs/{id}-key.pem\" }\n";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

int Mode(const std::string& path) {
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  return static_cast<int>(st.st_mode & 0777);
}

Topology SmallTopology(const TempDir& dir) {
  const std::string yaml = absl::StrCat(
      "model: ", SourcePath("models/tiny-mixtral-f16.gguf"), "\n", kPerNodeTls,
      "main: { id: main, address: \"127.0.0.1:7700\" }\n"
      "shadow: { id: shadow, address: \"localhost:7701\" }\n"
      "workers:\n  nodes:\n"
      "    - { id: w0, address: \"127.0.0.1:7710\" }\n"
      "    - { id: w1, address: \"127.0.0.1:7711\" }\n");
  absl::StatusOr<Topology> t = ParseTopology(yaml, dir / "t.yaml");
  INFO(t.status());
  REQUIRE(t.ok());
  return *t;
}

// Opens a Worker.Experts stream to `address` as `auth` and returns how it ended.
grpc::Status OpenExperts(const std::string& address, const PeerAuth& auth) {
  auto stub = v1::Worker::NewStub(MakeChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(5)));
  AttachCredential(ctx, &auth);
  auto stream = stub->Experts(&ctx);
  stream->WritesDone();
  return stream->Finish();
}

}  // namespace

TEST_CASE("node certificates: one per node and the operator, each naming its role",
          "[cluster][auth][tls]") {
  TempDir dir("odmoe_certs");
  const Topology t = SmallTopology(dir);
  absl::StatusOr<IssuedCertificates> made = IssueClusterCertificates(t, 30);
  INFO(made.status());
  REQUIRE(made.ok());
  CHECK(made->written.size() == 2 + 2 * 5);  // the CA, then main, shadow, w0, w1, operator
  CHECK(made->kept.empty());
  CHECK(Mode(dir / "certs/ca-key.pem") == 0600);
  CHECK(Mode(dir / "certs/w1-key.pem") == 0600);
  CHECK(Mode(dir / "certs/w1.pem") == 0644);
  for (const auto& [id, role] : std::vector<std::pair<std::string, PeerRole>>{
           {"main", PeerRole::kMain},
           {"shadow", PeerRole::kShadow},
           {"w0", PeerRole::kWorker},
           {"w1", PeerRole::kWorker},
           {"operator", PeerRole::kOperator}}) {
    INFO(id);
    absl::StatusOr<std::optional<PeerIdentity>> who =
        CertificateIdentity(ReadAll(dir / ("certs/" + id + ".pem")));
    REQUIRE(who.ok());
    REQUIRE(who->has_value());
    CHECK(**who == PeerIdentity{role, id});
  }
  // The CA names no node; text that is no certificate is an error.
  absl::StatusOr<std::optional<PeerIdentity>> ca = CertificateIdentity(ReadAll(dir / "certs/ca.pem"));
  REQUIRE(ca.ok());
  CHECK(!ca->has_value());
  CHECK(absl::IsInvalidArgument(CertificateIdentity("hello").status()));
  if (Sh("command -v openssl >/dev/null").exit_code == 0) {
    // Signed by the CA, with the node's address and its identity.
    const ShellResult verify = Sh("openssl verify -CAfile " + (dir / "certs/ca.pem") + " " +
                                  (dir / "certs/w0.pem") + " 2>&1");
    CHECK(verify.exit_code == 0);
    const ShellResult text = Sh("openssl x509 -noout -ext subjectAltName -in " +
                                (dir / "certs/shadow.pem") + " 2>&1");
    CHECK(text.output.find("DNS:localhost") != std::string::npos);
    CHECK(text.output.find("URI:spiffe://odmoe/shadow/shadow") != std::string::npos);
  }

  // Again: nothing new. A node whose pair is gone gets a new one from the same CA.
  const std::string w1_before = ReadAll(dir / "certs/w1.pem");
  made = IssueClusterCertificates(t, 30);
  REQUIRE(made.ok());
  CHECK(made->written.empty());
  CHECK(made->kept.size() == 5);
  fs::remove(dir / "certs/w0.pem");
  fs::remove(dir / "certs/w0-key.pem");
  made = IssueClusterCertificates(t, 30);
  REQUIRE(made.ok());
  CHECK(made->written == std::vector<std::string>{dir / "certs/w0.pem", dir / "certs/w0-key.pem"});
  CHECK(ReadAll(dir / "certs/w1.pem") == w1_before);

  // Half a pair is not overwritten; without the CA key nothing new is signed.
  fs::remove(dir / "certs/w0-key.pem");
  absl::Status half = IssueClusterCertificates(t, 30).status();
  CHECK(absl::IsAlreadyExists(half));
  CHECK(half.message().find("w0-key.pem") != std::string::npos);
  fs::remove(dir / "certs/w0.pem");
  fs::rename(dir / "certs/ca-key.pem", dir / "ca-key.moved");
  absl::Status no_key = IssueClusterCertificates(t, 30).status();
  CHECK(absl::IsFailedPrecondition(no_key));
  CHECK(no_key.message().find("ca-key.pem") != std::string::npos);

  // A topology with one certificate for all cannot have per-node ones issued.
  Topology shared = t;
  shared.node_tls.cert = dir / "node.pem";
  shared.node_tls.key = dir / "node-key.pem";
  absl::Status not_per_node = IssueClusterCertificates(shared, 30).status();
  CHECK(absl::IsFailedPrecondition(not_per_node));
  CHECK(not_per_node.message().find("{id}") != std::string::npos);
}

TEST_CASE("node certificates: the certificate must agree with the credential",
          "[cluster][auth][tls]") {
  const PeerAuth node("0123456789abcdef0123456789abcdef", PeerRole::kWorker, "w1", "main",
                      "shadow");
  const PeerAuth main("0123456789abcdef0123456789abcdef", PeerRole::kMain, "main", "main",
                      "shadow");
  const PeerAuth op("0123456789abcdef0123456789abcdef", PeerRole::kOperator, "operator", "main",
                    "shadow");
  CertifiedPeer as_main{true, PeerIdentity{PeerRole::kMain, "main"}, ""};
  CHECK(node.Authorize(main.Credential(), {PeerRole::kMain}, "Worker.Experts", as_main).ok());
  // A worker's certificate with a credential that claims the main node, or the operator.
  CertifiedPeer as_w0{true, PeerIdentity{PeerRole::kWorker, "w0"}, ""};
  absl::Status s =
      node.Authorize(main.Credential(), {PeerRole::kMain}, "Worker.Experts", as_w0).status();
  CHECK(absl::IsPermissionDenied(s));
  CHECK(s.message().find("certificate names worker w0 but its credential claims main main") !=
        std::string::npos);
  CHECK(absl::IsPermissionDenied(
      node.Authorize(op.Credential(), {PeerRole::kOperator}, "Main.Scale", as_w0).status()));
  // A certificate without an identity where the cluster's name one; and one
  // that could not be read.
  CertifiedPeer anonymous{true, std::nullopt, ""};
  s = node.Authorize(op.Credential(), {PeerRole::kOperator}, "Main.Scale", anonymous).status();
  CHECK(absl::IsPermissionDenied(s));
  CHECK(s.message().find("names no node identity") != std::string::npos);
  CertifiedPeer unreadable{true, std::nullopt, "not a PEM certificate"};
  CHECK(absl::IsPermissionDenied(
      node.Authorize(op.Credential(), {PeerRole::kOperator}, "Main.Scale", unreadable).status()));
  // A cluster with one shared certificate: the credential decides, as without TLS.
  CertifiedPeer shared{false, std::nullopt, ""};
  CHECK(node.Authorize(op.Credential(), {PeerRole::kOperator}, "Main.Scale", shared).ok());
  // The credential is still checked first: a certificate alone is not enough.
  CHECK(absl::IsUnauthenticated(
      node.Authorize(std::nullopt, {PeerRole::kMain}, "Worker.Experts", as_main).status()));
}

TEST_CASE("topology: per-node node_tls and the operator's reserved id", "[topology][security]") {
  TempDir dir("odmoe_certs_topology");
  const std::string head =
      absl::StrCat("model: ", SourcePath("models/tiny-mixtral-f16.gguf"), "\n");
  const std::string nodes =
      "main: { id: main, address: \"127.0.0.1:7700\" }\nprediction: none\n"
      "workers:\n  nodes:\n    - { id: w0, address: \"127.0.0.1:7710\" }\n"
      "    - { id: w1, address: \"127.0.0.1:7711\" }\n";
  absl::StatusOr<Topology> ok = ParseTopology(head + kPerNodeTls + nodes, dir / "t.yaml");
  REQUIRE(ok.ok());
  CHECK(ok->node_tls.per_node());
  CHECK(ok->node_tls.ForNode("w1").cert == dir / "certs/w1.pem");
  CHECK(ok->node_tls.ForNode("w1").key == dir / "certs/w1-key.pem");
  CHECK(ok->node_tls.ForNode("w1").ca == dir / "certs/ca.pem");
  absl::Status half = ParseTopology(head +
                                        "node_tls: { ca: ca.pem, cert: \"{id}.pem\", key: k.pem }\n" +
                                        nodes,
                                    dir / "t.yaml")
                          .status();
  CHECK(absl::IsInvalidArgument(half));
  CHECK(half.message().find("both contain {id}") != std::string::npos);
  absl::Status reserved =
      ParseTopology(head + "main: { id: main, address: \"127.0.0.1:7700\" }\nprediction: none\n"
                           "workers:\n  nodes:\n    - { id: operator, address: \"127.0.0.1:7710\" }\n"
                           "    - { id: w1, address: \"127.0.0.1:7711\" }\n",
                    dir / "t.yaml")
          .status();
  CHECK(absl::IsInvalidArgument(reserved));
  CHECK(reserved.message().find("reserved for the operator") != std::string::npos);
}

TEST_CASE("processes: per-node certificates, and a worker's key cannot act as main or operator",
          "[cluster][processes][auth][tls]") {
  TestbedSpec spec;
  spec.workers = 2;
  spec.top_extra = kPerNodeTls;
  ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_role_certs", spec);
  const ShellResult certs = Sh(Bin("odmoe-cluster") + " certs " + bed.topology());
  INFO(certs.output);
  REQUIRE(certs.exit_code == 0);
  CHECK(certs.output.find("12 files written") != std::string::npos);
  const ShellResult up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  // The operator's tools use the operator's certificate.
  const ShellResult done =
      Sh(Bin("odmoe") + " complete --topology " + bed.topology() + " -n 6 --ignore-eos hello");
  INFO(done.output);
  CHECK(done.exit_code == 0);
  CHECK(bed.Scale(2).exit_code == 0);

  // An attacker with w0's certificate and key and the cluster secret.
  absl::StatusOr<Topology> t = LoadTopology(bed.topology());
  REQUIRE(t.ok());
  const std::string secret = ReadAll(bed.run_dir() + "/cluster.secret");
  const std::string trimmed(absl::StripAsciiWhitespace(secret));
  REQUIRE(UseNodeTls(t->node_tls.ForNode("w0")).ok());
  const PeerAuth fake_main(trimmed, PeerRole::kMain, "main", "main", "shadow");
  grpc::Status stream = OpenExperts(t->workers[1].address, fake_main);
  INFO(stream.error_message());
  CHECK(stream.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(stream.error_message().find("certificate names worker w0") != std::string::npos);
  const PeerAuth fake_operator(trimmed, PeerRole::kOperator, kOperatorId, "main", "shadow");
  absl::Status scaled = ScaleOnMain(bed.main_address(), 2, &fake_operator).status();
  INFO(scaled);
  CHECK(absl::IsPermissionDenied(scaled));
  // The operator's own files do scale (the calls above changed nothing).
  REQUIRE(UseNodeTls(t->node_tls.ForNode(kOperatorId)).ok());
  const PeerAuth real_operator(trimmed, PeerRole::kOperator, kOperatorId, "main", "shadow");
  CHECK(ScaleOnMain(bed.main_address(), 2, &real_operator).ok());
  // A node started with another node's certificate refuses to start.
  const ShellResult wrong = Sh("cd " + bed.dir().path().string() + " && mkdir -p swap && cp certs/w0.pem swap/w1.pem && " +
                               "cp certs/w0-key.pem swap/w1-key.pem && sed 's#certs/{id}#swap/{id}#' " +
                               bed.topology() + " > swapped.yaml && " + Bin("odmoe-worker") +
                               " --topology swapped.yaml --id w1 --cluster-secret-file " +
                               bed.run_dir() + "/cluster.secret 2>&1");
  CHECK(wrong.exit_code != 0);
  CHECK(wrong.output.find("names spiffe://odmoe/worker/w0 but this node is "
                          "spiffe://odmoe/worker/w1") != std::string::npos);
  REQUIRE(UseNodeTls({}).ok());
}

}  // namespace odmoe::test
