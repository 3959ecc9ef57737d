#include "shadow_node/shadow_core.h"

#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
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

// One request followed: its slot, where its iterations are, what the main
// node has told it.
struct ShadowCore::Seq {
  v1::ShadowBegin begin;
  uint64_t req = 0;
  int slot = 0;
  int prompt = 0;           // prompt length
  bool prefilled = false;
  bool ended = false;       // ShadowEnd (or AbortAll) arrived
  bool predicting = true;   // hints and predictions (false: drafts only)
  bool batched = false;     // in shared iterations: no hints of its own
  bool aligning = false;
  uint32_t draft = 0;       // drafted tokens asked for (0 = none)
  uint32_t ahead = 1;       // iterations it may run ahead of the main node
  uint32_t n = 1;           // its next decode iteration
  int32_t own = -1;         // its greedy guess of iteration n's input
  int32_t token = -1;       // iteration n's input, once Ready()
  uint32_t main_progress = 0;  // the latest iteration the main node started
  std::map<uint32_t, int32_t> aligned;  // iteration -> the main node's input token
  std::vector<int32_t> used;            // the token each iteration ran with
  std::deque<v1::ShadowAlign> aligns;   // not applied yet, in arrival order
  bool skipped = false;     // Ready() skipped an iteration (look again at once)
  uint32_t iterations = 0;
  absl::Status error;
  // Past its last iteration: max_tokens done, or the context full.
  bool PastEnd(int n_ctx) const {
    return n > begin.max_tokens() || prompt + static_cast<int>(n) - 1 >= n_ctx;
  }
};

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
  core->slot_free_.assign(static_cast<size_t>(core->transformer_->n_seq()), true);
  core->thread_ = std::thread([c = core.get()] { c->Loop(); });
  return core;
}

ShadowCore::ShadowCore(const ModelFile& model, Backend& backend, const Options& options)
    : model_(model), backend_(backend), options_(options) {}

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
  inbox_.push_back(request);
  cv_.notify_all();
  return absl::OkStatus();
}

void ShadowCore::TakeInboxLocked() {
  while (!inbox_.empty()) {
    v1::ShadowRequest m = std::move(inbox_.front());
    inbox_.pop_front();
    if (m.has_begin()) {
      ++stats_.requests;
      if (seqs_.count(m.begin().request()) > 0) {  // a repeated begin: the old one ends
        seqs_[m.begin().request()]->ended = true;
        ++stats_.rejected_messages;
        continue;
      }
      Begin(m.begin());
    } else if (m.has_align()) {
      auto it = seqs_.find(m.align().request());
      if (it != seqs_.end()) it->second->aligns.push_back(std::move(*m.mutable_align()));
    } else if (m.has_end()) {
      auto it = seqs_.find(m.end().request());
      if (it != seqs_.end()) it->second->ended = true;
    }
  }
  if (abort_) {
    for (auto& [id, seq] : seqs_) seq->ended = true;
    abort_ = false;
  }
}

void ShadowCore::Begin(const v1::ShadowBegin& begin) {
  size_t slot = 0;
  while (slot < slot_free_.size() && !slot_free_[slot]) ++slot;
  if (slot == slot_free_.size()) {
    // A request ended in the same batch of messages still holds its slot:
    // finish it first (its end came before this begin).
    for (auto& [id, seq] : seqs_) {
      if (!seq->ended) continue;
      slot = static_cast<size_t>(seq->slot);
      FinishLocked(id);
      break;
    }
  }
  if (slot == slot_free_.size()) {
    const absl::Status s = absl::ResourceExhaustedError(absl::StrFormat(
        "the shadow follows %d requests at once, and all of them are running", slot_free_.size()));
    ODMOE_LOG_WARN("request {}: {}", begin.request(), s.message());
    v1::ShadowReply done;
    done.mutable_done()->set_request(begin.request());
    done.mutable_done()->set_error_code(static_cast<int>(s.code()));
    done.mutable_done()->set_error_message(std::string(s.message()));
    ++stats_.requests_finished;
    Reply(done);
    return;
  }
  slot_free_[slot] = false;
  auto seq = std::make_unique<Seq>();
  seq->begin = begin;
  seq->req = begin.request();
  seq->slot = static_cast<int>(slot);
  seq->prompt = begin.prompt_ids_size();
  seq->predicting = !begin.drafts_only();
  seq->batched = begin.batched();
  seq->aligning = begin.token_period() > 0 || begin.kv_period() > 0;
  seq->draft = begin.draft_tokens();
  // Speculative run-ahead: the shadow never waits for an alignment. It
  // computes iteration n with the main node's token when that has arrived,
  // else with its own greedy guess, and keeps at most one iteration ahead of
  // the main node while alignments are on (so its hints for iteration n+1
  // reach the workers while the main node still computes n). When the main
  // node's token for an iteration it already computed differs from its
  // guess, it computes that iteration again with the real token (the workers
  // get the corrected hints).
  //
  // Drafting (speculative decoding) lets it run further ahead, 2 * draft + 1
  // iterations, on its own tokens: the main node verifies `draft` of them per
  // iteration and finds the next ones already drafted while it verifies.
  seq->ahead = seq->aligning ? 1u : static_cast<uint32_t>(options_.max_run_ahead);
  if (seq->draft > 0) seq->ahead = std::max(seq->ahead, 2 * seq->draft + 1);
  seq->used.assign(begin.max_tokens() + 2u, -1);
  seqs_[seq->req] = std::move(seq);
}

