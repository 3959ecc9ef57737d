// Gemma 4's Mixture-of-Experts model (gemma-4-26B-A4B), as transformers'
// Gemma4TextModel and llama.cpp's gemma4 graph have it: token embeddings
// times sqrt(n_embd); per-head q/k RMS norms, V RMS-normed without a weight,
// scores unscaled; sliding layers (their own head size, KV heads and RoPE
// base, which layers from the file's pattern) and full layers (V = K where
// the file has no attn_v; "proportional" RoPE through rope_freqs.weight);
// sandwich norms; in every layer a dense GeGLU FFN beside the routed GeGLU
// experts, the router reading rms_norm(x) * scale / sqrt(n_embd), a softmax
// over all experts renormalised over the top-k and multiplied by a per-expert
// scale; a per-layer output scale; final logits soft-capped. Norm weights are
// stored as they are applied (Gemma 4 has no 1 + w). Per-layer embeddings
// (E2B / E4B, dense) and KV sharing between layers are refused (ModelFile).
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kGemma4Arch = {
    .gguf_name = "gemma4",
    .models = "gemma-4-26B-A4B",
    .blocks =
        {
            .rope_mode = RopeMode::kHalf,
            .qk_norm = QkNorm::kPerHead,
            .window_layers = WindowLayers::kFromFile,
            .window_layer_shape = true,
            .rope_freq_factors = true,
            .attn_unscaled = true,
            .v_norm = true,
            .v_optional = true,
            .embd_scaled = true,
            .post_norms = true,
            .layer_output_scale = true,
            .ffn_layout = FfnLayout::kDenseBesideExperts,
            .router_input = RouterInput::kScaledRms,
            .expert_weight_scale = true,
            .expert_activation = {ExpertActivation::Kind::kGeGlu},
        },
    .router_normalize = true,
    .expert_ff_key = "expert_feed_forward_length",
    .keys = {{.suffix = "attention.sliding_window",
              .min = 1,
              .max = 1 << 24,
              .into = &ModelConfig::sliding_window}},
    .tensor_names = {},
};

}  // namespace odmoe
