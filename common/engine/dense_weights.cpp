#include "engine/dense_weights.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"
#include "util/step_progress.h"

namespace odmoe {

absl::StatusOr<WeightRef> DenseWeights::Load(Backend& backend, const TensorView& view) {
  ODMOE_ASSIGN_OR_RETURN(BackendWeight w, backend.LoadWeight(view));
  if (w.storage) {
    storage_.push_back(std::move(w.storage));
    copied_bytes_ += view.bytes();
  }
  return w.ref;
}

absl::StatusOr<const float*> DenseWeights::LoadFloats(Backend& backend, const TensorView& view) {
  ODMOE_ASSIGN_OR_RETURN(WeightRef r, Load(backend, view));
  return static_cast<const float*>(r.data);
}

absl::StatusOr<std::unique_ptr<DenseWeights>> DenseWeights::Load(const ModelFile& model,
                                                                 Backend& backend) {
  std::unique_ptr<DenseWeights> w(new DenseWeights());
  const int n_layer = model.config().n_layer;
  StepProgress progress(absl::StrCat("loading the dense weights onto ", backend.name()),
                        static_cast<uint64_t>(n_layer) + 1, "layers");
  ODMOE_ASSIGN_OR_RETURN(w->token_embd_, w->Load(backend, model.token_embd()));
  w->output_ = w->token_embd_;
  if (!model.config().output_tied) {
    ODMOE_ASSIGN_OR_RETURN(w->output_, w->Load(backend, model.output()));
  }
  ODMOE_ASSIGN_OR_RETURN(w->output_norm_, w->LoadFloats(backend, model.output_norm()));
  const ModelConfig& c = model.config();
  if (c.embd_scaled) {
    ODMOE_ASSIGN_OR_RETURN(w->embd_scale_,
                           w->UploadFloats(backend, {std::sqrt(static_cast<float>(c.n_embd))}));
  }
  if (c.v_norm) {
    ODMOE_ASSIGN_OR_RETURN(w->ones_,
                           w->UploadFloats(backend, std::vector<float>(c.head_dim, 1.0f)));
  }
  uint64_t reported = w->copied_bytes_;
  progress.Advance(1, reported);  // the embeddings and the output head
  for (int l = 0; l < n_layer; ++l) {
    const LayerTensors& t = model.layer(l);
    DenseLayerWeights d;
    ODMOE_ASSIGN_OR_RETURN(d.attn_norm, w->LoadFloats(backend, t.attn_norm));
    ODMOE_ASSIGN_OR_RETURN(d.ffn_norm, w->LoadFloats(backend, t.ffn_norm));
    ODMOE_RETURN_IF_ERROR(w->LoadAttention(model, backend, l, &d));
    ODMOE_RETURN_IF_ERROR(w->LoadFfn(model, backend, l, &d));
    ODMOE_RETURN_IF_ERROR(w->LoadGemmaLayer(model, backend, l, &d));
    w->layers_.push_back(std::move(d));
    progress.Advance(1, w->copied_bytes_ - reported);
    reported = w->copied_bytes_;
  }
  progress.Finish();
  return w;
}

absl::Status DenseWeights::LoadAttention(const ModelFile& model, Backend& backend, int l,
                                         DenseLayerWeights* d) {
  const ModelConfig& c = model.config();
  const LayerTensors& t = model.layer(l);
  if (!c.has_mixer(l)) return absl::OkStatus();  // a hybrid's FFN layer
  if (c.mamba2 && c.is_recurrent(l)) return LoadMamba2(model, backend, l, d);
  if (c.is_recurrent(l)) return LoadDeltaNet(model, backend, l, d);
  ODMOE_ASSIGN_OR_RETURN(d->attn_output, Load(backend, t.attn_output));
  if (c.attention == AttentionKind::kMla) {
    if (c.mla.q_lora_rank > 0) {
      ODMOE_ASSIGN_OR_RETURN(d->attn_q_a, Load(backend, t.attn_q_a));
      ODMOE_ASSIGN_OR_RETURN(d->attn_q_a_norm, LoadFloats(backend, t.attn_q_a_norm));
      ODMOE_ASSIGN_OR_RETURN(d->attn_q_b, Load(backend, t.attn_q_b));
    } else {
      ODMOE_ASSIGN_OR_RETURN(d->attn_q, Load(backend, t.attn_q));
    }
    ODMOE_ASSIGN_OR_RETURN(d->attn_kv_a, Load(backend, t.attn_kv_a_mqa));
    ODMOE_ASSIGN_OR_RETURN(d->attn_kv_a_norm, LoadFloats(backend, t.attn_kv_a_norm));
    for (int h = 0; h < c.n_head; ++h) {
      ODMOE_ASSIGN_OR_RETURN(WeightRef kb, Load(backend, t.attn_k_b.Slice2D(h)));
      ODMOE_ASSIGN_OR_RETURN(WeightRef vb, Load(backend, t.attn_v_b.Slice2D(h)));
      d->attn_k_b.push_back(kb);
      d->attn_v_b.push_back(vb);
    }
    // The heads' slices of one tensor: one type and shape, as a table needs.
    ODMOE_ASSIGN_OR_RETURN(d->attn_k_b_table, backend.MakeWeightTable(d->attn_k_b));
    ODMOE_ASSIGN_OR_RETURN(d->attn_v_b_table, backend.MakeWeightTable(d->attn_v_b));
    return absl::OkStatus();
  }
  ODMOE_ASSIGN_OR_RETURN(d->attn_q, Load(backend, t.attn_q));
  ODMOE_ASSIGN_OR_RETURN(d->attn_k, Load(backend, t.attn_k));
  ODMOE_ASSIGN_OR_RETURN(d->attn_v, Load(backend, t.attn_v));
  if (c.qk_norm != QkNorm::kNone) {
    ODMOE_ASSIGN_OR_RETURN(d->attn_q_norm, LoadFloats(backend, t.attn_q_norm));
    ODMOE_ASSIGN_OR_RETURN(d->attn_k_norm, LoadFloats(backend, t.attn_k_norm));
  }
  if (c.attn_bias) {
    ODMOE_ASSIGN_OR_RETURN(d->attn_q_bias, LoadFloats(backend, t.attn_q_bias));
    ODMOE_ASSIGN_OR_RETURN(d->attn_k_bias, LoadFloats(backend, t.attn_k_bias));
    ODMOE_ASSIGN_OR_RETURN(d->attn_v_bias, LoadFloats(backend, t.attn_v_bias));
    if (t.attn_output_bias.data != nullptr) {
      ODMOE_ASSIGN_OR_RETURN(d->attn_output_bias, LoadFloats(backend, t.attn_output_bias));
    }
  }
  if (c.attn_sinks) {
    ODMOE_ASSIGN_OR_RETURN(d->attn_sinks, LoadFloats(backend, t.attn_sinks));
  }
  return absl::OkStatus();
}

absl::Status DenseWeights::LoadDeltaNet(const ModelFile& model, Backend& backend, int l,
                                        DenseLayerWeights* d) {
  const LayerTensors& t = model.layer(l);
  ODMOE_ASSIGN_OR_RETURN(d->attn_qkv, Load(backend, t.attn_qkv));
  ODMOE_ASSIGN_OR_RETURN(d->attn_gate, Load(backend, t.attn_gate));
  if (model.config().delta_net_ba_fused) {
    ODMOE_ASSIGN_OR_RETURN(d->ssm_ba, Load(backend, t.ssm_ba));
  } else {
    ODMOE_ASSIGN_OR_RETURN(d->ssm_beta, Load(backend, t.ssm_beta));
    ODMOE_ASSIGN_OR_RETURN(d->ssm_alpha, Load(backend, t.ssm_alpha));
  }
  ODMOE_ASSIGN_OR_RETURN(d->ssm_out, Load(backend, t.ssm_out));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_conv1d, LoadFloats(backend, t.ssm_conv1d));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_dt_bias, LoadFloats(backend, t.ssm_dt_bias));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_a, LoadFloats(backend, t.ssm_a));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_norm, LoadFloats(backend, t.ssm_norm));
  return absl::OkStatus();
}