void ShadowCore::Loop() {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      TakeInboxLocked();
      if (stop_) {
        for (auto& [id, seq] : seqs_) seq->ended = true;
      }
    }
    // Ended (or failed, or past their last iteration): ShadowDone.
    for (auto it = seqs_.begin(); it != seqs_.end();) {
      Seq& seq = *it->second;
      const bool over = seq.ended || !seq.error.ok() || seq.PastEnd(transformer_->n_ctx());
      ++it;
      if (over) Finish(seq.req);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    // Prompts first (one request at a time), then one decode iteration of
    // every request that may run one, together.
    bool ran = false;
    for (auto& [id, seq] : seqs_) {
      if (seq->prefilled || !seq->error.ok()) continue;
      const auto t0 = std::chrono::steady_clock::now();
      seq->error = Prefill(*seq);
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.forward_seconds += Since(t0);
      }
      ran = true;
    }
    if (ran) continue;
    std::vector<Seq*> rows;
    bool waiting_token = false, skipped = false;
    for (auto& [id, seq] : seqs_) {
      if (!seq->error.ok() || seq->ended) continue;
      if (static_cast<int>(rows.size()) >= transformer_->n_batch()) break;
      if (Ready(*seq)) {
        rows.push_back(seq.get());
      } else if (seq->skipped) {
        skipped = true;
      } else if (seq->main_progress + seq->ahead >= seq->n) {
        waiting_token = true;
      }
    }
    if (rows.empty() && skipped) continue;
    if (!rows.empty()) {
      const absl::Status s = Decode(rows);
      if (!s.ok()) {
        for (Seq* seq : rows) seq->error = s;
      }
      continue;
    }
    // Nothing to run: wait for the main node (an alignment, a begin, an end).
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    auto woken = [&] { return stop_ || abort_ || !inbox_.empty(); };
    if (waiting_token) {
      // Skipped the previous iteration and no token yet: look again soon.
      cv_.wait_for(lock, std::chrono::milliseconds(1), woken);
    } else {
      cv_.wait(lock, woken);
    }
    stats_.wait_seconds += Since(t0);
  }
}

absl::Status ShadowCore::Prefill(Seq& seq) {
  SetGroups(seq.begin.live_groups());
  const std::vector<int32_t> prompt(seq.begin.prompt_ids().begin(), seq.begin.prompt_ids().end());
  for (int done = 0; done < seq.prompt;) {
    const int m = std::min(transformer_->n_batch(), seq.prompt - done);
    const Transformer::Segment segment{seq.slot, done, m};
    ODMOE_RETURN_IF_ERROR(transformer_->ForwardSegments(
        std::span<const int32_t>(prompt).subspan(static_cast<size_t>(done), static_cast<size_t>(m)),
        {&segment, 1}, *experts_));
    done += m;
  }
  ODMOE_RETURN_IF_ERROR(transformer_->SegmentLogits(&logits_));
  seq.own = Argmax(logits_);
  seq.prefilled = true;
  return absl::OkStatus();
}

