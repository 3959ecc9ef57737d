// Issue 18's attacks, with real nodes: a local process that opens a
// Worker.Experts or Shadow.Follow stream without the cluster secret, or with
// a credential of the wrong role, gets UNAUTHENTICATED / PERMISSION_DENIED
// and changes nothing: the worker computes nothing for it, it receives no
// result, and later completions run as fast as before (a ratio against the
// same completions before the attempt, in one run) with prediction intact.
// A stream from the legitimate main node (a restarted one) replaces the old
// one cleanly; when it closes, the running main node's links come back within
// a timeout instead of staying silent.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "absl/time/clock.h"
#include "cluster/grpc_util.h"
#include "cluster/wire.h"
#include "engine/reference_engine.h"
#include "model/model_file.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

const char kPrompt[] = "It is a truth universally acknowledged";
// Under ThreadSanitizer (scripts/sanitize.sh tsan) the shadow's forward
// passes slow down more than the main node's steps, and 8 tokens can all be
// generated before its first prediction arrives (recall 0 with prediction
// intact); 32 leave it time.
#if defined(__SANITIZE_THREAD__)
constexpr int kTokens = 32;
#else
constexpr int kTokens = 8;
#endif

GenerateRequest Request() {
  GenerateRequest req;
  req.prompt = kPrompt;
  req.max_tokens = kTokens;
  req.ignore_eos = true;
  return req;
}

const std::vector<int32_t>& ReferenceIds() {
  static const std::vector<int32_t> ids =
      ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {})
          .value()
          ->Generate(Request())
          .value()
          .output_ids;
  return ids;
}

struct Completions {
  double mean_seconds = 0;
  // The best recall among the completions (prediction: shadow). Not the
  // worst: a completion this short can end before a busy shadow's first
  // prediction; a disabled shadow gives 0 to every one.
  double best_recall = 0;
};

// `n` completions of the same request; each must give the reference tokens.
Completions Run(TestCluster& c, int n) {
  Completions out;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<ClusterGenerateResult> r = c.main().Generate(Request(), nullptr);
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == ReferenceIds());
    out.best_recall = std::max(out.best_recall, r->recall.slots > 0 ? r->recall.overall : 0.0);
  }
  out.mean_seconds = total / n;
  return out;
}

// Later completions may be slower than earlier ones by this factor at most
// (generous: the attacks of issue 18 made them 10-50 times slower). The
// floor keeps a very fast baseline from turning scheduling noise into a
// failure.
void CheckNotSlower(const Completions& before, const Completions& after) {
  INFO("before " << before.mean_seconds << " s, after " << after.mean_seconds << " s");
  CHECK(after.mean_seconds < 3.0 * std::max(before.mean_seconds, 0.1));
}

uint64_t WorkerTasks(TestCluster& c) {
  uint64_t n = 0;
  for (int i = 0; i < c.n_workers(); ++i) n += c.worker(i).core().stats().tasks;
  return n;
}

v1::WorkerRequest ForeignTask(const Topology& t) {
  const int n_embd = ModelFile::Open(t.model).value()->config().n_embd;
  v1::WorkerRequest req;
  v1::ExpertTask* task = req.mutable_task();
  task->set_task_id(424242);
  task->mutable_key()->set_request(static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())));
  task->mutable_key()->set_layer(0);
  task->set_expert(0);
  task->set_mini_batches(1);
  std::vector<float> x(static_cast<size_t>(n_embd), 0.5f);
  EncodeRows(x.data(), 1, n_embd, v1::WIRE_DTYPE_F32, task->mutable_input());
  return req;
}

// Opens an Experts stream to worker 0 as `auth` (null: no credential), sends
// a task, and reports what came back and how the stream ended.
struct StreamOutcome {
  int messages = 0;
  grpc::Status status;
};
StreamOutcome ForeignExperts(TestCluster& c, const PeerAuth* auth) {
  auto stub = v1::Worker::NewStub(MakeChannel(c.topology().workers[0].address));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(3)));
  AttachCredential(ctx, auth);
  auto stream = stub->Experts(&ctx);
  stream->Write(ForeignTask(c.topology()));
  StreamOutcome out;
  v1::ExpertResult r;
  if (stream->Read(&r)) {  // one result is all it could get
    ++out.messages;
    ctx.TryCancel();
  }
  out.status = stream->Finish();
  return out;
}

StreamOutcome ForeignFollow(TestCluster& c, const PeerAuth* auth) {
  auto stub = v1::Shadow::NewStub(MakeChannel(c.topology().shadow->address));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(3)));
  AttachCredential(ctx, auth);
  auto stream = stub->Follow(&ctx);
  v1::ShadowRequest begin;
  begin.mutable_begin()->set_request(static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())));
  begin.mutable_begin()->add_prompt_ids(1);
  begin.mutable_begin()->set_max_tokens(2);
  stream->Write(begin);
  StreamOutcome out;
  v1::ShadowReply r;
  if (stream->Read(&r)) {
    ++out.messages;
    ctx.TryCancel();
  }
  out.status = stream->Finish();
  return out;
}

}  // namespace

