#include "main_node/main_call_limits.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace odmoe {
namespace {

std::string MiB(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1u << 20));
}

}  // namespace

MainCallLimits::MainCallLimits(int max_running, int max_queue)
    : tokenize_calls_(kMaxTokenizeCalls),
      tokenize_bytes_(kTokenizeBytesInFlight),
      grpc_queued_(static_cast<uint64_t>(std::max(1, max_running + std::max(0, max_queue) / 2))) {}

absl::StatusOr<MainCallLimits::TokenizeTurn> MainCallLimits::AdmitTokenize(std::string_view call,
                                                                           size_t text_bytes) {
  if (text_bytes > kMaxTokenizeTextBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the text of %d bytes exceeds the limit of %d bytes (%s) per call",
                        call, text_bytes, kMaxTokenizeTextBytes, MiB(kMaxTokenizeTextBytes)));
  }
  std::optional<Budget::Share> one = tokenize_calls_.Take(1);
  if (!one) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d texts are being tokenized already, the most at once (Tokenize and Score calls "
        "together); retry later",
        call, kMaxTokenizeCalls));
  }
  std::optional<Budget::Share> bytes = tokenize_bytes_.Take(text_bytes);
  if (!bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %s of text is being tokenized already and this text has %s: more than the %s "
        "tokenized at once (Tokenize and Score calls together); retry later",
        call, MiB(tokenize_bytes_.in_use()), MiB(text_bytes), MiB(kTokenizeBytesInFlight)));
  }
  return TokenizeTurn{std::move(*one), std::move(*bytes)};
}

absl::StatusOr<Budget::Share> MainCallLimits::AdmitGrpcQueued(std::string_view call) {
  std::optional<Budget::Share> place = grpc_queued_.Take(1);
  if (!place) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d gRPC calls run or wait already, the gRPC share of the request queue "
        "(main.max_running + main.max_queue / 2; the other waiting places are kept for the "
        "HTTP API); retry later",
        call, grpc_queued_.capacity()));
  }
  return std::move(*place);
}

}  // namespace odmoe
