// Nemotron-H MoE (NVIDIA Nemotron 3 Nano 30B-A3B and its siblings): a hybrid
// of layers of one block each, after the layer's own attn_norm: Mamba-2
// mixers (ssm_in -> causal conv + SiLU -> selective scan -> gated grouped
// RMS norm -> ssm_out, a per-sequence state), a few grouped-query attention
// layers without RoPE, and FFN layers of routed experts plus a shared
// expert. Which layer is which: the per-layer attention.head_count_kv and
// feed_forward_length arrays (model_mamba2.cpp). The routing is sigmoid
// scores with a correction bias (blk.N.exp_probs_b.bias) for the choice,
// the chosen sigmoids renormalised (expert_weights_norm) and scaled
// (expert_weights_scale); the experts and the shared expert are up -> relu^2
// -> down, without a gate. Both are still to come (RouterGating's sigmoid
// routing, gate-less relu^2 experts): files with FFN layers are refused
// with their names until then.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kNemotronHMoeArch = {
    .gguf_name = "nemotron_h_moe",
    .models = "Nemotron 3 Nano 30B-A3B",
    .blocks =
        {
            .shared_expert = true,
            .shared_gated = false,
            .mamba2 = true,
            .no_rope = true,
        },
    .router_normalize = true,
    .expert_ff_key = "expert_feed_forward_length",
    // Every layer's one norm is attn_norm, the FFN layers' too.
    .tensor_names = {{TensorRole::kFfnNorm, "blk.{l}.attn_norm.weight"}},
};

}  // namespace odmoe
