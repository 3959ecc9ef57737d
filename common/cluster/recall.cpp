#include "cluster/recall.h"

#include <algorithm>

#include "cluster/assignment.h"

namespace odmoe {

RecallCounter::Cell* RecallCounter::At(int token, int layer) {
  if (token < 1 || layer < 0 || layer >= n_layer_) return nullptr;
  const size_t i = static_cast<size_t>(token - 1) * n_layer_ + layer;
  if (i >= cells_.size()) cells_.resize(i + 1);
  return &cells_[i];
}

const RecallCounter::Cell* RecallCounter::Find(int token, int layer) const {
  if (token < 1 || layer < 0 || layer >= n_layer_) return nullptr;
  const size_t i = static_cast<size_t>(token - 1) * n_layer_ + layer;
  return i < cells_.size() ? &cells_[i] : nullptr;
}

void RecallCounter::RecordActual(int token, int layer, std::span<const int32_t> experts) {
  if (Cell* c = At(token, layer)) {
    c->actual.assign(experts.begin(), experts.end());
    c->has_actual = true;
  }
}

void RecallCounter::RecordPrediction(int token, int layer, std::span<const int32_t> experts) {
  if (Cell* c = At(token, layer)) {
    c->predicted.assign(experts.begin(), experts.end());
    c->has_prediction = true;
  }
}

bool RecallCounter::HasPrediction(int token, int layer) const {
  const Cell* c = Find(token, layer);
  return c && c->has_prediction;
}

std::span<const int32_t> RecallCounter::Prediction(int token, int layer) const {
  const Cell* c = Find(token, layer);
  if (!c || !c->has_prediction) return {};
  return c->predicted;
}

void RecallCounter::SkipLayer(int layer) {
  if (layer < 0 || layer >= n_layer_) return;
  skipped_.resize(static_cast<size_t>(n_layer_), false);
  skipped_[static_cast<size_t>(layer)] = true;
}

RecallSummary RecallCounter::Summarize(int tokens) const {
  RecallSummary s;
  s.layer_correct.assign(static_cast<size_t>(std::max(n_layer_, 0)), 0);
  s.layer_slots.assign(s.layer_correct.size(), 0);
  for (int n = 1; n <= tokens; ++n) {
    uint64_t correct = 0, slots = 0;
    for (int l = first_moe_layer_; l < n_layer_; ++l) {
      if (!skipped_.empty() && skipped_[static_cast<size_t>(l)]) continue;
      const Cell* c = Find(n, l);
      if (!c || !c->has_prediction) {
        ++s.predictions_missing;
        continue;
      }
      const uint64_t hit =
          c->has_actual ? static_cast<uint64_t>(CountCorrect(c->predicted, c->actual)) : 0;
      slots += static_cast<uint64_t>(k_);
      correct += hit;
      s.layer_slots[static_cast<size_t>(l)] += static_cast<uint64_t>(k_);
      s.layer_correct[static_cast<size_t>(l)] += hit;
    }
    s.per_token.push_back(slots > 0 ? static_cast<double>(correct) / slots : 0.0);
    s.correct += correct;
    s.slots += slots;
  }
  s.overall = s.slots > 0 ? static_cast<double>(s.correct) / s.slots : 0.0;
  return s;
}

}  // namespace odmoe