absl::Status DenseWeights::LoadMamba2(const ModelFile& model, Backend& backend, int l,
                                      DenseLayerWeights* d) {
  const LayerTensors& t = model.layer(l);
  ODMOE_ASSIGN_OR_RETURN(d->ssm_in, Load(backend, t.ssm_in));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_out, Load(backend, t.ssm_out));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_conv1d, LoadFloats(backend, t.ssm_conv1d));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_conv1d_bias, LoadFloats(backend, t.ssm_conv1d_bias));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_dt_bias, LoadFloats(backend, t.ssm_dt_bias));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_a, LoadFloats(backend, t.ssm_a));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_d, LoadFloats(backend, t.ssm_d));
  ODMOE_ASSIGN_OR_RETURN(d->ssm_norm, LoadFloats(backend, t.ssm_norm));
  return absl::OkStatus();
}

absl::Status DenseWeights::LoadFfn(const ModelFile& model, Backend& backend, int l,
                                   DenseLayerWeights* d) {
  const ModelConfig& c = model.config();
  const LayerTensors& t = model.layer(l);
  if (!c.has_ffn(l)) return absl::OkStatus();  // a hybrid's mixer layer
  if (!c.has_experts(l)) {
    ODMOE_ASSIGN_OR_RETURN(d->dense_ffn.gate, Load(backend, t.ffn_gate));
    ODMOE_ASSIGN_OR_RETURN(d->dense_ffn.up, Load(backend, t.ffn_up));
    ODMOE_ASSIGN_OR_RETURN(d->dense_ffn.down, Load(backend, t.ffn_down));
    return absl::OkStatus();
  }
  ODMOE_ASSIGN_OR_RETURN(d->router, Load(backend, t.router));
  if (c.router_bias) {
    ODMOE_ASSIGN_OR_RETURN(d->router_bias, LoadFloats(backend, t.router_bias));
  }
  if (c.router_selection_bias) {
    ODMOE_ASSIGN_OR_RETURN(d->selection_bias, LoadFloats(backend, t.exp_probs_b));
  }
  if (c.n_ff_shared > 0) {
    ODMOE_ASSIGN_OR_RETURN(d->shared_expert.gate, Load(backend, t.shexp_gate));
    ODMOE_ASSIGN_OR_RETURN(d->shared_expert.up, Load(backend, t.shexp_up));
    ODMOE_ASSIGN_OR_RETURN(d->shared_expert.down, Load(backend, t.shexp_down));
    if (c.shared_gated) {
      ODMOE_ASSIGN_OR_RETURN(d->shared_gate, Load(backend, t.shexp_gate_inp));
    }
  }
  return absl::OkStatus();
}

}  // namespace odmoe
