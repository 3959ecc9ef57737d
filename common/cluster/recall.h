// Expert-prediction recall of one request, as Eq. 2-3 of the OD-MoE paper:
// for decode iteration n, c(n, l) = |predicted ∩ chosen| at layer l,
// recall(n) = sum_l c(n, l) / (k L); overall = sum_n sum_l c / (k L N).
// The sums run over the (token, layer) pairs the predictor did predict: a
// prediction that never came (the shadow fell behind and the request ended
// first) says nothing about accuracy; those pairs are counted apart as
// `predictions_missing` (timeliness shows in the workers' hits and misses).
// Summing `correct` and `slots` over requests gives Eq. 3 over Q prompts.
//
//   RecallCounter r(/*n_layer=*/8, /*k=*/2);
//   r.RecordActual(1, 0, {3, 5});    r.RecordPrediction(1, 0, {5, 6});
//   RecallSummary s = r.Summarize(/*tokens=*/1);   // s.overall == 0.5 / 8 ...
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace odmoe {

struct RecallSummary {
  double overall = 0;                // Eq. 3 (one prompt): correct / slots
  std::vector<double> per_token;     // Eq. 2, index 0 = token 1 (0 if none predicted)
  uint64_t predictions_missing = 0;  // (token, layer) pairs never predicted
  uint64_t correct = 0;              // sum of c
  uint64_t slots = 0;                // k * predicted (token, layer) pairs
  // The same two sums by layer (index = layer; n_layer entries): recall by
  // depth is layer_correct[l] / layer_slots[l].
  std::vector<uint64_t> layer_correct, layer_slots;
};

class RecallCounter {
 public:
  RecallCounter() = default;
  /// Layers [0, first_moe_layer) have no experts and are not counted.
  RecallCounter(int n_layer, int k, int first_moe_layer = 0)
      : n_layer_(n_layer), k_(k), first_moe_layer_(first_moe_layer) {}

  /// Decode iteration `token` >= 1. Later records for the same pair replace
  /// earlier ones. Out-of-range pairs are ignored (callers validate first).
  void RecordActual(int token, int layer, std::span<const int32_t> experts);
  void RecordPrediction(int token, int layer, std::span<const int32_t> experts);
  bool HasPrediction(int token, int layer) const;
  /// Leaves out a layer after first_moe_layer that has no experts either
  /// (Llama 4's interleaved dense layers).
  void SkipLayer(int layer);
  /// The recorded prediction (empty if none).
  std::span<const int32_t> Prediction(int token, int layer) const;

  /// Over iterations 1..tokens.
  RecallSummary Summarize(int tokens) const;

 private:
  struct Cell {
    std::vector<int32_t> actual, predicted;
    bool has_actual = false, has_prediction = false;
  };
  Cell* At(int token, int layer);
  const Cell* Find(int token, int layer) const;

  int n_layer_ = 0;
  int k_ = 0;
  int first_moe_layer_ = 0;
  std::vector<Cell> cells_;  // [(token - 1) * n_layer + layer]
  // SkipLayer's layers (empty: none).
  std::vector<bool> skipped_;
};

}  // namespace odmoe
