// Gemma 4's FFN block and scales on the main node (arch_blocks.h:
// FfnLayout::kDenseBesideExperts, RouterInput::kScaledRms,
// expert_weight_scale, layer_output_scale), as transformers'
// Gemma4TextDecoderLayer computes them:
//
//   a   = x (attention's residual added)
//   m1  = post_ffw_norm_1(dense(ffn_norm(a)))
//   m2  = post_ffw_norm_2(experts(pre_ffw_norm_2(a)))   router: rms(a) * scale / sqrt(d)
//   x   = (a + post_ffw_norm(m1 + m2)) * layer_output_scale
#include "engine/transformer.h"
#include "util/status_macros.h"

namespace odmoe {

void Transformer::DenseBesideExperts(int layer) {
  const DenseLayerWeights& w = weights_->layer(layer);
  const ModelConfig& c = config_;
  const int64_t n = rows_;
  const Mat h{h_, n, c.n_embd}, o{o_, n, c.n_embd}, beside{beside_out_, n, c.n_embd};
  const Mat x{x_, n, c.n_embd};
  NormX(w.ffn_norm, h);  // x is whole from here on
  RunExpertFfn(backend_, w.dense_ffn, h, *dense_scratch_, beside);
  backend_.RmsNorm(beside, w.ffn_post_norm_1, c.rms_eps, beside);
  backend_.RmsNorm(x, w.router_input_norm, c.rms_eps, o);  // the router's input
  backend_.RmsNorm(x, w.ffn_pre_norm_2, c.rms_eps, h);     // the experts' input
}

void Transformer::FinishDenseBesideExperts(int layer) {
  const DenseLayerWeights& w = weights_->layer(layer);
  const Mat moe = moe_output();
  backend_.RmsNorm(moe, w.ffn_post_norm_2, config_.rms_eps, moe);
  backend_.Add(moe, ConstMat(beside_out_, rows_, config_.n_embd), moe);
  backend_.RmsNorm(moe, w.ffn_post_norm, config_.rms_eps, moe);
  AddToX(moe_);
}

void Transformer::ScaleLayerOutput(int layer) {
  const float* scale = weights_->layer(layer).layer_output_scale;
  if (scale == nullptr) return;
  SettleX();
  backend_.Scale(Mat{x_, rows_, config_.n_embd}, scale);
}

absl::Status Transformer::ScaleExpertWeights(int layer, size_t nk) {
  const std::vector<float>& scale = weights_->layer(layer).expert_scale;
  for (size_t i = 0; i < nk; ++i) {
    host_route_[i] = host_route_[i] * scale[static_cast<size_t>(host_ids_[i])];
  }
  return backend_.CopyToBackend(weights_out_, host_route_.data(), nk * sizeof(float));
}

}  // namespace odmoe
