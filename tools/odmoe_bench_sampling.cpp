// odmoe-bench-sampling: what each sampling parameter costs (engine/sampler.h).
//
// Two tables, one row per setting (each parameter on alone, then all of them):
//  - the sampler's own time per token at a vocabulary of --vocab tokens
//    (Qwen's 151936 by default): Process (bias, penalties, bans), Sample
//    and Accept on synthetic logits shaped as a model's (a broad tail and a
//    few dozen plausible tokens), after a prompt of --history tokens, the
//    best batch of 10 tokens;
//  - decode tokens/s of a model in one process (--model), --tokens tokens
//    past a short prompt, EOS ignored, best of --runs.
//
//   odmoe-bench-sampling --model models/tiny-mixtral-f16.gguf --threads 2
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/reference_engine.h"
#include "engine/sampler.h"
#include "util/cli_args.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Setting {
  const char* name;
  odmoe::GenerateRequest request;
};

std::vector<Setting> Settings() {
  auto with = [](float temperature, auto&& set) {
    odmoe::GenerateRequest r;
    r.sampling.temperature = temperature;
    r.sampling.seed = 1;
    set(r);
    return r;
  };
  std::map<int32_t, float> bias;
  // 100 tokens within a tiny model's 2048: half of them banned.
  for (int32_t t = 0; t < 100; ++t) bias[t * 13 + 5] = t % 2 ? 1.5f : odmoe::kLogitBiasBan;
  auto all = [&bias](odmoe::GenerateRequest& r) {
    odmoe::SamplingParams& s = r.sampling;
    s.top_k = 40;
    s.top_p = 0.9f;
    s.min_p = 0.05f;
    s.typical_p = 0.95f;
    s.presence_penalty = 0.5f;
    s.frequency_penalty = 0.5f;
    s.repetition_penalty = 1.1f;
    s.logit_bias = bias;
    r.min_tokens = 1 << 20;
    r.stop_token_ids = {7, 8, 9};
  };
  return {
      {"greedy (all off)", with(0.0f, [](auto&) {})},
      {"greedy + penalties", with(0.0f, [](auto& r) { r.sampling.presence_penalty = 0.5f; })},
      {"temperature 1 (all off)", with(1.0f, [](auto&) {})},
      {"top_k 40", with(1.0f, [](auto& r) { r.sampling.top_k = 40; })},
      {"top_p 0.9", with(1.0f, [](auto& r) { r.sampling.top_p = 0.9f; })},
      {"min_p 0.05", with(1.0f, [](auto& r) { r.sampling.min_p = 0.05f; })},
      {"typical_p 0.95", with(1.0f, [](auto& r) { r.sampling.typical_p = 0.95f; })},
      {"presence_penalty 0.5", with(1.0f, [](auto& r) { r.sampling.presence_penalty = 0.5f; })},
      {"frequency_penalty 0.5", with(1.0f, [](auto& r) { r.sampling.frequency_penalty = 0.5f; })},
      {"repetition_penalty 1.1", with(1.0f, [](auto& r) { r.sampling.repetition_penalty = 1.1f; })},
      {"penalties, whole context", with(1.0f,
                                        [](auto& r) {
                                          r.sampling.frequency_penalty = 0.5f;
                                          r.sampling.repeat_last_n = -1;
                                        })},
      {"logit_bias (100 tokens)", with(1.0f, [&bias](auto& r) { r.sampling.logit_bias = bias; })},
      {"min_tokens + stop_token_ids", with(1.0f,
                                           [](auto& r) {
                                             r.min_tokens = 1 << 20;
                                             r.stop_token_ids = {7, 8, 9};
                                           })},
      {"all of them", with(1.0f, all)},
  };
}

