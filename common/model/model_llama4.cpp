// ModelFile's Llama 4 options: the attention temperature's scale (a float
// key), q/k norms off where the description says (Maverick), the router's
// input scaling (top-1 only), and the RoPE frequency factors odmoe does not
// apply (refused, not approximated).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/gguf_checks.h"
#include "model/model_file.h"
#include "util/status_macros.h"

namespace odmoe {

absl::Status ModelFile::ReadLlama4Config() {
  const GgufFile& f = *gguf_;
  const ArchDesc& a = *arch_;
  ModelConfig& c = config_;
  auto key = [&](std::string_view suffix) { return MetadataKey(a, suffix); };
  if (c.nope_layer_step > 0) {
    ODMOE_ASSIGN_OR_RETURN(c.attn_temp_scale, ReadFloat(f, key("attention.temperature_scale"), 0.0,
                                                        1e3, a.attn_temp_scale));
  }
  if (a.rope_qk_norm_off_expert_count > 0 && c.n_expert == a.rope_qk_norm_off_expert_count) {
    c.rope_qk_rms_norm = false;
  }
  if (c.router_input_scaled) {
    if (c.n_expert_used != 1) {
      return Invalid(f.path(),
                     absl::StrFormat("'%s' is %d: a router that scales the expert's input "
                                     "(%s) runs one expert per token; expected 1",
                                     key("expert_used_count"), c.n_expert_used, a.gguf_name));
    }
    // The one chosen expert's input carries sigmoid(logit); its output is
    // combined with weight 1 (the softmax over one selected logit).
    c.gating.normalize = true;
    c.gating.scale = 1.0f;
  }
  if (f.HasTensor("rope_freqs.weight")) {
    return Invalid(f.path(),
                   "tensor 'rope_freqs.weight' (Llama 3 style RoPE frequency factors, "
                   "rope_scaling llama3) is not supported by odmoe yet");
  }
  return absl::OkStatus();
}

}  // namespace odmoe
