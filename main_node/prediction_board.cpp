#include "main_node/prediction_board.h"

namespace odmoe {

void PredictionBoard::Reset(uint64_t request) {
  std::lock_guard<std::mutex> lock(mu_);
  request_ = request;
  predictions_.clear();
  drafts_.clear();
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

void PredictionBoard::PutDraft(uint64_t request, uint32_t token, int32_t input,
                               int32_t output) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (request != request_) return;
    drafts_[token] = {input, output};
  }
  cv_.notify_all();
}

std::vector<int32_t> PredictionBoard::ChainLocked(uint32_t token, int32_t input, int max) const {
  std::vector<int32_t> chain;
  while (static_cast<int>(chain.size()) < max) {
    auto it = drafts_.find(token++);
    if (it == drafts_.end() || it->second.first != input) break;
    input = it->second.second;
    chain.push_back(input);
  }
  return chain;
}

std::vector<int32_t> PredictionBoard::DraftChain(uint64_t request, uint32_t token, int32_t input,
                                                 int max) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (request != request_) return {};
  return ChainLocked(token, input, max);
}

std::vector<int32_t> PredictionBoard::WaitDraftChain(uint64_t request, uint32_t token,
                                                     int32_t input, int max, bool realigned,
                                                     absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (request != request_) return {};
  std::vector<int32_t> chain;
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    chain = ChainLocked(token, input, max);
    if (static_cast<int>(chain.size()) >= max || done_ >= request || request != request_) {
      return true;
    }
    auto first = drafts_.find(token);
    return !realigned && first != drafts_.end() && first->second.first != input;
  });
  return request == request_ ? chain : std::vector<int32_t>{};
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
