#include "cluster/node_server.h"

#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cluster/grpc_util.h"
#include "cluster/h2_guard.h"
#include "grpcpp/server_posix.h"
#include "util/clip_for_message.h"
#include "util/logging.h"
#include "util/process_memory.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

class NodeServiceImpl final : public v1::Node::Service {
 public:
  explicit NodeServiceImpl(NodeDaemon& daemon)
      : daemon_(daemon), started_(std::chrono::steady_clock::now()) {}

  grpc::Status Handshake(grpc::ServerContext* ctx, const v1::Hello* hello,
                         v1::Welcome* welcome) override {
    // Only the nodes that dial others (main, shadow) handshake.
    if (grpc::Status auth = AuthorizeCall(*ctx, daemon_.peer_auth(),
                                          {PeerRole::kMain, PeerRole::kShadow}, "Node.Handshake");
        !auth.ok()) {
      return auth;
    }
    const std::string me = absl::StrFormat("%s %s", RoleName(daemon_.role()), daemon_.node_id());
    if (hello->protocol_version() != kProtocolVersion) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrFormat("%s speaks odmoe protocol v%d, %s %s speaks v%d", me, kProtocolVersion,
                          RoleName(hello->role()), ClipForMessage(hello->node_id()),
                          hello->protocol_version()));
    }
    if (hello->model_fingerprint() != 0 &&
        hello->model_fingerprint() != daemon_.model_fingerprint()) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrFormat("model mismatch: %s serves model %s but %s %s has model %s; start "
                          "every node with the same model file",
                          me, FingerprintHex(daemon_.model_fingerprint()), RoleName(hello->role()),
                          ClipForMessage(hello->node_id()),
                          FingerprintHex(hello->model_fingerprint())));
    }
    if (absl::Status ready = daemon_.ReadyForPeers(); !ready.ok()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrFormat("%s: %s", me, ready.message()));
    }
    welcome->set_protocol_version(kProtocolVersion);
    welcome->set_role(daemon_.role());
    welcome->set_node_id(daemon_.node_id());
    welcome->set_model_fingerprint(daemon_.model_fingerprint());
    daemon_.FillWelcome(welcome);
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*,
                      v1::NodeStatus* status) override {
    status->set_protocol_version(kProtocolVersion);
    status->set_node_id(daemon_.node_id());
    status->set_role(daemon_.role());
    status->set_state(daemon_.state());
    status->set_pid(static_cast<int64_t>(getpid()));
    status->set_uptime_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    status->set_detail(daemon_.state_detail());
    daemon_.FillStatus(status);
    // The process's resident memory (a benchmark's "peak memory per node";
    // nodes sharing a process, as in tests, share these numbers).
    const ProcessMemory m = ReadProcessMemory();
    v1::ProcessStats* process = status->mutable_process();
    process->set_rss_bytes(m.rss_bytes);
    process->set_peak_rss_bytes(m.peak_rss_bytes);
    process->set_cpu_seconds(ProcessCpuSeconds());
    return grpc::Status::OK;
  }

  grpc::Status Trace(grpc::ServerContext* ctx, const v1::TraceRequest* request,
                     v1::TraceReply* reply) override {
    if (grpc::Status auth =
            AuthorizeCall(*ctx, daemon_.peer_auth(), {PeerRole::kOperator}, "Node.Trace");
        !auth.ok()) {
      return auth;
    }
    reply->set_node_id(daemon_.node_id());
    reply->set_role(daemon_.role());
    switch (request->action()) {
      case v1::TraceRequest::START:
        if (request->capacity() > kMaxTraceSpans) {
          return grpc::Status(
              grpc::StatusCode::INVALID_ARGUMENT,
              absl::StrFormat("%s %s: a trace capacity of %d spans exceeds the maximum of %d",
                              RoleName(daemon_.role()), daemon_.node_id(), request->capacity(),
                              kMaxTraceSpans));
        }
        daemon_.trace().Start(request->capacity() > 0 ? request->capacity() : kDefaultTraceSpans);
        break;
      case v1::TraceRequest::STOP: {
        uint64_t dropped = 0;
        for (TraceEvent& e : daemon_.trace().Stop(&dropped)) {
          v1::TraceEvent* out = reply->add_events();
          out->set_name(std::move(e.name));
          out->set_lane(std::move(e.lane));
          out->set_start_us(e.start_us);
          out->set_duration_us(e.duration_us);
          out->set_request(e.request);
          out->set_token(e.token);
          out->set_layer(e.layer);
          out->set_expert(e.expert);
        }
        reply->set_dropped(dropped);
        break;
      }
      default:
        break;
    }
    reply->set_clock_us(TraceRecorder::NowUs());
    return grpc::Status::OK;
  }

 private:
  NodeDaemon& daemon_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace

struct NodeServer::Impl {
  std::unique_ptr<NodeServiceImpl> node_service;
  // Plain TCP: the guard accepts the connections (cluster/h2_guard.h); with
  // mutual TLS gRPC listens itself (no frame reaches it before the handshake).
  std::unique_ptr<H2Guard> guard;
  std::unique_ptr<grpc::Server> server;
};

absl::StatusOr<std::unique_ptr<NodeServer>> NodeServer::Start(const std::string& address,
                                                              NodeDaemon& daemon) {
  std::unique_ptr<NodeServer> s(new NodeServer());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->node_service = std::make_unique<NodeServiceImpl>(daemon);
  const std::string name = absl::StrFormat("%s %s", RoleName(daemon.role()), daemon.node_id());
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder, daemon.max_receive_message_bytes());
  if (NodeTlsEnabled()) {
    builder.AddListeningPort(address, ServerCredentials(), &s->port_);
  } else {
    absl::StatusOr<std::unique_ptr<H2Guard>> guard = H2Guard::Listen(address, {.name = name});
    if (!guard.ok()) {
      return absl::Status(guard.status().code(),
                          absl::StrFormat("%s cannot listen on %s (address in use or not local?): %s",
                                          name, address, guard.status().message()));
    }
    s->impl_->guard = std::move(*guard);
    s->port_ = s->impl_->guard->port();
  }
  builder.RegisterService(s->impl_->node_service.get());
  for (grpc::Service* service : daemon.services()) builder.RegisterService(service);
  s->impl_->server = builder.BuildAndStart();
  if (!s->impl_->server || s->port_ == 0) {
    return absl::UnavailableError(absl::StrFormat(
        "%s cannot listen on %s (address in use or not local?)", name, address));
  }
  if (s->impl_->guard) {
    grpc::Server* server = s->impl_->server.get();
    ODMOE_RETURN_IF_ERROR(
        s->impl_->guard->Start([server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); }));
  }
  ODMOE_LOG_INFO("{} {} listening on port {}", RoleName(daemon.role()), daemon.node_id(),
                 s->port_);
  return s;
}

NodeServer::~NodeServer() { Shutdown(absl::ZeroDuration()); }

void NodeServer::Shutdown(absl::Duration deadline) {
  if (!impl_) return;
  // Stop accepting, let gRPC finish (its GOAWAY and last replies still pass
  // through the guard), then close what is left.
  if (impl_->guard) impl_->guard->StopAccepting();
  if (impl_->server) {
    impl_->server->Shutdown(DeadlineIn(deadline));
    impl_->server->Wait();
    impl_->server.reset();
  }
  if (impl_->guard) {
    impl_->guard->Stop();
    impl_->guard.reset();
  }
}

}  // namespace odmoe
