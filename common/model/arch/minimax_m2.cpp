// MiniMax-M2 / M2.1: grouped-query attention, RMS norms over the whole q and
// k rows (a weight per element), NeoX RoPE on the first rope.dimension_count
// dims of each head (rotary_dim 64 of 128); sigmoid routing with the
// correction bias (exp_probs_b), no expert groups, always renormalised over
// the k chosen (transformers' MiniMaxM2TopKRouter); no shared expert.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kMiniMaxM2Arch = {
    .gguf_name = "minimax-m2",
    .models = "MiniMax-M2, MiniMax-M2.1",
    .blocks =
        {
            .rope_mode = RopeMode::kHalf,
            .qk_norm = QkNorm::kFull,
        },
    .router_normalize = true,
    .router_score = RouterScore::kSigmoid,
    .expert_ff_key = "expert_feed_forward_length",
};

}  // namespace odmoe
