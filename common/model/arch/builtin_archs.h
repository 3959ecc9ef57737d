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
extern const ArchDesc kQwen3NextArch;  // qwen3next.cpp
extern const ArchDesc kQwen35MoeArch;  // qwen35moe.cpp
extern const ArchDesc kNemotronHMoeArch;  // nemotron_h_moe.cpp

/// In the order messages list them.
inline const ArchDesc* const kBuiltinArchs[] = {
    &kLlamaArch, &kQwen3MoeArch, &kOlmoeArch, &kQwen2MoeArch, &kGptOssArch, &kDeepSeek2Arch,
    &kQwen3NextArch, &kQwen35MoeArch,
    &kNemotronHMoeArch,
};

}  // namespace odmoe