bool ShadowCore::Ready(Seq& seq) {
  seq.token = -1;
  seq.skipped = false;
  // Apply, in arrival order, every alignment for iterations up to n; the
  // later ones only say how far the main node is.
  for (const v1::ShadowAlign& a : seq.aligns) seq.main_progress = std::max(seq.main_progress, a.token());
  while (!seq.aligns.empty() && seq.aligns.front().token() <= seq.n) {
    const v1::ShadowAlign& a = seq.aligns.front();
    if (a.has_kv()) {
      const auto ta = std::chrono::steady_clock::now();
      const absl::Status s = ApplyKv(seq.slot, a.kv());
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok()) {
        ODMOE_LOG_ERROR("request {}: KV alignment rejected: {}", seq.req, s.message());
        ++stats_.rejected_messages;
      } else {
        ++stats_.kv_alignments;
        stats_.kv_rows_aligned += a.kv().count();
      }
      stats_.alignment_seconds += Since(ta);
    }
    SetGroups(a.live_groups());
    seq.batched = a.batched();
    if (a.has_token()) {
      seq.aligned[a.token()] = a.token_id();
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.token_alignments;
    }
    seq.aligns.pop_front();
  }
  if (seq.main_progress + seq.ahead < seq.n) return false;  // far enough ahead
  // Check the iterations already computed against the tokens that arrived.
  for (auto it = seq.aligned.begin(); it != seq.aligned.end() && it->first < seq.n;) {
    if (seq.used[it->first] >= 0 && seq.used[it->first] != it->second) {
      seq.n = it->first;  // mispredicted token: compute that iteration again
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.speculation_misses;
      break;
    }
    it = seq.aligned.erase(it);
  }
  // (Never with recurrent layers: a skipped row would be missing from their
  // state, which no KV row can bring.)
  if (seq.begin.token_period() == 1 && seq.begin.kv_period() == 1 && seq.main_progress > seq.n &&
      transformer_->recurrent_state().empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.iterations_skipped;
    ++seq.n;
    seq.skipped = true;
    return false;
  }
  if (seq.PastEnd(transformer_->n_ctx())) return false;
  auto known = seq.aligned.find(seq.n);
  seq.token = known != seq.aligned.end()           ? known->second
              : seq.n == 1 || seq.used[seq.n - 1] >= 0 ? seq.own
                                                     : -1;
  return seq.token >= 0;
}

absl::Status ShadowCore::Resync(Seq& seq) {
  const RecurrentState& state = transformer_->recurrent_state();
  const int pos = seq.prompt + static_cast<int>(seq.n) - 1;
  if (state.empty() || state.Check(seq.slot, pos).ok()) return absl::OkStatus();
  const int checkpoint = state.checkpoint(seq.slot);
  const int from = checkpoint >= 0 && checkpoint <= pos ? checkpoint : 0;
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(pos - from));
  for (int p = from; p < pos; ++p) {
    if (p < seq.prompt) {
      tokens.push_back(seq.begin.prompt_ids(p));
      continue;
    }
    const size_t iteration = static_cast<size_t>(p - seq.prompt + 1);
    if (iteration >= seq.used.size() || seq.used[iteration] < 0) {
      return absl::InternalError(absl::StrCat("request ", seq.req, ": iteration ", iteration,
                                              " has no token to bring the recurrent state back"));
    }
    tokens.push_back(seq.used[iteration]);
  }
  for (int done = 0; done < static_cast<int>(tokens.size());) {
    const int m = std::min(transformer_->n_batch(), static_cast<int>(tokens.size()) - done);
    const Transformer::Segment segment{seq.slot, from + done, m};
    ODMOE_RETURN_IF_ERROR(transformer_->ForwardSegments(
        std::span<const int32_t>(tokens).subspan(static_cast<size_t>(done), static_cast<size_t>(m)),
        {&segment, 1}, *experts_));
    done += m;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.recurrent_resyncs;
  stats_.recurrent_rows_replayed += tokens.size();
  return absl::OkStatus();
}

