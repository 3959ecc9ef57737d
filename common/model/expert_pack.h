// One expert as a contiguous, fixed-size unit: the thing a worker node loads
// into a device slot, computes with, and evicts.
//
// Layout of a packed expert (each part starts on a 64-byte boundary):
//   [gate: n_ff rows of n_embd][up: n_ff rows of n_embd][down: n_embd rows of n_ff]
// in the storage types of the model file (no conversion), followed, only for
// architectures whose experts have biases (gpt-oss), by
//   [gate bias: n_ff F32][up bias: n_ff F32][down bias: n_embd F32]
// so a worker that loads the unit has everything the expert computes with. Every expert of a
// layer has the same layout; layers may differ (ModelConfig::expert_storage).
// A slot meant for any expert is LargestPackedExpert() bytes; each expert is
// packed, and computed with, in its own layer's layout.
//
//   ExpertPackLayout layout = ExpertPackLayout::For(model.config(), layer);
//   std::vector<uint8_t> blob(layout.total_bytes);
//   PackExpert(model.Expert(layer, e), layout, blob.data());
//   ExpertWeights w = layout.WeightsAt(slot_base);   // WeightRefs into the slot
//
// A host backend may compute some types faster in a layout of its own
// (Backend::SlotLayout): layout.WithSlotLayouts(backend) records it per
// matrix, PackExpert(..., &backend) arranges the bytes so, and WeightsAt
// hands the layout on in the WeightRefs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/model_file.h"

namespace odmoe {

/// The three matrices of one expert as backend weights, its biases (in the
/// same memory space; null when the architecture has none) and its
/// activation: y = down(act(gate x + bg, up x + bu)) + bd.
struct ExpertWeights {
  WeightRef gate;                    // rows n_ff, cols n_embd
  WeightRef up;                      // rows n_ff, cols n_embd
  WeightRef down;                    // rows n_embd, cols n_ff
  const float* gate_bias = nullptr;  // n_ff floats, or null
  const float* up_bias = nullptr;    // n_ff floats, or null
  const float* down_bias = nullptr;  // n_embd floats, or null
  ExpertActivation activation;
};

struct ExpertPackLayout {
  DType gate_type = DType::kF32, up_type = DType::kF32, down_type = DType::kF32;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  size_t gate_offset = 0, up_offset = 0, down_offset = 0;
  /// The biases' offsets when `has_bias` (F32 each); unused otherwise.
  bool has_bias = false;
  size_t gate_bias_offset = 0, up_bias_offset = 0, down_bias_offset = 0;
  ExpertActivation activation;
  size_t total_bytes = 0;
  /// How each matrix's bytes are ordered (kRows, the file's, unless
  /// WithSlotLayouts chose a backend's own; the sizes are the same).
  WeightLayout gate_layout = WeightLayout::kRows, up_layout = WeightLayout::kRows,
               down_layout = WeightLayout::kRows;

  /// The layout of an expert of `layer` (in [0, n_layer)).
  static ExpertPackLayout For(const ModelConfig& config, int layer);
  /// WeightRefs for a packed expert whose first byte is at `base` (in any
  /// memory space: host or device).
  ExpertWeights WeightsAt(const void* base) const;
  /// This layout with each matrix in the layout `backend` computes it in
  /// from memory filled by PackExpert (Backend::SlotLayout).
  ExpertPackLayout WithSlotLayouts(const Backend& backend) const;
};

/// The layouts of every layer, in layer order.
std::vector<ExpertPackLayout> LayerPackLayouts(const ModelConfig& config);

/// Bytes of the largest packed expert of `layers` (every layer when empty):
/// what one slot that may hold any of their experts needs.
size_t LargestPackedExpert(const ModelConfig& config, const std::vector<int>& layers = {});

/// Mean bytes of a packed expert over the layers (what an average load moves).
double MeanPackedExpert(const ModelConfig& config);

/// Copies one expert (and its biases when layout.has_bias) into `dst`
/// (layout.total_bytes bytes, host memory); a matrix whose layout is not
/// kRows is arranged by `backend` (Backend::ArrangeWeight; required then).
void PackExpert(const ExpertTensors& src, const ExpertPackLayout& layout, uint8_t* dst,
                const Backend* backend = nullptr);

/// WeightRef of a 2-D tensor view (rows = ne[1], cols = ne[0]).
WeightRef WeightRefOf(const TensorView& view);

}  // namespace odmoe
