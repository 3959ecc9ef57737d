#include "main_node/cluster_links.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "cluster/delay_line.h"
#include "cluster/grpc_util.h"
#include "cluster/wire.h"
#include "util/logging.h"

namespace odmoe {
namespace {

struct WorkerLink {
  int index = 0;
  std::string id, address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Worker::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerRequest, v1::ExpertResult>> stream;
  std::mutex write_mu;
  std::thread reader;
  std::atomic<bool> broken{true};
};

struct ShadowLink {
  std::string id, address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Shadow::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ShadowRequest, v1::ShadowReply>> stream;
  std::mutex write_mu;
  std::thread reader;
  std::atomic<bool> broken{true};
};

}  // namespace

struct ClusterLinks::Impl {
  explicit Impl(const PeerAuth& a) : auth(a) {}
  const PeerAuth& auth;
  Topology topology;
  ModelConfig config;
  std::string node_id;
  uint64_t fingerprint = 0;
  std::vector<std::unique_ptr<WorkerLink>> workers;
  std::unique_ptr<ShadowLink> shadow;
  PredictionBoard board;

  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<uint64_t, v1::ExpertResult> results;

  std::atomic<bool> closing{false};
  std::thread rejoin;
  std::atomic<uint64_t> to_workers{0}, from_workers{0}, to_shadow{0}, from_shadow{0};

  // Reconnects broken links until closing (each try is short).
  void RejoinLoop() {
    while (!closing.load()) {
      for (auto& link : workers) {
        if (closing.load() || !link->broken.load()) continue;
        std::unique_lock<std::mutex> lock(link->write_mu);
        if (link->reader.joinable()) link->reader.join();
        lock.unlock();
        absl::Status s = ConnectWorker(*link, closing, absl::Milliseconds(500));
        if (s.ok()) ODMOE_LOG_INFO("worker {} at {} rejoined", link->id, link->address);
      }
      if (shadow && shadow->broken.load() && !closing.load()) {
        if (shadow->reader.joinable()) shadow->reader.join();
        absl::Status s = ConnectShadow(*shadow, closing, absl::Milliseconds(500));
        if (s.ok()) ODMOE_LOG_INFO("shadow {} at {} rejoined", shadow->id, shadow->address);
      }
      for (int i = 0; i < 10 && !closing.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  // The largest ExpertResult a worker sends: a prefill mini-batch of f32
  // rows, with room for the other fields and framing.
  size_t MaxResultBytes() const {
    return static_cast<size_t>(topology.prefill_mini_batch) * static_cast<size_t>(config.n_embd) *
               sizeof(float) +
           kSmallReplyBytes;
  }

  v1::Hello Hello() const {
    v1::Hello h;
    h.set_protocol_version(kProtocolVersion);
    h.set_role(v1::ROLE_MAIN);
    h.set_node_id(node_id);
    h.set_model_fingerprint(fingerprint);
    return h;
  }

  void ReadWorker(WorkerLink* link) {
    v1::ExpertResult r;
    DelayLine delay(absl::Microseconds(topology.wire_delay_us));
    while (link->stream->Read(&r)) {
      from_workers += r.ByteSizeLong();
      delay.Push([this, r = std::move(r)]() mutable {
        std::lock_guard<std::mutex> lock(mu);
        results[r.task_id()] = std::move(r);
        cv.notify_all();
      });
      r = v1::ExpertResult();
    }
    grpc::Status s = link->stream->Finish();
    link->broken = true;
    ODMOE_LOG_WARN("expert stream to worker {} ended: {}", link->id,
                   s.ok() ? std::string("closed") : s.error_message());
    std::lock_guard<std::mutex> lock(mu);
    cv.notify_all();
  }

  void ReadShadow(ShadowLink* link) {
    v1::ShadowReply r;
    DelayLine delay(absl::Microseconds(topology.wire_delay_us));
    while (link->stream->Read(&r)) {
      from_shadow += r.ByteSizeLong();
      delay.Push([this, r]() { HandleShadowReply(r); });
    }
    grpc::Status s = link->stream->Finish();
    link->broken = true;
    ODMOE_LOG_WARN("follow stream to shadow {} ended: {}", link->id,
                   s.ok() ? std::string("closed") : s.error_message());
  }

  void HandleShadowReply(const v1::ShadowReply& r) {
    if (r.has_prediction()) {
      const v1::Prediction& p = r.prediction();
      absl::Status s = ValidateStepKey(p.key(), config);
      if (s.ok()) s = ValidateExpertList(p.experts(), config);
      if (!s.ok()) {
        ODMOE_LOG_WARN("dropped a malformed prediction from the shadow: {}", s.message());
        return;
      }
      std::vector<int32_t> experts(p.experts().begin(), p.experts().end());
      board.Put(p.key().request(), p.key().token(), p.key().layer(), std::move(experts));
    } else if (r.has_done()) {
      if (r.done().error_code() != 0) {
        ODMOE_LOG_WARN("shadow: request {}: {}", r.done().request(), r.done().error_message());
      }
      board.MarkDone(r.done().request());
    }
  }

  absl::Status ConnectWorker(WorkerLink& link, const std::atomic<bool>& cancel,
                             absl::Duration patience = absl::Seconds(120)) {
    link.channel = MakeChannel(link.address, MaxResultBytes());
    absl::StatusOr<v1::Welcome> w =
        HandshakeWithRetry(*link.channel, Hello(), patience, &cancel, &auth);
    if (!w.ok()) {
      return absl::Status(w.status().code(), absl::StrFormat("worker %s at %s: %s", link.id,
                                                             link.address,
                                                             w.status().message()));
    }
    if (w->role() != v1::ROLE_WORKER || w->node_id() != link.id ||
        w->worker().worker_index() != link.index) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s answers as %s %s (worker index %d), but the topology places worker %s (index %d) "
          "there; start every node with the same topology file",
          link.address, RoleName(w->role()), w->node_id(), w->worker().worker_index(), link.id,
          link.index));
    }
    std::lock_guard<std::mutex> lock(link.write_mu);
    link.stub = v1::Worker::NewStub(link.channel);
    link.ctx = std::make_unique<grpc::ClientContext>();
    AttachCredential(*link.ctx, &auth);
    link.stream = link.stub->Experts(link.ctx.get());
    link.broken = false;
    link.reader = std::thread([this, l = &link] { ReadWorker(l); });
    return absl::OkStatus();
  }

