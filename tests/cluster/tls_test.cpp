// TLS: mutual TLS on the gRPC links between nodes (topology node_tls) and
// HTTPS for the HTTP API (main.tls). Certificates are made with the openssl
// command (skipped where it is missing).
#include <catch2/catch.hpp>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "cluster/main_client.h"
#include "cluster/node_probe.h"
#include "engine/reference_engine.h"
#include "httplib.h"
#include "shell.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

// A self-signed certificate for 127.0.0.1 (its own CA) in `dir`.
bool MakeCertificate(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const ShellResult r =
      Sh("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=odmoe-test "
         "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
         (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string());
  return r.exit_code == 0;
}

}  // namespace

TEST_CASE("tls: the cluster runs over mutual TLS, plain peers are refused", "[cluster][tls]") {
  const auto dir = std::filesystem::temp_directory_path() / absl::StrCat("odmoe_tls_", getpid());
  if (!MakeCertificate(dir)) {
    WARN("openssl is not available; TLS test skipped");
    return;
  }
  NodeTls tls{(dir / "cert.pem").string(), (dir / "cert.pem").string(), (dir / "key.pem").string()};
  REQUIRE(UseNodeTls(tls).ok());
  {
    ClusterConfig cfg;
    cfg.workers = 4;
    cfg.http = true;
    cfg.api_key = "k";
    auto cluster = TestCluster::Start(cfg);
    REQUIRE(cluster.ok());
    GenerateRequest req;
    req.prompt = "The sea";
    req.max_tokens = 12;
    req.ignore_eos = true;
    auto engine = ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
    // The shadow's predictions come over TLS too. (A run that ends before the
    // first of them arrives, on a loaded machine under a sanitizer, is
    // repeated; one of three must have predicted slots.)
    const std::vector<int32_t> want = engine->Generate(req).value().output_ids;
    const absl::StatusOr<ClusterGenerateResult> r = GenerateUntilPredicted(
        [&] { return (*cluster)->main().Generate(req, nullptr); },
        [&](const ClusterGenerateResult& g) { CHECK(g.result.output_ids == want); });
    REQUIRE(r.ok());
    CHECK(r->recall.slots > 0);
    // The admin call: a certificate alone is not enough, an operator's credential is.
    CHECK(absl::IsUnauthenticated(ScaleOnMain((*cluster)->main_address(), 2, nullptr).status()));
    auto op = TestAuth((*cluster)->topology(), PeerRole::kOperator, "operator");
    absl::StatusOr<v1::ScaleReply> scaled = ScaleOnMain((*cluster)->main_address(), 2, op.get());
    INFO(scaled.status());
    CHECK(scaled.ok());
    // With TLS, a client without certificates is refused.
    CHECK(ProbeNode((*cluster)->main_address(), absl::Seconds(2)).ok());
    REQUIRE(UseNodeTls({}).ok());
    CHECK(!ProbeNode((*cluster)->main_address(), absl::Seconds(2)).ok());
    REQUIRE(UseNodeTls(tls).ok());
  }
  REQUIRE(UseNodeTls({}).ok());
  NodeTls missing = tls;
  missing.key = "/nonexistent/key.pem";
  absl::Status bad = UseNodeTls(missing);
  CHECK(absl::IsNotFound(bad));
  CHECK(bad.message().find("node_tls.key") != std::string::npos);
  NodeTls not_pem = tls;
  not_pem.ca = SourcePath("README.md");
  CHECK(absl::IsInvalidArgument(UseNodeTls(not_pem)));
  std::filesystem::remove_all(dir);
}

TEST_CASE("tls: the HTTP API serves HTTPS", "[cluster][tls]") {
  const auto dir = std::filesystem::temp_directory_path() / absl::StrCat("odmoe_https_", getpid());
  if (!MakeCertificate(dir)) {
    WARN("openssl is not available; HTTPS test skipped");
    return;
  }
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  Topology t = MakeTopology(cfg);
  t.main.tls_cert = (dir / "cert.pem").string();
  t.main.tls_key = (dir / "key.pem").string();
  t.workers[0].address = t.workers[1].address = "127.0.0.1:1";  // health only
  auto main = MainNode::Create(t, "main");
  REQUIRE(main.ok());
  httplib::SSLClient cli("127.0.0.1", (*main)->http_port());
  cli.set_ca_cert_path((dir / "cert.pem").string().c_str());
  cli.enable_server_certificate_verification(true);
  auto res = cli.Get("/health");
  REQUIRE(res);
  CHECK(res->status == 503);  // served over HTTPS; the cluster is not up
  httplib::Client plain("127.0.0.1", (*main)->http_port());
  CHECK(!plain.Get("/health"));
  (*main)->Shutdown();
  t.main.tls_key = "/nonexistent/key.pem";
  auto broken = MainNode::Create(t, "main");
  REQUIRE(!broken.ok());
  CHECK(broken.status().message().find("main.tls") != std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace odmoe::test
