#include "model/model_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/gguf_checks.h"
#include "util/status_macros.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t Fingerprint(const GgufFile& f) {
  uint64_t h = 14695981039346656037ull;
  for (const auto& [key, value] : f.metadata()) {
    h = Fnv1a(h, key.data(), key.size());
    const auto type = static_cast<uint32_t>(value.type());
    h = Fnv1a(h, &type, sizeof(type));
    const uint64_t n = value.ArraySize();
    h = Fnv1a(h, &n, sizeof(n));
    if (const std::string* s = value.AsString()) h = Fnv1a(h, s->data(), s->size());
    if (std::optional<double> x = value.AsFloat()) h = Fnv1a(h, &*x, sizeof(*x));
  }
  for (const TensorView& t : f.tensors()) {
    h = Fnv1a(h, t.name.data(), t.name.size());
    const auto type = static_cast<uint32_t>(t.type);
    h = Fnv1a(h, &type, sizeof(type));
    h = Fnv1a(h, t.ne.data(), sizeof(t.ne));
    const uint64_t offset = f.DataOffset(t);
    h = Fnv1a(h, &offset, sizeof(offset));
  }
  const uint64_t size = f.file_size();
  return Fnv1a(h, &size, sizeof(size));
}

// <arch>.rope.scaling.*: YaRN (with the description's `truncate`) or none.
absl::Status ReadRopeScaling(const GgufFile& f, const ArchDesc& a, RopeScaling* out) {
  auto key = [&](std::string_view suffix) { return MetadataKey(a, suffix); };
  if (std::optional<std::string> type = f.GetString(key("rope.scaling.type"))) {
    if (*type == "yarn") {
      out->type = RopeScalingType::kYarn;
      out->truncate = a.yarn_truncate;
      ODMOE_ASSIGN_OR_RETURN(out->factor, ReadFloat(f, key("rope.scaling.factor"), 1e-6, 1e6, 1.0));
      ODMOE_ASSIGN_OR_RETURN(out->original_context,
                             ReadInt(f, key("rope.scaling.original_context_length"), 1, 1 << 24));
      ODMOE_ASSIGN_OR_RETURN(out->beta_fast,
                             ReadFloat(f, key("rope.scaling.yarn_beta_fast"), 1e-6, 1e6, 32.0));
      ODMOE_ASSIGN_OR_RETURN(out->beta_slow,
                             ReadFloat(f, key("rope.scaling.yarn_beta_slow"), 1e-6, 1e6, 1.0));
      // transformers' default attention factor unless the file gives one.
      // DeepSeek's files carry yarn_log_multiplier (0.1 * mscale_all_dim)
      // instead: their rotation keeps unit magnitude (mscale / mscale_all_dim
      // = 1) and the factor moves into the attention scale (ReadMlaConfig).
      const bool deepseek_yarn = f.Find(key("rope.scaling.yarn_log_multiplier")) != nullptr;
      ODMOE_ASSIGN_OR_RETURN(out->attention_factor,
                             ReadFloat(f, key("rope.scaling.attn_factor"), 1e-6, 1e6,
                                       deepseek_yarn ? 1.0 : YarnAttentionFactor(out->factor)));
    } else if (*type != "none") {
      return Invalid(f.path(), absl::StrCat("unsupported RoPE scaling '", *type, "' in '",
                                            key("rope.scaling.type"), "' (supported: yarn, none)"));
    }
  }
  return absl::OkStatus();
}

