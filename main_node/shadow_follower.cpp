#include "main_node/shadow_follower.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "cluster/trace.h"
#include "cluster/wire.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {
constexpr absl::Duration kShadowDrain = absl::Seconds(2);
// A shadow silent for this many requests in a row has lost its channel (one
// silent request can be a slow prefill of a long prompt).
constexpr int kSilentShadowRequests = 2;
}  // namespace

bool ShadowFollower::Begin(ShadowFollow& follow, uint64_t request,
                           std::span<const int32_t> prompt_ids, int max_tokens, bool drafts_only,
                           bool batched) {
  v1::ShadowRequest begin;
  v1::ShadowBegin* b = begin.mutable_begin();
  b->set_request(request);
  for (int32_t id : prompt_ids) b->add_prompt_ids(id);
  b->set_max_tokens(static_cast<uint32_t>(max_tokens));
  b->set_token_period(static_cast<uint32_t>(follow.token_period));
  b->set_kv_period(static_cast<uint32_t>(follow.kv_period));
  b->set_draft_tokens(static_cast<uint32_t>(follow.draft));
  b->set_drafts_only(drafts_only);
  b->set_batched(batched);
  uint64_t version = 0;
  FillSchedule(b->mutable_live_groups(), &version);
  b->set_schedule_version(version);
  follow.schedule_version = version;
  follow.on = true;
  if (absl::Status s = links_.SendToShadow(begin); !s.ok()) {
    ODMOE_LOG_WARN("request {}: shadow link failed ({}); continuing without it", request,
                   s.message());
    follow.on = false;
  }
  return follow.on;
}

bool ShadowFollower::Align(ShadowFollow& follow, uint64_t request, int n, int32_t token, int pos,
                           int slot, bool batched, TraceRecorder* trace) {
  if (!follow.on) return false;
  TraceSpan span(trace, "align", "shadow link", request, static_cast<uint32_t>(n), -1);
  const auto t0 = std::chrono::steady_clock::now();
  // Due when a multiple of the period is among the tokens since the last
  // alignment (one per iteration, or several after accepted drafts).
  auto due = [&](int period) { return period > 0 && n / period > follow.aligned_n / period; };
  const bool realigned = due(follow.token_period);
  absl::Status s =
      SendAlignment(request, n, token, pos, realigned, due(follow.kv_period),
                    schedule_->version != follow.schedule_version, &follow.kv_sent, slot, batched);
  follow.aligned_n = n;
  follow.schedule_version = schedule_->version;
  follow.alignment_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) {
    ODMOE_LOG_WARN("request {}: shadow link failed ({}); continuing without it", request,
                   s.message());
    follow.on = false;
    return false;
  }
  return realigned;
}

void ShadowFollower::End(const ShadowFollow& follow, uint64_t request, bool decoded) {
  if (!follow.on) return;
  v1::ShadowRequest end;
  end.mutable_end()->set_request(request);
  bool silent = false;
  if (links_.SendToShadow(end).ok() && !links_.predictions().WaitDone(request, kShadowDrain)) {
    ODMOE_LOG_WARN("request {}: the shadow did not finish within {}", request,
                   absl::FormatDuration(kShadowDrain));
    silent = decoded && links_.predictions().Snapshot(request).empty();
  }
  silent_requests_ = silent ? silent_requests_ + 1 : 0;
  if (silent_requests_ >= kSilentShadowRequests) {
    // Open but silent: its replies go nowhere. A fresh stream re-aligns it.
    links_.ResetShadow(absl::StrFormat(
        "sent neither a prediction nor an end for %d requests in a row", silent_requests_));
    silent_requests_ = 0;
  }
}

void ShadowFollower::FillSchedule(google::protobuf::RepeatedField<int32_t>* groups,
                                  uint64_t* version) const {
  for (int g : schedule_->groups) groups->Add(g);
  *version = schedule_->version;
}

absl::Status ShadowFollower::SendAlignment(uint64_t request, int n, int32_t token, int pos,
                                           bool send_token, bool send_kv, bool send_schedule,
                                           int* kv_sent, int slot, bool batched) {
  const ModelConfig& c = config_;
  const int first = *kv_sent;
  const int count = send_kv ? pos - first : 0;
  const int64_t w = c.kv_width();
  const int chunk =
      std::max<int>(1, static_cast<int>(kKvChunkBytes / (2 * c.n_layer * w * sizeof(float))));
  int sent = 0;
  do {
    const int m = std::min(chunk, count - sent);
    v1::ShadowRequest req;
    v1::ShadowAlign* a = req.mutable_align();
    a->set_request(request);
    a->set_token(static_cast<uint32_t>(n));
    a->set_batched(batched);
    if (send_token) {
      a->set_has_token(true);
      a->set_token_id(token);
    }
    if (send_schedule && sent == 0) {
      uint64_t version = 0;
      FillSchedule(a->mutable_live_groups(), &version);
      a->set_schedule_version(version);
    }
    if (m > 0) {
      const size_t layer_floats = static_cast<size_t>(m * w);
      KvCache& kv = transformer_.kv_cache(slot);
      const bool with_v = !kv.v_in_k();  // MLA: V is inside the K rows
      kv_k_.resize(layer_floats * c.n_layer);
      kv_v_.resize(with_v ? layer_floats * c.n_layer : 0);
      // Rows of every layer travel kv_width() wide; a narrower layer's
      // (Gemma 4's sliding and full layers differ) are padded with zeros.
      auto copy_layer = [&](const Mat& cache, float* dst) -> absl::Status {
        const int64_t wl = cache.cols;
        if (wl == w) {
          return transformer_.backend().CopyToHost(dst, cache.Row(first + sent),
                                                   layer_floats * sizeof(float));
        }
        std::fill(dst, dst + layer_floats, 0.0f);
        for (int r = 0; r < m; ++r) {
          ODMOE_RETURN_IF_ERROR(transformer_.backend().CopyToHost(
              dst + r * w, cache.Row(first + sent + r), static_cast<size_t>(wl) * sizeof(float)));
        }
        return absl::OkStatus();
      };
      for (int l = 0; l < c.n_layer; ++l) {
        ODMOE_RETURN_IF_ERROR(copy_layer(kv.k(l), kv_k_.data() + l * layer_floats));
        if (!with_v) continue;
        ODMOE_RETURN_IF_ERROR(copy_layer(kv.v(l), kv_v_.data() + l * layer_floats));
      }
      v1::KvRows* rows = a->mutable_kv();
      rows->set_first_pos(static_cast<uint32_t>(first + sent));
      rows->set_count(static_cast<uint32_t>(m));
      EncodeRows(kv_k_.data(), int64_t{m} * c.n_layer, w, v1::WIRE_DTYPE_F32, rows->mutable_k());
      if (with_v) {
        EncodeRows(kv_v_.data(), int64_t{m} * c.n_layer, w, v1::WIRE_DTYPE_F32, rows->mutable_v());
      }
      sent += m;
    }
    a->set_kv_more(sent < count);
    ODMOE_RETURN_IF_ERROR(links_.SendToShadow(req));
  } while (sent < count);
  if (send_kv) *kv_sent = pos;
  return absl::OkStatus();
}

}  // namespace odmoe
