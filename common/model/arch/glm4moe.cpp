// GLM-4.5 / 4.6 / 4.7 and GLM-4.5-Air: grouped-query attention with q/k/v
// biases, NeoX RoPE on the first rope.dimension_count dims of each head
// (partial_rotary_factor 0.5), per-head q/k RMS norms where the file has them
// (use_qk_norm: GLM-4.5, not Air), the first leading_dense_block_count layers
// dense; sigmoid routing with the correction bias (exp_probs_b), renormalised
// over the k chosen, times expert_weights_scale (routed_scaling_factor); one
// ungated shared expert. The FFN norm is stored as post_attention_norm. The
// file's NextN / MTP layers (nextn_predict_layers, counted in block_count)
// are not run (model_config.h). GLM-4.7-Flash is a deepseek2 file.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kGlm4MoeArch = {
    .gguf_name = "glm4moe",
    .models = "GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7",
    .blocks =
        {
            .rope_mode = RopeMode::kHalf,
            .qk_norm = QkNorm::kPerHead,
            .shared_expert = true,
            .shared_gated = false,
        },
    .attn_biases = AttnBiases::kQkv,
    .router_normalize = true,
    .router_score = RouterScore::kSigmoid,
    .expert_ff_key = "expert_feed_forward_length",
    .qk_norm_optional = true,
    .tensor_names = {{TensorRole::kFfnNorm, "blk.{l}.post_attention_norm.weight"}},
};

}  // namespace odmoe
