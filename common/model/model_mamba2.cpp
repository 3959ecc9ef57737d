// ModelFile's Mamba-2 hybrids (Nemotron-H): the shapes from the ssm.* keys,
// each layer's one block from the per-layer arrays llama.cpp's converter
// writes (attention.head_count_kv and feed_forward_length: both 0 for a
// Mamba-2 layer, a head count and 0 for an attention layer, 0 heads and the
// expert width for an FFN layer), and a Mamba-2 layer's tensors (ssm_in
// holding [z | x | B | C | dt], ssm_a holding -exp(A_log), ssm_dt.bias the
// dt bias, ssm_norm the grouped gated norm's weight per group).
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/gguf_checks.h"
#include "model/model_file.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

// The per-layer values of an integer key: an array of n_layer values, or a
// scalar for every layer; nullopt when absent.
absl::StatusOr<std::optional<std::vector<int32_t>>> PerLayer(const GgufFile& f,
                                                             const std::string& key, int n_layer) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return std::optional<std::vector<int32_t>>();
  if (std::optional<int64_t> n = v->AsInt()) {
    return std::optional<std::vector<int32_t>>(
        std::vector<int32_t>(static_cast<size_t>(n_layer), static_cast<int32_t>(*n)));
  }
  std::optional<std::vector<int32_t>> a = v->AsI32Array();
  if (!a || a->size() != static_cast<size_t>(n_layer)) {
    return Invalid(f.path(), absl::StrCat("metadata key '", key,
                                          "' must be an integer or an array of block_count (",
                                          n_layer, ") integers"));
  }
  for (int32_t x : *a) {
    if (x < 0 || x > (1 << 20)) {
      return Invalid(f.path(), absl::StrCat("metadata key '", key, "' holds ", x,
                                            ": expected values in [0, 1048576]"));
    }
  }
  return a;
}

}  // namespace

absl::StatusOr<int> ModelFile::Mamba2HeadCountKv() {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  auto key = [&](std::string_view suffix) { return MetadataKey(*arch_, suffix); };
  ODMOE_ASSIGN_OR_RETURN(const int n_layer, ReadInt(f, key("block_count"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(auto kv, PerLayer(f, key("attention.head_count_kv"), n_layer));
  ODMOE_ASSIGN_OR_RETURN(auto ff, PerLayer(f, key("feed_forward_length"), n_layer));
  if (!kv || !ff) {
    return Invalid(f.path(), absl::StrCat("a Mamba-2 hybrid needs the per-layer '",
                                          key("attention.head_count_kv"), "' and '",
                                          key("feed_forward_length"), "'"));
  }
  c.layer_blocks.assign(static_cast<size_t>(n_layer), LayerBlock::kMamba2);
  int n_head_kv = 0;
  for (size_t l = 0; l < c.layer_blocks.size(); ++l) {
    const int32_t h = (*kv)[l], w = (*ff)[l];
    if (w > 0 && h > 0) {
      return Invalid(f.path(), absl::StrFormat("layer %d has both attention heads ('%s' %d) and "
                                               "an FFN ('%s' %d): a hybrid layer is one block",
                                               l, key("attention.head_count_kv"), h,
                                               key("feed_forward_length"), w));
    }
    if (w > 0) {
      c.layer_blocks[l] = LayerBlock::kFfn;
    } else if (h > 0) {
      c.layer_blocks[l] = LayerBlock::kAttention;
      if (n_head_kv != 0 && h != n_head_kv) {
        return Invalid(f.path(), absl::StrFormat("'%s': attention layers of %d and %d kv heads "
                                                 "(not supported)",
                                                 key("attention.head_count_kv"), n_head_kv, h));
      }
      n_head_kv = h;
    }
  }
  // A model without attention layers still needs a valid head count.
  return n_head_kv > 0 ? n_head_kv : 1;
}

absl::Status ModelFile::ReadMamba2Config() {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  Mamba2Shape& s = c.mamba;
  auto key = [&](std::string_view suffix) { return MetadataKey(*arch_, suffix); };
  ODMOE_ASSIGN_OR_RETURN(s.conv_kernel, ReadInt(f, key("ssm.conv_kernel"), 2, 8));
  ODMOE_ASSIGN_OR_RETURN(s.state, ReadInt(f, key("ssm.state_size"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(s.n_groups, ReadInt(f, key("ssm.group_count"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(s.n_heads, ReadInt(f, key("ssm.time_step_rank"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(const int inner, ReadInt(f, key("ssm.inner_size"), 1, 1 << 20));
  if (inner % s.n_heads != 0 || s.n_heads % s.n_groups != 0) {
    return Invalid(f.path(),
                   absl::StrFormat("inconsistent Mamba-2 shapes: '%s' %d must be a multiple of "
                                   "'%s' %d, itself a multiple of '%s' %d",
                                   key("ssm.inner_size"), inner, key("ssm.time_step_rank"),
                                   s.n_heads, key("ssm.group_count"), s.n_groups));
  }
  s.head_dim = inner / s.n_heads;
  for (int l = 0; l < c.n_layer; ++l) {
    if (c.layer_blocks[static_cast<size_t>(l)] == LayerBlock::kFfn) {
      // Nemotron-H's FFN: sigmoid routing with a correction bias
      // (exp_probs_b), experts and shared expert of up -> relu^2 -> down.
      return absl::UnimplementedError(absl::StrFormat(
          "%s: layer %d is an FFN layer ('%s' %d): the Mamba-2 hybrids' sigmoid routing with "
          "a correction bias and gate-less relu^2 experts are not supported yet",
          f.path(), l, key("feed_forward_length"), c.n_ff));
    }
  }
  // The converter writes the RMS norms' epsilon as layer_norm_epsilon (llama.cpp
  // reads it for the RMS norms when layer_norm_rms_epsilon is absent).
  if (f.Find(key("attention.layer_norm_rms_epsilon")) == nullptr) {
    ODMOE_ASSIGN_OR_RETURN(c.rms_eps,
                           ReadFloat(f, key("attention.layer_norm_epsilon"), 0.0, 1.0, 1e-5));
  }
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int l = 0; l < c.n_layer; ++l) {
    c.recurrent_layers[static_cast<size_t>(l)] =
        c.layer_blocks[static_cast<size_t>(l)] == LayerBlock::kMamba2;
  }
  return absl::OkStatus();
}

absl::Status ModelFile::BindMamba2Tensors(int l, LayerTensors* t) {
  const GgufFile& f = *gguf_;
  const ModelConfig& c = config_;
  const Mamba2Shape& s = c.mamba;
  auto name = [&](TensorRole role) { return TensorName(*arch_, role, l); };
  const int64_t d = c.n_embd, nh = s.n_heads, conv = s.conv_dim();
  ODMOE_ASSIGN_OR_RETURN(t->ssm_in, Expect(f, name(TensorRole::kSsmIn), {d, s.in_proj()}));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_conv1d,
                         Expect(f, name(TensorRole::kSsmConv1d), {s.conv_kernel, conv}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_conv1d_bias,
                         Expect(f, name(TensorRole::kSsmConv1dBias), {conv}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_dt_bias, Expect(f, name(TensorRole::kSsmDtBias), {nh}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_a, Expect(f, name(TensorRole::kSsmA), {1, nh}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_d, Expect(f, name(TensorRole::kSsmD), {1, nh}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_norm, Expect(f, name(TensorRole::kSsmNorm),
                                             {s.inner() / s.n_groups, s.n_groups}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_out, Expect(f, name(TensorRole::kSsmOut), {s.inner(), d}));
  return absl::OkStatus();
}

}  // namespace odmoe
