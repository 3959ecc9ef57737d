#include "shadow_node/shadow_core.h"

#include <chrono>
#include <map>

#include "absl/strings/str_format.h"
#include "cluster/wire.h"
#include "engine/sampler.h"
#include "topology/topology.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs the local experts and, first, announces which ones the gate chose.
class PredictingExecutor : public ExpertExecutor {
 public:
  using Emit = std::function<void(int layer, const RoutingPlan& plan)>;
  PredictingExecutor(ExpertExecutor& inner, Emit emit) : inner_(inner), emit_(std::move(emit)) {}
  absl::Status Run(int layer, ConstMat x, const RoutingPlan& plan, Mat out) override {
    emit_(layer, plan);
    return inner_.Run(layer, x, plan, out);
  }

 private:
  ExpertExecutor& inner_;
  Emit emit_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShadowCore>> ShadowCore::Create(const ModelFile& model,
                                                               Backend& backend,
                                                               Transformer::Options transformer,
                                                               const Options& options) {
  if (options.n_groups < 1 || options.max_run_ahead < 1) {
    return absl::InvalidArgumentError("shadow needs n_groups >= 1 and max_run_ahead >= 1");
  }
  std::unique_ptr<ShadowCore> core(new ShadowCore(model, backend, options));
  ODMOE_ASSIGN_OR_RETURN(core->transformer_, Transformer::Create(model, backend, transformer));
  ODMOE_ASSIGN_OR_RETURN(core->experts_, LocalExpertExecutor::Create(
                                             model, backend, core->transformer_->n_batch()));
  for (int g = 0; g < options.n_groups; ++g) core->live_groups_.push_back(g);
  core->thread_ = std::thread([c = core.get()] { c->Loop(); });
  return core;
}

ShadowCore::~ShadowCore() { Stop(); }

void ShadowCore::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ShadowCore::Attach(uint64_t id, ReplySink replies, HintSink hints) {
  std::lock_guard<std::mutex> lock(sink_mu_);
  sink_id_ = id;
  replies_ = std::move(replies);
  hints_ = std::move(hints);
}

bool ShadowCore::Detach(uint64_t id) {
  std::lock_guard<std::mutex> lock(sink_mu_);
  if (sink_id_ != id) return false;
  replies_ = nullptr;
  hints_ = nullptr;
  return true;
}

void ShadowCore::Reply(const v1::ShadowReply& reply) {
  std::lock_guard<std::mutex> lock(sink_mu_);
  if (replies_) replies_(reply);
}

absl::Status ShadowCore::ValidateGroups(
    const google::protobuf::RepeatedField<int32_t>& groups) const {
  for (int i = 0; i < groups.size(); ++i) {
    if (groups[i] < 0 || groups[i] >= options_.n_groups || (i > 0 && groups[i] <= groups[i - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "live groups must be ascending ids in [0, %d)", options_.n_groups));
    }
  }
  return absl::OkStatus();
}

void ShadowCore::SetGroups(const google::protobuf::RepeatedField<int32_t>& groups) {
  if (groups.empty()) return;
  live_groups_.assign(groups.begin(), groups.end());
}

absl::Status ShadowCore::ValidateAlign(const v1::ShadowAlign& a) const {
  const ModelConfig& c = model_.config();
  ODMOE_RETURN_IF_ERROR(ValidateGroups(a.live_groups()));
  if (a.token() < 1) return absl::InvalidArgumentError("alignment for token 0");
  if (a.has_token() && (a.token_id() < 0 || a.token_id() >= c.n_vocab)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("aligned token id %d outside the vocabulary [0, %d)", a.token_id(),
                        c.n_vocab));
  }
  if (a.has_kv()) {
    const v1::KvRows& kv = a.kv();
    const uint64_t end = uint64_t{kv.first_pos()} + kv.count();
    if (kv.count() < 1 || end > static_cast<uint64_t>(transformer_->n_ctx())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "KV rows %d..%d outside the context of %d", kv.first_pos(), end, transformer_->n_ctx()));
    }
    const uint64_t rows = uint64_t{kv.count()} * c.n_layer;
    if (kv.k().rows() != rows) {
      return absl::InvalidArgumentError(
          absl::StrFormat("KV chunk has %d K rows, expected %d layers x %d positions",
                          kv.k().rows(), c.n_layer, kv.count()));
    }
    // MLA's latent cache has no V of its own (ModelConfig::v_in_k): no V rows.
    const uint64_t v_rows = c.v_in_k() ? 0 : rows;
    if (kv.v().rows() != v_rows) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "KV chunk has %d V rows, expected %d", kv.v().rows(), v_rows));
    }
  }
  return absl::OkStatus();
}

