// gpt-oss (gpt-oss-20b, gpt-oss-120b), as transformers' modeling file has
// it: the top-k of the biased router logits and a softmax over those k; its
// SwiGLU clamped at 7 with alpha 1.702 (llama.cpp hard-codes the same); the
// even layers slide (transformers' default layer_types); YaRN with
// truncate = false; q/k/v/o biases and a sink logit per head; the FFN norm
// named post_attention_norm.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kGptOssArch = {
    .gguf_name = "gpt-oss",
    .models = "gpt-oss-20b, gpt-oss-120b",
    .blocks =
        {
            .rope_mode = RopeMode::kHalf,
            .attn_sinks = true,
            .window_layers = WindowLayers::kEven,
            .router_bias = true,
            .expert_activation = {ExpertActivation::Kind::kSwiGluOai, 1.702f, 7.0f},
            .expert_bias = true,
        },
    .attn_biases = AttnBiases::kQkvo,
    .router_normalize = true,
    .expert_ff_key = "expert_feed_forward_length",
    .keys = {{.suffix = "attention.sliding_window",
              .min = 1,
              .max = 1 << 24,
              .into = &ModelConfig::sliding_window}},
    .yarn_truncate = false,
    .tensor_names = {{TensorRole::kFfnNorm, "blk.{l}.post_attention_norm.weight"}},
};

}  // namespace odmoe
