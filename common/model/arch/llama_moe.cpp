// Mixtral 8x7B / 8x22B: stored as architecture "llama" with expert_count > 0
// (a dense llama file is refused). The plain layer: grouped-query attention
// with interleaved RoPE, experts chosen by a softmax over the k best logits.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kLlamaArch = {
    .gguf_name = "llama",
    .models = "Mixtral 8x7B, 8x22B",
    .blocks = {.rope_mode = RopeMode::kInterleaved},
    .router_normalize = true,
};

}  // namespace odmoe