absl::Status ShadowCore::Submit(const v1::ShadowRequest& request) {
  const ModelConfig& c = model_.config();
  absl::Status s;
  if (request.has_begin()) {
    const v1::ShadowBegin& b = request.begin();
    const int64_t total = int64_t{b.prompt_ids_size()} + b.max_tokens();
    s = ValidateGroups(b.live_groups());
    if (!s.ok()) {
    } else if (b.draft_tokens() > static_cast<uint32_t>(kMaxDraftTokens)) {
      s = absl::InvalidArgumentError(absl::StrFormat("begin asks for %d drafted tokens (at most %d)",
                                                     b.draft_tokens(), kMaxDraftTokens));
    } else if (b.request() == 0 || b.prompt_ids_size() == 0 || b.max_tokens() == 0) {
      s = absl::InvalidArgumentError("begin needs a request id, a prompt and max_tokens >= 1");
    } else if (total > transformer_->n_ctx()) {
      s = absl::InvalidArgumentError(absl::StrFormat(
          "prompt (%d) + max_tokens (%d) exceeds the shadow's context of %d",
          b.prompt_ids_size(), b.max_tokens(), transformer_->n_ctx()));
    } else {
      for (int32_t id : b.prompt_ids()) {
        if (id < 0 || id >= c.n_vocab) {
          s = absl::InvalidArgumentError(absl::StrFormat("prompt token id %d out of range", id));
          break;
        }
      }
    }
  } else if (request.has_align()) {
    s = ValidateAlign(request.align());
  } else if (!request.has_end()) {
    s = absl::InvalidArgumentError("empty shadow request");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) {
    ++stats_.rejected_messages;
    return s;
  }
  if (request.has_end()) {
    ended_ = std::max(ended_, request.end().request());
  } else {
    inbox_.push_back(request);
  }
  cv_.notify_all();
  return absl::OkStatus();
}

void ShadowCore::Loop() {
  while (true) {
    v1::ShadowBegin begin;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        while (!inbox_.empty() && !inbox_.front().has_begin()) inbox_.pop_front();  // stale aligns
        return stop_ || !inbox_.empty();
      });
      if (stop_) return;
      begin = inbox_.front().begin();
      inbox_.pop_front();
      ++stats_.requests;
      if (begin.request() <= ended_) {  // ended before it started
        ++stats_.requests_finished;
        continue;
      }
      current_ = begin.request();
    }
    RunRequest(begin);
    std::lock_guard<std::mutex> lock(mu_);
    current_ = 0;
    ++stats_.requests_finished;
  }
}

absl::Status ShadowCore::ApplyKv(const v1::KvRows& kv) {
  const ModelConfig& c = model_.config();
  const int64_t n = kv.count();
  const int64_t rows = n * c.n_layer;
  for (int which = 0; which < (c.v_in_k() ? 1 : 2); ++which) {
    ODMOE_RETURN_IF_ERROR(DecodeRows(which == 0 ? kv.k() : kv.v(), c.kv_width(), rows, &kv_host_,
                                     "KV rows")
                              .status());
    for (int l = 0; l < c.n_layer; ++l) {
      const Mat dst = (which == 0 ? transformer_->kv_cache().k(l) : transformer_->kv_cache().v(l))
                          .RowRange(kv.first_pos(), n);
      ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(
          dst.data, kv_host_.data() + static_cast<size_t>(l * n * c.kv_width()),
          static_cast<size_t>(n * c.kv_width()) * sizeof(float)));
    }
  }
  return absl::OkStatus();
}

