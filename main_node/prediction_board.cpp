#include "main_node/prediction_board.h"

namespace odmoe {

void PredictionBoard::Reset(uint64_t request) {
  std::lock_guard<std::mutex> lock(mu_);
  request_ = request;
  predictions_.clear();
}

void PredictionBoard::Put(uint64_t request, uint32_t token, uint32_t layer,
                          std::vector<int32_t> experts) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request != request_) return;
  predictions_[{token, layer}] = std::move(experts);
}

std::vector<int32_t> PredictionBoard::Get(uint64_t request, uint32_t token,
                                          uint32_t layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (request != request_) return {};
  auto it = predictions_.find({token, layer});
  return it == predictions_.end() ? std::vector<int32_t>{} : it->second;
}

std::map<std::pair<uint32_t, uint32_t>, std::vector<int32_t>> PredictionBoard::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return predictions_;
}

void PredictionBoard::MarkDone(uint64_t request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = std::max(done_, request);
  }
  cv_.notify_all();
}

bool PredictionBoard::WaitDone(uint64_t request, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                      [&] { return done_ >= request; });
}

}  // namespace odmoe
