// Multi-head latent attention (DeepSeek-V2), the absorbed form:
//
//   q        = Wq h                          (or Wqb rmsnorm(Wqa h)), per head [nope | rope]
//   [c | kr] = Wkv_a h                       one latent c (kv_lora_rank) and one rope key per row
//   c        = rmsnorm(c) * kv_a_norm;  kr, q_rope rotated (interleaved, YaRN)
//   cache row = [c | kr]                     (V is c: KvCache::v_in_k)
//   q_abs[h] = [k_b[h] q_nope[h] | q_rope[h]]
//   a[h]     = attention(q_abs[h], cache) over the latents, scale ModelConfig::attn_scale
//   x       += Wo [v_b[0] a[0] | ... | v_b[H-1] a[H-1]]
//
// which equals transformers' DeepseekV2Attention (k_nope[h] = k_b[h]^T c,
// v[h] = v_b[h] c) up to summation order. A head's slice of the rows is
// moved with CopyColumns; a single row (decode) takes every head's k_b (and
// v_b) product in one MatMulById over the heads' weight tables, head h's
// slice as row h (MatMul's rows are independent, so both ways give the same
// bits).
#include <algorithm>
#include <vector>

#include "engine/transformer.h"
#include "util/status_macros.h"

namespace odmoe {

absl::Status Transformer::AllocateMlaBuffers() {
  const MlaShape& m = config_.mla;
  const size_t b = static_cast<size_t>(n_batch_), h = static_cast<size_t>(config_.n_head);
  const size_t kw = static_cast<size_t>(config_.head_dim);  // kv_lora_rank + qk_rope
  const size_t in = static_cast<size_t>(std::max(m.qk_nope, m.kv_lora_rank));
  const size_t out = static_cast<size_t>(std::max(m.kv_lora_rank, m.v_head));
  const size_t heads = h * static_cast<size_t>(m.v_head);
  const size_t lat = static_cast<size_t>(m.q_lora_rank);
  const size_t one_row = h * static_cast<size_t>(m.qk_nope + m.kv_lora_rank);
  ODMOE_ASSIGN_OR_RETURN(
      mla_buffer_,
      backend_.Allocate((b * (h * kw + in + out + heads + lat) + one_row + h) * sizeof(float)));
  float* p = static_cast<float*>(mla_buffer_->data());
  q_abs_ = p;
  head_in_ = q_abs_ + b * h * kw;
  head_out_ = head_in_ + b * in;
  o_heads_ = head_out_ + b * out;
  q_lat_ = o_heads_ + b * heads;
  heads_nope_ = q_lat_ + b * lat;
  heads_absorbed_ = heads_nope_ + h * static_cast<size_t>(m.qk_nope);
  head_ids_ = reinterpret_cast<int32_t*>(heads_absorbed_ + h * static_cast<size_t>(m.kv_lora_rank));
  std::vector<int32_t> ids(h);
  for (size_t i = 0; i < h; ++i) ids[i] = static_cast<int32_t>(i);
  return backend_.CopyToBackend(head_ids_, ids.data(), h * sizeof(int32_t));
}

void Transformer::MlaAttention(int layer) {
  const DenseLayerWeights& w = weights_->layer(layer);
  const ModelConfig& c = config_;
  const MlaShape& m = c.mla;
  const int64_t n = rows_, heads = c.n_head, r = m.kv_lora_rank, qk = m.qk_head();
  const int64_t kw = c.head_dim, vh = m.v_head;
  const Mat h{h_, n, c.n_embd}, o{o_, n, c.n_embd};
  NormX(w.attn_norm, h);

  const Mat q{q_, n, heads * qk};
  if (m.q_lora_rank > 0) {
    const Mat lat{q_lat_, n, m.q_lora_rank};
    backend_.MatMul(w.attn_q_a, h, lat);
    backend_.RmsNorm(lat, w.attn_q_a_norm, c.rms_eps, lat);
    backend_.MatMul(w.attn_q_b, lat, q);
  } else {
    backend_.MatMul(w.attn_q, h, q);
  }
  // The new cache rows: the latent, normed in place, and the rope key (for
  // several sequences built in k_ first, then copied to each one's slot).
  const bool one = segments_.size() == 1;
  const Mat kv = one ? kv_[static_cast<size_t>(segments_.front().slot)].k(layer).RowRange(
                           segments_.front().pos0, n)
                     : Mat{k_, n, kw};
  backend_.MatMul(w.attn_kv_a, h, kv);
  const Mat latent{head_in_, n, r};
  backend_.CopyColumns(kv, 0, latent, 0, r);
  backend_.RmsNorm(latent, w.attn_kv_a_norm, c.rms_eps, latent);
  backend_.CopyColumns(latent, 0, kv, 0, r);

  RopeParams rope;
  rope.dims = m.qk_rope;
  rope.freq_base = c.rope_freq_base;
  rope.mode = c.rope_mode;
  rope.scaling = c.rope_scaling;
  rope.offset = m.qk_nope;
  backend_.Rope(q, static_cast<int>(qk), positions_, rope);
  rope.offset = static_cast<int>(r);
  backend_.Rope(kv, static_cast<int>(kw), positions_, rope);

  // Absorbed queries: [k_b[h] q_nope[h] | q_rope[h]] per head.
  const Mat q_abs{q_abs_, n, heads * kw};
  const Mat nope{head_in_, n, m.qk_nope}, absorbed{head_out_, n, r};
  if (n == 1) {
    // One row: every head's product in one op (head h: row h of q_nope
    // times k_b[h]), the bits of the per-head MatMuls.
    const Mat rows_nope{heads_nope_, heads, m.qk_nope}, rows_absorbed{heads_absorbed_, heads, r};
    backend_.CopyColumns(Mat{q_, heads, qk}, 0, rows_nope, 0, m.qk_nope);
    backend_.MatMulById(w.attn_k_b_table, head_ids_, rows_nope, rows_absorbed);
    backend_.CopyColumns(rows_absorbed, 0, Mat{q_abs_, heads, kw}, 0, r);
  } else {
    for (int64_t hd = 0; hd < heads; ++hd) {
      backend_.CopyColumns(q, hd * qk, nope, 0, m.qk_nope);
      backend_.MatMul(w.attn_k_b[hd], nope, absorbed);
      backend_.CopyColumns(absorbed, 0, q_abs, hd * kw, r);
    }
  }
  backend_.CopyColumns(Mat{q_, n * heads, qk}, m.qk_nope, Mat{q_abs_, n * heads, kw}, r, m.qk_rope);

  AttentionOptions options;
  options.v_head_dim = static_cast<int>(r);
  const Mat attn{attn_, n, heads * r};
  int64_t row = 0;
  for (const Segment& s : segments_) {
    const KvCache& cache = kv_[static_cast<size_t>(s.slot)];
    if (!one) backend_.Copy(kv.RowRange(row, s.n), cache.k(layer).RowRange(s.pos0, s.n));
    backend_.Attention(q_abs.RowRange(row, s.n), cache.k(layer), cache.v(layer), c.n_head,
                       /*n_head_kv=*/1, static_cast<int>(kw), s.pos0, c.attn_scale, options,
                       attn.RowRange(row, s.n));
    row += s.n;
  }

  // Each head's latent result back to its values: v_b[h] a[h].
  const Mat o_heads{o_heads_, n, heads * vh};
  const Mat a_head{head_in_, n, r}, v_head{head_out_, n, vh};
  if (n == 1) {  // one row: head h's latent is row h of attn
    backend_.MatMulById(w.attn_v_b_table, head_ids_, ConstMat(attn_, heads, r),
                        Mat{o_heads_, heads, vh});
  } else {
    for (int64_t hd = 0; hd < heads; ++hd) {
      backend_.CopyColumns(attn, hd * r, a_head, 0, r);
      backend_.MatMul(w.attn_v_b[hd], a_head, v_head);
      backend_.CopyColumns(v_head, 0, o_heads, hd * vh, vh);
    }
  }
  backend_.MatMul(w.attn_output, o_heads, o);
  AddToX(o_);
}

}  // namespace odmoe
