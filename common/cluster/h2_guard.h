// A guard in front of a node's plain-TCP gRPC port: it accepts the TCP
// connections itself, hands gRPC one end of a socketpair per connection
// (grpc::AddInsecureChannelFromFd) and relays the bytes between the two on
// one epoll thread. The server's bytes pass as they are; the client's pass
// through an H2FrameScanner (cluster/h2_frame_scanner.h), and a connection
// that does not start with the HTTP/2 client preface, or resets streams
// beyond its budget (the "rapid reset" attack, CVE-2023-44487, which gRPC
// 1.51 has no defence against), is closed at once and logged (at most 10
// lines in 10 s). gRPC then sees the connection end and frees its calls.
//
//   ODMOE_ASSIGN_OR_RETURN(auto guard, H2Guard::Listen("0.0.0.0:7700", {.name = "worker w0"}));
//   int port = guard->port();              // the port bound (port 0: any free one)
//   auto server = builder.BuildAndStart(); // no listening port of its own
//   guard->Start([&](int fd) { grpc::AddInsecureChannelFromFd(server.get(), fd); });
//   ...
//   guard->StopAccepting();                // no new connection, no Serve call after this
//   server->Shutdown(deadline);            // GOAWAY and the last replies still pass
//   guard->Stop();                         // closes every connection, joins the thread
//
// The relay keeps one buffer per direction per connection (64 KiB each, held
// only while bytes wait in it) and copies each byte once, through it; a full
// buffer stops reading that side (TCP's own flow control then slows the
// sender). gRPC sees the connection as
// a socketpair: ServerContext::peer() reads "fd:N", which PeerAddress turns
// back into the client's address for logs.
// With mutual TLS the node uses gRPC's own listener: nobody without a cluster
// certificate gets past the handshake to send HTTP/2 frames.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/h2_frame_scanner.h"

namespace odmoe {

class H2Guard {
 public:
  struct Options {
    std::string name = "node";  // for the log: "worker w0"
    H2ResetBudget::Limits connection_resets = H2ResetBudget::ConnectionDefault();
    H2ResetBudget::Limits node_resets = H2ResetBudget::NodeDefault();
    size_t buffer_bytes = 64 * 1024;  // per direction per connection
  };
  struct Stats {
    uint64_t accepted = 0;           // connections accepted
    uint64_t refused_not_http2 = 0;  // closed: no client preface
    uint64_t refused_resets = 0;     // closed: resets beyond the budget
    uint64_t open = 0;               // connections relayed now
  };

  /// Binds and listens on `address` ("host:port", "[v6]:port"; every address
  /// the host resolves to). INVALID_ARGUMENT for a malformed address,
  /// UNAVAILABLE when nothing can be bound.
  static absl::StatusOr<std::unique_ptr<H2Guard>> Listen(const std::string& address,
                                                         Options options);
  ~H2Guard();
  H2Guard(const H2Guard&) = delete;
  H2Guard& operator=(const H2Guard&) = delete;

  int port() const { return port_; }
  /// Starts relaying: `serve` gets the server end of each accepted connection
  /// (a non-blocking socket it then owns), on the relay thread.
  absl::Status Start(std::function<void(int fd)> serve);
  /// Closes the listening sockets; returns once no `serve` call can follow.
  void StopAccepting();
  /// StopAccepting, then closes every connection and joins the thread.
  void Stop();
  Stats stats() const;

  /// The client address behind a gRPC peer string "fd:N" of a guarded
  /// connection (ServerContext::peer()); any other string as it is.
  static std::string PeerAddress(const std::string& grpc_peer);

 private:
  struct Impl;
  explicit H2Guard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace odmoe
