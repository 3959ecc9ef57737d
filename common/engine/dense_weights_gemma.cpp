// DenseWeights' part for Gemma 4's blocks (arch_blocks.h): the sandwich
// norms, the dense FFN beside the experts and its norms, the router's input
// norm (its scale over sqrt(n_embd)), the per-expert weight scale (on the
// host, where the routing weights are scaled) and the layer's output scale.
#include <cmath>
#include <cstring>

#include "engine/dense_weights.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<const float*> DenseWeights::UploadFloats(Backend& backend,
                                                        const std::vector<float>& values) {
  const size_t bytes = values.size() * sizeof(float);
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> buf, backend.Allocate(bytes));
  ODMOE_RETURN_IF_ERROR(backend.CopyToBackend(buf->data(), values.data(), bytes));
  const float* p = static_cast<const float*>(buf->data());
  storage_.push_back(std::move(buf));
  return p;
}

absl::Status DenseWeights::LoadGemmaLayer(const ModelFile& model, Backend& backend, int l,
                                          DenseLayerWeights* d) {
  const ModelConfig& c = model.config();
  const LayerTensors& t = model.layer(l);
  if (c.post_norms) {
    ODMOE_ASSIGN_OR_RETURN(d->attn_post_norm, LoadFloats(backend, t.attn_post_norm));
    ODMOE_ASSIGN_OR_RETURN(d->ffn_post_norm, LoadFloats(backend, t.ffn_post_norm));
  }
  if (t.layer_output_scale.data != nullptr) {
    ODMOE_ASSIGN_OR_RETURN(d->layer_output_scale, LoadFloats(backend, t.layer_output_scale));
  }
  if (!c.has_experts(l)) return absl::OkStatus();
  if (c.ffn_layout == FfnLayout::kDenseBesideExperts) {
    ODMOE_ASSIGN_OR_RETURN(d->dense_ffn.gate, Load(backend, t.ffn_gate));
    ODMOE_ASSIGN_OR_RETURN(d->dense_ffn.up, Load(backend, t.ffn_up));
    ODMOE_ASSIGN_OR_RETURN(d->dense_ffn.down, Load(backend, t.ffn_down));
    d->dense_ffn.activation = c.expert_activation;  // Gemma: GeGLU like its experts
    ODMOE_ASSIGN_OR_RETURN(d->ffn_post_norm_1, LoadFloats(backend, t.ffn_post_norm_1));
    ODMOE_ASSIGN_OR_RETURN(d->ffn_pre_norm_2, LoadFloats(backend, t.ffn_pre_norm_2));
    ODMOE_ASSIGN_OR_RETURN(d->ffn_post_norm_2, LoadFloats(backend, t.ffn_post_norm_2));
  }
  if (c.router_input == RouterInput::kScaledRms) {
    std::vector<float> w(static_cast<size_t>(c.n_embd));
    std::memcpy(w.data(), t.router_scale.data, w.size() * sizeof(float));
    const float root = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
    for (float& x : w) x = x * root;
    ODMOE_ASSIGN_OR_RETURN(d->router_input_norm, UploadFloats(backend, w));
  }
  if (c.expert_weight_scale) {
    d->expert_scale.resize(static_cast<size_t>(c.n_expert));
    std::memcpy(d->expert_scale.data(), t.expert_scale.data,
                d->expert_scale.size() * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace odmoe
