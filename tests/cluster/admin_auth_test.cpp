// Main.Scale, the admin call, needs the API key or a node_tls client
// certificate; with neither configured it is taken only from loopback callers.
// The rule as a function (every branch), then through real gRPC calls.
#include "cluster/admin_auth.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "cluster/main_client.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

// An IPv4 address of this machine that is not loopback, or "" when it has none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) && !IsLoopbackHost(text)) {
      found = text;
    }
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

TEST_CASE("admin auth: loopback peers", "[cluster][admin]") {
  for (const char* peer :
       {"ipv4:127.0.0.1:50123", "ipv4:127.8.0.1:1", "ipv6:[::1]:50123", "ipv6:%5B::1%5D:50123",
        "ipv6:[::ffff:127.0.0.1]:9", "unix:/tmp/s", "unix-abstract:odmoe"}) {
    INFO(peer);
    CHECK(IsLoopbackPeer(peer));
  }
  for (const char* peer :
       {"ipv4:10.0.0.5:50123", "ipv4:0.0.0.0:1", "ipv6:[fe80::1]:50123",
        "ipv6:%5B2001:db8::1%5D:443", "ipv4:127.0.0.1", "127.0.0.1:5", "", "ipv4:", "ipv6:[::1]"}) {
    INFO(peer);
    CHECK(!IsLoopbackPeer(peer));
  }
}

TEST_CASE("admin auth: the rule, branch by branch", "[cluster][admin]") {
  const AdminCaller local{"ipv4:127.0.0.1:4000", std::nullopt, false};
  const AdminCaller remote{"ipv4:10.0.0.5:4000", std::nullopt, false};
  auto with_key = [](AdminCaller c, const std::string& value) {
    c.authorization = value;
    return c;
  };
  auto with_cert = [](AdminCaller c) {
    c.certificate_verified = true;
    return c;
  };
  // An API key is configured: it is needed from everywhere, loopback included.
  const std::string key = "s3cret";
  CHECK(AuthorizeAdminCall(with_key(remote, "Bearer s3cret"), key, "Main.Scale").ok());
  CHECK(AuthorizeAdminCall(with_key(local, "Bearer s3cret"), key, "Main.Scale").ok());
  for (const std::string wrong :
       {"Bearer s3cre", "Bearer s3cretX", "bearer s3cret", "s3cret", "Bearer S3cret", ""}) {
    INFO(wrong);
    absl::Status s = AuthorizeAdminCall(with_key(local, wrong), key, "Main.Scale");
    CHECK(absl::IsUnauthenticated(s));
  }
  absl::Status s = AuthorizeAdminCall(local, key, "Main.Scale");
  CHECK(absl::IsUnauthenticated(s));
  CHECK(s.message().find("Main.Scale needs the API key") == 0);
  CHECK(s.message().find("authorization: Bearer <main.api_key>") != std::string::npos);
  // ... or a verified client certificate instead.
  CHECK(AuthorizeAdminCall(with_cert(remote), key, "Main.Scale").ok());
  // No key configured: a certificate, or a loopback caller; a key sent is no key.
  CHECK(AuthorizeAdminCall(with_cert(remote), "", "Main.Scale").ok());
  CHECK(AuthorizeAdminCall(local, "", "Main.Scale").ok());
  s = AuthorizeAdminCall(remote, "", "Main.Scale");
  CHECK(absl::IsPermissionDenied(s));
  CHECK(s.message().find("Main.Scale from ipv4:10.0.0.5:4000 refused") == 0);
  CHECK(s.message().find("main.api_key") != std::string::npos);
  CHECK(s.message().find("node_tls") != std::string::npos);
  CHECK(
      absl::IsPermissionDenied(AuthorizeAdminCall(with_key(remote, "Bearer "), "", "Main.Scale")));
}

TEST_CASE("admin auth: Main.Scale without the API key is refused, with it works",
          "[cluster][admin][scaling]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = PredictionMode::kNone;
  cfg.api_key = "s3cret";
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const std::string address = (*cluster)->main_address();
  MainNode& main = (*cluster)->main();
  const uint64_t version = main.engine().schedule().version;

  absl::StatusOr<v1::ScaleReply> r = ScaleOnMain(address, 2);
  INFO(r.status());
  CHECK(absl::IsUnauthenticated(r.status()));
  r = ScaleOnMain(address, 2, "wrong");
  CHECK(absl::IsUnauthenticated(r.status()));
  CHECK(main.engine().active_workers() == 4);  // refused calls change nothing
  CHECK(main.engine().schedule().version == version);

  r = ScaleOnMain(address, 2, "s3cret");
  INFO(r.status());
  REQUIRE(r.ok());
  CHECK(r->workers() == 2);
  CHECK(main.engine().active_workers() == 2);
  // The key does not bypass the argument checks.
  CHECK(absl::IsInvalidArgument(ScaleOnMain(address, 3, "s3cret").status()));
}

TEST_CASE("admin auth: without a key or node_tls Main.Scale is local only",
          "[cluster][admin][scaling]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = PredictionMode::kNone;
  cfg.main_listen_host = "0.0.0.0";  // reachable on the machine's other addresses too
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  MainNode& main = (*cluster)->main();
  // From loopback (odmoe-cluster scale on the main node's machine).
  REQUIRE(ScaleOnMain((*cluster)->main_address(), 2).ok());
  CHECK(main.engine().active_workers() == 2);

  const std::string lan = NonLoopbackAddress();
  if (lan.empty()) {
    WARN("this machine has no non-loopback IPv4 address; the remote-caller part is skipped");
    return;
  }
  const std::string remote =
      absl::StrCat(lan, ":", (*cluster)->topology().main.port);  // the peer is then `lan`
  absl::StatusOr<v1::ScaleReply> r = ScaleOnMain(remote, 4);
  INFO(r.status());
  CHECK(absl::IsPermissionDenied(r.status()));
  CHECK(r.status().message().find("refused") != std::string::npos);
  CHECK(main.engine().active_workers() == 2);
  // A key sent to a cluster that has none does not help.
  CHECK(absl::IsPermissionDenied(ScaleOnMain(remote, 4, "guess").status()));
}

}  // namespace odmoe::test
