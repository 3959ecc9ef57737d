#include "cluster/peer_auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

constexpr char kVersionTag[] = "odmoe1";
constexpr size_t kNonceBytes = 8;
constexpr size_t kMaxSeenNonces = 1 << 20;  // far above any real call rate for 10 minutes

std::optional<PeerRole> ParseRole(absl::string_view name) {
  for (PeerRole r : {PeerRole::kMain, PeerRole::kShadow, PeerRole::kWorker, PeerRole::kOperator}) {
    if (name == ToAbsl(PeerRoleName(r))) return r;
  }
  return std::nullopt;
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    // OpenSSL's generator failing is not recoverable for a security token.
    std::abort();
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

std::string_view PeerRoleName(PeerRole role) {
  switch (role) {
    case PeerRole::kMain:
      return "main";
    case PeerRole::kShadow:
      return "shadow";
    case PeerRole::kWorker:
      return "worker";
    case PeerRole::kOperator:
      return "operator";
  }
  return "?";
}

absl::StatusOr<std::string> LoadClusterSecret(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("cluster secret ", path, ": cannot read the file"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "cluster secret %s: mode %04o lets group or others read it (expected owner-only: "
        "chmod 600 %s)",
        path, st.st_mode & 07777, path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cluster secret ", path, ": cannot read"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string secret(absl::StripAsciiWhitespace(text));
  if (secret.size() < kMinClusterSecretChars || secret.size() > kMaxClusterSecretChars) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cluster secret %s: %d characters (expected %d to %d; `odmoe-cluster up` writes 64 "
        "random hex digits)",
        path, secret.size(), kMinClusterSecretChars, kMaxClusterSecretChars));
  }
  return secret;
}

absl::Status WriteNewClusterSecret(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat("cluster secret ", path, " already exists"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot create the cluster secret ", path, ": ", std::strerror(errno)));
  }
  const std::string text = RandomHex(32) + "\n";
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok) return absl::UnavailableError(absl::StrCat("cannot write the cluster secret ", path));
  return absl::OkStatus();
}

PeerAuth::PeerAuth(std::string secret, PeerRole role, std::string node_id, std::string main_id,
                   std::string shadow_id)
    : secret_(std::move(secret)),
      role_(role),
      node_id_(std::move(node_id)),
      main_id_(std::move(main_id)),
      shadow_id_(std::move(shadow_id)) {}

absl::StatusOr<std::shared_ptr<const PeerAuth>> PeerAuth::ForNode(const Topology& topology,
                                                                  PeerRole role,
                                                                  std::string node_id) {
  if (topology.cluster_secret_file.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(topology.path,
                     ": cluster_secret_file: none given; every node needs the cluster secret "
                     "(`odmoe-cluster up` generates one in its run directory and passes "
                     "--cluster-secret-file; or name a file only its owner can read)"));
  }
  absl::StatusOr<std::string> secret = LoadClusterSecret(topology.cluster_secret_file);
  if (!secret.ok()) {
    return absl::Status(
        secret.status().code(),
        absl::StrCat(topology.path, ": cluster_secret_file: ", secret.status().message()));
  }
  return std::make_shared<const PeerAuth>(std::move(*secret), role, std::move(node_id),
                                          topology.main.id,
                                          topology.shadow ? topology.shadow->id : "");
}

absl::StatusOr<std::shared_ptr<const PeerAuth>> PeerAuth::ForOperator(const Topology& topology,
                                                                      const std::string& run_dir) {
  Topology t = topology;
  t.cluster_secret_file = ClusterSecretPath(topology, run_dir);
  return ForNode(t, PeerRole::kOperator, kOperatorId);
}

std::string ClusterSecretPath(const Topology& topology, const std::string& run_dir) {
  if (!topology.cluster_secret_file.empty()) return topology.cluster_secret_file;
  return absl::StrCat(run_dir, "/", kGeneratedSecretName);
}

std::string PeerAuth::Mac(std::string_view role, std::string_view node_id, std::string_view time_ms,
                          std::string_view nonce) const {
  const std::string message = absl::StrCat(kVersionTag, "\n", ToAbsl(role), "\n", ToAbsl(node_id),
                                           "\n", ToAbsl(time_ms), "\n", ToAbsl(nonce));
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &len);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), len));
}

std::string PeerAuth::Credential() const {
  const std::string role(PeerRoleName(role_));
  const std::string time_ms = absl::StrCat(NowMs());
  const std::string nonce = RandomHex(kNonceBytes);
  return absl::StrJoin({std::string(kVersionTag), role, node_id_, time_ms, nonce,
                        Mac(role, node_id_, time_ms, nonce)},
                       ":");
}