// Sigmoid routing's expert groups (DeepSeek-V3): n_group equal groups of
// at least two experts (a group ranks by its two best), enough experts in
// the kept groups for the top-k, at most 64 groups (the backends' mask).
absl::Status CheckExpertGroups(const GgufFile& f, const ArchDesc& a, const ModelConfig& c) {
  const RouterGating& g = c.gating;
  if (!g.group_limited()) return absl::OkStatus();
  const std::string key = MetadataKey(a, "expert_group_count");
  if (g.score != RouterScore::kSigmoid) {
    return Invalid(f.path(), absl::StrFormat("group-limited routing (%d of %d expert groups) with "
                                             "a softmax (DeepSeek-V2's group_limited_greedy) is "
                                             "not supported; with sigmoid scores "
                                             "(expert_gating_func 2) it is",
                                             g.n_group_used, g.n_group));
  }
  const int per_group = c.n_expert / g.n_group;
  if (g.n_group > 64 || c.n_expert % g.n_group != 0 || per_group < 2) {
    return Invalid(f.path(), absl::StrFormat("'%s' = %d must divide expert_count %d into at most "
                                             "64 groups of at least 2 experts",
                                             key, g.n_group, c.n_expert));
  }
  if (g.n_group_used < 1 || g.n_group_used * per_group < c.n_expert_used) {
    return Invalid(f.path(),
                   absl::StrFormat("'%s' = %d keeps %d experts, fewer than the top-%d",
                                   MetadataKey(a, "expert_group_used_count"), g.n_group_used,
                                   g.n_group_used * per_group, c.n_expert_used));
  }
  return absl::OkStatus();
}

