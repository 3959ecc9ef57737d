// odmoe-perplexity: the perplexity of a model on a text, with llama.cpp's
// conventions (engine/perplexity.h; docs/perplexity.md), in one process or
// against a running cluster.
//
//   odmoe-perplexity --model models/tiny-mixtral-f16.gguf --file tests/data/heldout.txt --ctx 128
//   odmoe-perplexity --main 127.0.0.1:7700 --file tests/data/heldout.txt --ctx 128
//
// Running estimates ("[1]12.3456,[2]...") and the final line go to stdout,
// progress and timing to stderr. With --main the cluster's main node
// tokenizes the text (Main.Tokenize) and scores every chunk (Main.Score), so
// no model file is needed here.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cluster/score_client.h"
#include "engine/perplexity.h"
#include "engine/reference_engine.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"
#include "util/cli_args.h"
#include "util/logging.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "odmoe-perplexity: error: " << message << "\n";
  return 1;
}
int Fail(const absl::Status& status) { return Fail(std::string(status.message())); }

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --file '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read --file '", path, "'"));
  if (ss.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--file '", path, "' is empty"));
  }
  return ss.str();
}

// The tokens of the text and the context they must fit, from the model file
// (local) or from the main node (--main).
struct Tokens {
  std::vector<int32_t> ids;
  int32_t bos_id = -1;  // BOS to put first in each chunk; -1 = none
  int context = 0;
};

absl::StatusOr<Tokens> TokenizeLocally(const std::string& model_path, const std::string& text) {
  auto model = odmoe::ModelFile::Open(model_path);
  if (!model.ok()) return model.status();
  auto tok = odmoe::Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return tok.status();
  auto ids = (*tok)->Encode(text);
  if (!ids.ok()) return ids.status();
  Tokens t;
  t.ids = std::move(*ids);
  t.bos_id = (*tok)->vocab().add_bos ? (*tok)->bos_id() : -1;
  t.context = (*model)->config().n_ctx_train;
  return t;
}

absl::StatusOr<Tokens> TokenizeOnCluster(const std::string& address, const std::string& text) {
  auto remote = odmoe::TokenizeOnMain(address, text);
  if (!remote.ok()) return remote.status();
  Tokens t;
  t.ids = std::move(remote->ids);
  t.bos_id = remote->add_bos ? remote->bos_id : -1;
  t.context = remote->context;
  return t;
}

