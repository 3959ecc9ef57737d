#include "model/expert_pack.h"

#include <cstring>

namespace odmoe {
namespace {
constexpr size_t kPartAlignment = 64;
size_t AlignUp(size_t n) { return (n + kPartAlignment - 1) / kPartAlignment * kPartAlignment; }
}  // namespace

ExpertPackLayout ExpertPackLayout::For(const ModelConfig& c) {
  ExpertPackLayout l;
  l.gate_type = c.expert_gate_type;
  l.up_type = c.expert_up_type;
  l.down_type = c.expert_down_type;
  l.n_embd = c.n_embd;
  l.n_ff = c.n_ff;
  l.gate_offset = 0;
  l.up_offset = AlignUp(RowBytes(l.gate_type, l.n_embd) * static_cast<size_t>(l.n_ff));
  l.down_offset =
      l.up_offset + AlignUp(RowBytes(l.up_type, l.n_embd) * static_cast<size_t>(l.n_ff));
  l.total_bytes =
      l.down_offset + AlignUp(RowBytes(l.down_type, l.n_ff) * static_cast<size_t>(l.n_embd));
  return l;
}

ExpertWeights ExpertPackLayout::WeightsAt(const void* base) const {
  const auto* p = static_cast<const uint8_t*>(base);
  return {WeightRef{gate_type, p + gate_offset, n_ff, n_embd},
          WeightRef{up_type, p + up_offset, n_ff, n_embd},
          WeightRef{down_type, p + down_offset, n_embd, n_ff}};
}

void PackExpert(const ExpertTensors& src, const ExpertPackLayout& layout, uint8_t* dst) {
  std::memcpy(dst + layout.gate_offset, src.gate.data, src.gate.bytes());
  std::memcpy(dst + layout.up_offset, src.up.data, src.up.bytes());
  std::memcpy(dst + layout.down_offset, src.down.data, src.down.bytes());
}

WeightRef WeightRefOf(const TensorView& view) {
  return WeightRef{view.type, view.data, view.ne[1], view.ne[0]};
}

}  // namespace odmoe
