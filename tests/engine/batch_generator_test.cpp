// Several requests generated together (engine/batch_generator.h): each
// one's tokens, text, stop reason, log-probabilities and streamed pieces are
// those of the same request run alone by the single-process engine, with
// greedy and seeded sampling, late arrivals, more requests than KV slots, a
// stop sequence, and one request dropped half-way.
#include "engine/batch_generator.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "engine/local_expert_executor.h"
#include "engine/reference_engine.h"
#include "test_paths.h"

namespace odmoe {
namespace {

struct Job {
  Job(GenerateRequest r, int at) : request(std::move(r)), arrives(at) {}
  GenerateRequest request;
  int arrives = 0;                 // the step before which it is added
  std::string stop_after;          // a stop sequence (should_stop) when not empty
  std::shared_ptr<Sequence> seq;
  std::string streamed;
};

GenerateRequest Req(const std::string& prompt, int max_tokens, float temperature = 0,
                    uint64_t seed = 0) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.top_p = temperature > 0 ? 0.9f : 1.0f;
  r.sampling.seed = seed;
  return r;
}

}  // namespace

TEST_CASE("batch generator: requests batched together get what they get alone",
          "[engine][batching]") {
  EngineOptions eo;
  eo.n_ctx = 128;
  auto engine = ReferenceEngine::Create(test::SourcePath("models/tiny-mixtral-f16.gguf"), eo);
  REQUIRE(engine.ok());
  const Tokenizer& tok = (*engine)->tokenizer();
  std::vector<Job> jobs = {
      {Req("Once upon a time", 24), 0},
      {Req("The sea", 16, 0.8f, 7), 0},
      {Req("A long time ago, in a small village by the river, there lived", 20), 0},
      {Req("She said", 12, 1.0f, 42), 0},
      {Req("Hello", 30), 3},
      {Req("The king and the queen", 18, 0.7f, 3), 5},
  };
  jobs[0].request.logprobs = 3;
  jobs[2].request.ignore_eos = true;
  jobs[4].stop_after = " the";

  Transformer::Options topt;
  topt.n_ctx = 128;
  topt.n_batch = 16;
  topt.n_seq = 3;  // fewer slots than requests: slots are reused
  auto tf = Transformer::Create((*engine)->model(), (*engine)->backend(), topt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create((*engine)->model(), (*engine)->backend(), 16);
  REQUIRE(experts.ok());
  BatchGenerator::Options bo;
  bo.prefill_chunk = 5;  // long prompts take several iterations, next to decode rows
  BatchGenerator gen(**tf, **experts, bo);

  auto make = [&](Job& job) {
    auto ids = PreparePrompt(job.request, tok, (*tf)->n_ctx());
    REQUIRE(ids.ok());
    std::function<bool()> stop;
    if (!job.stop_after.empty()) {
      stop = [&job] { return job.streamed.find(job.stop_after) != std::string::npos; };
    }
    job.seq = std::make_shared<Sequence>(
        tok, job.request, *ids,
        [&job](int32_t, std::string_view piece) { job.streamed += std::string(piece); }, stop);
  };
  // One more request, dropped after its third step: the others are unaffected.
  Job dropped{Req("It was a dark", 40), 0};
  make(dropped);
  REQUIRE(gen.Add(dropped.seq).ok());
  int64_t total_rows = 0;
  for (int step = 0; gen.busy() || step <= 5; ++step) {
    REQUIRE(step < 500);
    for (Job& job : jobs) {
      if (job.arrives == step) {
        make(job);
        REQUIRE(gen.Add(job.seq).ok());
      }
    }
    if (step == 3) gen.Remove(dropped.seq.get());
    absl::StatusOr<int64_t> rows = gen.Step();
    REQUIRE(rows.ok());
    total_rows += *rows;
  }
  CHECK(!dropped.seq->done());
  CHECK(gen.rows() == static_cast<uint64_t>(total_rows));

  size_t forwards_alone = 0;
  for (Job& job : jobs) {
    INFO(job.request.prompt);
    REQUIRE(job.seq->done());
    const GenerateResult got = job.seq->TakeResult();
    std::string alone_streamed;
    GenerateRequest req = job.request;
    absl::StatusOr<GenerateResult> alone;
    if (job.stop_after.empty()) {
      alone = (*engine)->Generate(req, [&](int32_t, std::string_view p) {
        alone_streamed += std::string(p);
      });
    } else {
      // The same stop rule through RunGeneration's hook.
      auto ids = PreparePrompt(req, tok, (*tf)->n_ctx());
      REQUIRE(ids.ok());
      Transformer::Options one;
      one.n_ctx = 128;
      one.n_batch = 16;
      auto tf1 = Transformer::Create((*engine)->model(), (*engine)->backend(), one);
      REQUIRE(tf1.ok());
      GenerationHooks hooks;
      hooks.should_stop = [&] { return alone_streamed.find(job.stop_after) != std::string::npos; };
      alone = RunGeneration(**tf1, **experts, tok, req, *ids,
                            [&](int32_t, std::string_view p) { alone_streamed += std::string(p); },
                            hooks);
    }
    REQUIRE(alone.ok());
    CHECK(got.output_ids == alone->output_ids);
    CHECK(got.text == alone->text);
    CHECK(job.streamed == alone_streamed);
    CHECK(got.stop_reason == alone->stop_reason);
    REQUIRE(got.logprobs.size() == alone->logprobs.size());
    for (size_t i = 0; i < got.logprobs.size(); ++i) {
      CHECK(got.logprobs[i].target_logprob == alone->logprobs[i].target_logprob);
      CHECK(got.logprobs[i].top.size() == alone->logprobs[i].top.size());
    }
    CHECK(got.stats.generated_tokens == static_cast<int>(got.output_ids.size()));
    forwards_alone += got.output_ids.size() + 1;
  }
  CHECK(jobs[0].seq->result().logprobs.size() == jobs[0].seq->result().output_ids.size());
  CHECK(jobs[4].seq->result().stop_reason == GenerateResult::StopReason::kStopped);
  // Batching did happen: fewer iterations than the requests' forwards one by one.
  CHECK(gen.iterations() < forwards_alone);
}

TEST_CASE("batch generator: what it refuses", "[engine][batching]") {
  EngineOptions eo;
  eo.n_ctx = 32;
  auto engine = ReferenceEngine::Create(test::SourcePath("models/tiny-mixtral-f16.gguf"), eo);
  REQUIRE(engine.ok());
  Transformer::Options topt;
  topt.n_ctx = 32;
  topt.n_batch = 8;
  topt.n_seq = 2;
  auto tf = Transformer::Create((*engine)->model(), (*engine)->backend(), topt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create((*engine)->model(), (*engine)->backend(), 8);
  REQUIRE(experts.ok());
  BatchGenerator gen(**tf, **experts);
  const Tokenizer& tok = (*engine)->tokenizer();
  GenerateRequest r = Req("Once upon a time", 40);  // more than the context holds
  auto ids = PreparePrompt(Req("Once upon a time", 4), tok, 32);
  REQUIRE(ids.ok());
  CHECK(absl::IsInvalidArgument(gen.Add(std::make_shared<Sequence>(tok, r, *ids))));
  GenerateRequest routed = Req("Once upon a time", 4);
  routed.record_routing = true;
  CHECK(absl::IsInvalidArgument(gen.Add(std::make_shared<Sequence>(tok, routed, *ids))));
  CHECK(absl::IsInvalidArgument(gen.Add(nullptr)));
  CHECK(!gen.busy());
  absl::StatusOr<int64_t> idle = gen.Step();
  REQUIRE(idle.ok());
  CHECK(*idle == 0);
}

}  // namespace odmoe
