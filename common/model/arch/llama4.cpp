// Llama 4 (Scout 17B-16E, Maverick 17B-128E), text layers: interleaved RoPE
// (no permutation); every fourth layer without RoPE (NoPE), whose queries
// are scaled by the attention temperature log(floor((p + 1) / 8192) + 1) *
// 0.1 + 1; the other layers attend within chunks of 8192 positions and
// RMS-norm q and k without a weight after RoPE (not Maverick: llama.cpp
// turns it off for 128 experts, as transformers' use_qk_norm); experts in
// every interleave_moe_layer_step-th layer, a dense FFN (feed_forward_length)
// in the others; a top-1 router whose weight, sigmoid(logit), scales the
// expert's input; an ungated shared expert as wide as a routed one.
//
// The chunk and the temperature are llama.cpp's constants; a file may carry
// them as attention.sliding_window (the chunk; 0: no chunks, as llama.cpp's
// MobileLLM case) and attention.temperature_length / temperature_scale.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kLlama4Arch = {
    .gguf_name = "llama4",
    .models = "Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E",
    .blocks =
        {
            .rope_mode = RopeMode::kInterleaved,
            .shared_expert = true,
            .shared_gated = false,
            .nope_layer_step = 4,
            .rope_qk_rms_norm = true,
            .router_input_scaled = true,
        },
    .expert_ff_key = "expert_feed_forward_length",
    .keys =
        {
            {.suffix = "interleave_moe_layer_step",
             .min = 1,
             .max = 4096,
             .into = &ModelConfig::moe_layer_step},
            {.suffix = "attention.sliding_window",
             .min = 0,
             .max = 1 << 24,
             .fallback = 8192,
             .into = &ModelConfig::attn_chunk},
            {.suffix = "attention.temperature_length",
             .min = 1,
             .max = 1 << 24,
             .fallback = 8192,
             .into = &ModelConfig::attn_temp_length},
        },
    .attn_temp_scale = 0.1f,
    .rope_qk_norm_off_expert_count = 128,
};

}  // namespace odmoe
