// The shadow's core following several requests at once (continuous
// batching): each in its own KV slot, every request's predictions the same
// as when it is followed alone (the shadow's rows are independent), hints
// only for requests that are not batched, and a begin past the slots refused
// with a ShadowDone that says why.
#include "shadow_node/shadow_core.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "backends/backend_registry.h"
#include "model/model_file.h"
#include "test_paths.h"

namespace odmoe {
namespace {

using test::SourcePath;

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  // (request, token, layer) -> experts
  std::map<std::tuple<uint64_t, uint32_t, uint32_t>, std::vector<uint32_t>> predictions;
  std::map<uint64_t, v1::ShadowDone> done;
  std::set<uint64_t> hinted;  // requests with at least one hint
  bool WaitDone(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return done.size() >= n; });
  }
};

struct Shadow {
  std::unique_ptr<ModelFile> model;
  std::unique_ptr<Backend> backend;
  Collected got;  // outlives the core: its thread replies until it stops
  std::unique_ptr<ShadowCore> core;
};

std::unique_ptr<Shadow> StartShadow(int slots) {
  auto s = std::make_unique<Shadow>();
  s->model = ModelFile::Open(SourcePath("models/tiny-mixtral-f16.gguf")).value();
  s->backend = CreateBackend("cpu:1").value();
  Transformer::Options topt;
  topt.n_ctx = 128;
  topt.n_batch = 16;
  topt.n_seq = slots;
  ShadowCore::Options opt;
  opt.n_groups = 2;
  opt.max_run_ahead = 8;
  s->core = ShadowCore::Create(*s->model, *s->backend, topt, opt).value();
  Collected* got = &s->got;
  s->core->Attach(
      1,
      [got](const v1::ShadowReply& r) {
        std::lock_guard<std::mutex> lock(got->mu);
        std::vector<v1::Prediction> preds;
        if (r.has_prediction()) preds.push_back(r.prediction());
        for (const v1::Prediction& p : r.predictions().predictions()) preds.push_back(p);
        for (const v1::Prediction& p : preds) {
          const v1::StepKey& k = p.key();
          got->predictions[{k.request(), k.token(), k.layer()}] = {p.experts().begin(),
                                                                   p.experts().end()};
        }
        if (r.has_done()) {
          got->done[r.done().request()] = r.done();
        }
        got->cv.notify_all();
      },
      [got](int, const v1::Hint& h) {
        std::lock_guard<std::mutex> lock(got->mu);
        got->hinted.insert(h.key().request());
      });
  return s;
}

v1::ShadowRequest Begin(uint64_t request, std::vector<int32_t> prompt, uint32_t max_tokens,
                        bool batched) {
  v1::ShadowRequest m;
  v1::ShadowBegin* b = m.mutable_begin();
  b->set_request(request);
  for (int32_t id : prompt) b->add_prompt_ids(id);
  b->set_max_tokens(max_tokens);
  b->set_batched(batched);
  return m;  // no alignment: it runs ahead on its own tokens (max_run_ahead)
}

}  // namespace

TEST_CASE("shadow core: several requests followed at once predict as each alone",
          "[cluster][batching][tsan]") {
  const std::vector<int32_t> p1 = {1, 45, 101, 31}, p2 = {1, 90, 25, 26, 93, 29};
  constexpr uint32_t kTokens = 6;
  auto alone = StartShadow(1);
  REQUIRE(alone->core->Submit(Begin(11, p1, kTokens, false)).ok());
  REQUIRE(alone->got.WaitDone(1));
  REQUIRE(alone->core->Submit(Begin(12, p2, kTokens, false)).ok());
  REQUIRE(alone->got.WaitDone(2));

  auto both = StartShadow(2);
  REQUIRE(both->core->Submit(Begin(11, p1, kTokens, false)).ok());
  REQUIRE(both->core->Submit(Begin(12, p2, kTokens, /*batched=*/true)).ok());
  REQUIRE(both->got.WaitDone(2));
  CHECK(both->got.done[11].error_code() == 0);
  CHECK(both->got.done[12].error_code() == 0);
  CHECK(both->got.done[11].iterations() == kTokens);
  CHECK(both->got.done[12].iterations() == kTokens);
  // Same predictions for every (request, iteration, layer), and all there.
  const int layers = alone->model->config().n_moe_layer();
  CHECK(alone->got.predictions.size() == size_t{2} * kTokens * static_cast<size_t>(layers));
  CHECK(both->got.predictions == alone->got.predictions);
  // The batched request is hinted by the main node, not by the shadow.
  CHECK(both->got.hinted == std::set<uint64_t>{11});
  CHECK(alone->got.hinted == std::set<uint64_t>{11, 12});
  const ShadowStats st = both->core->stats();
  CHECK(st.requests == 2);
  CHECK(st.requests_finished == 2);
  CHECK(st.iterations == 2 * kTokens);
}