// Microseconds per token of Process + Sample + Accept at `vocab` tokens (best batch).
double SamplerMicros(const odmoe::GenerateRequest& r, int vocab, int history, double seconds) {
  // Logits shaped as a model's: a broad tail, N(0, 2), and 64 plausible
  // tokens around 12 (the most likely holds some 20 % of the mass).
  std::mt19937 rng(42);
  std::normal_distribution<float> tail(0.0f, 2.0f), plausible(12.0f, 1.5f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = tail(rng);
  for (int i = 0; i < 64; ++i) logits[rng() % logits.size()] = plausible(rng);
  std::vector<int32_t> prompt(static_cast<size_t>(history));
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  odmoe::Sampler s(r.sampling);
  s.Accept(prompt);
  std::vector<int32_t> banned = r.stop_token_ids;
  if (r.min_tokens > 0) banned.push_back(2);
  // The best batch of 10 tokens: the machine's other work only adds time.
  double best = 1e30;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    for (int i = 0; i < 10; ++i) {
      const int32_t t = s.Sample(s.Process(logits, banned));
      s.Accept(t);
    }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / 10);
  } while (std::chrono::duration<double>(Clock::now() - start).count() < seconds);
  return best * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  odmoe::CliArgs args("odmoe-bench-sampling",
                      "What each sampling parameter costs: the sampler per token at a large "
                      "vocabulary, and a model's decode tokens/s with it on and off.");
  std::string model;
  int vocab = 151936, history = 2048, tokens = 64, runs = 3, threads = 0;
  float seconds = 0.3f;
  args.AddString("model", &model, "FILE", "GGUF model for decode tokens/s (none: skip that table)");
  args.AddInt("vocab", &vocab, "N", "vocabulary of the sampler table (default 151936, Qwen's)");
  args.AddInt("history", &history, "N", "prompt tokens before the sampler table (default 2048)");
  args.AddFloat("seconds", &seconds, "S", "time per sampler row (default 0.3)");
  args.AddInt("tokens", &tokens, "N", "tokens decoded per run (default 64)");
  args.AddInt("runs", &runs, "N", "decode runs per setting, the best kept (default 3)");
  args.AddInt("threads", &threads, "N", "CPU threads for the model (default: all cores)");
  args.SetDefaultLogLevel("warn");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (vocab < 16 || history < 0 || tokens < 2 || runs < 1) {
    std::fprintf(stderr,
                 "odmoe-bench-sampling: error: --vocab >= 16, --history >= 0, "
                 "--tokens >= 2, --runs >= 1\n");
    return odmoe::CliArgs::kUsageExit;
  }
  const std::vector<Setting> settings = Settings();
  std::printf("sampler per token, vocabulary %d, history %d:\n", vocab, history);
  std::printf("  %-30s %10s\n", "setting", "us/token");
  for (const Setting& s : settings) {
    std::printf("  %-30s %10.1f\n", s.name, SamplerMicros(s.request, vocab, history, seconds));
  }
  if (model.empty()) return 0;
  odmoe::EngineOptions options;
  if (threads > 0) options.backend = absl::StrCat("cpu:", threads);
  auto engine = odmoe::ReferenceEngine::Create(model, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "odmoe-bench-sampling: error: %s\n",
                 std::string(engine.status().message()).c_str());
    return 1;
  }
  std::printf(
      "\ndecode, %s, %d tokens (vocabulary %d), best of %d, each run beside one with "
      "the parameter off:\n",
      model.c_str(), tokens, (*engine)->tokenizer().n_vocab(), runs);
  std::printf("  %-30s %10s %10s %8s\n", "setting", "tokens/s", "off", "change");
  // The machine's load drifts: each setting is timed in turns with its
  // "off" (greedy, or temperature 1 with nothing else), the best of each.
  const odmoe::GenerateRequest* off = &settings[0].request;
  for (const Setting& s : settings) {
    if (std::string(s.name).find("(all off)") != std::string::npos) off = &s.request;
    double best_on = 0, best_off = 0;
    for (int i = 0; i < runs; ++i) {
      for (const bool on : {true, false}) {
        odmoe::GenerateRequest r = on ? s.request : *off;
        r.prompt = "Once upon a time, in a land far away,";
        r.max_tokens = tokens;
        r.ignore_eos = true;
        r.stop_token_ids.clear();  // the tiny model may well pick them
        absl::StatusOr<odmoe::GenerateResult> g = (*engine)->Generate(r);
        if (!g.ok()) {
          std::fprintf(stderr, "odmoe-bench-sampling: error: %s\n",
                       std::string(g.status().message()).c_str());
          return 1;
        }
        double& best = on ? best_on : best_off;
        best = std::max(best, g->stats.decode_tokens_per_second());
      }
    }
    std::printf("  %-30s %10.1f %10.1f %7.1f%%\n", s.name, best_on, best_off,
                100.0 * (best_on / best_off - 1.0));
  }
  return 0;
}