// How the router's logits become expert weights: the description's default
// unless the file says otherwise; routing odmoe does not run is refused.
absl::Status ReadRouting(const GgufFile& f, const ArchDesc& a, RouterGating* gating) {
  auto key = [&](std::string_view suffix) { return MetadataKey(a, suffix); };
  gating->normalize = a.router_normalize;
  if (const GgufValue* v = f.Find(key("expert_weights_norm"))) {
    std::optional<bool> b = v->AsBool();
    if (!b)
      return Invalid(
          f.path(), absl::StrCat("metadata key '", key("expert_weights_norm"), "' must be a bool"));
    gating->normalize = *b;
  }
  ODMOE_ASSIGN_OR_RETURN(gating->scale, ReadFloat(f, key("expert_weights_scale"), 0.0, 1e6, 1.0));
  if (gating->scale == 0.0f) gating->scale = 1.0f;  // converters write 0 for "none"
  // Routing variants odmoe does not run are refused, not approximated.
  gating->score = a.router_score;
  if (f.Find(key("expert_gating_func")) != nullptr) {
    ODMOE_ASSIGN_OR_RETURN(int func, ReadInt(f, key("expert_gating_func"), 0, 16));
    if (func != 1 && func != 2) {
      return Invalid(f.path(), absl::StrFormat("'%s' = %d is not supported (1: softmax, "
                                               "2: sigmoid)",
                                               key("expert_gating_func"), func));
    }
    gating->score = func == 2 ? RouterScore::kSigmoid : RouterScore::kSoftmax;
  }
  ODMOE_ASSIGN_OR_RETURN(int groups, ReadInt(f, key("expert_group_count"), 0, 4096, 1));
  ODMOE_ASSIGN_OR_RETURN(int groups_used,
                         ReadInt(f, key("expert_group_used_count"), 0, 4096, groups));
  gating->n_group = std::max(groups, 1);  // converters may write 0 for "none"
  gating->n_group_used = groups_used;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(const std::string& path) {
  std::unique_ptr<ModelFile> m(new ModelFile());
  ODMOE_ASSIGN_OR_RETURN(m->gguf_, GgufFile::Open(path));
  std::optional<std::string> arch = m->gguf_->GetString("general.architecture");
  if (!arch) return Invalid(path, "missing metadata key 'general.architecture'");
  m->arch_ = FindArch(*arch);
  if (m->arch_ == nullptr) {
    return Invalid(
        path,
        absl::StrCat("unsupported architecture '", *arch, "' (supported: ",
                     absl::StrJoin(SupportedArchNames(), ", ",
                                   [](std::string* out, std::string_view n) { out->append(n); }),
                     ")"));
  }
  ODMOE_RETURN_IF_ERROR(m->ReadConfig());
  ODMOE_RETURN_IF_ERROR(m->BindTensors());
  m->fingerprint_ = Fingerprint(*m->gguf_);
  return m;
}

absl::Status ModelFile::ReadConfig() {
  const GgufFile& f = *gguf_;
  const ArchDesc& a = *arch_;
  ModelConfig& c = config_;
  c.arch = std::string(a.gguf_name);
  c.name = f.GetString("general.name").value_or("");
  static_cast<ArchBlocks&>(c) = a.blocks;  // what the layers are made of: the description's
  auto key = [&](std::string_view suffix) { return MetadataKey(a, suffix); };
  ODMOE_ASSIGN_OR_RETURN(c.n_embd, ReadInt(f, key("embedding_length"), 1, 1 << 16));
  ODMOE_ASSIGN_OR_RETURN(c.n_layer, ReadInt(f, key("block_count"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(c.n_layer_nextn,
                         ReadInt(f, key("nextn_predict_layers"), 0, c.n_layer - 1, 0));
  c.n_layer -= c.n_layer_nextn;  // the NextN / MTP layers at the end are not run
  ODMOE_ASSIGN_OR_RETURN(c.n_head, ReadInt(f, key("attention.head_count"), 1, 4096));
  const GgufValue* kv_heads = f.Find(key("attention.head_count_kv"));
  if (c.mamba2) {
    ODMOE_ASSIGN_OR_RETURN(c.n_head_kv, Mamba2HeadCountKv());  // per layer: model_mamba2.cpp
  } else if (c.window_layer_shape && kv_heads != nullptr && kv_heads->type() == GgufType::kArray) {
    c.n_head_kv = c.n_head;  // one per layer: ReadWindowLayerShapes
  } else {
    ODMOE_ASSIGN_OR_RETURN(c.n_head_kv,
                           ReadInt(f, key("attention.head_count_kv"), 1, 4096, c.n_head));
  }
  ODMOE_ASSIGN_OR_RETURN(c.n_ctx_train, ReadInt(f, key("context_length"), 1, 1 << 24));
  if (!a.expert_ff_key.empty() && f.Find(key(a.expert_ff_key)) != nullptr) {
    ODMOE_ASSIGN_OR_RETURN(c.n_ff, ReadInt(f, key(a.expert_ff_key), 1, 1 << 20));
  } else {
    ODMOE_ASSIGN_OR_RETURN(c.n_ff, ReadInt(f, key("feed_forward_length"), 1, 1 << 20));
  }
  ODMOE_ASSIGN_OR_RETURN(c.n_expert, ReadInt(f, key("expert_count"), 0, 4096, 0));
  ODMOE_ASSIGN_OR_RETURN(c.n_expert_used, ReadInt(f, key("expert_used_count"), 0, 4096, 0));
  // With attention.key_length the heads need not split the hidden size
  // (GLM-4.5-Air: 96 heads of 128 over 4096).
  if (c.n_embd % c.n_head != 0 && f.Find(key("attention.key_length")) == nullptr) {
    return Invalid(f.path(), absl::StrFormat("embedding_length %d is not a multiple of "
                                             "head_count %d",
                                             c.n_embd, c.n_head));
  }
  ODMOE_ASSIGN_OR_RETURN(c.head_dim,
                         ReadInt(f, key("attention.key_length"), 2, 1 << 14, c.n_embd / c.n_head));
  ODMOE_ASSIGN_OR_RETURN(c.rope_dims,
                         ReadInt(f, key("rope.dimension_count"), 2, c.head_dim, c.head_dim));
  ODMOE_ASSIGN_OR_RETURN(c.rope_freq_base, ReadFloat(f, key("rope.freq_base"), 1.0, 1e12, 1e4));
  ODMOE_ASSIGN_OR_RETURN(c.rms_eps,
                         ReadFloat(f, key("attention.layer_norm_rms_epsilon"), 0.0, 1.0, 1e-5));
  for (const ArchKey& k : a.keys) {  // the architecture's own keys
    ODMOE_ASSIGN_OR_RETURN(c.*k.into, ReadInt(f, key(k.suffix), k.min, k.max, k.fallback));
  }
  ODMOE_RETURN_IF_ERROR(ReadRopeScaling(f, a, &c.rope_scaling));
  if (c.window_layers == WindowLayers::kFromFile || c.window_layer_shape) {
    ODMOE_RETURN_IF_ERROR(ReadWindowLayerShapes());
  }
  if (c.n_head % c.n_head_kv != 0) {
    return Invalid(f.path(), absl::StrFormat("head_count %d is not a multiple of head_count_kv %d",
                                             c.n_head, c.n_head_kv));
  }
  if (c.head_dim % 2 != 0 || c.rope_dims % 2 != 0) {
    return Invalid(f.path(), "head and rope dimensions must be even");
  }
  if (a.requires_experts && c.n_expert < 2) {
    return Invalid(f.path(),
                   absl::StrCat("'", key("expert_count"),
                                "' must be >= 2: odmoe serves Mixture-of-Experts models"));
  }
  if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert) {
    return Invalid(f.path(),
                   absl::StrFormat("'%s' must be in [1, %d], found %d", key("expert_used_count"),
                                   c.n_expert, c.n_expert_used));
  }
  ODMOE_RETURN_IF_ERROR(ReadRouting(f, a, &c.gating));
  ODMOE_RETURN_IF_ERROR(CheckExpertGroups(f, a, c));
  ODMOE_ASSIGN_OR_RETURN(c.n_dense_leading,
                         ReadInt(f, key("leading_dense_block_count"), 0, c.n_layer - 1, 0));
  if (c.n_dense_leading > 0 || c.moe_layer_step > 1) {
    ODMOE_ASSIGN_OR_RETURN(c.n_ff_dense, ReadInt(f, key("feed_forward_length"), 1, 1 << 20));
  }
  if (c.ffn_layout == FfnLayout::kDenseBesideExperts) {
    ODMOE_ASSIGN_OR_RETURN(c.n_ff_beside, ReadInt(f, key("feed_forward_length"), 1, 1 << 20));
  }
  if (c.nope_layer_step > 0 || c.router_input_scaled || c.rope_qk_rms_norm) {
    ODMOE_RETURN_IF_ERROR(ReadLlama4Config());
  }
  c.attn_scale = c.attn_unscaled ? 1.0f : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (c.attention == AttentionKind::kMla) ODMOE_RETURN_IF_ERROR(ReadMlaConfig());
  if (c.delta_net) ODMOE_RETURN_IF_ERROR(ReadDeltaNetConfig());
  if (c.mamba2) ODMOE_RETURN_IF_ERROR(ReadMamba2Config());
  return absl::OkStatus();
}

absl::Status ModelFile::BindTensors() {
  const GgufFile& f = *gguf_;
  const ArchDesc& a = *arch_;
  ModelConfig& c = config_;
  auto name = [&](TensorRole role, int l = -1, int e = -1) { return TensorName(a, role, l, e); };

  ODMOE_ASSIGN_OR_RETURN(TensorView embd, f.Tensor(name(TensorRole::kTokenEmbd)));
  if (embd.n_dims != 2 || embd.ne[0] != c.n_embd || embd.ne[1] < 1) {
    return Invalid(f.path(), absl::StrCat("tensor 'token_embd.weight' must have shape [", c.n_embd,
                                          ", n_vocab]"));
  }
  c.n_vocab = static_cast<int>(embd.ne[1]);
  token_embd_ = embd;
  const int64_t d = c.n_embd, v = c.n_vocab;
  ODMOE_ASSIGN_OR_RETURN(output_norm_, Expect(f, name(TensorRole::kOutputNorm), {d}, true));
  if (f.HasTensor(name(TensorRole::kOutput))) {
    ODMOE_ASSIGN_OR_RETURN(output_, Expect(f, name(TensorRole::kOutput), {d, v}));
  } else {
    output_ = token_embd_;
    c.output_tied = true;
  }

  c.expert_layout = f.HasTensor(name(TensorRole::kFfnGateExps, c.first_moe_layer()))
                        ? ExpertLayout::kStacked
                        : ExpertLayout::kPerExpert;
  if (c.expert_layout == ExpertLayout::kPerExpert &&
      f.HasTensor(name(TensorRole::kFfnGateUpExps, c.n_dense_leading))) {
    c.expert_layout = ExpertLayout::kStackedGateUp;
  }
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerTensors& t = layers_[static_cast<size_t>(l)];
    ODMOE_ASSIGN_OR_RETURN(t.attn_norm, Expect(f, name(TensorRole::kAttnNorm, l), {d}, true));
    ODMOE_RETURN_IF_ERROR(BindAttentionTensors(l, &t));
    ODMOE_ASSIGN_OR_RETURN(t.ffn_norm, Expect(f, name(TensorRole::kFfnNorm, l), {d}, true));
    ODMOE_RETURN_IF_ERROR(BindOptionalLayerTensors(l, &t));
    ODMOE_RETURN_IF_ERROR(BindFfnTensors(l, &t));
    ODMOE_RETURN_IF_ERROR(BindGemmaLayerTensors(l, &t));
  }
  return CheckExpertStorage();
}

absl::Status ModelFile::BindAttentionTensors(int l, LayerTensors* t) {
  if (config_.attention == AttentionKind::kMla) return BindMlaTensors(l, t);
  if (!config_.has_mixer(l)) return absl::OkStatus();  // a hybrid's FFN layer
  if (config_.mamba2 && config_.is_recurrent(l)) return BindMamba2Tensors(l, t);
  if (config_.is_recurrent(l)) return BindDeltaNetTensors(l, t);
  const GgufFile& f = *gguf_;
  const ModelConfig& c = config_;
  auto name = [&](TensorRole role) { return TensorName(*arch_, role, l); };
  const LayerAttention la = c.attention_of(l);
  const int64_t d = c.n_embd, q = int64_t{c.n_head} * la.head_dim, kv = c.kv_width_of(l);
  // With an output gate q's projection holds [q | gate] per head.
  const int64_t q_out = c.attn_output_gate ? 2 * q : q;
  ODMOE_ASSIGN_OR_RETURN(t->attn_q, Expect(f, name(TensorRole::kAttnQ), {d, q_out}));
  ODMOE_ASSIGN_OR_RETURN(t->attn_k, Expect(f, name(TensorRole::kAttnK), {d, kv}));
  if (c.v_optional && !f.HasTensor(name(TensorRole::kAttnV))) {
    config_.layer_attention[static_cast<size_t>(l)].v_from_k = true;  // V is K's projection
    t->attn_v = t->attn_k;
  } else {
    ODMOE_ASSIGN_OR_RETURN(t->attn_v, Expect(f, name(TensorRole::kAttnV), {d, kv}));
  }
  ODMOE_ASSIGN_OR_RETURN(t->attn_output, Expect(f, name(TensorRole::kAttnOutput), {q, d}));
  return absl::OkStatus();
}

absl::Status ModelFile::BindFfnTensors(int l, LayerTensors* t) {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  auto name = [&](TensorRole role, int e = -1) { return TensorName(*arch_, role, l, e); };
  const int64_t d = c.n_embd, ff = c.n_ff, ne = c.n_expert;
  if (!c.has_ffn(l)) return absl::OkStatus();  // a hybrid's mixer layer
  if (!c.has_experts(l)) {
    const int64_t fd = c.n_ff_dense;
    ODMOE_ASSIGN_OR_RETURN(t->ffn_gate, Expect(f, name(TensorRole::kFfnGate), {d, fd}));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_up, Expect(f, name(TensorRole::kFfnUp), {d, fd}));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_down, Expect(f, name(TensorRole::kFfnDown), {fd, d}));
    return absl::OkStatus();
  }
  ODMOE_ASSIGN_OR_RETURN(t->router, Expect(f, name(TensorRole::kFfnGateInp), {d, ne}));
  if (c.expert_layout == ExpertLayout::kStacked) {
    ODMOE_ASSIGN_OR_RETURN(t->gate_exps, Expect(f, name(TensorRole::kFfnGateExps), {d, ff, ne}));
    ODMOE_ASSIGN_OR_RETURN(t->up_exps, Expect(f, name(TensorRole::kFfnUpExps), {d, ff, ne}));
    ODMOE_ASSIGN_OR_RETURN(t->down_exps, Expect(f, name(TensorRole::kFfnDownExps), {ff, d, ne}));
    return absl::OkStatus();
  }
  if (c.expert_layout == ExpertLayout::kStackedGateUp) {
    ODMOE_ASSIGN_OR_RETURN(t->gate_up_exps,
                           Expect(f, name(TensorRole::kFfnGateUpExps), {d, 2 * ff, ne}));
    ODMOE_ASSIGN_OR_RETURN(t->down_exps, Expect(f, name(TensorRole::kFfnDownExps), {ff, d, ne}));
    return absl::OkStatus();
  }
  t->per_expert.resize(static_cast<size_t>(ne));
  for (int e = 0; e < ne; ++e) {
    ExpertTensors& x = t->per_expert[static_cast<size_t>(e)];
    ODMOE_ASSIGN_OR_RETURN(x.gate, Expect(f, name(TensorRole::kFfnGateExpert, e), {d, ff}));
    ODMOE_ASSIGN_OR_RETURN(x.up, Expect(f, name(TensorRole::kFfnUpExpert, e), {d, ff}));
    ODMOE_ASSIGN_OR_RETURN(x.down, Expect(f, name(TensorRole::kFfnDownExpert, e), {ff, d}));
  }
  return absl::OkStatus();
}