  absl::Status ConnectShadow(ShadowLink& link, const std::atomic<bool>& cancel,
                             absl::Duration patience = absl::Seconds(300)) {
    link.channel = MakeChannel(link.address, kSmallReplyBytes);
    absl::StatusOr<v1::Welcome> w =
        HandshakeWithRetry(*link.channel, Hello(), patience, &cancel, &auth);
    if (!w.ok()) {
      return absl::Status(w.status().code(), absl::StrFormat("shadow %s at %s: %s", link.id,
                                                             link.address,
                                                             w.status().message()));
    }
    std::lock_guard<std::mutex> lock(link.write_mu);
    link.stub = v1::Shadow::NewStub(link.channel);
    link.ctx = std::make_unique<grpc::ClientContext>();
    AttachCredential(*link.ctx, &auth);
    link.stream = link.stub->Follow(link.ctx.get());
    link.broken = false;
    link.reader = std::thread([this, l = &link] { ReadShadow(l); });
    return absl::OkStatus();
  }
};

ClusterLinks::ClusterLinks(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterLinks::~ClusterLinks() { Close(); }

std::unique_ptr<ClusterLinks> ClusterLinks::Create(const Topology& topology,
                                                   const ModelConfig& config,
                                                   std::string node_id, uint64_t fingerprint,
                                                   const PeerAuth& auth) {
  auto impl = std::make_unique<Impl>(auth);
  impl->config = config;
  impl->topology = topology;
  impl->node_id = std::move(node_id);
  impl->fingerprint = fingerprint;
  for (int i = 0; i < topology.n_workers(); ++i) {
    auto link = std::make_unique<WorkerLink>();
    link->index = i;
    link->id = topology.workers[static_cast<size_t>(i)].id;
    link->address = topology.workers[static_cast<size_t>(i)].address;
    impl->workers.push_back(std::move(link));
  }
  if (topology.prediction == PredictionMode::kShadow && topology.shadow) {
    impl->shadow = std::make_unique<ShadowLink>();
    impl->shadow->id = topology.shadow->id;
    impl->shadow->address = topology.shadow->address;
  }
  return std::unique_ptr<ClusterLinks>(new ClusterLinks(std::move(impl)));
}

absl::Status ClusterLinks::Connect(const std::atomic<bool>& cancel) {
  for (auto& link : impl_->workers) {
    if (absl::Status s = impl_->ConnectWorker(*link, cancel); !s.ok()) return s;
  }
  if (impl_->shadow) return impl_->ConnectShadow(*impl_->shadow, cancel);
  return absl::OkStatus();
}

void ClusterLinks::StartRejoin() {
  if (!impl_->rejoin.joinable()) impl_->rejoin = std::thread([this] { impl_->RejoinLoop(); });
}

bool ClusterLinks::worker_connected(int worker) const {
  if (worker < 0 || worker >= static_cast<int>(impl_->workers.size())) return false;
  return !impl_->workers[static_cast<size_t>(worker)]->broken.load();
}

void ClusterLinks::Close() {
  impl_->closing = true;
  if (impl_->rejoin.joinable()) impl_->rejoin.join();
  for (auto& link : impl_->workers) {
    std::lock_guard<std::mutex> lock(link->write_mu);
    if (link->ctx) link->ctx->TryCancel();
    if (link->reader.joinable()) link->reader.join();
  }
  if (impl_->shadow) {
    std::lock_guard<std::mutex> lock(impl_->shadow->write_mu);
    if (impl_->shadow->ctx) impl_->shadow->ctx->TryCancel();
    if (impl_->shadow->reader.joinable()) impl_->shadow->reader.join();
  }
}

absl::Status ClusterLinks::SendToWorker(int worker, const v1::WorkerRequest& request) {
  WorkerLink& link = *impl_->workers.at(static_cast<size_t>(worker));
  std::lock_guard<std::mutex> lock(link.write_mu);
  if (link.broken || !link.stream || !link.stream->Write(request)) {
    return absl::UnavailableError(
        absl::StrFormat("worker %s at %s is not reachable", link.id, link.address));
  }
  impl_->to_workers += request.ByteSizeLong();
  return absl::OkStatus();
}

absl::StatusOr<v1::ExpertResult> ClusterLinks::TakeResult(uint64_t task_id, int worker,
                                                         absl::Duration timeout) {
  WorkerLink& link = *impl_->workers.at(static_cast<size_t>(worker));
  std::unique_lock<std::mutex> lock(impl_->mu);
  const bool arrived = impl_->cv.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    return impl_->results.count(task_id) > 0 || link.broken.load();
  });
  auto it = impl_->results.find(task_id);
  if (it == impl_->results.end()) {
    lock.unlock();
    if (!arrived) {
      // A silent result channel (its worker hung, or the stream lost its
      // owner): end it so that the rejoin loop opens a fresh one.
      std::lock_guard<std::mutex> write_lock(link.write_mu);
      if (!link.broken.exchange(true)) {
        ODMOE_LOG_WARN("worker {} at {} sent no result within {}; reopening its expert stream",
                       link.id, link.address, absl::FormatDuration(timeout));
        if (link.ctx) link.ctx->TryCancel();
      }
    }
    return absl::UnavailableError(absl::StrFormat(
        "worker %s at %s %s", link.id, link.address,
        arrived ? "dropped its stream" : "did not answer in time"));
  }
  v1::ExpertResult r = std::move(it->second);
  impl_->results.erase(it);
  return r;
}

