// The per-sequence state of a model's recurrent (Gated DeltaNet) layers,
// next to the KV cache: one per sequence slot, for each recurrent layer the
// causal convolution's last conv_kernel - 1 inputs and the delta rule's
// matrices (n_v_heads x head_v x head_k floats). Unlike a KV cache it
// cannot be cut at any position: the state after position p holds every
// token before p. So each slot keeps two banks: the state at position()
// and a checkpoint, the state before the last forward of that slot (at
// checkpoint()); a forward reads one bank and writes the other, so keeping
// the checkpoint costs no copy.
//
// Transformer drives it (BeginSegments / RunLayers); a segment of rows of
// slot s at positions [pos0, pos0 + n) may start
//   * at 0: a new sequence (the state starts from zeros; nothing to clear);
//   * at position(s): the continuation (decode, the next prefill chunk);
//   * at checkpoint(s): a rollback to before the last forward (the main
//     node's rejected drafts), at no cost;
// anything else is FAILED_PRECONDITION. To roll back to a position p inside
// the last forward (accepted drafts), re-forward its tokens [checkpoint, p)
// from the checkpoint: the recompute costs those rows, nothing is copied
// (they may lead the next verify batch: [t, d1, bonus, new drafts] from p0).
//
//   // Speculative decoding of one slot whose state is at p0, t its last token:
//   const std::vector<int32_t> verify = {t, d1, d2, d3, d4};
//   const Transformer::Segment at_p0[] = {{slot, p0, 5}};
//   ODMOE_RETURN_IF_ERROR(tf->ForwardSegments(verify, at_p0, experts));  // checkpoint: p0
//   // d1 accepted, d2 rejected, b the bonus token: start again at the checkpoint
//   const std::vector<int32_t> next = {t, d1, b};
//   const Transformer::Segment again[] = {{slot, p0, 3}};
//   ODMOE_RETURN_IF_ERROR(tf->ForwardSegments(next, again, experts));    // state at p0 + 3
//   tf->ClearSequence(slot);  // a cancelled request: the next one starts at 0
//
// Mamba-2 layers (Nemotron-H) keep the same two parts: the conv's last
// inputs and the SSM state, [heads, head_dim, state] (ssm_in / ssm_out).
//
// Memory: 2 x n_recurrent x (conv + delta) floats per slot (Qwen3.5-35B-A3B:
// 2 x 30 x (3 x 8192 + 32 x 128 x 128) x 4 bytes = 126 MiB per slot). Cost
// per forward: each layer reads its state once and writes it once.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "model/model_config.h"

namespace odmoe {

class RecurrentState {
 public:
  /// `n_slots` sequences of a model with recurrent layers (none: an empty
  /// state, every call a no-op).
  static absl::StatusOr<RecurrentState> Create(Backend& backend, const ModelConfig& config,
                                               int n_slots);

  bool empty() const { return slots_.empty(); }
  /// Backend bytes per slot (both banks).
  size_t bytes_per_slot() const { return 2 * bank_floats_ * sizeof(float); }
  /// Tokens the state of `slot` has seen (0: a new sequence).
  int position(int slot) const { return slots_[static_cast<size_t>(slot)].position; }
  /// The position of the kept state before the last forward (-1: none).
  int checkpoint(int slot) const { return slots_[static_cast<size_t>(slot)].checkpoint; }

  /// Forgets the sequence in `slot` (its next forward must start at 0). Free.
  void Clear(int slot);

  /// FAILED_PRECONDITION unless rows at [pos0, pos0 + n) can continue the
  /// state of `slot` (see the header comment). Changes nothing.
  absl::Status Check(int slot, int pos0) const;
  /// Chooses the banks the rows read and write (after Check); the state
  /// moves only at Commit.
  void Begin(int slot, int pos0, int n);
  /// The rows begun for `slot` ran through every layer.
  void Commit(int slot);

  // The state a recurrent layer's rows read (null: zeros) and write, for
  // the slot's rows begun; `layer` is the model's layer index.
  const float* conv_in(int slot, int layer) const { return In(slot, layer); }
  float* conv_out(int slot, int layer) const { return Out(slot, layer); }
  const float* delta_in(int slot, int layer) const {
    const float* p = In(slot, layer);
    return p ? p + conv_floats_ : nullptr;
  }
  float* delta_out(int slot, int layer) const { return Out(slot, layer) + conv_floats_; }
  // Mamba-2's SSM state ([heads, head_dim, state] floats) in the same place.
  const float* ssm_in(int slot, int layer) const { return delta_in(slot, layer); }
  float* ssm_out(int slot, int layer) const { return delta_out(slot, layer); }

 private:
  struct Slot {
    int position = 0;
    int checkpoint = -1;  // position of the other bank's state (0: zeros)
    int bank = 0;         // the bank holding the state at `position`
    // Begun, not committed:
    int in_bank = -1;  // -1: zeros
    int out_bank = 0;
    int pos0 = 0, n = 0;
  };
  const float* In(int slot, int layer) const;
  float* Out(int slot, int layer) const;
  float* Layer(int slot, int bank, int layer) const;

  std::vector<std::unique_ptr<BackendBuffer>> buffers_;  // one per slot: both banks
  std::vector<Slot> slots_;
  std::vector<int> index_of_layer_;  // -1 for attention layers
  int64_t conv_floats_ = 0, layer_floats_ = 0;
  size_t bank_floats_ = 0;
};

}  // namespace odmoe
