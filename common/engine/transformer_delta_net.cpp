// Gated DeltaNet (Qwen3-Next, Qwen3.5), the recurrent layers' token mixer:
//
//   h            = rmsnorm(x) * attn_norm
//   qkv          = Wqkv h                  [q (n_k heads) | k (n_k heads) | v (n_v heads)]
//   z            = Wgate h                 (n_v heads x head_v)
//   b, a         = Wbeta h, Walpha h       (or split from Wba h per key head: [b | a])
//   c            = silu(causal_conv(qkv))  per channel, conv_kernel taps, the slot's
//                                          last conv_kernel - 1 inputs before the rows
//   o            = delta_rule(c, a, b)     Backend::GatedDeltaNet, the slot's state
//   o            = rmsnorm(o per head) * ssm_norm * silu(z)
//   x           += Wout o
//
// The conv and the recurrence run per segment (one sequence's rows) on that
// slot's RecurrentState; the rest per row over the whole batch. The gated
// attention of the other layers (attn_output_gate) is GroupedAttention with
// GatedQuery / ApplyOutputGate below: q's projection holds per head
// [q | gate], and the attention output is multiplied by sigmoid(gate).
#include <algorithm>

#include "engine/transformer.h"
#include "util/status_macros.h"

namespace odmoe {

absl::Status Transformer::AllocateDeltaNetBuffers() {
  const DeltaNetShape& s = config_.delta;
  const size_t b = static_cast<size_t>(n_batch_);
  const size_t conv = static_cast<size_t>(s.conv_dim()), vd = static_cast<size_t>(s.value_dim());
  const size_t nv = static_cast<size_t>(s.n_v_heads), qw = static_cast<size_t>(config_.q_width());
  const size_t gated = config_.attn_output_gate ? 3 * qw : 0;
  const size_t floats = b * (2 * conv + 2 * vd + 4 * nv + gated);
  ODMOE_ASSIGN_OR_RETURN(delta_buffer_, backend_.Allocate(std::max<size_t>(floats, 1) * 4));
  // Layout (floats): qkv conv [b*conv each] z core [b*vd each] ba [b*2nv] beta alpha
  // [b*nv each], then q_full [b*2qw] gate [b*qw] (attn_output_gate).
  dn_qkv_ = static_cast<float*>(delta_buffer_->data());
  dn_conv_ = dn_qkv_ + b * conv;
  dn_z_ = dn_conv_ + b * conv;
  dn_core_ = dn_z_ + b * vd;
  dn_ba_ = dn_core_ + b * vd;
  dn_beta_ = dn_ba_ + b * 2 * nv;
  dn_alpha_ = dn_beta_ + b * nv;
  if (config_.attn_output_gate) {
    q_full_ = dn_alpha_ + b * nv;
    gate_ = q_full_ + b * 2 * qw;
  }
  return absl::OkStatus();
}

void Transformer::DeltaNetBlock(int layer) {
  const DenseLayerWeights& w = weights_->layer(layer);
  const ModelConfig& c = config_;
  const DeltaNetShape& s = c.delta;
  const int64_t n = rows_, nv = s.n_v_heads, r = s.n_v_heads / s.n_k_heads;
  const Mat h{h_, n, c.n_embd}, o{o_, n, c.n_embd};
  const Mat qkv{dn_qkv_, n, s.conv_dim()}, conv{dn_conv_, n, s.conv_dim()};
  const Mat z{dn_z_, n, s.value_dim()}, core{dn_core_, n, s.value_dim()};
  const Mat beta{dn_beta_, n, nv}, alpha{dn_alpha_, n, nv};
  NormX(w.attn_norm, h);
  backend_.MatMul(w.attn_qkv, h, qkv);
  backend_.MatMul(w.attn_gate, h, z);
  if (c.delta_net_ba_fused) {
    // Per key head [b (r) | a (r)]: as rows of 2r, b is each row's first half.
    const Mat ba{dn_ba_, n * s.n_k_heads, 2 * r};
    backend_.MatMul(w.ssm_ba, h, Mat{dn_ba_, n, 2 * nv});
    backend_.CopyColumns(ba, 0, Mat{dn_beta_, n * s.n_k_heads, r}, 0, r);
    backend_.CopyColumns(ba, r, Mat{dn_alpha_, n * s.n_k_heads, r}, 0, r);
  } else {
    backend_.MatMulPair(w.ssm_beta, w.ssm_alpha, h, beta, alpha);
  }
  DeltaNetParams p;
  p.n_k_heads = s.n_k_heads;
  p.n_v_heads = s.n_v_heads;
  p.head_k = s.head_k;
  p.head_v = s.head_v;
  p.v_heads_tiled = c.delta_net_heads == DeltaNetHeadOrder::kTiled;
  p.l2_eps = c.rms_eps;
  int64_t row = 0;
  for (const Segment& seg : segments_) {
    backend_.CausalConvSilu(qkv.RowRange(row, seg.n), w.ssm_conv1d, s.conv_kernel,
                            recurrent_.conv_in(seg.slot, layer),
                            recurrent_.conv_out(seg.slot, layer), conv.RowRange(row, seg.n));
    backend_.GatedDeltaNet(conv.RowRange(row, seg.n), alpha.RowRange(row, seg.n),
                           beta.RowRange(row, seg.n), w.ssm_a, w.ssm_dt_bias, p,
                           recurrent_.delta_in(seg.slot, layer),
                           recurrent_.delta_out(seg.slot, layer), core.RowRange(row, seg.n));
    row += seg.n;
  }
  // The gated norm per value head: rmsnorm(o) * ssm_norm, then * silu(z).
  const Mat heads{dn_core_, n * nv, s.head_v};
  backend_.RmsNorm(heads, w.ssm_norm, c.rms_eps, heads);
  backend_.SwiGlu(Mat{dn_z_, n * nv, s.head_v}, heads, heads);
  backend_.MatMul(w.ssm_out, core, o);
  AddToX(o_);
}

void Transformer::GatedQuery(const DenseLayerWeights& w, ConstMat h, Mat q) {
  const ModelConfig& c = config_;
  const int64_t n = h.rows, rows = n * c.n_head, hd = c.head_dim;
  backend_.MatMul(w.attn_q, h, Mat{q_full_, n, 2 * c.q_width()});
  const ConstMat heads{q_full_, rows, 2 * hd};
  backend_.CopyColumns(heads, 0, Mat{q.data, rows, hd}, 0, hd);
  backend_.CopyColumns(heads, hd, Mat{gate_, rows, hd}, 0, hd);
}

void Transformer::ApplyOutputGate(Mat attn) {
  const Mat gate{gate_, attn.rows, attn.cols};
  backend_.Sigmoid(gate);
  backend_.Mul(attn, gate, attn);
}

}  // namespace odmoe
