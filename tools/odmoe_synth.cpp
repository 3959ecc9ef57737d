// odmoe-synth: a GGUF with the shapes of a real MoE model and seeded random
// weights, for throughput and memory measurements at real sizes (recall is
// measured on the trained model only).
//
//   odmoe-synth --out /data/mixtral-2l.gguf --layers 2 --type q8_0   # Mixtral 8x7B shapes
//   odmoe-synth --out m.gguf --dry-run                                # sizes only
//   odmoe-synth --out small.gguf --embd 256 --ff 512 --experts 8 --top-k 2 --heads 8 \
//       --kv-heads 2 --vocab 512 --layers 4
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/synth_model.h"
#include "util/cli_args.h"
#include "util/progress_line.h"

int main(int argc, char** argv) {
  using odmoe::SynthSpec;
  odmoe::CliArgs args("odmoe-synth",
                      "Write a GGUF MoE model with real shapes and seeded random weights.");
  std::string out, preset = "mixtral-8x7b", arch, type = "f16";
  int layers = 0, embd = 0, ff = 0, experts = 0, top_k = 0, heads = 0, kv_heads = 0, vocab = 0,
      ctx = 0, head_dim = 0, shared_ff = 0, dense_layers = 0, dense_ff = 0, kv_lora = 0,
      qk_nope = 0, qk_rope = 0, v_head = 0, moe_step = 0;
  uint64_t seed = 1;
  bool dry_run = false;
  args.AddString("out", &out, "FILE", "the GGUF to write", true);
  args.AddString("preset", &preset, "NAME",
                 "shapes to start from: mixtral-8x7b (default), qwen3-30b-a3b, olmoe-1b-7b, "
                 "qwen1.5-moe-a2.7b, gpt-oss-20b, deepseek-v2-lite, deepseek-v3-lite (V2-Lite's "
                 "shapes, DeepSeek-V3's routing), glm-4.5-air, minimax-m2, gemma-4-26b-a4b, "
                 "qwen3.5-35b-a3b, qwen3-next-80b-a3b, llama-4-scout, llama-4-maverick");
  args.AddString("arch", &arch, "ARCH",
                 "architecture, with its preset's shapes: llama (Mixtral), qwen3moe, olmoe, "
                 "qwen2moe, gpt-oss, deepseek2, glm4moe, minimax-m2, gemma4, qwen35moe, "
                 "qwen3next, llama4 (overrides --preset)");
  args.AddString("type", &type, "T", "weight type: f16 (default) or q8_0");
  args.AddInt("layers", &layers, "N", "layers (default: the preset's)");
  args.AddInt("embd", &embd, "N", "hidden size");
  args.AddInt("ff", &ff, "N", "expert FFN size");
  args.AddInt("experts", &experts, "N", "experts per layer");
  args.AddInt("top-k", &top_k, "N", "experts used per token");
  args.AddInt("heads", &heads, "N", "attention heads");
  args.AddInt("kv-heads", &kv_heads, "N", "KV heads");
  args.AddInt("head-dim", &head_dim, "N", "size of one attention head (default embd / heads)");
  args.AddInt("shared-ff", &shared_ff, "N", "shared expert FFN size (qwen2moe, deepseek2)");
  args.AddInt("dense-layers", &dense_layers, "N", "leading layers with a dense FFN (deepseek2)");
  args.AddInt("dense-ff", &dense_ff, "N", "FFN size of the dense layers (deepseek2)");
  args.AddInt("moe-step", &moe_step, "N",
              "experts in every N-th layer, a dense FFN in the others (llama4)");
  args.AddInt("kv-lora", &kv_lora, "N", "latent attention: latent KV width (deepseek2)");
  args.AddInt("qk-nope", &qk_nope, "N", "latent attention: per-head q/k dims without RoPE");
  args.AddInt("qk-rope", &qk_rope, "N", "latent attention: per-head q/k dims with RoPE");
  args.AddInt("v-head", &v_head, "N", "latent attention: per-head value dims");
  args.AddInt("vocab", &vocab, "N", "vocabulary size");
  args.AddInt("ctx", &ctx, "N", "training context length");
  args.AddUInt64("seed", &seed, "S", "random seed (default 1)");
  args.AddFlag("dry-run", &dry_run, "print the configuration and sizes, write nothing");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  auto fail = [](const std::string& m, int code) {
    std::cerr << "odmoe-synth: error: " << m << "\n";
    return code;
  };
  absl::StatusOr<SynthSpec> chosen = SynthSpec::Preset(arch.empty() ? preset : arch);
  if (!chosen.ok()) {
    return fail(absl::StrCat(arch.empty() ? "--preset: " : "--arch: ", chosen.status().message()),
                2);
  }
  SynthSpec s = *chosen;
  if (type == "f16") {
    s.type = odmoe::DType::kF16;
  } else if (type == "q8_0") {
    s.type = odmoe::DType::kQ8_0;
  } else {
    return fail("--type: '" + type + "' is not f16 or q8_0", 2);
  }
  auto set = [&](const char* name, int v, int* field) {
    if (args.IsSet(name)) *field = v;
  };
  set("layers", layers, &s.n_layer);
  set("embd", embd, &s.n_embd);
  set("ff", ff, &s.n_ff);
  set("experts", experts, &s.n_expert);
  set("top-k", top_k, &s.n_expert_used);
  set("heads", heads, &s.n_head);
  set("kv-heads", kv_heads, &s.n_head_kv);
  set("vocab", vocab, &s.n_vocab);
  set("ctx", ctx, &s.n_ctx);
  set("head-dim", head_dim, &s.head_dim);
  set("shared-ff", shared_ff, &s.n_ff_shared);
  set("dense-layers", dense_layers, &s.n_dense_leading);
  set("dense-ff", dense_ff, &s.n_ff_dense);
  set("moe-step", moe_step, &s.moe_layer_step);
  set("kv-lora", kv_lora, &s.kv_lora_rank);
  set("qk-nope", qk_nope, &s.qk_nope);
  set("qk-rope", qk_rope, &s.qk_rope);
  set("v-head", v_head, &s.v_head);
  s.seed = seed;
  if (absl::Status v = odmoe::ValidateSynthSpec(s); !v.ok()) {
    return fail(absl::StrCat("--", v.message()), 2);
  }
  absl::StatusOr<uint64_t> bytes = odmoe::SynthModelBytes(s);
  if (!bytes.ok()) return fail(std::string(bytes.status().message()), 1);
  std::printf(
      "%s (%s): %d layers, embd %d, ff %d, %d experts (top-%d), %d heads of %d / %d KV heads, "
      "vocab %d, ctx %d, %s weights, seed %llu\n"
      "file: %.3f GB; one expert: %.1f MB; experts: %.3f GB of it\n",
      s.name.c_str(), s.arch.c_str(), s.n_layer, s.n_embd, s.n_ff, s.n_expert, s.n_expert_used,
      s.n_head, s.head_size(), s.n_head_kv, s.n_vocab, s.n_ctx, type.c_str(), static_cast<unsigned long long>(s.seed),
      *bytes / 1e9, odmoe::SynthExpertBytes(s) / 1e6,
      odmoe::SynthExpertBytes(s) * static_cast<double>(s.n_expert) *
          (s.n_layer - s.n_dense_leading) / 1e9);
  if (dry_run) return 0;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::absolute(out).parent_path();
  const auto space = std::filesystem::space(dir, ec);
  if (!ec && space.available < *bytes + (64ull << 20)) {
    return fail(absl::StrCat(dir.string(), " has ", space.available / 1000000,
                             " MB free; the model needs ", *bytes / 1000000, " MB"),
                1);
  }
  const auto t0 = std::chrono::steady_clock::now();
  odmoe::ProgressLine progress(stdout);
  auto on_progress = [&](uint64_t written, uint64_t total) {
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.Update(absl::StrFormat("writing %s: %.0f / %.0f MB (%.0f %%), %.0f s", out,
                                    written / 1e6, total / 1e6, 100.0 * written / total, sec));
  };
  if (absl::Status w = odmoe::WriteSynthModel(s, out, on_progress); !w.ok()) {
    progress.Finish("failed");
    return fail(std::string(w.message()), 1);
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.Finish(absl::StrFormat("wrote %s in %.1f s (%.0f MB/s)", out, sec, *bytes / 1e6 / sec));
  return 0;
}
