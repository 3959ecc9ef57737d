// Main.Score: the cluster's teacher-forced log-probabilities are the
// single-process engine's, bit for bit (in process and over gRPC), a
// perplexity run gives the same number, Main.Tokenize is the model's
// tokenizer, and every bad request is refused with INVALID_ARGUMENT.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "cluster/grpc_util.h"
#include "cluster/score_client.h"
#include "engine/perplexity.h"
#include "engine/reference_engine.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

std::string HeldOutText() {
  std::ifstream in(SourcePath("tests/data/heldout.txt"), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ReferenceEngine& Engine() {
  static std::unique_ptr<ReferenceEngine> engine =
      ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  return *engine;
}

// 150 tokens of held-out text, BOS first.
std::vector<int32_t> Tokens() {
  std::vector<int32_t> ids = Engine().tokenizer().Encode(HeldOutText()).value();
  ids.resize(150);
  return ids;
}

void ExpectSameScores(const ScoreResult& a, const ScoreResult& b) {
  CHECK(a.first == b.first);
  CHECK(a.next_logprobs == b.next_logprobs);  // exact doubles
  CHECK(a.top1 == b.top1);
  CHECK(a.top == b.top);
}

}  // namespace

TEST_CASE("score: the cluster's log-probabilities are the engine's, bit for bit",
          "[cluster][score]") {
  const std::vector<int32_t> tokens = Tokens();
  const ScoreOptions options{.first = 20, .top_n = 4};
  const ScoreResult want = Engine().Score(tokens, options).value();
  REQUIRE(want.next_logprobs.size() == 129);

  for (const auto& [mini_batch, batch] : {std::pair{16, 64}, std::pair{3, 17}}) {
    INFO("mini_batch " << mini_batch << " batch " << batch);
    ClusterConfig cfg;
    cfg.mini_batch = mini_batch;
    cfg.batch = batch;
    auto cluster = TestCluster::Start(cfg);
    REQUIRE(cluster.ok());
    absl::StatusOr<ClusterScoreResult> r = (*cluster)->main().Score(tokens, options);
    REQUIRE(r.ok());
    ExpectSameScores(r->score, want);
    CHECK(r->experts.tasks > 0);  // the workers computed the experts

    // Over gRPC, with the client's shape checks.
    absl::StatusOr<RemoteScore> remote = ScoreOnMain((*cluster)->main_address(), tokens, options);
    REQUIRE(remote.ok());
    ExpectSameScores(remote->score, want);
    CHECK(remote->request_id > r->request_id);

    // A generation after scoring is unaffected (same tokens as the engine).
    GenerateRequest req;
    req.prompt = "Once upon a time";
    req.max_tokens = 8;
    req.ignore_eos = true;
    auto g = (*cluster)->main().Generate(req, nullptr);
    REQUIRE(g.ok());
    CHECK(g->result.output_ids == Engine().Generate(req).value().output_ids);
  }
}

TEST_CASE("score: a perplexity run on the cluster gives the engine's number", "[cluster][score]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const std::string address = (*cluster)->main_address();

  const std::string text = HeldOutText().substr(0, 4000);
  absl::StatusOr<RemoteTokens> remote = TokenizeOnMain(address, text);
  REQUIRE(remote.ok());
  CHECK(remote->ids == Engine().tokenizer().Encode(text).value());
  CHECK(remote->bos_id == Engine().tokenizer().bos_id());
  CHECK(remote->add_bos);
  CHECK(remote->n_vocab == 2048);
  CHECK(remote->context == 512);

  const PerplexityPlan plan =
      PlanPerplexity(static_cast<int64_t>(remote->ids.size()), {.ctx = 48, .max_chunks = 3},
                     remote->context, remote->bos_id)
          .value();
  auto local = RunPerplexity(remote->ids, plan, [](std::span<const int32_t> c, int first) {
    return Engine().Score(c, {.first = first});
  });
  auto on_cluster = RunPerplexity(
      remote->ids, plan, [&](std::span<const int32_t> c, int first) -> absl::StatusOr<ScoreResult> {
        auto r = ScoreOnMain(address, c, {.first = first});
        if (!r.ok()) return r.status();
        return r->score;
      });
  REQUIRE(local.ok());
  REQUIRE(on_cluster.ok());
  CHECK(local->nll.count() == 3 * 23);
  CHECK(local->nll.perplexity() == on_cluster->nll.perplexity());
  CHECK(local->nll.perplexity_error() == on_cluster->nll.perplexity_error());
  CHECK(local->top1 == on_cluster->top1);
  CHECK(local->nll.perplexity() > 1.0);
}

TEST_CASE("score: bad requests are refused with INVALID_ARGUMENT", "[cluster][score]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const std::string address = (*cluster)->main_address();
  auto refused = [&](const v1::ScoreRequest& req, const std::string& why) {
    auto stub = v1::Main::NewStub(MakeChannel(address));
    grpc::ClientContext ctx;
    v1::ScoreReply reply;
    const grpc::Status s = stub->Score(&ctx, req, &reply);
    INFO(s.error_message());
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message().find(why) != std::string::npos);
  };
  auto with_tokens = [](int n, int32_t id) {
    v1::ScoreRequest req;
    for (int i = 0; i < n; ++i) req.add_token_ids(id);
    return req;
  };
  refused(v1::ScoreRequest(), "empty");
  refused(with_tokens(4, 2048), "token id 2048 outside the vocabulary");
  refused(with_tokens(4, -3), "token id -3");
  refused(with_tokens(513, 5), "do not fit the context of 512");
  refused(with_tokens(kMaxScoreTokens + 1, 5), "exceed the limit of 131072");
  v1::ScoreRequest req = with_tokens(4, 5);
  req.set_top_n(21);
  refused(req, "top_n must be in [0, 20]");
  req = with_tokens(4, 5);
  req.set_first(4);
  refused(req, "first scored position 4");
  req.set_first(4000000000u);
  refused(req, "out of range");
  req = with_tokens(4, 5);
  req.set_text("both");
  refused(req, "not both");
  v1::ScoreRequest big_text;
  big_text.set_text(std::string((1 << 20) + 1, 'a'));
  refused(big_text, "exceeds the limit");
  v1::ScoreRequest bad_utf8;
  bad_utf8.set_text("caf\xc3 \xff end");
  refused(bad_utf8, "UTF-8");

  // Text is tokenized by the main node (with BOS) and scored.
  v1::ScoreRequest text;
  text.set_text("The cat sat on the mat.");
  auto stub = v1::Main::NewStub(MakeChannel(address));
  grpc::ClientContext ctx;
  v1::ScoreReply reply;
  REQUIRE(stub->Score(&ctx, text, &reply).ok());
  const std::vector<int32_t> ids = Engine().tokenizer().Encode(text.text()).value();
  CHECK(std::vector<int32_t>(reply.token_ids().begin(), reply.token_ids().end()) == ids);
  const ScoreResult want = Engine().Score(ids, {}).value();
  CHECK(std::vector<double>(reply.next_logprobs().begin(), reply.next_logprobs().end()) ==
        want.next_logprobs);

  // Tokenize refuses what it cannot read; nothing was scored by the refusals.
  CHECK(absl::IsInvalidArgument(TokenizeOnMain(address, "caf\xc3 \xff").status()));
  CHECK((*cluster)->main().engine().n_ctx() == 512);
}

}  // namespace odmoe::test