absl::Status ShadowCore::Decode(const std::vector<Seq*>& rows) {
  for (Seq* seq : rows) ODMOE_RETURN_IF_ERROR(Resync(*seq));
  std::vector<int32_t> tokens;
  std::vector<Transformer::Segment> segments;
  for (const Seq* seq : rows) {
    tokens.push_back(seq->token);
    segments.push_back({seq->slot, seq->prompt + static_cast<int>(seq->n) - 1, 1});
  }
  int64_t layer_start_us = TraceRecorder::NowUs();  // S_l: from the previous gate to this one
  PredictingExecutor emitter(*experts_, [&](int layer, const RoutingPlan& plan) {
    const bool tracing = options_.trace && options_.trace->enabled();
    const int64_t now = tracing ? TraceRecorder::NowUs() : 0;
    // One reply for the layer: a Prediction when one request ran, else all
    // of them in a PredictionBatch.
    v1::ShadowReply reply;
    for (size_t r = 0; r < rows.size(); ++r) {
      const Seq& seq = *rows[r];
      if (tracing) {
        options_.trace->Record(TraceEvent{"S", "compute", layer_start_us, now - layer_start_us,
                                          seq.req, seq.n, layer, -1});
      }
      if (!seq.predicting) continue;
      v1::Hint hint;
      v1::StepKey* key = hint.mutable_key();
      key->set_request(seq.req);
      key->set_token(seq.n);
      key->set_layer(static_cast<uint32_t>(layer));
      // The row's experts by rank: weight descending, ties to the lower id
      // (RouterTopK's order).
      std::vector<std::pair<float, int32_t>> ranked;
      for (const RoutingPlan::ExpertRows& er : plan.experts) {  // ascending ids
        auto at = std::find(er.rows.begin(), er.rows.end(), static_cast<int32_t>(r));
        if (at != er.rows.end()) ranked.emplace_back(er.weights[static_cast<size_t>(at - er.rows.begin())], er.expert);
      }
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (const auto& [weight, expert] : ranked) hint.add_experts(static_cast<uint32_t>(expert));
      hint.set_ranked(true);
      v1::Prediction* pred = rows.size() == 1 ? reply.mutable_prediction()
                                              : reply.mutable_predictions()->add_predictions();
      *pred->mutable_key() = hint.key();
      *pred->mutable_experts() = hint.experts();
      std::lock_guard<std::mutex> lock(sink_mu_);
      if (hints_ && !seq.batched) {
        hints_(live_groups_[static_cast<size_t>(layer) % live_groups_.size()], hint);
      }
    }
    if (reply.kind_case() != v1::ShadowReply::KIND_NOT_SET) Reply(reply);
    layer_start_us = now;
  });
  const auto t0 = std::chrono::steady_clock::now();
  ODMOE_RETURN_IF_ERROR(transformer_->ForwardSegments(tokens, segments, emitter));
  ODMOE_RETURN_IF_ERROR(transformer_->SegmentLogits(&logits_));
  const size_t n_vocab = logits_.size() / rows.size();
  uint64_t predictions = 0, drafts = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    Seq& seq = *rows[r];
    seq.used[seq.n] = seq.token;
    seq.own = Argmax(std::span<const float>(logits_).subspan(r * n_vocab, n_vocab));
    if (seq.draft > 0) {
      v1::ShadowReply reply;
      v1::Draft* d = reply.mutable_draft();
      d->set_request(seq.req);
      d->set_token(seq.n);
      d->set_input_id(seq.token);
      d->set_output_id(seq.own);
      Reply(reply);
      ++drafts;
    }
    if (seq.predicting) predictions += static_cast<uint64_t>(model_.config().n_moe_layer());
    ++seq.iterations;
    ++seq.n;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.iterations += rows.size();
  stats_.predictions += predictions;
  stats_.drafts += drafts;
  stats_.forward_seconds += Since(t0);
  return absl::OkStatus();
}

void ShadowCore::Finish(uint64_t request) {
  std::lock_guard<std::mutex> lock(mu_);
  FinishLocked(request);
}

void ShadowCore::FinishLocked(uint64_t request) {
  auto it = seqs_.find(request);
  Seq& seq = *it->second;
  v1::ShadowReply done;
  done.mutable_done()->set_request(seq.req);
  done.mutable_done()->set_iterations(seq.iterations);
  if (!seq.error.ok()) {
    ODMOE_LOG_ERROR("request {}: {}", seq.req, seq.error.message());
    done.mutable_done()->set_error_code(static_cast<int>(seq.error.code()));
    done.mutable_done()->set_error_message(std::string(seq.error.message()));
  }
  slot_free_[static_cast<size_t>(seq.slot)] = true;
  seqs_.erase(it);
  ++stats_.requests_finished;
  Reply(done);
}

absl::Status ShadowCore::ApplyKv(int slot, const v1::KvRows& kv) {
  const ModelConfig& c = model_.config();
  const int64_t n = kv.count();
  const int64_t rows = n * c.n_layer;
  KvCache& cache = transformer_->kv_cache(slot);
  for (int which = 0; which < (c.v_in_k() ? 1 : 2); ++which) {
    ODMOE_RETURN_IF_ERROR(DecodeRows(which == 0 ? kv.k() : kv.v(), c.kv_width(), rows, &kv_host_,
                                     "KV rows")
                              .status());
    for (int l = 0; l < c.n_layer; ++l) {
      const Mat dst = (which == 0 ? cache.k(l) : cache.v(l)).RowRange(kv.first_pos(), n);
      const float* src = kv_host_.data() + static_cast<size_t>(l * n * c.kv_width());
      if (dst.cols == c.kv_width()) {
        ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(
            dst.data, src, static_cast<size_t>(n * c.kv_width()) * sizeof(float)));
        continue;
      }
      // A narrower layer (Gemma 4): the first kv_width_of(l) floats of each row.
      for (int64_t r = 0; r < n; ++r) {
        ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(
            dst.Row(r), src + r * c.kv_width(), static_cast<size_t>(dst.cols) * sizeof(float)));
      }
    }
  }
  return absl::OkStatus();
}

void ShadowCore::AbortAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    abort_ = true;
    inbox_.clear();
  }
  cv_.notify_all();
}

ShadowStats ShadowCore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace odmoe
