// Qwen1.5-MoE / Qwen2-MoE: NeoX RoPE, q/k/v biases, the softmax over all
// experts read at the chosen ones (norm_topk_prob = false), and a shared
// expert per layer whose output is scaled by sigmoid(h . ffn_gate_inp_shexp).
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kQwen2MoeArch = {
    .gguf_name = "qwen2moe",
    .models = "Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B",
    .blocks =
        {
            .rope_mode = RopeMode::kHalf,
            .shared_expert = true,
            .shared_gated = true,
        },
    .attn_biases = AttnBiases::kQkv,
    .router_normalize = false,
    .expert_ff_key = "expert_feed_forward_length",
};

}  // namespace odmoe
