// Synthetic models with the shapes of real ones and seeded random weights,
// for throughput and memory measurements at real sizes (recall needs a
// trained model: the weights here route tokens arbitrarily). The file is a
// normal GGUF (architecture "llama" with experts, like Mixtral) with a
// synthetic SentencePiece-style vocabulary (control tokens, 256 byte tokens,
// then made-up pieces), so every tool and daemon opens it; text is
// meaningless. Tensors are generated while the file is written, so a file
// larger than memory (Mixtral 8x7B is ~93 GB in F16) never is in memory.
//
//   SynthSpec s = SynthSpec::Mixtral8x7B();  s.n_layer = 2;  s.type = DType::kQ8_0;
//   ODMOE_RETURN_IF_ERROR(ValidateSynthSpec(s));
//   ODMOE_ASSIGN_OR_RETURN(uint64_t bytes, SynthModelBytes(s));
//   ODMOE_RETURN_IF_ERROR(WriteSynthModel(s, "/data/mixtral-2l-q8_0.gguf"));
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/dtype.h"

namespace odmoe {

struct SynthSpec {
  int n_layer = 2;
  int n_embd = 256;
  int n_ff = 512;
  int n_expert = 8;
  int n_expert_used = 2;
  int n_head = 8;
  int n_head_kv = 2;
  int n_vocab = 512;
  int n_ctx = 512;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  DType type = DType::kF16;  // weight matrices: kF16 | kQ8_0 (norms, router: F32)
  uint64_t seed = 1;
  std::string name = "synthetic";

  /// Mixtral-8x7B's shapes: 32 layers, 4096 / 14336, 8 experts, top-2, 32
  /// heads, 8 KV heads, vocabulary 32000, RoPE theta 1e6.
  static SynthSpec Mixtral8x7B();
};

/// INVALID_ARGUMENT naming the field when the shapes cannot make a model.
absl::Status ValidateSynthSpec(const SynthSpec& spec);

/// The file's size in bytes, and one expert's bytes (gate + up + down).
absl::StatusOr<uint64_t> SynthModelBytes(const SynthSpec& spec);
uint64_t SynthExpertBytes(const SynthSpec& spec);

/// Writes the model (to a temporary name, renamed into place when complete).
/// `progress` (optional) hears bytes written and the total as it goes.
absl::Status WriteSynthModel(
    const SynthSpec& spec, const std::string& path,
    const std::function<void(uint64_t written, uint64_t total)>& progress = {});

}  // namespace odmoe
