#include "main_node/cluster_links.h"

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cluster/delay_line.h"
#include "cluster/peer_link.h"
#include "cluster/wire.h"
#include "util/logging.h"

namespace odmoe {
namespace {

using ExpertStream = grpc::ClientReaderWriter<v1::WorkerRequest, v1::ExpertResult>;
using FollowStream = grpc::ClientReaderWriter<v1::ShadowRequest, v1::ShadowReply>;

}  // namespace

struct ClusterLinks::Impl {
  Impl(const Topology& t, const ModelConfig& c, std::string id, uint64_t fingerprint,
       const PeerAuth& auth)
      : topology(t), config(c), dialer{MakeHello(v1::ROLE_MAIN, id, fingerprint), &auth} {}
  const Topology topology;
  const ModelConfig config;
  const PeerDialer dialer;
  std::vector<std::unique_ptr<PeerLink<ExpertStream>>> workers;
  std::unique_ptr<PeerLink<FollowStream>> shadow;
  PredictionBoard board;

  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<uint64_t, v1::ExpertResult> results;

  std::unique_ptr<PeerRejoin> rejoin;
  std::atomic<uint64_t> to_workers{0}, from_workers{0}, to_shadow{0}, from_shadow{0};

  // The largest ExpertResult a worker sends: a prefill mini-batch (or a
  // verification's rows) of f32 rows, with room for the other fields and
  // framing.
  size_t MaxResultBytes() const {
    return static_cast<size_t>(topology.max_task_rows()) * static_cast<size_t>(config.n_embd) *
               sizeof(float) +
           kSmallReplyBytes;
  }

  std::unique_ptr<PeerLink<ExpertStream>> MakeWorkerLink(int index) {
    const WorkerSpec& spec = topology.workers[static_cast<size_t>(index)];
    PeerTarget target{.kind = "worker",
                      .id = spec.id,
                      .address = spec.address,
                      .stream = "expert",
                      .max_receive_bytes = MaxResultBytes()};
    // The peer must be the worker the topology places at this index.
    target.check_welcome = [index, id = spec.id, address = spec.address](const v1::Welcome& w) {
      if (w.role() == v1::ROLE_WORKER && w.node_id() == id && w.worker().worker_index() == index) {
        return absl::OkStatus();
      }
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s answers as %s %s (worker index %d), but the topology places worker %s (index %d) "
          "there; start every node with the same topology file",
          address, RoleName(w.role()), w.node_id(), w.worker().worker_index(), id, index));
    };
    return std::make_unique<PeerLink<ExpertStream>>(
        std::move(target), dialer,
        [](const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx) {
          return v1::Worker::NewStub(channel)->Experts(ctx);
        },
        [this](ExpertStream& stream) { ReadWorker(stream); },
        [this] {
          std::lock_guard<std::mutex> lock(mu);
          cv.notify_all();  // wakes TakeResult: the stream broke
        });
  }

  std::unique_ptr<PeerLink<FollowStream>> MakeShadowLink() {
    PeerTarget target{.kind = "shadow",
                      .id = topology.shadow->id,
                      .address = topology.shadow->address,
                      .stream = "follow",
                      .max_receive_bytes = kSmallReplyBytes};
    return std::make_unique<PeerLink<FollowStream>>(
        std::move(target), dialer,
        [](const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx) {
          return v1::Shadow::NewStub(channel)->Follow(ctx);
        },
        [this](FollowStream& stream) { ReadShadow(stream); });
  }

  void ReadWorker(ExpertStream& stream) {
    v1::ExpertResult r;
    DelayLine delay(absl::Microseconds(topology.wire_delay_us));
    while (stream.Read(&r)) {
      from_workers += r.ByteSizeLong();
      delay.Push([this, r = std::move(r)]() mutable {
        std::lock_guard<std::mutex> lock(mu);
        results[r.task_id()] = std::move(r);
        cv.notify_all();
      });
      r = v1::ExpertResult();
    }
  }

  void ReadShadow(FollowStream& stream) {
    v1::ShadowReply r;
    DelayLine delay(absl::Microseconds(topology.wire_delay_us));
    while (stream.Read(&r)) {
      from_shadow += r.ByteSizeLong();
      delay.Push([this, r]() { HandleShadowReply(r); });
    }
  }

  void HandlePrediction(const v1::Prediction& p) {
    absl::Status s = ValidateStepKey(p.key(), config);
    if (s.ok()) s = ValidateExpertList(p.experts(), config);
    if (!s.ok()) {
      ODMOE_LOG_WARN("dropped a malformed prediction from the shadow: {}", s.message());
      return;
    }
    std::vector<int32_t> experts(p.experts().begin(), p.experts().end());
    board.Put(p.key().request(), p.key().token(), p.key().layer(), std::move(experts));
  }

  void HandleShadowReply(const v1::ShadowReply& r) {
    if (r.has_prediction()) {
      HandlePrediction(r.prediction());
    } else if (r.has_predictions()) {
      for (const v1::Prediction& p : r.predictions().predictions()) HandlePrediction(p);
    } else if (r.has_draft()) {
      const v1::Draft& d = r.draft();
      if (d.token() < 1 || d.input_id() < 0 || d.input_id() >= config.n_vocab ||
          d.output_id() < 0 || d.output_id() >= config.n_vocab) {
        ODMOE_LOG_WARN("dropped a malformed draft from the shadow: iteration {}, tokens {} -> {} "
                       "(vocabulary of {})",
                       d.token(), d.input_id(), d.output_id(), config.n_vocab);
        return;
      }
      board.PutDraft(d.request(), d.token(), d.input_id(), d.output_id());
    } else if (r.has_done()) {
      if (r.done().error_code() != 0) {
        ODMOE_LOG_WARN("shadow: request {}: {}", r.done().request(), r.done().error_message());
      }
      board.MarkDone(r.done().request());
    }
  }
};