TEST_CASE("streams: a foreign Experts stream cannot make a worker compute or break it",
          "[cluster][auth][streams][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const Completions before = Run(c, 3);
  const uint64_t tasks = WorkerTasks(c);

  StreamOutcome none = ForeignExperts(c, nullptr);
  CHECK(none.messages == 0);
  CHECK(none.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  const PeerAuth stranger(std::string(40, 'x'), PeerRole::kMain, "main", "main", "shadow");
  StreamOutcome wrong_secret = ForeignExperts(c, &stranger);
  CHECK(wrong_secret.messages == 0);
  CHECK(wrong_secret.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  // The shadow's credential (right secret, wrong role).
  auto shadow = TestAuth(c.topology(), PeerRole::kShadow, "shadow");
  StreamOutcome wrong_role = ForeignExperts(c, shadow.get());
  CHECK(wrong_role.messages == 0);
  CHECK(wrong_role.status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(WorkerTasks(c) == tasks);  // nothing was computed for them

  CheckNotSlower(before, Run(c, 3));
  CHECK(c.main().Health().ok());
}

TEST_CASE("streams: a foreign Follow stream cannot disable prediction",
          "[cluster][auth][streams][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const Completions before = Run(c, 3);
  REQUIRE(before.best_recall > 0);

  StreamOutcome none = ForeignFollow(c, nullptr);
  CHECK(none.messages == 0);
  CHECK(none.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  auto worker = TestAuth(c.topology(), PeerRole::kWorker, "w0");
  StreamOutcome wrong_role = ForeignFollow(c, worker.get());
  CHECK(wrong_role.messages == 0);
  CHECK(wrong_role.status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  // A main node with another id than the topology's.
  auto other_main = TestAuth(c.topology(), PeerRole::kMain, "main2");
  CHECK(ForeignFollow(c, other_main.get()).status.error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);

  const Completions after = Run(c, 3);
  CHECK(after.best_recall > 0);  // prediction still works
  CheckNotSlower(before, after);
  CHECK(c.main().Health().ok());
}

TEST_CASE(
    "streams: a second stream of the main node replaces the first, and closing it breaks "
    "nothing",
    "[cluster][auth][streams][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const Completions before = Run(c, 3);
  REQUIRE(before.best_recall > 0);

  // As a restarted main node would: the right credential, new streams. They
  // take the channels over (the worker computes the task and answers), and
  // the running main node's streams are ended rather than left silent.
  //
  // The running main node reopens its stream in turn (its rejoin loop, a
  // round every ~0.5 s), and that replaces this one: on a loaded machine it
  // can do so before the task's result was sent (CI saw it under TSan). That
  // is the same rule working the other way, so such a try ends CANCELLED and
  // is repeated; one of a few tries must get its result.
  auto main_auth = TestAuth(c.topology(), PeerRole::kMain, "main");
  bool answered = false;
  for (int attempt = 0; attempt < 5 && !answered; ++attempt) {
    const uint64_t tasks = WorkerTasks(c);
    StreamOutcome experts = ForeignExperts(c, main_auth.get());
    if (experts.messages == 1) {
      answered = true;
      CHECK(WorkerTasks(c) == tasks + 1);
    } else {
      INFO("attempt " << attempt << ": " << experts.status.error_message());
      CHECK(experts.status.error_code() == grpc::StatusCode::CANCELLED);
      CHECK(WorkerTasks(c) <= tasks + 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the reclaim is over
    }
  }
  CHECK(answered);
  ForeignFollow(c, main_auth.get());

  // Both streams are closed now. The main node reopens its own (within one
  // worker timeout) and the shadow follows it again.
  Completions after;
  for (int i = 0; i < 20; ++i) {
    after = Run(c, 1);
    if (after.best_recall > 0 && c.main().Health().ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(c.main().Health().ok());
  after = Run(c, 3);
  CHECK(after.best_recall > 0);
  CheckNotSlower(before, after);
}

TEST_CASE("streams: a restarted main node takes its streams back and prediction re-aligns",
          "[cluster][auth][streams][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const Completions before = Run(c, 3);
  REQUIRE(before.best_recall > 0);
  const absl::Status restarted = c.RestartMain();
  INFO(restarted);
  REQUIRE(restarted.ok());
  for (int i = 0; i < 50 && !c.main().Health().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(c.main().Health().ok());  // every worker and the shadow connected again
  const Completions after = Run(c, 3);
  CHECK(after.best_recall > 0);
  CheckNotSlower(before, after);
}

}  // namespace odmoe::test
