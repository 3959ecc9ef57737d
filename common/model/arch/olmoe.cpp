// OLMoE-1B-7B: NeoX RoPE, an RMS norm over the whole q and k rows, the
// softmax over all experts read at the chosen ones (norm_topk_prob = false).
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kOlmoeArch = {
    .gguf_name = "olmoe",
    .models = "OLMoE-1B-7B",
    .blocks = {.rope_mode = RopeMode::kHalf, .qk_norm = QkNorm::kFull},
    .router_normalize = false,
};

}  // namespace odmoe