bool ShadowCore::PrepareIteration(uint64_t request, uint32_t n, uint32_t ahead,
                                  std::map<uint32_t, int32_t>* aligned, uint32_t* progress) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  uint32_t main_progress = *progress;
  while (true) {
    if (stop_ || ended_ >= request) return false;
    // Apply, in arrival order, every alignment for iterations up to n.
    for (auto it = inbox_.begin(); it != inbox_.end();) {
      if (it->has_begin()) return false;  // a newer request supersedes this one
      const v1::ShadowAlign& a = it->align();
      if (a.request() != request) {
        it = inbox_.erase(it);
        continue;
      }
      main_progress = std::max(main_progress, a.token());
      if (a.token() > n) {
        ++it;
        continue;
      }
      if (a.has_kv()) {
        const auto ta = std::chrono::steady_clock::now();
        if (absl::Status s = ApplyKv(a.kv()); !s.ok()) {
          ODMOE_LOG_ERROR("KV alignment rejected: {}", s.message());
          ++stats_.rejected_messages;
        } else {
          ++stats_.kv_alignments;
          stats_.kv_rows_aligned += a.kv().count();
        }
        stats_.alignment_seconds += Since(ta);
      }
      SetGroups(a.live_groups());
      if (a.has_token()) {
        (*aligned)[a.token()] = a.token_id();
        ++stats_.token_alignments;
      }
      it = inbox_.erase(it);
    }
    if (main_progress + ahead >= n) break;
    cv_.wait(lock);
  }
  stats_.wait_seconds += Since(t0);
  *progress = main_progress;
  return true;
}