bool PeerAuth::FirstUse(const std::string& nonce, int64_t now_ms) const {
  std::lock_guard<std::mutex> lock(seen_mu_);
  // Nonces are forgotten in the order they came, once no credential that old
  // is accepted any more.
  while (!seen_order_.empty() && seen_order_.front().first < now_ms) {
    seen_.erase(seen_order_.front().second);
    seen_order_.pop_front();
  }
  if (seen_.size() >= kMaxSeenNonces) return false;  // refuse rather than forget early
  if (!seen_.insert(nonce).second) return false;
  seen_order_.emplace_back(now_ms + 2 * absl::ToInt64Milliseconds(kCredentialMaxAge), nonce);
  return true;
}

absl::StatusOr<PeerIdentity> PeerAuth::Authenticate(
    std::optional<std::string_view> credential) const {
  if (!credential.has_value() || credential->empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat("no node credential (gRPC metadata \"", kPeerCredentialMetadata,
                     "\"): node calls need the cluster secret (docs/operations.md, Security)"));
  }
  if (credential->size() > 512) return absl::UnauthenticatedError("node credential too long");
  const std::vector<absl::string_view> parts = absl::StrSplit(ToAbsl(*credential), ':');
  if (parts.size() != 6 || parts[0] != kVersionTag) {
    return absl::UnauthenticatedError("malformed node credential");
  }
  const std::optional<PeerRole> role = ParseRole(parts[1]);
  int64_t time_ms = 0;
  if (!role || parts[2].empty() || !absl::SimpleAtoi(parts[3], &time_ms) ||
      parts[4].size() != 2 * kNonceBytes || parts[5].size() != 64) {
    return absl::UnauthenticatedError("malformed node credential");
  }
  const std::string expected =
      Mac(ToStd(parts[1]), ToStd(parts[2]), ToStd(parts[3]), ToStd(parts[4]));
  if (CRYPTO_memcmp(expected.data(), parts[5].data(), expected.size()) != 0) {
    return absl::UnauthenticatedError(
        "node credential not signed with this cluster's secret (a node of another cluster, or "
        "a rotated secret that did not reach every node)");
  }
  const int64_t now = NowMs();
  const int64_t max_age = absl::ToInt64Milliseconds(kCredentialMaxAge);
  if (time_ms < now - max_age || time_ms > now + max_age) {
    return absl::UnauthenticatedError(absl::StrFormat(
        "node credential from %d ms away from this node's clock (at most %d ms; are the "
        "machines' clocks synchronized?)",
        time_ms - now, max_age));
  }
  if (!FirstUse(std::string(parts[4]), now)) {
    return absl::UnauthenticatedError("node credential used before (replayed)");
  }
  return PeerIdentity{*role, std::string(parts[2])};
}

absl::StatusOr<PeerIdentity> PeerAuth::Authorize(std::optional<std::string_view> credential,
                                                 std::initializer_list<PeerRole> roles,
                                                 std::string_view call,
                                                 const CertifiedPeer& certified) const {
  absl::StatusOr<PeerIdentity> who = Authenticate(credential);
  if (!who.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(ToAbsl(call), ": ", who.status().message()));
  }
  const auto name = [](const PeerIdentity& p) {
    return absl::StrCat(ToAbsl(PeerRoleName(p.role)), " ", p.node_id);
  };
  if (!certified.error.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(ToAbsl(call), ": the caller's certificate: ", certified.error));
  }
  if (certified.identity.has_value() && !(*certified.identity == *who)) {
    return absl::PermissionDeniedError(
        absl::StrCat(ToAbsl(call), ": the caller's certificate names ", name(*certified.identity),
                     " but its credential claims ", name(*who)));
  }
  if (!certified.identity.has_value() && certified.required) {
    return absl::PermissionDeniedError(absl::StrCat(
        ToAbsl(call), ": the caller (credential of ", name(*who),
        ") presents a certificate that names no node identity, and this cluster's do "
        "(odmoe-cluster certs issues them)"));
  }
  bool allowed = false;
  std::vector<std::string> names;
  for (PeerRole r : roles) {
    allowed = allowed || r == who->role;
    names.emplace_back(PeerRoleName(r));
  }
  if (!allowed) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s: %s %s may not make this call (only: %s)", ToAbsl(call),
                        ToAbsl(PeerRoleName(who->role)), who->node_id, absl::StrJoin(names, ", ")));
  }
  const std::string& required = who->role == PeerRole::kMain     ? main_id_
                                : who->role == PeerRole::kShadow ? shadow_id_
                                                                 : who->node_id;
  if (who->node_id != required) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: %s %s is not this cluster's %s (%s)", ToAbsl(call), ToAbsl(PeerRoleName(who->role)),
        who->node_id, ToAbsl(PeerRoleName(who->role)), required.empty() ? "none" : required));
  }
  return who;
}

}  // namespace odmoe
