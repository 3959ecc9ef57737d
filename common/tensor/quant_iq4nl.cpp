// IQ4_NL quantization without importance weights: the GGUF ecosystem's
// reference algorithm (tensor/quant.h states it), written out in its float
// order so that the bytes match that quantizer's.
#include <cmath>

#include "tensor/quant_blocks.h"
#include "tensor/quant_families.h"
#include "util/fp16.h"

namespace odmoe::quant_internal {
namespace {

constexpr int kLevels = 16;
/// Blocks whose largest magnitude is below this quantize to d = 0.
constexpr float kMinBlockMax = 1e-15f;
/// Scale candidates tried on each side of the first guess.
constexpr int kScaleTries = 7;

/// Index of the grid value nearest to v (the lower one on a tie); NaN gives
/// the last index. Binary search over the sorted kIq4nlValues.
int NearestLevel(float v) {
  if (v <= kIq4nlValues[0]) return 0;
  if (v >= kIq4nlValues[kLevels - 1]) return kLevels - 1;
  int lo = 0, hi = kLevels - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kIq4nlValues[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - kIq4nlValues[hi - 1] < kIq4nlValues[hi] - v ? hi - 1 : hi;
}

/// Weighted least-squares fit of x by scale * grid values at scale `inv`^-1:
/// sum w q x and sum w q^2 with w = x^2.
struct Fit {
  float sum_qx = 0.0f, sum_q2 = 0.0f;
};

Fit FitAt(const float* x, float inv) {
  Fit f;
  for (int j = 0; j < kBlock32Elems; ++j) {
    const float q = kIq4nlValues[NearestLevel(inv * x[j])];
    const float w = x[j] * x[j];
    f.sum_qx += w * q * x[j];
    f.sum_q2 += w * q * q;
  }
  return f;
}

/// The block scale: the best least-squares scale over the first guess
/// (max -> -values[0]) and 2 * kScaleTries + 1 grid offsets around it.
float BestScale(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock32Elems; ++j) {
    const float a = std::fabs(x[j]);
    if (a > amax) {
      amax = a;
      max = x[j];
    }
  }
  if (amax < kMinBlockMax) return 0.0f;
  const float guess = -max / static_cast<float>(kIq4nlValues[0]);
  Fit f = FitAt(x, 1.0f / guess);
  float d = f.sum_qx / f.sum_q2;
  float best = d * f.sum_qx;
  for (int t = -kScaleTries; t <= kScaleTries; ++t) {
    const float inv = static_cast<float>(t + kIq4nlValues[0]) / max;
    f = FitAt(x, inv);
    if (f.sum_q2 > 0.0f && f.sum_qx * f.sum_qx > best * f.sum_q2) {
      d = f.sum_qx / f.sum_q2;
      best = d * f.sum_qx;
    }
  }
  return d;
}

}  // namespace

void QuantizeIq4NlRow(const float* x, BlockIq4Nl* out, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock32Elems) {
    const float d = BestScale(x);
    // The codes come from the unrounded scale, the stored one is its f16.
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    int codes[kBlock32Elems];
    for (int j = 0; j < kBlock32Elems; ++j) codes[j] = NearestLevel(inv * x[j]);
    out[i].d = F32ToF16(d);
    for (int j = 0; j < kBlock32Elems / 2; ++j) {
      out[i].qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + kBlock32Elems / 2] << 4));
    }
  }
}

}  // namespace odmoe::quant_internal
