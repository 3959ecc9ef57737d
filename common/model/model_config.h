// Hyperparameters of a Mixture-of-Experts transformer, read from GGUF
// metadata and validated (model_file.h fills it in).
//
//   const ModelConfig& c = model->config();
//   int kv_width = c.n_head_kv * c.head_dim;     // K/V row width
//   size_t one_expert = c.expert_bytes;            // gate + up + down
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "tensor/dtype.h"

namespace odmoe {

/// How the experts are stored in the file.
enum class ExpertLayout {
  kStacked,    // 3-D tensors blk.N.ffn_{gate,up,down}_exps (current converters)
  kPerExpert,  // 2-D tensors blk.N.ffn_{gate,up,down}.E (older converters)
};

struct ModelConfig {
  std::string arch;  // general.architecture
  std::string name;  // general.name ("" if absent)
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;   // n_embd / n_head unless the file says otherwise
  int rope_dims = 0;  // dims rotated per head (<= head_dim)
  int n_ff = 0;       // hidden size of one expert
  int n_expert = 0;
  int n_expert_used = 0;  // top-k
  int n_ctx_train = 0;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  RopeMode rope_mode = RopeMode::kInterleaved;
  ExpertLayout expert_layout = ExpertLayout::kStacked;
  bool output_tied = false;  // LM head shares token_embd (no output.weight)

  // Storage of one expert (all layers agree; validated at load).
  DType expert_gate_type = DType::kF32;
  DType expert_up_type = DType::kF32;
  DType expert_down_type = DType::kF32;
  size_t expert_bytes = 0;  // gate + up + down of one expert

  int q_width() const { return n_head * head_dim; }
  int kv_width() const { return n_head_kv * head_dim; }
};

}  // namespace odmoe
