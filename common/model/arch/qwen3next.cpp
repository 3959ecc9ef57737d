// Qwen3-Next: three of every four layers Gated DeltaNet linear attention
// (a causal conv over q/k/v, L2-normed q/k, the gated delta rule with a
// per-sequence state, an output norm gated by z; v heads grouped by key
// head, b and a in one projection ssm_ba), the fourth grouped-query
// attention with a sigmoid output gate, per-head q/k norms and NeoX RoPE on
// a part of each head (rope.dimension_count); every layer's FFN the routed
// experts (softmax, top-k renormalised) plus a sigmoid-gated shared expert.
// The converter stores the (1 + w) norms as w + 1, so they are plain RMS
// norms here; the FFN norm is named post_attention_norm.
#include "model/arch/builtin_archs.h"

namespace odmoe {

ArchDesc Qwen3NextDescription() {
  return {
      .gguf_name = "qwen3next",
      .models = "Qwen3-Next-80B-A3B",
      .blocks =
          {
              .rope_mode = RopeMode::kHalf,
              .qk_norm = QkNorm::kPerHead,
              .shared_expert = true,
              .shared_gated = true,
              .delta_net = true,
              .delta_net_heads = DeltaNetHeadOrder::kGrouped,
              .delta_net_ba_fused = true,
              .attn_output_gate = true,
          },
      .router_normalize = true,
      .expert_ff_key = "expert_feed_forward_length",
      .tensor_names = {{TensorRole::kFfnNorm, "blk.{l}.post_attention_norm.weight"}},
  };
}

const ArchDesc kQwen3NextArch = Qwen3NextDescription();

}  // namespace odmoe
