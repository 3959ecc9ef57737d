#include "engine/dense_weights.h"

#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<WeightRef> DenseWeights::Load(Backend& backend, const TensorView& view) {
  ODMOE_ASSIGN_OR_RETURN(BackendWeight w, backend.LoadWeight(view));
  if (w.storage) storage_.push_back(std::move(w.storage));
  return w.ref;
}

absl::StatusOr<std::unique_ptr<DenseWeights>> DenseWeights::Load(const ModelFile& model,
                                                                 Backend& backend) {
  std::unique_ptr<DenseWeights> w(new DenseWeights());
  auto floats = [&](const TensorView& v) -> absl::StatusOr<const float*> {
    ODMOE_ASSIGN_OR_RETURN(WeightRef r, w->Load(backend, v));
    return static_cast<const float*>(r.data);
  };
  ODMOE_ASSIGN_OR_RETURN(w->token_embd_, w->Load(backend, model.token_embd()));
  w->output_ = w->token_embd_;
  if (!model.config().output_tied) {
    ODMOE_ASSIGN_OR_RETURN(w->output_, w->Load(backend, model.output()));
  }
  ODMOE_ASSIGN_OR_RETURN(w->output_norm_, floats(model.output_norm()));
  for (int l = 0; l < model.config().n_layer; ++l) {
    const LayerTensors& t = model.layer(l);
    DenseLayerWeights d;
    ODMOE_ASSIGN_OR_RETURN(d.attn_norm, floats(t.attn_norm));
    ODMOE_ASSIGN_OR_RETURN(d.ffn_norm, floats(t.ffn_norm));
    ODMOE_ASSIGN_OR_RETURN(d.attn_q, w->Load(backend, t.attn_q));
    ODMOE_ASSIGN_OR_RETURN(d.attn_k, w->Load(backend, t.attn_k));
    ODMOE_ASSIGN_OR_RETURN(d.attn_v, w->Load(backend, t.attn_v));
    ODMOE_ASSIGN_OR_RETURN(d.attn_output, w->Load(backend, t.attn_output));
    ODMOE_ASSIGN_OR_RETURN(d.router, w->Load(backend, t.router));
    const ModelConfig& c = model.config();
    if (c.qk_norm != QkNorm::kNone) {
      ODMOE_ASSIGN_OR_RETURN(d.attn_q_norm, floats(t.attn_q_norm));
      ODMOE_ASSIGN_OR_RETURN(d.attn_k_norm, floats(t.attn_k_norm));
    }
    if (c.attn_bias) {
      ODMOE_ASSIGN_OR_RETURN(d.attn_q_bias, floats(t.attn_q_bias));
      ODMOE_ASSIGN_OR_RETURN(d.attn_k_bias, floats(t.attn_k_bias));
      ODMOE_ASSIGN_OR_RETURN(d.attn_v_bias, floats(t.attn_v_bias));
      if (t.attn_output_bias.data != nullptr) {
        ODMOE_ASSIGN_OR_RETURN(d.attn_output_bias, floats(t.attn_output_bias));
      }
    }
    if (c.attn_sinks) {
      ODMOE_ASSIGN_OR_RETURN(d.attn_sinks, floats(t.attn_sinks));
    }
    if (c.router_bias) {
      ODMOE_ASSIGN_OR_RETURN(d.router_bias, floats(t.router_bias));
    }
    if (c.n_ff_shared > 0) {
      ODMOE_ASSIGN_OR_RETURN(d.shared_expert.gate, w->Load(backend, t.shexp_gate));
      ODMOE_ASSIGN_OR_RETURN(d.shared_expert.up, w->Load(backend, t.shexp_up));
      ODMOE_ASSIGN_OR_RETURN(d.shared_expert.down, w->Load(backend, t.shexp_down));
      ODMOE_ASSIGN_OR_RETURN(d.shared_gate, w->Load(backend, t.shexp_gate_inp));
    }
    w->layers_.push_back(d);
  }
  return w;
}

}  // namespace odmoe
