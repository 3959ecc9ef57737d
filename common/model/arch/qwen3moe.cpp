// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): NeoX RoPE, an RMS norm over
// each head of q and k, the top-k weights renormalised (transformers'
// norm_topk_prob = true); the head size may differ from n_embd / n_head.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kQwen3MoeArch = {
    .gguf_name = "qwen3moe",
    .models = "Qwen3-30B-A3B, Qwen3-235B-A22B",
    .blocks = {.rope_mode = RopeMode::kHalf, .qk_norm = QkNorm::kPerHead},
    .router_normalize = true,
    .expert_ff_key = "expert_feed_forward_length",
};

}  // namespace odmoe
