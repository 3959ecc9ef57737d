#include "model/expert_pack.h"

#include <algorithm>
#include <cstring>

#include "backend/op_checks.h"

namespace odmoe {
namespace {
constexpr size_t kPartAlignment = 64;
size_t AlignUp(size_t n) { return (n + kPartAlignment - 1) / kPartAlignment * kPartAlignment; }
}  // namespace

ExpertPackLayout ExpertPackLayout::For(const ModelConfig& c, int layer) {
  const ExpertStorage& s = c.experts_of(layer);
  ExpertPackLayout l;
  if (!c.has_experts(layer)) return l;  // a dense layer: no experts, total_bytes 0
  l.gate_type = s.gate_type;
  l.up_type = s.up_type;
  l.down_type = s.down_type;
  l.n_embd = c.n_embd;
  l.n_ff = c.n_ff;
  l.gate_offset = 0;
  l.up_offset = AlignUp(RowBytes(l.gate_type, l.n_embd) * static_cast<size_t>(l.n_ff));
  l.down_offset =
      l.up_offset + AlignUp(RowBytes(l.up_type, l.n_embd) * static_cast<size_t>(l.n_ff));
  l.total_bytes =
      l.down_offset + AlignUp(RowBytes(l.down_type, l.n_ff) * static_cast<size_t>(l.n_embd));
  l.activation = c.expert_activation;
  if (c.expert_bias) {
    const size_t ff_bytes = static_cast<size_t>(l.n_ff) * sizeof(float);
    l.has_bias = true;
    l.gate_bias_offset = l.total_bytes;
    l.up_bias_offset = l.gate_bias_offset + AlignUp(ff_bytes);
    l.down_bias_offset = l.up_bias_offset + AlignUp(ff_bytes);
    l.total_bytes = l.down_bias_offset + AlignUp(static_cast<size_t>(l.n_embd) * sizeof(float));
  }
  return l;
}

std::vector<ExpertPackLayout> LayerPackLayouts(const ModelConfig& c) {
  std::vector<ExpertPackLayout> layouts;
  layouts.reserve(static_cast<size_t>(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) layouts.push_back(ExpertPackLayout::For(c, l));
  return layouts;
}

size_t LargestPackedExpert(const ModelConfig& c, const std::vector<int>& layers) {
  size_t largest = 0;
  if (layers.empty()) {
    for (int l = 0; l < c.n_layer; ++l) {
      largest = std::max(largest, ExpertPackLayout::For(c, l).total_bytes);
    }
  }
  for (int l : layers) largest = std::max(largest, ExpertPackLayout::For(c, l).total_bytes);
  return largest;
}

double MeanPackedExpert(const ModelConfig& c) {
  if (c.n_moe_layer() < 1) return 0;
  double sum = 0;
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    if (c.has_experts(l)) sum += ExpertPackLayout::For(c, l).total_bytes;
  }
  return sum / c.n_moe_layer();
}

ExpertWeights ExpertPackLayout::WeightsAt(const void* base) const {
  const auto* p = static_cast<const uint8_t*>(base);
  ExpertWeights w;
  w.gate = WeightRef{gate_type, p + gate_offset, n_ff, n_embd, gate_layout};
  w.up = WeightRef{up_type, p + up_offset, n_ff, n_embd, up_layout};
  w.down = WeightRef{down_type, p + down_offset, n_embd, n_ff, down_layout};
  if (has_bias) {
    w.gate_bias = reinterpret_cast<const float*>(p + gate_bias_offset);
    w.up_bias = reinterpret_cast<const float*>(p + up_bias_offset);
    w.down_bias = reinterpret_cast<const float*>(p + down_bias_offset);
  }
  w.activation = activation;
  return w;
}

ExpertPackLayout ExpertPackLayout::WithSlotLayouts(const Backend& backend) const {
  ExpertPackLayout l = *this;
  l.gate_layout = backend.SlotLayout(gate_type, n_ff, n_embd);
  l.up_layout = backend.SlotLayout(up_type, n_ff, n_embd);
  l.down_layout = backend.SlotLayout(down_type, n_embd, n_ff);
  return l;
}

void PackExpert(const ExpertTensors& src, const ExpertPackLayout& layout, uint8_t* dst,
                const Backend* backend) {
  auto copy = [&](const TensorView& v, WeightLayout wl, size_t offset) {
    if (wl == WeightLayout::kRows) {
      std::memcpy(dst + offset, v.data, v.bytes());
      return;
    }
    if (backend == nullptr) {  // a programming error: the refs would lie about the bytes
      op_checks::Fail("PackExpert", "a matrix in a backend's own layout and no backend to arrange it");
    }
    backend->ArrangeWeight(v, wl, dst + offset);
  };
  copy(src.gate, layout.gate_layout, layout.gate_offset);
  copy(src.up, layout.up_layout, layout.up_offset);
  copy(src.down, layout.down_layout, layout.down_offset);
  if (layout.has_bias) {
    std::memcpy(dst + layout.gate_bias_offset, src.gate_bias.data, src.gate_bias.bytes());
    std::memcpy(dst + layout.up_bias_offset, src.up_bias.data, src.up_bias.bytes());
    std::memcpy(dst + layout.down_bias_offset, src.down_bias.data, src.down_bias.bytes());
  }
}

WeightRef WeightRefOf(const TensorView& view) {
  return WeightRef{view.type, view.data, view.ne[1], view.ne[0]};
}

}  // namespace odmoe
