#include "engine/recurrent_state.h"

#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<RecurrentState> RecurrentState::Create(Backend& backend, const ModelConfig& config,
                                                      int n_slots) {
  RecurrentState st;
  const int n_rec = config.n_recurrent();
  if (n_rec == 0) return st;
  // Gated DeltaNet's conv inputs and delta matrices, or Mamba-2's conv
  // inputs and SSM state ([heads, head_dim, state]): the same two parts.
  st.conv_floats_ =
      config.mamba2 ? config.mamba.conv_state_floats() : config.delta.conv_state_floats();
  st.layer_floats_ = st.conv_floats_ + (config.mamba2 ? config.mamba.ssm_state_floats()
                                                      : config.delta.delta_state_floats());
  st.bank_floats_ = static_cast<size_t>(st.layer_floats_) * n_rec;
  st.index_of_layer_.assign(static_cast<size_t>(config.n_layer), -1);
  int r = 0;
  for (int l = 0; l < config.n_layer; ++l) {
    if (config.is_recurrent(l)) st.index_of_layer_[static_cast<size_t>(l)] = r++;
  }
  for (int s = 0; s < n_slots; ++s) {
    ODMOE_ASSIGN_OR_RETURN(auto buffer, backend.Allocate(2 * st.bank_floats_ * sizeof(float)));
    st.buffers_.push_back(std::move(buffer));
  }
  st.slots_.resize(static_cast<size_t>(n_slots));
  return st;
}

void RecurrentState::Clear(int slot) {
  if (empty()) return;
  slots_[static_cast<size_t>(slot)] = Slot{};
}

absl::Status RecurrentState::Check(int slot, int pos0) const {
  if (empty()) return absl::OkStatus();
  const Slot& s = slots_[static_cast<size_t>(slot)];
  if (pos0 == 0 || pos0 == s.position || pos0 == s.checkpoint) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "slot %d: rows at position %d cannot continue the recurrent state, which is at position "
      "%d (kept: %d); forward from 0, from %d or from the kept position",
      slot, pos0, s.position, s.checkpoint, s.position));
}

void RecurrentState::Begin(int slot, int pos0, int n) {
  if (empty()) return;
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (pos0 == 0) {
    s.in_bank = -1;
    s.out_bank = 1 - s.bank;
  } else if (pos0 == s.position) {
    s.in_bank = s.bank;
    s.out_bank = 1 - s.bank;
  } else {  // the checkpoint (Check passed)
    s.in_bank = 1 - s.bank;
    s.out_bank = s.bank;
  }
  s.pos0 = pos0;
  s.n = n;
}

void RecurrentState::Commit(int slot) {
  if (empty()) return;
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.checkpoint = s.pos0;  // in_bank's state (zeros at 0) is kept
  s.bank = s.out_bank;
  s.position = s.pos0 + s.n;
}

float* RecurrentState::Layer(int slot, int bank, int layer) const {
  const int r = index_of_layer_[static_cast<size_t>(layer)];
  return static_cast<float*>(buffers_[static_cast<size_t>(slot)]->data()) +
         static_cast<size_t>(bank) * bank_floats_ + static_cast<size_t>(r) * layer_floats_;
}

const float* RecurrentState::In(int slot, int layer) const {
  const Slot& s = slots_[static_cast<size_t>(slot)];
  return s.in_bank < 0 ? nullptr : Layer(slot, s.in_bank, layer);
}

float* RecurrentState::Out(int slot, int layer) const {
  return Layer(slot, slots_[static_cast<size_t>(slot)].out_bank, layer);
}

}  // namespace odmoe
