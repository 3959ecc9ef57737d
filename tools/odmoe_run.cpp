// odmoe-run: generate text with a MoE model in one process (the reference
// engine). Streams the text to stdout and prints timing to stderr.
//
//   odmoe-run --model models/tiny-mixtral-f16.gguf --prompt "The meaning of life" -n 64
//   odmoe-run --model m.gguf --prompt "Hi" -n 32 --temp 0.8 --top-p 0.95 --seed 7
//   odmoe-run --model m.gguf --prompt "Hi" -n 16 --dump-experts experts.jsonl
//   odmoe-run --model m.gguf --prompt "Hi" -n 16 --logprobs-out lp.jsonl --top-logprobs 5
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/reference_engine.h"
#include "engine/request_fields.h"
#include "util/cli_args.h"
#include "util/logging.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "odmoe-run: error: " << message << "\n";
  return 1;
}

// One JSON line per position: {"pos":P,"token":T,"experts":[[e,e],...]}; a layer
// without experts (DeepSeek's dense first layer) is null.
bool DumpExperts(const std::string& path, const odmoe::GenerateResult& r, int k) {
  std::ofstream out(path);
  if (!out) return false;
  std::vector<int32_t> tokens = r.prompt_ids;
  tokens.insert(tokens.end(), r.output_ids.begin(), r.output_ids.end());
  for (size_t pos = 0; pos < r.routing.size(); ++pos) {
    std::vector<std::string> layers;
    for (size_t l = 0; l * k < r.routing[pos].size(); ++l) {
      std::vector<int32_t> ids(r.routing[pos].begin() + l * k,
                               r.routing[pos].begin() + (l + 1) * k);
      const bool dense = !ids.empty() && ids.front() < 0;
      layers.push_back(dense ? "null" : absl::StrCat("[", absl::StrJoin(ids, ","), "]"));
    }
    out << "{\"pos\":" << pos << ",\"token\":" << tokens[pos] << ",\"experts\":["
        << absl::StrJoin(layers, ",") << "]}\n";
  }
  return static_cast<bool>(out);
}

// One JSON line per generated token: {"i":I,"token":T,"logprob":L,"top":[[id,lp],...]}
// (log-probabilities as the HTTP API returns them: %.17g, exact doubles).
bool DumpLogprobs(const std::string& path, const odmoe::GenerateResult& r) {
  std::ofstream out(path);
  if (!out) return false;
  auto num = [](double v) { return absl::StrFormat("%.17g", v); };
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    std::vector<std::string> top;
    for (const odmoe::TokenLogprob& t : r.logprobs[i].top) {
      top.push_back(absl::StrCat("[", t.id, ",", num(t.logprob), "]"));
    }
    out << "{\"i\":" << i << ",\"token\":" << r.output_ids[i]
        << ",\"logprob\":" << num(r.logprobs[i].target_logprob) << ",\"top\":["
        << absl::StrJoin(top, ",") << "]}\n";
  }
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  odmoe::SetLogNodeId("run");
  odmoe::CliArgs args("odmoe-run",
                      "Generate text with a Mixture-of-Experts GGUF model in one process.");
  std::string model, prompt, prompt_file, backend = "cpu", dump, logprobs_out;
  int threads = 0, ctx = 0, batch = 512, top_logprobs = 0;
  // -n, --temperature, --top-p, ...: one flag per request field
  // (engine/request_fields.h), checked with the request (PreparePrompt).
  odmoe::GenerateRequest request;
  args.AddString("model", &model, "FILE", "GGUF model file", true);
  args.AddString("prompt", &prompt, "TEXT", "prompt text");
  args.AddString("prompt-file", &prompt_file, "FILE", "read the prompt from a file");
  odmoe::AddRequestFlags(args, &request);
  args.AddFloat("temp", &request.sampling.temperature, "T", "the same as --temperature");
  args.AddString("backend", &backend, "NAME", "compute backend: cpu, cpu:N, cuda:N (default cpu)");
  args.AddInt("threads", &threads, "N", "CPU threads (default: all cores)");
  args.AddInt("ctx", &ctx, "N", "context size in tokens (default: the model's, at most 4096)");
  args.AddInt("batch", &batch, "N",
              "prefill batch size, at most the context (default 512: every weight is packed "
              "once per batch)");
  args.AddString("dump-experts", &dump, "FILE",
                 "write the experts each layer selected, one JSON line per position");
  args.AddString("logprobs-out", &logprobs_out, "FILE",
                 "write each generated token's log-probability, one JSON line per token");
  args.AddInt("top-logprobs", &top_logprobs, "N",
              "with --logprobs-out: also the N most likely tokens (0-20, default 0)");
  args.SetDefaultLogLevel("warn");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) return Fail("cannot read --prompt-file '" + prompt_file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    prompt = ss.str();
  }
  if (threads < 0) return Fail("--threads must be >= 0");
  if (threads > 0 && backend == "cpu") backend = absl::StrCat("cpu:", threads);
  if (ctx < 0) return Fail("--ctx must be >= 0");
  if (batch < 1) return Fail("--batch must be >= 1");

  odmoe::EngineOptions options;
  options.backend = backend;
  options.n_ctx = ctx;
  options.n_batch = batch;
  auto engine = odmoe::ReferenceEngine::Create(model, options);
  if (!engine.ok()) return Fail(std::string(engine.status().message()));

  request.prompt = prompt;
  request.record_routing = !dump.empty();
  if (!logprobs_out.empty()) {
    // The request's logprobs field under this tool's name for it.
    const absl::Status s = odmoe::SetRequestField(odmoe::RequestFieldNamed("logprobs"),
                                                  top_logprobs, &request, "--top-logprobs");
    if (!s.ok()) return Fail(absl::StrCat(s.message(), " alternatives per token"));
  }
  // The prompt is echoed once the request has been accepted (with its first token).
  bool echoed = false;
  auto result = (*engine)->Generate(request, [&](int32_t, std::string_view text) {
    if (!echoed) std::cout << prompt;
    echoed = true;
    std::cout << text << std::flush;
  });
  if (!result.ok()) {
    if (echoed) std::cout << "\n";
    return Fail(std::string(result.status().message()));
  }
  std::cout << (echoed ? "" : prompt) << "\n";
  const odmoe::GenerateStats& st = result->stats;
  std::fprintf(stderr,
               "\nprompt: %d tokens, prefill %.1f tokens/s | generated: %d tokens, decode %.1f "
               "tokens/s | TTFT %.1f ms | backend %s\n",
               st.prompt_tokens, st.prefill_tokens_per_second(), st.generated_tokens,
               st.decode_tokens_per_second(), st.ttft_seconds * 1e3,
               (*engine)->backend().name().c_str());
  if (!dump.empty() && !DumpExperts(dump, *result, (*engine)->model().config().n_expert_used)) {
    return Fail("cannot write --dump-experts file '" + dump + "'");
  }
  if (!logprobs_out.empty() && !DumpLogprobs(logprobs_out, *result)) {
    return Fail("cannot write --logprobs-out file '" + logprobs_out + "'");
  }
  return 0;
}