TEST_CASE("shadow core: a begin past its slots is refused, the others go on",
          "[cluster][batching]") {
  auto s = StartShadow(2);
  const std::vector<int32_t> p = {1, 45, 101};
  // Aligned every iteration: both wait for a main node that never comes, so
  // they hold the two slots until they are ended.
  for (uint64_t id : {21, 22}) {
    v1::ShadowRequest b = Begin(id, p, 50, id == 22);
    b.mutable_begin()->set_token_period(1);
    REQUIRE(s->core->Submit(b).ok());
  }
  REQUIRE(s->core->Submit(Begin(23, p, 4, true)).ok());
  REQUIRE(s->got.WaitDone(1));
  {
    std::lock_guard<std::mutex> lock(s->got.mu);
    REQUIRE(s->got.done.count(23) == 1);
    CHECK(s->got.done[23].error_code() ==
          static_cast<int>(absl::StatusCode::kResourceExhausted));
    CHECK_THAT(s->got.done[23].error_message(), Catch::Contains("2 requests at once"));
  }
  // Its slot is free again once one ends: a new request is followed.
  v1::ShadowRequest end;
  end.mutable_end()->set_request(21);
  REQUIRE(s->core->Submit(end).ok());
  REQUIRE(s->core->Submit(Begin(24, p, 2, false)).ok());
  REQUIRE(s->got.WaitDone(3));
  s->core->AbortAll();
  REQUIRE(s->got.WaitDone(4));
  std::lock_guard<std::mutex> lock(s->got.mu);
  CHECK(s->got.done[21].error_code() == 0);
  CHECK(s->got.done[22].error_code() == 0);
  CHECK(s->got.done[24].error_code() == 0);
  CHECK(s->got.done[24].iterations() == 2);
}

TEST_CASE("shadow core: an end stops one request and not the other", "[cluster][batching]") {
  auto s = StartShadow(2);
  const std::vector<int32_t> p = {1, 45, 101};
  // Aligned every iteration, so neither runs more than one iteration ahead
  // of a main node that never comes: both wait after iteration 2.
  v1::ShadowRequest a = Begin(31, p, 50, false), b = Begin(32, p, 50, false);
  a.mutable_begin()->set_token_period(1);
  b.mutable_begin()->set_token_period(1);
  REQUIRE(s->core->Submit(a).ok());
  REQUIRE(s->core->Submit(b).ok());
  v1::ShadowRequest end;
  end.mutable_end()->set_request(31);
  REQUIRE(s->core->Submit(end).ok());
  REQUIRE(s->got.WaitDone(1));
  {
    std::lock_guard<std::mutex> lock(s->got.mu);
    CHECK(s->got.done.count(31) == 1);
    CHECK(s->got.done.count(32) == 0);
  }
  s->core->AbortAll();
  REQUIRE(s->got.WaitDone(2));
  CHECK(s->got.done.count(32) == 1);
}

TEST_CASE("shadow core: a request ended just before a begin gives up its slot to it",
          "[cluster][batching]") {
  auto s = StartShadow(1);
  const std::vector<int32_t> p = {1, 45, 101};
  v1::ShadowRequest a = Begin(41, p, 50, false);
  a.mutable_begin()->set_token_period(1);  // waits for a main node that never comes
  REQUIRE(s->core->Submit(a).ok());
  for (int i = 0; i < 30; ++i) {  // the end and the next begin, back to back
    v1::ShadowRequest end;
    end.mutable_end()->set_request(41 + static_cast<uint64_t>(i));
    REQUIRE(s->core->Submit(end).ok());
    v1::ShadowRequest next = Begin(42 + static_cast<uint64_t>(i), p, 50, false);
    next.mutable_begin()->set_token_period(1);
    REQUIRE(s->core->Submit(next).ok());
  }
  REQUIRE(s->got.WaitDone(30));
  std::lock_guard<std::mutex> lock(s->got.mu);
  for (const auto& [id, done] : s->got.done) {
    INFO("request " << id << ": " << done.error_message());
    CHECK(done.error_code() == 0);
  }
}

}  // namespace odmoe
