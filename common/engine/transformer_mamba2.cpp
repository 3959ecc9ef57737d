// Mamba-2 (Nemotron-H), the token mixer of a hybrid model's kMamba2 layers:
//
//   h            = rmsnorm(x) * attn_norm
//   [z | xBC | dt] = Win h                 z, x: inner; B, C: n_groups x state each
//   xBC          = silu(causal_conv(xBC) + conv_bias)   per channel, conv_kernel taps,
//                                          the slot's last conv_kernel - 1 inputs before
//                                          the rows
//   y            = scan(x, dt, B, C)       Backend::Mamba2Scan: softplus(dt + dt_bias),
//                                          per head A = -exp(A_log), the slot's
//                                          [heads, head_dim, state] state, + D x
//   y            = group_rmsnorm(y * silu(z)) * ssm_norm   groups of inner / n_groups
//   x           += Wout y
//
// The conv and the scan run per segment (one sequence's rows) on that
// slot's RecurrentState; the rest per row over the whole batch. The other
// layers of a hybrid are one block each (ModelConfig::layer_blocks):
// attention alone, or the FFN alone (RunLayers).
#include <algorithm>

#include "engine/transformer.h"
#include "util/status_macros.h"

namespace odmoe {

absl::Status Transformer::AllocateMamba2Buffers() {
  const Mamba2Shape& s = config_.mamba;
  const size_t b = static_cast<size_t>(n_batch_);
  const size_t in = static_cast<size_t>(s.in_proj()), conv = static_cast<size_t>(s.conv_dim());
  const size_t inner = static_cast<size_t>(s.inner()), nh = static_cast<size_t>(s.n_heads);
  const size_t floats = b * (in + 2 * conv + 2 * inner + nh);
  ODMOE_ASSIGN_OR_RETURN(mamba_buffer_, backend_.Allocate(std::max<size_t>(floats, 1) * 4));
  float* p = static_cast<float*>(mamba_buffer_->data());
  auto take = [&p](size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  mb_proj_ = take(b * in);
  mb_xbc_ = take(b * conv);
  mb_conv_ = take(b * conv);
  mb_z_ = take(b * inner);
  mb_y_ = take(b * inner);
  mb_dt_ = take(b * nh);
  return absl::OkStatus();
}

void Transformer::Mamba2Block(int layer) {
  const DenseLayerWeights& w = weights_->layer(layer);
  const ModelConfig& c = config_;
  const Mamba2Shape& s = c.mamba;
  const int64_t n = rows_, inner = s.inner(), conv_dim = s.conv_dim(), nh = s.n_heads;
  const Mat h{h_, n, c.n_embd}, o{o_, n, c.n_embd};
  const Mat proj{mb_proj_, n, s.in_proj()};
  const Mat xbc{mb_xbc_, n, conv_dim}, conv{mb_conv_, n, conv_dim};
  const Mat z{mb_z_, n, inner}, y{mb_y_, n, inner}, dt{mb_dt_, n, nh};
  NormX(w.attn_norm, h);
  backend_.MatMul(w.ssm_in, h, proj);
  backend_.CopyColumns(proj, 0, z, 0, inner);
  backend_.CopyColumns(proj, inner, xbc, 0, conv_dim);
  backend_.CopyColumns(proj, inner + conv_dim, dt, 0, nh);
  Mamba2Params p;
  p.n_heads = s.n_heads;
  p.head_dim = s.head_dim;
  p.n_groups = s.n_groups;
  p.state = s.state;
  int64_t row = 0;
  for (const Segment& seg : segments_) {
    backend_.CausalConvBiasSilu(xbc.RowRange(row, seg.n), w.ssm_conv1d, w.ssm_conv1d_bias,
                                s.conv_kernel, recurrent_.conv_in(seg.slot, layer),
                                recurrent_.conv_out(seg.slot, layer), conv.RowRange(row, seg.n));
    backend_.Mamba2Scan(conv.RowRange(row, seg.n), dt.RowRange(row, seg.n), w.ssm_a, w.ssm_d,
                        w.ssm_dt_bias, p, recurrent_.ssm_in(seg.slot, layer),
                        recurrent_.ssm_out(seg.slot, layer), y.RowRange(row, seg.n));
    row += seg.n;
  }
  backend_.GroupRmsNormGated(y, z, w.ssm_norm, static_cast<int>(inner / s.n_groups), c.rms_eps, y);
  backend_.MatMul(w.ssm_out, y, o);
  AddToX(o_);
}

}  // namespace odmoe
