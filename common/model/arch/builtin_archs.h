// The architectures odmoe ships: one description per file in this folder
// (model_arch.h says what a description holds). A new architecture is a new
// file here defining its `const ArchDesc`, declared and listed below.
//
//   for (const ArchDesc* a : kBuiltinArchs) names.push_back(a->gguf_name);
#pragma once

#include "model/model_arch.h"

namespace odmoe {

extern const ArchDesc kLlamaArch;      // llama_moe.cpp
extern const ArchDesc kQwen3MoeArch;   // qwen3moe.cpp
extern const ArchDesc kOlmoeArch;      // olmoe.cpp
extern const ArchDesc kQwen2MoeArch;   // qwen2moe.cpp
extern const ArchDesc kGptOssArch;     // gpt_oss.cpp
extern const ArchDesc kDeepSeek2Arch;  // deepseek2.cpp
extern const ArchDesc kGlm4MoeArch;    // glm4moe.cpp
extern const ArchDesc kMiniMaxM2Arch;  // minimax_m2.cpp
extern const ArchDesc kGemma4Arch;     // gemma4.cpp
extern const ArchDesc kQwen3NextArch;  // qwen3next.cpp
extern const ArchDesc kQwen35MoeArch;  // qwen35moe.cpp
/// Qwen3-Next's description, which Qwen3.5's starts from (qwen3next.cpp).
ArchDesc Qwen3NextDescription();
extern const ArchDesc kLlama4Arch;     // llama4.cpp
extern const ArchDesc kNemotronHMoeArch;  // nemotron_h_moe.cpp

/// In the order messages list them.
inline const ArchDesc* const kBuiltinArchs[] = {
    &kLlamaArch, &kQwen3MoeArch, &kOlmoeArch, &kQwen2MoeArch, &kGptOssArch, &kDeepSeek2Arch,
    &kGlm4MoeArch, &kMiniMaxM2Arch,
    &kGemma4Arch,
    &kQwen3NextArch, &kQwen35MoeArch,
    &kLlama4Arch,
    &kNemotronHMoeArch,
};

}  // namespace odmoe
