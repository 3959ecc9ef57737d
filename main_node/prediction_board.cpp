#include "main_node/prediction_board.h"

namespace odmoe {

void PredictionBoard::Track(uint64_t request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pages_[request] = Pages();
  }
  cv_.notify_all();
}

void PredictionBoard::Forget(uint64_t request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pages_.erase(request);
  }
  cv_.notify_all();
}

size_t PredictionBoard::tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pages_.size();
}

void PredictionBoard::Put(uint64_t request, uint32_t token, uint32_t layer,
                          std::vector<int32_t> experts) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pages_.find(request);
  if (it == pages_.end()) return;
  it->second.predictions[{token, layer}] = std::move(experts);
}

std::vector<int32_t> PredictionBoard::Get(uint64_t request, uint32_t token,
                                          uint32_t layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pages_.find(request);
  if (it == pages_.end()) return {};
  auto p = it->second.predictions.find({token, layer});
  return p == it->second.predictions.end() ? std::vector<int32_t>{} : p->second;
}

PredictionBoard::Page PredictionBoard::Snapshot(uint64_t request) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pages_.find(request);
  return it == pages_.end() ? Page{} : it->second.predictions;
}

void PredictionBoard::PutDraft(uint64_t request, uint32_t token, int32_t input,
                               int32_t output) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pages_.find(request);
    if (it == pages_.end()) return;
    it->second.drafts[token] = {input, output};
  }
  cv_.notify_all();
}

std::vector<int32_t> PredictionBoard::ChainLocked(const Pages& p, uint32_t token, int32_t input,
                                                  int max) {
  std::vector<int32_t> chain;
  while (static_cast<int>(chain.size()) < max) {
    auto it = p.drafts.find(token++);
    if (it == p.drafts.end() || it->second.first != input) break;
    input = it->second.second;
    chain.push_back(input);
  }
  return chain;
}

std::vector<int32_t> PredictionBoard::DraftChain(uint64_t request, uint32_t token, int32_t input,
                                                 int max) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pages_.find(request);
  if (it == pages_.end()) return {};
  return ChainLocked(it->second, token, input, max);
}

std::vector<int32_t> PredictionBoard::WaitDraftChain(uint64_t request, uint32_t token,
                                                     int32_t input, int max, bool realigned,
                                                     absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<int32_t> chain;
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    auto it = pages_.find(request);
    if (it == pages_.end()) {
      chain.clear();
      return true;
    }
    const Pages& p = it->second;
    chain = ChainLocked(p, token, input, max);
    if (static_cast<int>(chain.size()) >= max || p.done) return true;
    auto first = p.drafts.find(token);
    return !realigned && first != p.drafts.end() && first->second.first != input;
  });
  return chain;
}

void PredictionBoard::MarkDone(uint64_t request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pages_.find(request);
    if (it == pages_.end()) return;
    it->second.done = true;
  }
  cv_.notify_all();
}

bool PredictionBoard::WaitDone(uint64_t request, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    auto it = pages_.find(request);
    return it != pages_.end() && it->second.done;
  });
}

}  // namespace odmoe
