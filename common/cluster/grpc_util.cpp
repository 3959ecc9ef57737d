#include "cluster/grpc_util.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cluster/h2_guard.h"
#include "cluster/node_certificate.h"
#include "util/log_limiter.h"
#include "util/logging.h"
#include "util/regular_file.h"

namespace odmoe {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(std::string(context), ": ", status.error_message()));
}

namespace {

// A certificate chain or key is a few KiB; a CA bundle rarely 200 KiB.
constexpr uint64_t kMaxPemFileBytes = 1 << 20;

struct TlsState {
  std::mutex mu;
  bool enabled = false;
  std::string ca, cert, key;  // PEM contents
  std::optional<PeerIdentity> identity;  // what `cert` names
};

TlsState& Tls() {
  static TlsState* state = new TlsState();  // never destroyed: used until exit
  return *state;
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  // A regular file only (a FIFO would block the read forever), of PEM size.
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxPemFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat("node_tls.", what, ": cannot read ",
                                                           path, ": ", text.status().message()));
  }
  if (text->find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("node_tls.", what, ": ", path, " is not a PEM file"));
  }
  return *text;
}

}  // namespace

absl::Status UseNodeTls(const NodeTls& tls) {
  TlsState& state = Tls();
  std::lock_guard<std::mutex> lock(state.mu);
  if (!tls.enabled()) {
    state.enabled = false;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ca = ReadPem(tls.ca, "ca");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem(tls.cert, "cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(tls.key, "key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::optional<PeerIdentity>> identity = CertificateIdentity(*cert);
  if (!identity.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node_tls.cert: ", tls.cert, ": ", identity.status().message()));
  }
  state.ca = *ca;
  state.cert = *cert;
  state.key = *key;
  state.identity = *identity;
  state.enabled = true;
  return absl::OkStatus();
}

std::optional<PeerIdentity> OwnCertificateIdentity() {
  TlsState& state = Tls();
  std::lock_guard<std::mutex> lock(state.mu);
  return state.enabled ? state.identity : std::nullopt;
}

absl::Status CheckOwnCertificate(PeerRole role, const std::string& id) {
  const std::optional<PeerIdentity> own = OwnCertificateIdentity();
  if (!own || *own == PeerIdentity{role, id}) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "node_tls.cert names ", CertificateIdentityUri(*own), " but this node is ",
      CertificateIdentityUri({role, id}),
      " (each node needs its own certificate: node_tls cert and key with {id})"));
}

namespace {

// What the caller's certificate says, for PeerAuth::Authorize.
CertifiedPeer Certified(const grpc::ServerContext& ctx) {
  CertifiedPeer out;
  {
    TlsState& state = Tls();
    std::lock_guard<std::mutex> lock(state.mu);
    if (!state.enabled) return out;
    out.required = state.identity.has_value();
  }
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr) return out;
  const std::vector<grpc::string_ref> pems = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pems.empty()) return out;
  absl::StatusOr<std::optional<PeerIdentity>> identity =
      CertificateIdentity(std::string_view(pems.front().data(), pems.front().size()));
  if (!identity.ok()) {
    out.error = std::string(identity.status().message());
  } else {
    out.identity = *identity;
  }
  return out;
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentials() {
  TlsState& state = Tls();
  std::lock_guard<std::mutex> lock(state.mu);
  if (!state.enabled) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opt(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opt.pem_root_certs = state.ca;
  opt.pem_key_cert_pairs.push_back({state.key, state.cert});
  return grpc::SslServerCredentials(opt);
}

bool NodeTlsEnabled() {
  TlsState& state = Tls();
  std::lock_guard<std::mutex> lock(state.mu);
  return state.enabled;
}

std::string PeerForLog(const grpc::ServerContext& ctx) { return H2Guard::PeerAddress(ctx.peer()); }

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           size_t max_receive_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(max_receive_bytes, kMaxMessageBytes)));
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect quickly while the cluster comes up.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Each peer link gets its own TCP connection (no sharing between streams of
  // different roles that happen to live in one test process).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  {
    TlsState& state = Tls();
    std::lock_guard<std::mutex> lock(state.mu);
    if (state.enabled) {
      grpc::SslCredentialsOptions opt;
      opt.pem_root_certs = state.ca;
      opt.pem_private_key = state.key;
      opt.pem_cert_chain = state.cert;
      creds = grpc::SslCredentials(opt);
    }
  }
  return grpc::CreateCustomChannel(address, creds, args);
}