bool ClusterLinks::shadow_connected() const {
  return impl_->shadow && !impl_->shadow->broken.load();
}

void ClusterLinks::ResetShadow(std::string_view why) {
  ShadowLink* link = impl_->shadow.get();
  if (!link) return;
  std::lock_guard<std::mutex> lock(link->write_mu);
  if (link->broken.exchange(true)) return;
  ODMOE_LOG_WARN("shadow {} at {}: {}; reopening its follow stream", link->id, link->address,
                 std::string(why));
  if (link->ctx) link->ctx->TryCancel();
}

absl::Status ClusterLinks::SendToShadow(const v1::ShadowRequest& request) {
  ShadowLink* link = impl_->shadow.get();
  if (!link) return absl::FailedPreconditionError("no shadow in this cluster");
  std::lock_guard<std::mutex> lock(link->write_mu);
  if (link->broken || !link->stream || !link->stream->Write(request)) {
    link->broken = true;
    return absl::UnavailableError("the shadow is not reachable");
  }
  impl_->to_shadow += request.ByteSizeLong();
  return absl::OkStatus();
}

LinkBytes ClusterLinks::bytes() const {
  return {impl_->to_workers.load(), impl_->from_workers.load(), impl_->to_shadow.load(),
          impl_->from_shadow.load()};
}

PredictionBoard& ClusterLinks::predictions() { return impl_->board; }

}  // namespace odmoe