absl::Status ModelFile::CheckExpertStorage() {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  // Every expert of a layer must be stored alike, so that a layer's experts
  // are interchangeable units of one size; layers may differ.
  c.expert_storage.assign(static_cast<size_t>(c.n_layer), ExpertStorage{});
  c.expert_bytes_max = 0;
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    if (!c.has_experts(l)) continue;  // a dense (Llama 4) or a hybrid's mixer layer
    const ExpertTensors first = Expert(l, 0);
    ExpertStorage& s = c.expert_storage[static_cast<size_t>(l)];
    s.gate_type = first.gate.type;
    s.up_type = first.up.type;
    s.down_type = first.down.type;
    s.bytes = first.gate.bytes() + first.up.bytes() + first.down.bytes();
    c.expert_bytes_max = std::max(c.expert_bytes_max, s.bytes);
    for (int e = 1; e < c.n_expert; ++e) {
      const ExpertTensors x = Expert(l, e);
      if (x.gate.type != s.gate_type || x.up.type != s.up_type || x.down.type != s.down_type) {
        return Invalid(
            f.path(),
            absl::StrFormat("expert %d of layer %d is stored as gate %s / up %s / down %s, but "
                            "expert 0 of that layer as %s / %s / %s: every expert of a layer "
                            "must be stored in the same types",
                            e, l, Traits(x.gate.type).name, Traits(x.up.type).name,
                            Traits(x.down.type).name, Traits(s.gate_type).name,
                            Traits(s.up_type).name, Traits(s.down_type).name));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ModelFile::BindOptionalLayerTensors(int l, LayerTensors* t) {
  const GgufFile& f = *gguf_;
  const ArchDesc& a = *arch_;
  ModelConfig& c = config_;
  auto name = [&](TensorRole role) { return TensorName(a, role, l); };
  const int head_dim = c.attention_of(l).head_dim;
  const int64_t d = c.n_embd, q = int64_t{c.n_head} * head_dim, kv = c.kv_width_of(l);
  if (a.qk_norm_optional && a.blocks.qk_norm != QkNorm::kNone) {  // GLM-4.5's use_qk_norm
    const bool has = f.HasTensor(name(TensorRole::kAttnQNorm));
    if (l == 0) c.qk_norm = has ? a.blocks.qk_norm : QkNorm::kNone;
    if (has != (c.qk_norm != QkNorm::kNone)) {
      return Invalid(f.path(),
                     absl::StrFormat("layer %d %s q/k norms but layer 0 %s", l,
                                     has ? "has" : "lacks", has ? "does not" : "has them"));
    }
  }
  if (c.qk_norm != QkNorm::kNone && !c.is_recurrent(l)) {
    const bool per_head = c.qk_norm == QkNorm::kPerHead;
    ODMOE_ASSIGN_OR_RETURN(
        t->attn_q_norm, Expect(f, name(TensorRole::kAttnQNorm), {per_head ? head_dim : q}, true));
    ODMOE_ASSIGN_OR_RETURN(
        t->attn_k_norm, Expect(f, name(TensorRole::kAttnKNorm), {per_head ? head_dim : kv}, true));
  }
  // Biases: any architecture may carry them (Qwen2-MoE does); every layer
  // alike, decided by layer 0.
  const bool has_bias = f.HasTensor(name(TensorRole::kAttnQBias));
  if (l == 0) c.attn_bias = has_bias;
  if (has_bias != c.attn_bias) {
    return Invalid(f.path(), absl::StrFormat("layer %d %s q/k/v biases but layer 0 %s", l,
                                             has_bias ? "has" : "lacks",
                                             c.attn_bias ? "has them" : "does not"));
  }
  if (c.attn_bias) {
    ODMOE_ASSIGN_OR_RETURN(t->attn_q_bias, Expect(f, name(TensorRole::kAttnQBias), {q}, true));
    ODMOE_ASSIGN_OR_RETURN(t->attn_k_bias, Expect(f, name(TensorRole::kAttnKBias), {kv}, true));
    ODMOE_ASSIGN_OR_RETURN(t->attn_v_bias, Expect(f, name(TensorRole::kAttnVBias), {kv}, true));
    if (f.HasTensor(name(TensorRole::kAttnOutputBias))) {
      ODMOE_ASSIGN_OR_RETURN(t->attn_output_bias,
                             Expect(f, name(TensorRole::kAttnOutputBias), {d}, true));
    }
  }
  if (c.attn_sinks) {
    ODMOE_ASSIGN_OR_RETURN(t->attn_sinks,
                           Expect(f, name(TensorRole::kAttnSinks), {c.n_head}, true));
  }
  if (!c.has_experts(l)) return absl::OkStatus();  // the rest belongs to the MoE block
  if (c.router_bias) {
    ODMOE_ASSIGN_OR_RETURN(t->router_bias,
                           Expect(f, name(TensorRole::kFfnGateInpBias), {c.n_expert}, true));
  }
  ODMOE_RETURN_IF_ERROR(BindSelectionBias(l, t));
  if (c.expert_bias) {
    const int64_t ff = c.n_ff, ne = c.n_expert;
    ODMOE_ASSIGN_OR_RETURN(t->gate_exps_bias,
                           Expect(f, name(TensorRole::kFfnGateExpsBias), {ff, ne}, true));
    ODMOE_ASSIGN_OR_RETURN(t->up_exps_bias,
                           Expect(f, name(TensorRole::kFfnUpExpsBias), {ff, ne}, true));
    ODMOE_ASSIGN_OR_RETURN(t->down_exps_bias,
                           Expect(f, name(TensorRole::kFfnDownExpsBias), {d, ne}, true));
  }
  if (c.shared_expert) {
    ODMOE_ASSIGN_OR_RETURN(TensorView gate, f.Tensor(name(TensorRole::kFfnGateShexp)));
    if (gate.n_dims != 2 || gate.ne[0] != d || gate.ne[1] < 1 || gate.ne[1] > (1 << 20)) {
      return Invalid(f.path(), absl::StrCat("tensor '", gate.name, "' must have shape [", d,
                                            ", n_ff_shared]"));
    }
    if (l == c.first_moe_layer()) c.n_ff_shared = static_cast<int>(gate.ne[1]);
    const int64_t fs = c.n_ff_shared;
    ODMOE_ASSIGN_OR_RETURN(t->shexp_gate, Expect(f, name(TensorRole::kFfnGateShexp), {d, fs}));
    ODMOE_ASSIGN_OR_RETURN(t->shexp_up, Expect(f, name(TensorRole::kFfnUpShexp), {d, fs}));
    ODMOE_ASSIGN_OR_RETURN(t->shexp_down, Expect(f, name(TensorRole::kFfnDownShexp), {fs, d}));
    if (!c.shared_gated) return absl::OkStatus();
    // The converters write the gate as [n_embd] or as [n_embd, 1].
    const std::string gate_inp = name(TensorRole::kFfnGateInpShexp);
    ODMOE_ASSIGN_OR_RETURN(TensorView g, f.Tensor(gate_inp));
    ODMOE_ASSIGN_OR_RETURN(
        t->shexp_gate_inp,
        Expect(f, gate_inp, g.n_dims == 2 ? std::vector<int64_t>{d, 1} : std::vector<int64_t>{d},
               true));
  }
  return absl::OkStatus();
}

// Sigmoid routing's correction bias: read wherever a file has it (every MoE
// layer alike, decided by the first); only with sigmoid scores.
absl::Status ModelFile::BindSelectionBias(int l, LayerTensors* t) {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  const std::string bias = TensorName(*arch_, TensorRole::kFfnExpProbsB, l);
  const bool has = f.HasTensor(bias);
  if (l == c.n_dense_leading) c.router_selection_bias = has;
  if (has != c.router_selection_bias) {
    return Invalid(f.path(),
                   absl::StrFormat("layer %d %s '%s' but layer %d %s", l, has ? "has" : "lacks",
                                   bias, c.n_dense_leading, has ? "does not" : "has it"));
  }
  if (!has) return absl::OkStatus();
  if (c.gating.score != RouterScore::kSigmoid) {
    return Invalid(f.path(), absl::StrCat("'", bias,
                                          "' (a correction bias of the expert choice) "
                                          "is supported with sigmoid routing only ('",
                                          MetadataKey(*arch_, "expert_gating_func"), "' = 2)"));
  }
  ODMOE_ASSIGN_OR_RETURN(t->exp_probs_b, Expect(f, bias, {c.n_expert}, true));
  return absl::OkStatus();
}

ExpertTensors ModelFile::Expert(int layer, int expert) const {
  const LayerTensors& t = layers_[static_cast<size_t>(layer)];
  ExpertTensors x;
  if (config_.expert_layout == ExpertLayout::kPerExpert) {
    x = t.per_expert[static_cast<size_t>(expert)];
  } else if (config_.expert_layout == ExpertLayout::kStackedGateUp) {
    // The expert's 2 n_ff rows: gate's, then up's (whole rows: any type).
    const TensorView both = t.gate_up_exps.Slice2D(expert);
    const int64_t ff = config_.n_ff;
    x.gate = both;
    x.gate.ne[1] = ff;
    x.gate.name = both.name + ".gate";
    x.up = x.gate;
    x.up.data = both.Row(ff);
    x.up.name = both.name + ".up";
    x.down = t.down_exps.Slice2D(expert);
  } else {
    x.gate = t.gate_exps.Slice2D(expert);
    x.up = t.up_exps.Slice2D(expert);
    x.down = t.down_exps.Slice2D(expert);
  }
  if (config_.expert_bias) {
    x.gate_bias = RowOf(t.gate_exps_bias, expert);
    x.up_bias = RowOf(t.up_exps_bias, expert);
    x.down_bias = RowOf(t.down_exps_bias, expert);
  }
  return x;
}

}  // namespace odmoe