bool WriteTop1(std::ofstream& out, std::span<const int32_t> tokens,
               const odmoe::PerplexityPlan& plan, const odmoe::PerplexityResult& r) {
  out << "# chunk position next_token top1 logprob_next [top1 logprob top2 logprob] (position "
         "within the chunk of "
      << plan.ctx << " tokens; natural logs)\n";
  for (int c = 0; c < static_cast<int>(r.top1.size()); ++c) {
    for (size_t i = 0; i < r.top1[static_cast<size_t>(c)].size(); ++i) {
      const int pos = plan.first + static_cast<int>(i);
      const int32_t next = tokens[static_cast<size_t>(c) * plan.ctx + pos + 1];
      out << c << ' ' << pos << ' ' << next << ' ' << r.top1[static_cast<size_t>(c)][i] << ' '
          << absl::StrFormat("%.6f", r.next_logprob[static_cast<size_t>(c)][i]);
      if (i < r.top[static_cast<size_t>(c)].size()) {
        for (const odmoe::TokenLogprob& t : r.top[static_cast<size_t>(c)][i]) {
          out << ' ' << t.id << ' ' << absl::StrFormat("%.6f", t.logprob);
        }
      }
      out << '\n';
    }
  }
  out.close();
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  odmoe::SetLogNodeId("ppl");
  odmoe::CliArgs args("odmoe-perplexity",
                      "Perplexity of a MoE GGUF model on a text (llama.cpp's conventions), in "
                      "one process (--model) or on a running cluster (--main).");
  std::string model, file, main_address, backend = "cpu", top1_out;
  int ctx = 0, chunks = 0, threads = 0, batch = 2048;
  args.AddString("model", &model, "FILE", "GGUF model file (single-process run)");
  args.AddString("main", &main_address, "HOST:PORT",
                 "score on a running cluster's main node instead (it tokenizes too)");
  args.AddString("file", &file, "FILE", "the text to score", true);
  args.AddInt("ctx", &ctx, "N",
              "tokens per chunk (default 512, or the context when smaller; must fit it)");
  args.AddInt("chunks", &chunks, "N", "score at most N chunks (default: all)");
  args.AddString("backend", &backend, "NAME", "compute backend: cpu, cpu:N, cuda:N (default cpu)");
  args.AddInt("threads", &threads, "N", "CPU threads (default: all cores)");
  args.AddInt("batch", &batch, "N",
              "rows per forward pass (default 2048, as llama.cpp's tool): N >= --ctx scores N / "
              "ctx chunks per pass, each in its own KV slot (the same numbers; fewer passes "
              "over the weights); a smaller N splits each chunk (one process only)");
  args.AddString("top1-out", &top1_out, "FILE",
                 "write the greedy token of every scored position (teacher forced)");
  args.SetDefaultLogLevel("warn");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (model.empty() == main_address.empty()) {
    return Fail("give --model FILE (one process) or --main HOST:PORT (a cluster), exactly one");
  }
  if (threads < 0) return Fail("--threads must be >= 0");
  if (threads > 0 && backend == "cpu") backend = absl::StrCat("cpu:", threads);
  if (batch < 1) return Fail("--batch must be >= 1");
  if (ctx < 0) return Fail("--ctx must be >= 0");

  std::ofstream top1_file;  // opened first: a bad path fails before any work
  if (!top1_out.empty()) {
    top1_file.open(top1_out);
    if (!top1_file) return Fail("cannot write --top1-out file '" + top1_out + "'");
  }
  absl::StatusOr<std::string> text = ReadText(file);
  if (!text.ok()) return Fail(text.status());
  absl::StatusOr<Tokens> tokens =
      main_address.empty() ? TokenizeLocally(model, *text) : TokenizeOnCluster(main_address, *text);
  if (!tokens.ok()) return Fail(tokens.status());
  absl::StatusOr<odmoe::PerplexityPlan> plan =
      odmoe::PlanPerplexity(static_cast<int64_t>(tokens->ids.size()),
                            {.ctx = ctx, .max_chunks = chunks}, tokens->context, tokens->bos_id);
  if (!plan.ok()) return Fail(plan.status());

  // With --top1-out the runner-up is written too: how close a call was.
  const int top_n = top1_out.empty() ? 0 : 2;
  odmoe::ChunksScorer scorer;
  int chunks_per_call = 1;
  std::unique_ptr<odmoe::ReferenceEngine> engine;
  std::string where;
  if (main_address.empty()) {
    // --batch >= ctx: whole chunks side by side in one pass, each in its own
    // KV slot; otherwise each chunk in batches of --batch rows.
    chunks_per_call = std::max(1, std::min(batch / plan->ctx, plan->n_chunks));
    odmoe::EngineOptions options;
    options.backend = backend;
    options.n_ctx = plan->ctx;
    options.n_seq = chunks_per_call;
    options.n_batch = batch >= plan->ctx ? chunks_per_call * plan->ctx : batch;
    auto e = odmoe::ReferenceEngine::Create(model, options);
    if (!e.ok()) return Fail(e.status());
    engine = std::move(*e);
    where = absl::StrCat("backend ", engine->backend().name(), ", ", chunks_per_call,
                         chunks_per_call == 1 ? " chunk" : " chunks", " per pass");
    scorer = [&](std::span<const std::vector<int32_t>> chunks,
                 int first) -> absl::StatusOr<std::vector<odmoe::ScoreResult>> {
      const odmoe::ScoreOptions opt{.first = first, .top_n = top_n};
      if (chunks.size() == 1) {
        auto r = engine->Score(chunks[0], opt);
        if (!r.ok()) return r.status();
        return std::vector<odmoe::ScoreResult>{std::move(*r)};
      }
      std::vector<std::span<const int32_t>> spans(chunks.begin(), chunks.end());
      return engine->ScoreSequences(spans, opt);
    };
  } else {
    where = absl::StrCat("cluster at ", main_address);
    scorer = odmoe::OneChunkAtATime(
        [&](std::span<const int32_t> chunk, int first) -> absl::StatusOr<odmoe::ScoreResult> {
          auto r = odmoe::ScoreOnMain(main_address, chunk, {.first = first, .top_n = top_n});
          if (!r.ok()) return r.status();
          return std::move(r->score);
        });
  }
  std::fprintf(stderr,
               "odmoe-perplexity: %lld tokens, %d chunks of %d (scoring positions %d..%d of "
               "each%s), %s\n",
               static_cast<long long>(plan->n_tokens), plan->n_chunks, plan->ctx, plan->first,
               plan->ctx - 2, plan->bos_id >= 0 ? ", BOS first" : "", where.c_str());

  absl::StatusOr<odmoe::PerplexityResult> result =
      odmoe::RunPerplexityBatched(tokens->ids, *plan, chunks_per_call, scorer,
                                  [](const odmoe::ChunkProgress& p) {
        std::printf("[%d]%.4f,", p.chunk + 1, p.running_ppl);
        std::fflush(stdout);
        const double eta = p.tokens_per_second > 0
                               ? (p.n_chunks - p.chunk - 1) * (p.elapsed_seconds / (p.chunk + 1))
                               : 0.0;
        std::fprintf(stderr, "odmoe-perplexity: chunk %d/%d, %.1f tokens/s, ETA %.1f s\n",
                     p.chunk + 1, p.n_chunks, p.tokens_per_second, eta);
      });
  std::printf("\n");
  if (!result.ok()) return Fail(result.status());
  std::printf("%s\n", odmoe::FormatFinalEstimate(result->nll).c_str());
  const int64_t scored = result->nll.count();
  std::fprintf(
      stderr,
      "odmoe-perplexity: %lld tokens scored in %.2f s (%.1f tokens/s evaluated); "
      "greedy token = next token at %.2f%% of them\n",
      static_cast<long long>(scored), result->seconds,
      result->seconds > 0 ? plan->n_chunks * static_cast<double>(plan->ctx) / result->seconds : 0.0,
      scored > 0 ? 100.0 * result->top1_matches / scored : 0.0);
  if (!top1_out.empty() && !WriteTop1(top1_file, tokens->ids, *plan, *result)) {
    return Fail("cannot write --top1-out file '" + top1_out + "'");
  }
  return 0;
}
