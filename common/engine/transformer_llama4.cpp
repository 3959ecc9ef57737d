// Transformer's Llama 4 parts: attention within chunks and with a
// per-position temperature, as runs of plain Backend::Attention calls; and
// the router that scales the chosen expert's input.
#include <algorithm>
#include <cmath>

#include "engine/transformer.h"
#include "util/status_macros.h"

namespace odmoe {

void Transformer::AttendRuns(int layer, const KvCache& kv, ConstMat q, int pos0,
                             const AttentionOptions& options, Mat out) {
  const ModelConfig& c = config_;
  const int chunk = c.chunk_of(layer);
  const int64_t n = q.rows;
  for (int64_t begin = 0; begin < n;) {
    // A run: rows of one chunk and one temperature.
    const int p0 = pos0 + static_cast<int>(begin);
    const int first_key = chunk > 0 ? p0 - p0 % chunk : 0;
    const float temperature = c.attn_temperature_of(layer, p0);
    int64_t end = begin + 1;
    while (end < n) {
      const int p = pos0 + static_cast<int>(end);
      if ((chunk > 0 && p % chunk == 0) || c.attn_temperature_of(layer, p) != temperature) break;
      ++end;
    }
    // A query at p sees keys [first_key, p]: the cache from first_key on,
    // with the run's positions counted from there.
    const int64_t keys = kv.k(layer).rows - first_key;
    backend_.Attention(q.RowRange(begin, end - begin), kv.k(layer).RowRange(first_key, keys),
                       kv.v(layer).RowRange(first_key, keys), c.n_head, c.n_head_kv, c.head_dim,
                       p0 - first_key, c.attn_scale * temperature, options,
                       out.RowRange(begin, end - begin));
    begin = end;
  }
}

absl::Status Transformer::ScaleRoutedInput() {
  // The router's logits of the batch, read at RouteBlock's ids (one expert
  // per row: ModelFile refuses other counts for this router).
  const int64_t n = rows_, e = config_.n_expert;
  host_logits_.resize(static_cast<size_t>(n * e));
  ODMOE_RETURN_IF_ERROR(
      backend_.CopyToHost(host_logits_.data(), router_, host_logits_.size() * sizeof(float)));
  std::vector<float> scales(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const float logit =
        host_logits_[static_cast<size_t>(t * e + host_ids_[static_cast<size_t>(t)])];
    scales[static_cast<size_t>(t)] = 1.0f / (1.0f + std::exp(-logit));
  }
  ODMOE_RETURN_IF_ERROR(
      backend_.CopyToBackend(row_scales_, scales.data(), scales.size() * sizeof(float)));
  // scaled[t] = scales[t] * h[t] (the combination of one "expert": the row).
  backend_.CombineExperts(moe_input(), ids_out_, row_scales_, 1,
                          Mat{scaled_in_, n, config_.n_embd});
  return absl::OkStatus();
}

}  // namespace odmoe
