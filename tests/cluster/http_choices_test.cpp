// `n` > 1 through the HTTP API of an in-process cluster: choice i is the
// single process's generation with seed + i, streamed or not, and usage
// counts the prompt once and every choice's tokens.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "engine/reference_engine.h"
#include "http_cluster.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "sse_events.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;

TEST_CASE("http: n choices are the single process's generations with seed + i", "[cluster][http]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.max_running = 2;  // three choices: two batched, one waiting its turn
  std::unique_ptr<TestCluster> cluster = StartHttpCluster(cfg);
  httplib::Client cli = HttpClientOf(*cluster);

  const json ask = {{"prompt", "Once upon a time"},
                    {"max_tokens", 10},
                    {"temperature", 0.9},
                    {"seed", 5},
                    {"n", 3},
                    {"ignore_eos", true}};
  auto res = cli.Post("/v1/completions", ask.dump(), "application/json");
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);
  const json j = json::parse(res->body);
  REQUIRE(j["choices"].size() == 3);
  int prompt_tokens = 0;
  for (int i = 0; i < 3; ++i) {
    GenerateRequest req;
    req.prompt = "Once upon a time";
    req.max_tokens = 10;
    req.ignore_eos = true;
    req.sampling.temperature = 0.9f;
    req.sampling.seed = 5 + i;
    absl::StatusOr<GenerateResult> r = TinyReference().Generate(req);
    REQUIRE(r.ok());
    CHECK(j["choices"][i]["index"] == i);
    CHECK(j["choices"][i]["text"] == r->text);
    prompt_tokens = r->stats.prompt_tokens;
  }
  CHECK(j["choices"][0]["text"] != j["choices"][1]["text"]);
  CHECK(j["usage"]["prompt_tokens"] == prompt_tokens);
  CHECK(j["usage"]["completion_tokens"] == 30);
  CHECK(j["usage"]["total_tokens"] == prompt_tokens + 30);

  // Streamed: each choice's chunks carry its index, and add up to its text;
  // one usage chunk for all.
  json streamed = ask;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  res = cli.Post("/v1/completions", streamed.dump(), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  std::map<int, std::string> texts;
  std::map<int, std::string> finish;
  int usage_chunks = 0;
  for (const std::string& data : SseEvents(res->body)) {
    if (data == "[DONE]") break;
    const json e = json::parse(data);
    if (e["choices"].empty()) {
      ++usage_chunks;
      CHECK(e["usage"]["completion_tokens"] == 30);
      continue;
    }
    const int index = e["choices"][0]["index"];
    texts[index] += e["choices"][0]["text"].get<std::string>();
    if (e["choices"][0]["finish_reason"].is_string())
      finish[index] = e["choices"][0]["finish_reason"];
  }
  CHECK(usage_chunks == 1);
  REQUIRE(texts.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(texts[i] == j["choices"][i]["text"]);
    CHECK(finish[i] == "length");
  }

  // Chat: n choices of a message, greedy ones alike.
  res = cli.Post("/v1/chat/completions",
                 json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                      {"max_tokens", 6},
                      {"temperature", 0},
                      {"n", 2}}
                     .dump(),
                 "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const json chat = json::parse(res->body);
  REQUIRE(chat["choices"].size() == 2);
  CHECK(chat["choices"][1]["index"] == 1);
  CHECK(chat["choices"][0]["message"]["content"] == chat["choices"][1]["message"]["content"]);
}

}  // namespace
}  // namespace odmoe::test
