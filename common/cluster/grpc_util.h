// The gRPC seams shared by every node: the one place absl::Status and
// grpc::Status are mapped onto each other, channel and server settings, and
// the handshake call. Include only from *_service.cpp / *_client.cpp files
// (grpcpp headers are slow to compile).
//
//   auto channel = MakeChannel("127.0.0.1:7710", kMaxMessageBytes);
//   ODMOE_ASSIGN_OR_RETURN(v1::Welcome w,
//                          CallHandshake(*channel, hello, absl::Seconds(2), auth.get()));
//   // A server handler, first thing (cluster/peer_auth.h):
//   if (grpc::Status s = AuthorizeCall(*ctx, auth, {PeerRole::kMain}, "Worker.Experts");
//       !s.ok()) return s;
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/peer_auth.h"
#include "cluster/protocol.h"
#include "topology/topology.h"
#include "grpcpp/grpcpp.h"
#include "odmoe.grpc.pb.h"

namespace odmoe {

grpc::Status ToGrpcStatus(const absl::Status& status);
/// `context` prefixes the message ("worker w3 at 127.0.0.1:7713").
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context);

/// Makes every later channel and server of this process use mutual TLS with
/// these PEM files (the topology's node_tls, ForNode(this node's id)); empty
/// files = plain TCP. NOT_FOUND / INVALID_ARGUMENT when a file cannot be read
/// or the certificate names a malformed identity.
absl::Status UseNodeTls(const NodeTls& tls);
/// The identity this process's own certificate names (cluster/node_certificate.h);
/// nullopt without TLS or with a certificate that names none.
std::optional<PeerIdentity> OwnCertificateIdentity();
/// A daemon's check at start: when its certificate names an identity, it must
/// be `role` `id` (FAILED_PRECONDITION otherwise, naming both).
absl::Status CheckOwnCertificate(PeerRole role, const std::string& id);

/// A channel with odmoe's limits (keepalive, TLS if set); it accepts replies of
/// at most `max_receive_bytes` (what the peer's largest legitimate reply needs;
/// a bigger one fails the call with RESOURCE_EXHAUSTED).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           size_t max_receive_bytes = kMaxMessageBytes);

/// Adds a fresh credential of `auth` to an outgoing call (nothing when null).
void AttachCredential(grpc::ClientContext& ctx, const PeerAuth* auth);
/// The credential a call carries, if any.
std::optional<std::string_view> ReceivedCredential(const grpc::ServerContext& ctx);
/// PeerAuth::Authorize on the call's credential and, with TLS, the caller's
/// certificate, as a gRPC status (UNAUTHENTICATED / PERMISSION_DENIED, logged
/// with the caller's address);
/// refuses everything when `auth` is null. `who`, when given, gets the caller.
grpc::Status AuthorizeCall(const grpc::ServerContext& ctx, const PeerAuth* auth,
                           std::initializer_list<PeerRole> roles, std::string_view call,
                           PeerIdentity* who = nullptr);
/// The server side of UseNodeTls (insecure without it).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials();
/// Whether UseNodeTls turned mutual TLS on for this process.
bool NodeTlsEnabled();
/// The caller's address for logs: ServerContext::peer(), or for a connection
/// that came through the node's H2Guard ("fd:N") the client's address.
std::string PeerForLog(const grpc::ServerContext& ctx);
/// Applies the same limits to a server; it accepts messages of at most
/// `max_receive_bytes` (a node's NodeDaemon::max_receive_message_bytes).
void ConfigureServerBuilder(grpc::ServerBuilder& builder,
                            size_t max_receive_bytes = kMaxMessageBytes);

/// A deadline `timeout` from now, for ClientContext::set_deadline.
std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout);

/// One Node.Handshake call, with a credential of `auth` (a node's; null
/// sends none, which every node refuses with UNAUTHENTICATED).
absl::StatusOr<v1::Welcome> CallHandshake(grpc::Channel& channel, const v1::Hello& hello,
                                          absl::Duration timeout, const PeerAuth* auth);

/// Handshake, retried while the peer is not up yet (UNAVAILABLE /
/// DEADLINE_EXCEEDED) until `total` has passed or `cancel` is set. A refusal
/// (version or model mismatch) is returned at once.
absl::StatusOr<v1::Welcome> HandshakeWithRetry(grpc::Channel& channel, const v1::Hello& hello,
                                               absl::Duration total,
                                               const std::atomic<bool>* cancel,
                                               const PeerAuth* auth);

}  // namespace odmoe