ClusterLinks::ClusterLinks(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterLinks::~ClusterLinks() { Close(); }

std::unique_ptr<ClusterLinks> ClusterLinks::Create(const Topology& topology,
                                                   const ModelConfig& config,
                                                   std::string node_id, uint64_t fingerprint,
                                                   const PeerAuth& auth) {
  auto impl = std::make_unique<Impl>(topology, config, std::move(node_id), fingerprint, auth);
  for (int i = 0; i < topology.n_workers(); ++i) impl->workers.push_back(impl->MakeWorkerLink(i));
  // A shadow of the topology predicts (prediction: shadow), drafts
  // (shadow.draft_tokens), or serves the requests that ask for it (experiments).
  if (topology.shadow) {
    impl->shadow = impl->MakeShadowLink();
  }
  return std::unique_ptr<ClusterLinks>(new ClusterLinks(std::move(impl)));
}

absl::Status ClusterLinks::Connect(const std::atomic<bool>& cancel) {
  for (auto& link : impl_->workers) {
    if (absl::Status s = link->Connect(cancel, absl::Seconds(120)); !s.ok()) return s;
  }
  if (impl_->shadow) return impl_->shadow->Connect(cancel, absl::Seconds(300));
  return absl::OkStatus();
}

void ClusterLinks::StartRejoin() {
  if (impl_->rejoin) return;
  std::vector<PeerLinkBase*> links;
  for (auto& link : impl_->workers) links.push_back(link.get());
  if (impl_->shadow) links.push_back(impl_->shadow.get());
  impl_->rejoin = std::make_unique<PeerRejoin>(std::move(links));
}

bool ClusterLinks::worker_connected(int worker) const {
  if (worker < 0 || worker >= static_cast<int>(impl_->workers.size())) return false;
  return impl_->workers[static_cast<size_t>(worker)]->connected();
}

void ClusterLinks::Close() {
  if (impl_->rejoin) impl_->rejoin->Stop();
  for (auto& link : impl_->workers) link->Close();
  if (impl_->shadow) impl_->shadow->Close();
}

absl::Status ClusterLinks::SendToWorker(int worker, const v1::WorkerRequest& request) {
  PeerLink<ExpertStream>& link = *impl_->workers.at(static_cast<size_t>(worker));
  if (link.Write(request) != PeerWrite::kSent) {
    return absl::UnavailableError(absl::StrFormat("worker %s at %s is not reachable",
                                                  link.target().id, link.target().address));
  }
  impl_->to_workers += request.ByteSizeLong();
  return absl::OkStatus();
}

absl::StatusOr<v1::ExpertResult> ClusterLinks::TakeResult(uint64_t task_id, int worker,
                                                         absl::Duration timeout) {
  PeerLink<ExpertStream>& link = *impl_->workers.at(static_cast<size_t>(worker));
  std::unique_lock<std::mutex> lock(impl_->mu);
  const bool arrived = impl_->cv.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    return impl_->results.count(task_id) > 0 || !link.connected();
  });
  auto it = impl_->results.find(task_id);
  if (it == impl_->results.end()) {
    lock.unlock();
    if (!arrived) {
      // A silent result channel (its worker hung, or the stream lost its
      // owner): end it so that the rejoin loop opens a fresh one.
      link.Reset(absl::StrCat("sent no result within ", absl::FormatDuration(timeout)));
    }
    return absl::UnavailableError(
        absl::StrFormat("worker %s at %s %s", link.target().id, link.target().address,
                        arrived ? "dropped its stream" : "did not answer in time"));
  }
  v1::ExpertResult r = std::move(it->second);
  impl_->results.erase(it);
  return r;
}

bool ClusterLinks::shadow_connected() const { return impl_->shadow && impl_->shadow->connected(); }

void ClusterLinks::ResetShadow(std::string_view why) {
  if (impl_->shadow) impl_->shadow->Reset(why);
}

absl::Status ClusterLinks::SendToShadow(const v1::ShadowRequest& request) {
  if (!impl_->shadow) return absl::FailedPreconditionError("no shadow in this cluster");
  if (impl_->shadow->Write(request) != PeerWrite::kSent) {
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
