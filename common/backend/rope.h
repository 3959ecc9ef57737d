// The parameters of Backend::Rope and the one definition of its rotation
// frequencies, shared by every backend (each backend evaluates this table on
// the host in double, so all of them rotate by the same angles).
//
// Plain RoPE rotates pair i of a head by pos * base^(-2i/dims). YaRN
// (RopeScalingType::kYarn: gpt-oss, DeepSeek-V2) is transformers'
// `_compute_yarn_parameters` + rotary embedding, evaluated in double:
//   extrap_i = base^(-2i/dims),  interp_i = extrap_i / factor       (i < dims/2)
//   corr(r)  = dims * ln(original_context / (r * 2 pi)) / (2 ln base)
//   low  = corr(beta_fast), high = corr(beta_slow)
//          (truncate: low = floor(low), high = ceil(high));
//   low  = max(low, 0), high = min(high, dims - 1); high += 0.001 if low == high
//   ramp_i = clamp((i - low) / (high - low), 0, 1),  ext_i = 1 - ramp_i
//   inv_freq_i = interp_i * (1 - ext_i) + extrap_i * ext_i
// and cos / sin of pos * inv_freq_i are multiplied by `attention_factor`
// (transformers' "attention_scaling", YaRN's mscale) before they rotate.
// (llama.cpp always rounds low / high; transformers only with `truncate`,
// which gpt-oss's config turns off.)
//
//   RopeParams rope;
//   rope.dims = 64;                       // DeepSeek-V2: the qk_rope part
//   rope.offset = 128;                    // after qk_nope = 128 dims per head
//   rope.freq_base = 10000.0f;
//   rope.scaling = {RopeScalingType::kYarn, 40.0f, 4096, 32.0f, 1.0f, 1.0f, true};
//   be->Rope(q, /*head_dim=*/192, positions, rope);
//   std::vector<double> inv = RopeInverseFrequencies(rope);   // dims / 2 values
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace odmoe {

/// RoPE variants. kInterleaved rotates pairs (x[2i], x[2i+1]) - the "normal"
/// mode GGUF llama-family files are converted for (their Q/K weights are
/// permuted accordingly; DeepSeek-V2's complex pairs). kHalf rotates
/// (x[i], x[i + dims/2]) ("NeoX" style: Qwen, gpt-oss).
enum class RopeMode { kInterleaved, kHalf };

enum class RopeScalingType {
  kNone,  // plain RoPE: every other field of RopeScaling is ignored
  kYarn,  // YaRN, as transformers computes it (rope.h's header comment)
};

/// Context extension of RoPE (the GGUF keys `<arch>.rope.scaling.*`).
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  /// Context extension factor (transformers' `factor`), > 0.
  float factor = 1.0f;
  /// The training context the ramp is computed for
  /// (`original_max_position_embeddings`), > 0.
  int original_context = 0;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  /// Multiplies cos and sin (transformers' `attention_factor`; see
  /// YarnAttentionFactor for its default).
  float attention_factor = 1.0f;
  /// Round the correction range outward (floor / ceil); transformers'
  /// `truncate`, true unless the config says false.
  bool truncate = true;
};

/// What Backend::Rope rotates and by how much.
struct RopeParams {
  /// Rotated dims per head (even, >= 2); dims [offset, offset + dims) of
  /// each head rotate, the others are left as they are.
  int dims = 0;
  int offset = 0;
  float freq_base = 10000.0f;
  RopeMode mode = RopeMode::kInterleaved;
  RopeScaling scaling;
  /// > 0: only pairs [0, rotated_pairs) rotate, the others keep their values
  /// (inverse frequency 0; Gemma 4's "proportional" RoPE, which llama.cpp
  /// writes as rope_freqs factors 1 and 1e30); 0: every pair rotates.
  int rotated_pairs = 0;
};

/// transformers' default YaRN attention factor when the config gives none:
/// get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both
/// are non-zero (DeepSeek), else get_mscale(factor, 1), with
/// get_mscale(s, m) = s <= 1 ? 1 : 0.1 * m * ln(s) + 1.
inline double YarnAttentionFactor(double factor, double mscale = 0.0, double mscale_all_dim = 0.0) {
  auto get_mscale = [](double s, double m) { return s <= 1.0 ? 1.0 : 0.1 * m * std::log(s) + 1.0; };
  if (mscale != 0.0 && mscale_all_dim != 0.0) {
    return get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim);
  }
  return get_mscale(factor, 1.0);
}

/// The factor cos and sin are multiplied by: 1 without scaling.
inline double RopeAttentionFactor(const RopeParams& p) {
  return p.scaling.type == RopeScalingType::kYarn ? static_cast<double>(p.scaling.attention_factor)
                                                  : 1.0;
}

/// inv_freq_i for i < dims / 2 (see the header comment); without scaling
/// exactly pow(base, -2i / dims).
inline std::vector<double> RopeInverseFrequencies(const RopeParams& p) {
  const int half = p.dims / 2;
  std::vector<double> inv(static_cast<size_t>(std::max(half, 0)));
  const double base = p.freq_base;
  for (int i = 0; i < half; ++i) inv[i] = std::pow(base, -2.0 * i / p.dims);
  if (p.rotated_pairs > 0) {
    for (int i = p.rotated_pairs; i < half; ++i) inv[i] = 0.0;
  }
  if (p.scaling.type != RopeScalingType::kYarn) return inv;
  const RopeScaling& s = p.scaling;
  const double pi = 3.14159265358979323846;
  auto corr = [&](double rotations) {
    return p.dims * std::log(s.original_context / (rotations * 2.0 * pi)) / (2.0 * std::log(base));
  };
  double low = corr(s.beta_fast);
  double high = corr(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(p.dims - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double ext = 1.0 - ramp;
    const double interp = inv[i] / s.factor;
    inv[i] = interp * (1.0 - ext) + inv[i] * ext;
  }
  return inv;
}

}  // namespace odmoe
