// One gRPC stream from this node to a peer node, written once for every node
// that dials another: the main node's Experts streams to the workers and its
// Follow stream to the shadow, the shadow's Hints streams to the workers.
//
// A link dials (a channel whose receive limit is what the peer's replies can
// need), handshakes (HandshakeWithRetry with this node's Hello and
// credentials; an optional check of the peer's Welcome), then opens its
// stream with a fresh credential in the call's metadata. A link whose stream
// ended, failed a write or was Reset() is broken; a PeerRejoin loop
// reconnects it (handshake + stream) in the background. A bidirectional link
// has a reader thread that reads until the stream ends, then marks the link
// broken and logs why. Only files that already see grpcpp include this.
//
//   PeerDialer dialer{MakeHello(v1::ROLE_MAIN, "main", fingerprint), &auth};
//   PeerTarget target{.kind = "worker", .id = "w0", .address = "10.0.0.2:7711",
//                     .stream = "expert", .max_receive_bytes = result_bytes};
//   using Experts = grpc::ClientReaderWriter<v1::WorkerRequest, v1::ExpertResult>;
//   PeerLink<Experts> link(
//       target, dialer,
//       [](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
//         return v1::Worker::NewStub(ch)->Experts(ctx);
//       },
//       [](Experts& s) { v1::ExpertResult r; while (s.Read(&r)) File(r); });
//   ODMOE_RETURN_IF_ERROR(link.Connect(cancel, absl::Seconds(120)));
//   PeerRejoin rejoin({&link});                  // reconnects it until Stop()
//   if (link.Write(request) != PeerWrite::kSent) ... UNAVAILABLE ...
//   link.Reset("sent no result within 2s");      // the rejoin loop reopens it
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cluster/grpc_util.h"
#include "cluster/peer_auth.h"
#include "cluster/protocol.h"

namespace odmoe {

/// The Hello of a node of `role` named `node_id` (this build's protocol version).
v1::Hello MakeHello(v1::Role role, const std::string& node_id, uint64_t fingerprint);

/// Who dials: what it says in every handshake and its credentials (outlive
/// the links), attached to the handshake and to every stream.
struct PeerDialer {
  v1::Hello hello;
  const PeerAuth* auth = nullptr;
};

/// Where a link goes and what it expects there.
struct PeerTarget {
  std::string kind{};  // "worker" | "shadow": in messages
  std::string id{};    // the peer's node id
  std::string address{};
  std::string stream{};  // "expert" | "follow" | "hint": in messages
  /// The largest message the peer may send (gRPC refuses a bigger one).
  size_t max_receive_bytes = kSmallReplyBytes;
  /// Checks the peer's Welcome (identity, placement); empty: any peer that
  /// accepted the handshake. Its error is returned by Connect as it is.
  std::function<absl::Status(const v1::Welcome&)> check_welcome{};
  /// Also counts the link as broken when its channel left READY (a write-only
  /// stream notices a dead peer only at its next write otherwise).
  bool broken_when_channel_not_ready = false;
};

enum class PeerWrite {
  kSent,
  kNotConnected,  // broken or never connected: nothing was tried
  kFailed,        // the write failed; the link is broken from now on
};

/// What every link shares, whatever its stream type (PeerRejoin sees this).
class PeerLinkBase {
 public:
  PeerLinkBase(const PeerLinkBase&) = delete;
  PeerLinkBase& operator=(const PeerLinkBase&) = delete;

  /// Dials and handshakes (retrying until `patience` has passed or `cancel`
  /// is set), checks the Welcome, then ends the previous stream, if any, and
  /// opens a new one. Errors name the peer: "worker w0 at host:port: ...";
  /// FAILED_PRECONDITION when the peer refuses (protocol or model mismatch)
  /// or its Welcome fails the check.
  absl::Status Connect(const std::atomic<bool>& cancel, absl::Duration patience);
  /// Whether the stream is open and has not failed.
  bool connected() const { return !broken_.load(); }
  /// Broken, or (broken_when_channel_not_ready) its channel left READY.
  bool NeedsRejoin() const;
  /// Marks the link broken and cancels its stream, logging `why`; false when
  /// it was broken already (nothing is logged then).
  bool Reset(std::string_view why);
  /// Ends the stream for good (a later Connect opens a new one).
  void Close();
  const PeerTarget& target() const { return target_; }

 protected:
  PeerLinkBase(PeerTarget target, const PeerDialer& dialer, bool has_reader,
               std::function<void()> on_end);
  /// Derived classes call Close() in their destructor (it calls their hooks).
  virtual ~PeerLinkBase();

  // Hooks of the stream type; Open/Finish run with mu_ held.
  virtual void OpenStream(const std::shared_ptr<grpc::Channel>& channel,
                          grpc::ClientContext* ctx) = 0;
  /// Reader thread: reads until the stream ends, then returns its Finish().
  virtual grpc::Status ReadUntilEnd() = 0;
  /// Write-only streams: Finish() (after the call was cancelled).
  virtual void FinishStream() = 0;
  virtual void ReleaseStream() = 0;

  mutable std::mutex mu_;  // guards the stream, its context and channel
  std::atomic<bool> broken_{true};

 private:
  void DropLocked();  // cancels and ends the current stream (mu_ held)

  const PeerTarget target_;
  const PeerDialer dialer_;
  const bool has_reader_;
  const std::function<void()> on_end_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::thread reader_;
};

/// A link with a stream of type `Stream`: grpc::ClientReaderWriter<W, R>
/// (with a `read` function, run on the link's reader thread) or
/// grpc::ClientWriter<W> (write-only; no `read`).
template <typename Stream>
class PeerLink final : public PeerLinkBase {
 public:
  /// Opens the stream on `channel` with `ctx` (credentials already attached).
  using Open = std::function<std::unique_ptr<Stream>(const std::shared_ptr<grpc::Channel>&,
                                                     grpc::ClientContext*)>;
  /// Reads the stream until Read() returns false.
  using Read = std::function<void(Stream&)>;

  /// `on_end` runs on the reader thread after the stream ended and the link
  /// was marked broken (to wake those who wait for replies).
  PeerLink(PeerTarget target, const PeerDialer& dialer, Open open, Read read = nullptr,
           std::function<void()> on_end = nullptr)
      : PeerLinkBase(std::move(target), dialer, read != nullptr, std::move(on_end)),
        open_(std::move(open)),
        read_(std::move(read)) {}
  ~PeerLink() override { Close(); }

  template <typename Message>
  PeerWrite Write(const Message& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.load() || !stream_) return PeerWrite::kNotConnected;
    if (stream_->Write(message)) return PeerWrite::kSent;
    broken_ = true;
    return PeerWrite::kFailed;
  }

 private:
  void OpenStream(const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* ctx) override {
    stream_ = open_(channel, ctx);
  }
  grpc::Status ReadUntilEnd() override {
    read_(*stream_);
    return stream_->Finish();
  }
  void FinishStream() override {
    if (stream_) stream_->Finish();
  }
  void ReleaseStream() override { stream_.reset(); }

  const Open open_;
  const Read read_;
  std::unique_ptr<Stream> stream_;
};

/// Reconnects every broken link of a set in the background (each try waits
/// at most 500 ms for its handshake; a round every ~0.5 s) until Stop().
class PeerRejoin {
 public:
  explicit PeerRejoin(std::vector<PeerLinkBase*> links);
  ~PeerRejoin() { Stop(); }
  void Stop();

 private:
  void Loop();
  const std::vector<PeerLinkBase*> links_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace odmoe
