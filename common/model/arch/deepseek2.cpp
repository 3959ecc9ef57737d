// DeepSeek-V2 / V2-Lite: multi-head latent attention in the absorbed form
// current converters write (a KV cache of kv_lora_rank + qk_rope floats per
// position; its shapes are the MLA block's keys, model_mla.cpp), interleaved
// RoPE on the qk_rope dims, YaRN with the attention scale times mscale^2;
// the first leading_dense_block_count layers dense; the softmax over all
// experts without renormalisation (norm_topk_prob false) times
// expert_weights_scale (routed_scaling_factor); ungated shared experts.
// DeepSeek-V3 / V3.1 / R1 and Kimi-K2 files are deepseek2 files whose
// expert_gating_func (2) asks for sigmoid routing with the correction bias
// (exp_probs_b) and expert groups (expert_group_count / _used_count); their
// expert_weights_norm renormalises (RouterGating).
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kDeepSeek2Arch = {
    .gguf_name = "deepseek2",
    .models = "DeepSeek-V2-Lite, DeepSeek-V2, DeepSeek-V3, DeepSeek-V3.1, DeepSeek-R1, Kimi-K2",
    .blocks =
        {
            .attention = AttentionKind::kMla,
            .rope_mode = RopeMode::kInterleaved,
            .shared_expert = true,
            .shared_gated = false,
        },
    .router_normalize = false,
    .expert_ff_key = "expert_feed_forward_length",
};

}  // namespace odmoe
