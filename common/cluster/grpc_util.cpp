#include "cluster/grpc_util.h"

#include <thread>

#include "absl/strings/str_cat.h"

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

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
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
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void ConfigureServerBuilder(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
}

absl::StatusOr<v1::Welcome> CallHandshake(grpc::Channel& channel, const v1::Hello& hello,
                                          absl::Duration timeout) {
  // Stubs take a shared_ptr; the caller keeps the channel alive.
  std::shared_ptr<grpc::Channel> alias(std::shared_ptr<grpc::Channel>(), &channel);
  auto stub = v1::Node::NewStub(alias);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  ctx.set_wait_for_ready(true);
  v1::Welcome welcome;
  grpc::Status s = stub->Handshake(&ctx, hello, &welcome);
  if (!s.ok()) return FromGrpcStatus(s, "handshake");
  return welcome;
}

absl::StatusOr<v1::Welcome> HandshakeWithRetry(grpc::Channel& channel, const v1::Hello& hello,
                                               absl::Duration total,
                                               const std::atomic<bool>* cancel) {
  const absl::Time end = absl::Now() + total;
  absl::Status last = absl::DeadlineExceededError("no answer");
  while (absl::Now() < end && !(cancel && cancel->load())) {
    absl::StatusOr<v1::Welcome> w = CallHandshake(channel, hello, absl::Milliseconds(500));
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