void ShadowCore::RunRequest(const v1::ShadowBegin& begin) {
  const uint64_t req = begin.request();
  SetGroups(begin.live_groups());
  const std::vector<int32_t> prompt(begin.prompt_ids().begin(), begin.prompt_ids().end());
  const int p = static_cast<int>(prompt.size());
  v1::ShadowReply done;
  done.mutable_done()->set_request(req);
  auto fail = [&](const absl::Status& s) {
    ODMOE_LOG_ERROR("request {}: {}", req, s.message());
    done.mutable_done()->set_error_code(static_cast<int>(s.code()));
    done.mutable_done()->set_error_message(std::string(s.message()));
  };
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();
  absl::Status s = transformer_->Forward(prompt, 0, *experts_, &logits, nullptr);
  if (!s.ok()) {
    fail(s);
    Reply(done);
    return;
  }
  int32_t own = Argmax(logits);
  uint32_t n = 0;
  int64_t layer_start_us = 0;  // S_l: from the previous gate (or the iteration start) to this one
  const bool predicting = !begin.drafts_only();
  PredictingExecutor emitter(*experts_, [&](int layer, const RoutingPlan& plan) {
    if (options_.trace && options_.trace->enabled()) {
      const int64_t now = TraceRecorder::NowUs();
      options_.trace->Record(TraceEvent{"S", "compute", layer_start_us, now - layer_start_us, req,
                                        n, layer, -1});
      layer_start_us = now;
    }
    if (!predicting) return;
    v1::Hint hint;
    v1::StepKey* key = hint.mutable_key();
    key->set_request(req);
    key->set_token(n);
    key->set_layer(static_cast<uint32_t>(layer));
    for (const RoutingPlan::ExpertRows& er : plan.experts) {
      hint.add_experts(static_cast<uint32_t>(er.expert));
    }
    v1::ShadowReply reply;
    v1::Prediction* pred = reply.mutable_prediction();
    *pred->mutable_key() = hint.key();
    *pred->mutable_experts() = hint.experts();
    std::lock_guard<std::mutex> lock(sink_mu_);
    if (hints_) hints_(live_groups_[static_cast<size_t>(layer) % live_groups_.size()], hint);
    if (replies_) replies_(reply);
  });
  double forward_seconds = Since(t0);
  uint32_t iterations = 0;
  // Speculative run-ahead: the shadow never waits for an alignment. It
  // computes iteration n with the main node's token when that has arrived,
  // else with its own greedy guess, and keeps at most one iteration ahead of
  // the main node while alignments are on (so its hints for iteration n+1
  // reach the workers while the main node still computes n). KV rows are
  // applied as they arrive. When the main node's token for an iteration it
  // already computed differs from its guess, it computes that iteration again
  // with the real token (the workers get the corrected hints).
  //
  // Drafting (speculative decoding) lets it run further ahead, 2 * draft + 1
  // iterations, on its own tokens: the main node verifies `draft` of them per
  // iteration and finds the next ones already drafted while it verifies.
  const bool aligning = begin.token_period() > 0 || begin.kv_period() > 0;
  const uint32_t draft = begin.draft_tokens();
  uint32_t ahead = aligning ? 1u : static_cast<uint32_t>(options_.max_run_ahead);
  if (draft > 0) ahead = std::max(ahead, 2 * draft + 1);
  std::map<uint32_t, int32_t> aligned;  // iteration -> the main node's input token
  std::vector<int32_t> used(begin.max_tokens() + 2u, -1);  // the token each iteration ran with
  uint32_t main_progress = 0;
  for (n = 1; n <= begin.max_tokens();) {
    if (!PrepareIteration(req, n, ahead, &aligned, &main_progress)) break;
    // Check the iterations already computed against the tokens that arrived.
    for (auto it = aligned.begin(); it != aligned.end() && it->first < n;) {
      if (used[it->first] >= 0 && used[it->first] != it->second) {
        n = it->first;  // mispredicted token: compute that iteration again
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.speculation_misses;
        break;
      }
      it = aligned.erase(it);
    }
    if (begin.token_period() == 1 && begin.kv_period() == 1 && main_progress > n) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.iterations_skipped;
      ++n;
      continue;
    }
    const int pos = p + static_cast<int>(n) - 1;
    if (pos >= transformer_->n_ctx()) break;
    auto known = aligned.find(n);
    const int32_t token = known != aligned.end() ? known->second : n == 1 || used[n - 1] >= 0
                                                                       ? own
                                                                       : -1;
    if (token < 0) {  // skipped the previous iteration and no token yet: wait for it
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(1));
      continue;
    }
    t0 = std::chrono::steady_clock::now();
    layer_start_us = TraceRecorder::NowUs();
    const int32_t input[1] = {token};
    s = transformer_->Forward(input, pos, emitter, &logits, nullptr);
    forward_seconds += Since(t0);
    if (!s.ok()) {
      fail(s);
      break;
    }
    used[n] = token;
    own = Argmax(logits);
    if (draft > 0) {
      v1::ShadowReply reply;
      v1::Draft* d = reply.mutable_draft();
      d->set_request(req);
      d->set_token(n);
      d->set_input_id(token);
      d->set_output_id(own);
      Reply(reply);
    }
    ++iterations;
    ++n;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.iterations += iterations;
    if (predicting) stats_.predictions += uint64_t{iterations} * model_.config().n_moe_layer();
    if (draft > 0) stats_.drafts += iterations;
    stats_.forward_seconds += forward_seconds;
  }
  done.mutable_done()->set_iterations(iterations);
  Reply(done);
}

void ShadowCore::AbortCurrent() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = std::max(ended_, current_);
    inbox_.clear();
  }
  cv_.notify_all();
}

ShadowStats ShadowCore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace odmoe
