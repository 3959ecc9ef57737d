// Qwen3.5 / Qwen3.6 MoE (e.g. Qwen3.5-35B-A3B): Qwen3-Next's layers (see
// qwen3next.cpp) as current converters write them: b and a in two
// projections (ssm_beta, ssm_alpha) and the value heads reordered so that
// value head j reads key head j % n_k (DeltaNetHeadOrder::kTiled). The
// attention layers' RoPE is interleaved M-RoPE (rope.dimension_sections);
// for text every section has the token's position, which is NeoX RoPE on
// rope.dimension_count dims.
#include "model/arch/builtin_archs.h"

namespace odmoe {

const ArchDesc kQwen35MoeArch = [] {
  ArchDesc d = Qwen3NextDescription();
  d.gguf_name = "qwen35moe";
  d.models = "Qwen3.5-35B-A3B, Qwen3.5-122B-A10B, Qwen3.6-35B-A3B";
  d.blocks.delta_net_heads = DeltaNetHeadOrder::kTiled;
  d.blocks.delta_net_ba_fused = false;
  return d;
}();

}  // namespace odmoe