namespace {

// Threads one gRPC server runs calls on at most: more calls at once than that
// get RESOURCE_EXHAUSTED ("Server Threadpool Exhausted"). A node's long calls
// (Generate, Experts, Hints, Follow streams) need far fewer; the cap keeps a
// flood of calls (an HTTP/2 rapid reset) from making thousands.
constexpr int kMaxServerThreads = 64;
// HTTP/2 streams one connection may keep open (the SETTINGS value a server
// announces; it binds only clients that acknowledge it).
constexpr int kMaxConcurrentStreams = 100;

}  // namespace

void ConfigureServerBuilder(grpc::ServerBuilder& builder, size_t max_receive_bytes) {
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(max_receive_bytes, kMaxMessageBytes)));
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  // HTTP/2 rapid reset (CVE-2023-44487; gRPC 1.51 has no fix): every
  // HEADERS frame becomes a call even when RST_STREAM follows at once, and
  // the synchronous server started a thread per call it could not hand to an
  // idle one: thousands of threads within seconds, then an abort when no more
  // could be made. A quota of threads per server bounds that; a call that
  // finds every thread busy gets RESOURCE_EXHAUSTED "Server Threadpool
  // Exhausted". The calls still queue inside gRPC (memory), which no setting
  // of 1.51 bounds (docs/operations.md, Security: mutual TLS keeps anyone
  // without a cluster certificate from sending HTTP/2 frames at all).
  grpc::ResourceQuota quota("odmoe-server");
  quota.SetMaxThreads(kMaxServerThreads);
  builder.SetResourceQuota(quota);
  // Streams a client that acknowledges the setting may keep open at once.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams);
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
}

void AttachCredential(grpc::ClientContext& ctx, const PeerAuth* auth) {
  if (auth != nullptr) ctx.AddMetadata(kPeerCredentialMetadata, auth->Credential());
}

std::optional<std::string_view> ReceivedCredential(const grpc::ServerContext& ctx) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kPeerCredentialMetadata);
  if (it == metadata.end()) return std::nullopt;
  return std::string_view(it->second.data(), it->second.size());
}

grpc::Status AuthorizeCall(const grpc::ServerContext& ctx, const PeerAuth* auth,
                           std::initializer_list<PeerRole> roles, std::string_view call,
                           PeerIdentity* who) {
  absl::StatusOr<PeerIdentity> id =
      auth != nullptr
          ? auth->Authorize(ReceivedCredential(ctx), roles, call, Certified(ctx))
          : absl::StatusOr<PeerIdentity>(absl::UnauthenticatedError(absl::StrCat(
                std::string(call), ": this node has no cluster secret, so it takes no node calls")));
  if (!id.ok()) {
    // Anyone who reaches the port can cause these: at most 10 lines in 10 s.
    static LogLimiter limiter(10, std::chrono::seconds(10));
    uint64_t dropped = 0;
    if (limiter.Allow(&dropped)) {
      ODMOE_LOG_WARN("refused a call from {}: {}{}", PeerForLog(ctx), id.status().message(),
                     dropped > 0 ? absl::StrFormat(" (%d more refusals not logged)", dropped)
                                 : std::string());
    }
    return ToGrpcStatus(id.status());
  }
  if (who != nullptr) *who = std::move(*id);
  return grpc::Status::OK;
}

absl::StatusOr<v1::Welcome> CallHandshake(grpc::Channel& channel, const v1::Hello& hello,
                                          absl::Duration timeout, const PeerAuth* auth) {
  // Stubs take a shared_ptr; the caller keeps the channel alive.
  std::shared_ptr<grpc::Channel> alias(std::shared_ptr<grpc::Channel>(), &channel);
  auto stub = v1::Node::NewStub(alias);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  ctx.set_wait_for_ready(true);
  AttachCredential(ctx, auth);
  v1::Welcome welcome;
  grpc::Status s = stub->Handshake(&ctx, hello, &welcome);
  if (!s.ok()) return FromGrpcStatus(s, "handshake");
  return welcome;
}

absl::StatusOr<v1::Welcome> HandshakeWithRetry(grpc::Channel& channel, const v1::Hello& hello,
                                               absl::Duration total,
                                               const std::atomic<bool>* cancel,
                                               const PeerAuth* auth) {
  const absl::Time end = absl::Now() + total;
  absl::Status last = absl::DeadlineExceededError("no answer");
  while (absl::Now() < end && !(cancel && cancel->load())) {
    absl::StatusOr<v1::Welcome> w = CallHandshake(channel, hello, absl::Milliseconds(500), auth);
    if (w.ok()) return w;
    last = w.status();
    if (!absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last)) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (cancel && cancel->load()) return absl::CancelledError("shutting down");
  return absl::UnavailableError(absl::StrCat("no answer after ", absl::FormatDuration(total),
                                             " (", last.message(), ")"));
}

}  // namespace odmoe
