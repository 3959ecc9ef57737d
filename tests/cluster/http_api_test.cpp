// The OpenAI-compatible HTTP API of the main node, through a real HTTP client
// against an in-process cluster.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "cluster/main_client.h"
#include "engine/reference_engine.h"
#include "gguf/gguf_writer.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "sse_events.h"
#include "test_cluster.h"
#include "tokenizer/tokenizer.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;

std::string ReferenceText(const std::string& prompt, int tokens) {
  static auto engine =
      ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = tokens;
  return engine->Generate(req).value().text;
}

// The reference engine's text for a prompt given as token ids.
std::string ReferenceTextIds(const std::vector<int32_t>& ids, int tokens) {
  static auto engine =
      ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  GenerateRequest req;
  req.prompt_ids = ids;
  req.max_tokens = tokens;
  return engine->Generate(req).value().text;
}

// A copy of the tiny model whose tokenizer.chat_template is `chat_template`.
std::string ModelWithTemplate(const std::string& name, const std::string& chat_template) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("odmoe_http_" + name + "_" + std::to_string(getpid()) + ".gguf"))
                              .string();
  auto f = GgufFile::Open(SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(f.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*f)->metadata()) w.SetMetadata(key, value);
  w.SetMetadata("tokenizer.chat_template", GgufValue::String(chat_template));
  for (const TensorView& t : (*f)->tensors()) REQUIRE(w.AddTensorView(t).ok());
  REQUIRE(w.WriteFile(out).ok());
  return out;
}

httplib::Client Client(TestCluster& c) {
  httplib::Client cli("127.0.0.1", c.main().http_port());
  cli.set_read_timeout(std::chrono::seconds(60));
  return cli;
}

void ExpectError(httplib::Client& cli, const std::string& path, const std::string& body, int status,
                 const std::string& param_or_code) {
  auto res = cli.Post(path, body, "application/json");
  REQUIRE(res);
  INFO(body << " -> " << res->body);
  CHECK(res->status == status);
  json j = json::parse(res->body, nullptr, false);
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["message"].is_string());
  CHECK(j["error"]["type"].is_string());
  if (!param_or_code.empty()) {
    CHECK((j["error"]["param"] == param_or_code || j["error"]["code"] == param_or_code));
  }
}

// An in-process cluster of `workers` workers with the HTTP API on.
std::unique_ptr<TestCluster> HttpCluster(int workers,
                                         PredictionMode prediction = ClusterConfig{}.prediction) {
  ClusterConfig cfg;
  cfg.workers = workers;
  cfg.prediction = prediction;
  cfg.http = true;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  return std::move(*cluster);
}

// POSTs `body`, requires 200 and returns the response body.
std::string PostOk(httplib::Client& cli, const std::string& path, const json& body) {
  auto res = cli.Post(path, body.dump(), "application/json");
  REQUIRE(res);
  INFO(body.dump() << " -> " << res->body);
  REQUIRE(res->status == 200);
  return res->body;
}

}  // namespace

TEST_CASE("http: completions, streaming, chat, models, health, metrics", "[cluster][http][tsan]") {
  std::unique_ptr<TestCluster> cluster = HttpCluster(4);
  httplib::Client cli = Client(*cluster);
  const std::string prompt = "The meaning of life is";
  const std::string expected = ReferenceText(prompt, 12);

  auto res = cli.Post("/v1/completions",
                      json{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}}.dump(),
                      "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  json j = json::parse(res->body);
  CHECK(j["object"] == "text_completion");
  CHECK(j["model"] == "tiny-mixtral-f16");
  CHECK(j["choices"][0]["text"] == expected);
  CHECK(j["choices"][0]["finish_reason"] == "length");
  CHECK(j["usage"]["completion_tokens"] == 12);
  CHECK(j["usage"]["total_tokens"] ==
        j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());

  // Streaming gives the same text as events, then [DONE].
  res = cli.Post(
      "/v1/completions",
      json{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"stream", true}}.dump(),
      "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type").find("text/event-stream") == 0);
  std::vector<std::string> events = SseEvents(res->body);
  REQUIRE(events.size() >= 3);
  CHECK(events.back() == "[DONE]");
  std::string streamed;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    streamed += e["choices"][0]["text"].get<std::string>();
  }
  CHECK(streamed == expected);
  CHECK(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"] == "length");

  // Stop sequences cut the text and end the generation.
  const std::string stop_at = expected.substr(6, 4);
  res = cli.Post(
      "/v1/completions",
      json{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"stop", {stop_at}}}.dump(),
      "application/json");
  REQUIRE(res);
  j = json::parse(res->body);
  CHECK(j["choices"][0]["text"] == expected.substr(0, expected.find(stop_at)));
  CHECK(j["choices"][0]["finish_reason"] == "stop");

  // Chat, in the model's (default) chat format, streamed.
  res = cli.Post("/v1/chat/completions",
                 json{{"messages",
                       {{{"role", "system"}, {"content", "Be brief."}},
                        {{"role", "user"}, {"content", "Hello"}}}},
                      {"max_tokens", 6},
                      {"temperature", 0},
                      {"stream", true}}
                     .dump(),
                 "application/json");
  REQUIRE(res);
  events = SseEvents(res->body);
  REQUIRE(events.size() >= 3);
  CHECK(json::parse(events[0])["choices"][0]["delta"]["role"] == "assistant");
  CHECK(json::parse(events[0])["object"] == "chat.completion.chunk");
  CHECK(events.back() == "[DONE]");
  res = cli.Post("/v1/chat/completions",
                 json{{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                      {"max_tokens", 6},
                      {"temperature", 0}}
                     .dump(),
                 "application/json");
  REQUIRE(res);
  j = json::parse(res->body);
  CHECK(j["object"] == "chat.completion");
  CHECK(j["choices"][0]["message"]["role"] == "assistant");
  CHECK(j["choices"][0]["message"]["content"] == ReferenceText("user: Hello\nassistant:", 6));

  res = cli.Get("/v1/models");
  REQUIRE(res);
  CHECK(json::parse(res->body)["data"][0]["id"] == "tiny-mixtral-f16");
  res = cli.Get("/health");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(json::parse(res->body)["status"] == "ok");
  res = cli.Get("/metrics");
  REQUIRE(res);
  for (const char* series :
       {"odmoe_requests_total{api=\"http\",outcome=\"ok\"} 5", "odmoe_prompt_tokens_total",
        "odmoe_generation_tokens_total", "odmoe_time_to_first_token_seconds_bucket",
        "odmoe_inter_token_latency_seconds_count", "odmoe_requests_running 0",
        "odmoe_requests_queued 0", "odmoe_prediction_recall", "odmoe_expert_tasks_total",
        "odmoe_expert_reloads_total", "odmoe_load_stall_seconds_total{layer=\"7\"}",
        "odmoe_alignment_seconds_total", "odmoe_worker_up{worker=\"w3\"} 1",
        "odmoe_worker_bytes_loaded_total{worker=\"w0\"}",
        "odmoe_worker_memory_in_use_bytes{worker=\"w1\"}"}) {
    INFO(series);
    CHECK(res->body.find(series) != std::string::npos);
  }
}

TEST_CASE("http: chat renders the model's template, its special tokens as tokens",
          "[cluster][http][chat]") {
  // Mixtral-Instruct's format: "</s>" after an assistant turn is the EOS
  // token in the prompt, not the text "</s>".
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.http = true;
  cfg.model = ModelWithTemplate(
      "mistral",
      "{{ bos_token }}{% for message in messages %}"
      "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{% if message['role'] == 'user' %}"
      "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
      "{{ message['content'] + eos_token }}{% endif %}{% endfor %}");
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  httplib::Client cli = Client(**cluster);
  const json messages = {{{"role", "user"}, {"content", "Hi"}},
                         {{"role", "assistant"}, {"content", "Yo"}},
                         {{"role", "user"}, {"content", "Tell me a story"}}};
  json j = json::parse(PostOk(cli, "/v1/chat/completions",
                              {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}}));
  auto file = GgufFile::Open(cfg.model);
  REQUIRE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  REQUIRE(tok.ok());
  Tokenizer::EncodeOptions special;
  special.parse_special = true;
  const std::string prompt = "[INST] Hi [/INST]Yo</s>[INST] Tell me a story [/INST]";
  const std::vector<int32_t> ids = (*tok)->Encode(prompt, special).value();
  REQUIRE(std::count(ids.begin(), ids.end(), (*tok)->eos_id()) == 1);
  CHECK(j["usage"]["prompt_tokens"] == ids.size());
  CHECK(j["choices"][0]["message"]["content"] == ReferenceTextIds(ids, 6));
  CHECK_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
  // llama-server's /apply-template: the same prompt, nothing generated.
  const json applied = json::parse(PostOk(cli, "/apply-template", {{"messages", messages}}));
  CHECK(applied == json{{"prompt", (*tok)->vocab().tokens[(*tok)->bos_id()] + prompt}});
  // Switches the template does not read change nothing (as in transformers);
  // keys the request sets itself are refused.
  const json with_kwargs =
      json::parse(PostOk(cli, "/apply-template",
                         {{"messages", messages},
                          {"reasoning_effort", "low"},
                          {"chat_template_kwargs", {{"enable_thinking", true}}}}));
  CHECK(with_kwargs == applied);
  ExpectError(cli, "/v1/chat/completions",
              json{{"messages", messages}, {"chat_template_kwargs", {{"tools", 1}}}}.dump(), 400,
              "chat_template_kwargs.tools");
  // The template's raise_exception is a 400 with its message and line.
  const json alternating = {
      {"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}}};
  for (const char* path : {"/v1/chat/completions", "/apply-template"}) {
    ExpectError(cli, path, alternating.dump(), 400, "messages");
    auto res = cli.Post(path, alternating.dump(), "application/json");
    REQUIRE(res);
    CHECK_THAT(res->body,
               Catch::Contains(
                   "chat template line 1: raise_exception: Conversation roles must alternate"));
  }
  cluster->reset();
  std::filesystem::remove(cfg.model);
}

TEST_CASE("http: the OpenAI surface clients use", "[cluster][http]") {
  std::unique_ptr<TestCluster> cluster = HttpCluster(2);
  httplib::Client cli = Client(*cluster);
  const std::string prompt = "The meaning of life is";
  auto post = [&](const std::string& path, const json& body) { return PostOk(cli, path, body); };

  // max_completion_tokens on both endpoints; it wins over max_tokens.
  json j = json::parse(post(
      "/v1/completions", {{"prompt", prompt}, {"max_completion_tokens", 5}, {"temperature", 0}}));
  CHECK(j["usage"]["completion_tokens"] == 5);
  CHECK(j["choices"][0]["text"] == ReferenceText(prompt, 5));
  j = json::parse(post(
      "/v1/completions",
      {{"prompt", prompt}, {"max_tokens", 3}, {"max_completion_tokens", 7}, {"temperature", 0}}));
  CHECK(j["usage"]["completion_tokens"] == 7);
  const json hello = {{{"role", "user"}, {"content", "Hello"}}};
  j = json::parse(post("/v1/chat/completions",
                       {{"messages", hello}, {"max_completion_tokens", 4}, {"temperature", 0}}));
  CHECK(j["choices"][0]["message"]["content"] == ReferenceText("user: Hello\nassistant:", 4));

  // Chat without a limit is not cut at 16 tokens: it ends at EOS or when the
  // context is full.
  j = json::parse(post("/v1/chat/completions", {{"messages", hello}, {"temperature", 0}}));
  const int completion = j["usage"]["completion_tokens"];
  if (j["choices"][0]["finish_reason"] == "length") {
    CHECK(completion + j["usage"]["prompt_tokens"].get<int>() == cluster->main().n_ctx());
  } else {
    CHECK(j["choices"][0]["finish_reason"] == "stop");
  }
  CHECK(j["choices"][0]["message"]["content"] ==
        ReferenceText("user: Hello\nassistant:", completion));

  // One model, by list and by id; `created` is a real time.
  auto res = cli.Get("/v1/models/tiny-mixtral-f16");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  j = json::parse(res->body);
  CHECK(j["id"] == "tiny-mixtral-f16");
  CHECK(j["object"] == "model");
  CHECK(j["created"].get<int64_t>() > 1600000000);
  res = cli.Get("/v1/models");
  REQUIRE(res);
  CHECK(json::parse(res->body)["data"][0]["created"] == j["created"]);
  res = cli.Get("/v1/models/gpt-4o");
  REQUIRE(res);
  CHECK(res->status == 404);
  CHECK(json::parse(res->body)["error"]["code"] == "model_not_found");
  CHECK(json::parse(res->body)["error"]["param"] == "model");

  // stream_options.include_usage: "usage": null on every chunk, then one chunk
  // with no choices and the usage; without it, no usage in the stream.
  for (bool include : {true, false}) {
    json body = {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"stream", true}};
    if (include) body["stream_options"] = {{"include_usage", true}};
    const std::vector<std::string> events = SseEvents(post("/v1/completions", body));
    REQUIRE(events.size() >= 3);
    CHECK(events.back() == "[DONE]");
    std::string text;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      const json e = json::parse(events[i]);
      INFO("include_usage " << include << " event " << i << ": " << events[i]);
      const bool last = i + 2 == events.size();
      if (include && last) {
        CHECK(e["choices"].empty());
        CHECK(e["usage"]["completion_tokens"] == 6);
        CHECK(e["usage"]["total_tokens"] == e["usage"]["prompt_tokens"].get<int>() + 6);
      } else {
        CHECK(e.contains("usage") == include);
        if (include) CHECK(e["usage"].is_null());
        text += e["choices"][0]["text"].get<std::string>();
      }
    }
    CHECK(text == ReferenceText(prompt, 6));
  }
  ExpectError(cli, "/v1/completions",
              json{{"prompt", prompt}, {"stream_options", {{"include_usage", true}}}}.dump(), 400,
              "stream_options");
  ExpectError(cli, "/v1/completions",
              json{{"prompt", prompt}, {"stream", true}, {"stream_options", {{"x", 1}}}}.dump(),
              400, "stream_options");
  ExpectError(cli, "/v1/completions",
              json{{"prompt", prompt}, {"max_completion_tokens", "many"}}.dump(), 400,
              "max_completion_tokens");

  // A parameter the server does not honour is a 400 naming it; one whose value
  // asks for nothing (no tools) is fine, and so are the sampling chain's
  // parameters and those accepted as the reference APIs accept them.
  ExpectError(cli, "/v1/completions", json{{"prompt", prompt}, {"frobnicate", 1}}.dump(), 400,
              "frobnicate");
  ExpectError(cli, "/v1/completions", json{{"prompt", prompt}, {"presence_penalty", 2.5}}.dump(),
              400, "presence_penalty");
  ExpectError(cli, "/v1/chat/completions",
              json{{"messages", hello}, {"modalities", {"text", "audio"}}}.dump(), 400,
              "modalities");
  ExpectError(cli, "/v1/completions", json{{"prompt", prompt}, {"best_of", 3}}.dump(), 400,
              "best_of");
  // response_format is honoured (tests/cluster/http_structured_test.cpp); a
  // kind it does not know is the 400 naming it.
  ExpectError(cli, "/v1/chat/completions",
              json{{"messages", hello}, {"response_format", {{"type", "json_yaml"}}}}.dump(), 400,
              "response_format.type");
  ExpectError(cli, "/v1/chat/completions", json{{"messages", hello}, {"n", 17}}.dump(), 400, "n");
  ExpectError(cli, "/v1/chat/completions", json{{"messages", hello}, {"echo", true}}.dump(), 400,
              "echo");
  post("/v1/completions", {{"prompt", prompt},
                           {"max_tokens", 2},
                           {"presence_penalty", 0.5},
                           {"frequency_penalty", 0.3},
                           {"repetition_penalty", 1.1},
                           {"min_p", 0.05},
                           {"typical_p", 0.95},
                           {"top_k", 40},
                           {"logit_bias", {{"5", -100}}},
                           {"stop_token_ids", {7}},
                           {"min_tokens", 1},
                           {"ignore_eos", true},
                           {"metadata", {{"team", "a"}}},
                           {"store", false},
                           {"service_tier", "auto"},
                           {"cache_prompt", true},
                           {"best_of", 1},
                           {"suffix", nullptr},
                           {"user", "someone"}});
  post("/v1/chat/completions", {{"messages", hello},
                                {"max_tokens", 2},
                                {"tools", json::array()},
                                {"tool_choice", "none"},
                                {"response_format", {{"type", "text"}}}});

  // A context overflow names the input: prompt or messages.
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    json body = {{"max_tokens", 1 << 20}};
    if (std::string(path) == "/v1/completions") {
      body["prompt"] = prompt;
    } else {
      body["messages"] = hello;
    }
    res = cli.Post(path, body.dump(), "application/json");
    REQUIRE(res);
    CHECK(res->status == 400);
    j = json::parse(res->body);
    CHECK(j["error"]["code"] == "context_length_exceeded");
    CHECK(j["error"]["param"] == (std::string(path) == "/v1/completions" ? "prompt" : "messages"));
  }
}

TEST_CASE("http: logprobs and echo are the single process's numbers", "[cluster][http]") {
  std::unique_ptr<TestCluster> cluster = HttpCluster(4);
  httplib::Client cli = Client(*cluster);
  static auto engine =
      ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  const std::string prompt = "The meaning of life is";
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = 8;
  req.logprobs = 3;
  const GenerateResult want = engine->Generate(req).value();
  REQUIRE(want.output_ids.size() == 8);
  auto post = [&](const std::string& path, const json& body) { return PostOk(cli, path, body); };
  const Tokenizer& tok = cluster->main().tokenizer();

  // Completions: token_logprobs and top_logprobs of every generated token.
  json j = json::parse(
      post("/v1/completions",
           {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}}));
  json lp = j["choices"][0]["logprobs"];
  REQUIRE(lp["tokens"].size() == 8);
  for (size_t i = 0; i < 8; ++i) {
    INFO("token " << i);
    CHECK(lp["tokens"][i] == tok.TokenToPiece(want.output_ids[i]));
    CHECK(lp["token_logprobs"][i].get<double>() == want.logprobs[i].target_logprob);
    REQUIRE(lp["top_logprobs"][i].size() == 3);
    // The most likely alternative is the greedy token itself.
    double best = -1e300;
    std::string best_token;
    for (const auto& [t, v] : lp["top_logprobs"][i].items()) {
      if (v.get<double>() > best) {
        best = v.get<double>();
        best_token = t;
      }
    }
    CHECK(best_token == tok.TokenToPiece(want.output_ids[i]));
    CHECK(best == want.logprobs[i].target_logprob);
  }
  CHECK(lp["text_offset"][0] == 0);

  // Streamed, the same numbers chunk by chunk.
  std::vector<double> streamed;
  for (const std::string& e : SseEvents(post("/v1/completions", {{"prompt", prompt},
                                                                 {"max_tokens", 8},
                                                                 {"temperature", 0},
                                                                 {"logprobs", 0},
                                                                 {"stream", true}}))) {
    if (e == "[DONE]") break;
    const json c = json::parse(e)["choices"][0]["logprobs"];
    if (c.is_null()) continue;
    for (const json& v : c["token_logprobs"]) streamed.push_back(v.get<double>());
  }
  REQUIRE(streamed.size() == 8);
  for (size_t i = 0; i < 8; ++i) CHECK(streamed[i] == want.logprobs[i].target_logprob);

  // Chat: logprobs.content with top_logprobs.
  j = json::parse(
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                    {"max_tokens", 5},
                                    {"temperature", 0},
                                    {"logprobs", true},
                                    {"top_logprobs", 2}}));
  const json content = j["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() == j["usage"]["completion_tokens"].get<size_t>());
  for (const json& c : content) {
    REQUIRE(c["top_logprobs"].size() == 2);
    CHECK(c["top_logprobs"][0]["token"] == c["token"]);
    CHECK(c["top_logprobs"][0]["logprob"] == c["logprob"]);
    CHECK(c["bytes"].size() == c["token"].get<std::string>().size());
  }

  // echo with max_tokens 0: the prompt's own logprobs, one per prompt token
  // (the first has none), as teacher forcing in one process gives them.
  j = json::parse(post("/v1/completions",
                       {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}}));
  CHECK(j["choices"][0]["text"] == prompt);
  lp = j["choices"][0]["logprobs"];
  const std::vector<int32_t> ids = tok.Encode(prompt).value();
  REQUIRE(lp["token_logprobs"].size() == ids.size());
  CHECK(j["usage"]["prompt_tokens"] == ids.size());
  CHECK(j["usage"]["completion_tokens"] == 0);
  CHECK(lp["token_logprobs"][0].is_null());
  const ScoreResult score = engine->Score(ids, {.first = 0, .top_n = 1}).value();
  for (size_t i = 1; i < ids.size(); ++i) {
    INFO("prompt token " << i);
    CHECK(lp["token_logprobs"][i].get<double>() == score.next_logprobs[i - 1]);
    CHECK(lp["top_logprobs"][i].size() == 1);
  }
  // The same request with the prompt as token ids gives the same numbers.
  json by_ids = json::parse(post(
      "/v1/completions", {{"prompt", ids}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}}));
  CHECK(by_ids["choices"][0]["logprobs"]["token_logprobs"] == lp["token_logprobs"]);
  CHECK(by_ids["usage"]["prompt_tokens"] == ids.size());
  // A batch of one prompt (what evaluation harnesses send): that prompt.
  json batch_of_one = json::parse(
      post("/v1/completions",
           {{"prompt", json::array({ids})}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}}));
  CHECK(batch_of_one["choices"][0]["logprobs"]["token_logprobs"] == lp["token_logprobs"]);
  ExpectError(cli, "/v1/completions", json{{"prompt", {1, 2, 1 << 30}}}.dump(), 400, "prompt");
  // Prompt + one token when the model's next token is end-of-sequence (these
  // ids, from an evaluation harness's request, end so): the end token is
  // listed with its score, so the harness finds the prompt's scores where it
  // expects them, and the text ends before it.
  const std::vector<int32_t> ends = {415, 703, 747, 413, 315, 436, 591, 337,  528,  424, 1975,
                                     334, 679, 970, 821, 308, 400, 539, 1531, 1319, 321, 1975};
  GenerateRequest until_eos;
  until_eos.prompt_ids = ends;
  until_eos.max_tokens = 1;
  until_eos.logprobs = 1;
  const GenerateResult eos_want = engine->Generate(until_eos).value();
  REQUIRE(eos_want.stop_reason == GenerateResult::StopReason::kEos);
  REQUIRE(eos_want.eos_logprob.has_value());
  j = json::parse(
      post("/v1/completions",
           {{"prompt", json::array({ends})}, {"max_tokens", 1}, {"echo", true}, {"logprobs", 1}}));
  lp = j["choices"][0]["logprobs"];
  REQUIRE(lp["token_logprobs"].size() == ends.size() + 1);
  CHECK(lp["tokens"].back() == tok.TokenToPiece(tok.eos_id()));
  CHECK(lp["token_logprobs"].back().get<double>() == eos_want.eos_logprob->target_logprob);
  CHECK(j["choices"][0]["finish_reason"] == "stop");
  CHECK(j["usage"]["completion_tokens"] == 0);
  // echo with generation: prompt, then the generated tokens.
  j = json::parse(post("/v1/completions", {{"prompt", prompt},
                                           {"max_tokens", 8},
                                           {"temperature", 0},
                                           {"echo", true},
                                           {"logprobs", 0}}));
  lp = j["choices"][0]["logprobs"];
  REQUIRE(lp["token_logprobs"].size() == ids.size() + 8);
  CHECK(j["choices"][0]["text"] == prompt + want.text);
  CHECK(lp["token_logprobs"][ids.size()].get<double>() == want.logprobs[0].target_logprob);

  ExpectError(cli, "/v1/completions", json{{"prompt", prompt}, {"logprobs", 21}}.dump(), 400,
              "logprobs");
  ExpectError(cli, "/v1/completions",
              json{{"prompt", prompt}, {"echo", true}, {"stream", true}}.dump(), 400, "echo");
  ExpectError(cli, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 0}}.dump(), 400,
              "max_tokens");
  ExpectError(
      cli, "/v1/chat/completions",
      json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"top_logprobs", 2}}.dump(), 400,
      "top_logprobs");
}

TEST_CASE("http: bad requests get OpenAI-style 4xx errors", "[cluster][http]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  httplib::Client cli = Client(**cluster);
  const std::string c = "/v1/completions";
  ExpectError(cli, c, "{not json", 400, "");
  ExpectError(cli, c, "[1, 2]", 400, "");
  ExpectError(cli, c, R"({"max_tokens": 4})", 400, "prompt");
  ExpectError(cli, c, R"({"prompt": 7})", 400, "prompt");
  ExpectError(cli, c, R"({"prompt": ""})", 400, "prompt");
  ExpectError(cli, c, R"({"prompt": ["a", "b"]})", 400, "prompt");  // one prompt per request
  ExpectError(cli, c, R"({"prompt": [[1, 2], [3]]})", 400, "prompt");
  ExpectError(cli, c, R"({"prompt": [[]]})", 400, "prompt");
  ExpectError(cli, c, R"({"prompt": "hi", "max_tokens": "many"})", 400, "max_tokens");
  ExpectError(cli, c, R"({"prompt": "hi", "max_tokens": 0})", 400, "max_tokens");
  ExpectError(cli, c, R"({"prompt": "hi", "max_tokens": 100000})", 400, "context_length_exceeded");
  ExpectError(cli, c, R"({"prompt": ")" + std::string(5000, 'a') + " b" + R"("})", 400,
              "context_length_exceeded");
  ExpectError(cli, c, R"({"prompt": "hi", "temperature": "hot"})", 400, "temperature");
  ExpectError(cli, c, R"({"prompt": "hi", "temperature": 7})", 400, "temperature");
  ExpectError(cli, c, R"({"prompt": "hi", "top_p": 0})", 400, "top_p");
  ExpectError(cli, c, R"({"prompt": "hi", "stop": [1]})", 400, "stop");
  ExpectError(cli, c, R"({"prompt": "hi", "stop": ["a","b","c","d","e"]})", 400, "stop");
  ExpectError(cli, c, R"({"prompt": "hi", "stream": "yes"})", 400, "stream");
  ExpectError(cli, c, R"({"prompt": "hi", "n": 17})", 400, "n");
  ExpectError(cli, c, R"({"prompt": "hi", "model": "gpt-4"})", 404, "model_not_found");
  const std::string chat = "/v1/chat/completions";
  ExpectError(cli, chat, R"({"messages": "hi"})", 400, "messages");
  ExpectError(cli, chat, R"({"messages": []})", 400, "messages");
  ExpectError(cli, chat, R"({"messages": [{"role": "user"}]})", 400, "messages[0]");
  ExpectError(cli, chat, R"({"messages": [{"role": "wizard", "content": "x"}]})", 400,
              "messages[0].role");
  ExpectError(cli, "/v1/embeddings", "{}", 404, "");
  // Not UTF-8.
  ExpectError(cli, c, "{\"prompt\": \"caf\xc3\"}", 400, "");
  // After all that, the node still serves.
  auto res = cli.Post(c, R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  res = cli.Get("/metrics");
  REQUIRE(res);
  CHECK(res->body.find("odmoe_requests_total{api=\"http\",outcome=\"invalid\"}") !=
        std::string::npos);
}

// Each request field is checked in one place (engine/request_fields.h): the
// HTTP API and the gRPC service refuse the same bad value with the same
// message (a 400 naming the field; INVALID_ARGUMENT), and accept the edges.
TEST_CASE("http and grpc: one verdict for one bad request field", "[cluster][http]") {
  std::unique_ptr<TestCluster> cluster = HttpCluster(2, PredictionMode::kNone);
  httplib::Client cli = Client(*cluster);
  struct Case {
    const char* field;
    double value;
    const char* message;  // empty: accepted
  };
  for (const Case& c : {Case{"temperature", 7, "temperature: must be at most 2"},
                        Case{"temperature", 2.5, "temperature: must be at most 2"},
                        Case{"temperature", -0.5, "temperature: must be at least 0"},
                        Case{"top_p", 1.5, "top_p: must be at most 1"},
                        Case{"max_tokens", 16777217, "max_tokens: must be at most 16777216"},
                        Case{"temperature", 2, ""}, Case{"top_p", 1, ""}}) {
    INFO(c.field << " = " << c.value);
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"seed", 3}};
    if (c.value == static_cast<int64_t>(c.value)) {
      body[c.field] = static_cast<int64_t>(c.value);  // an integer in JSON, as clients send it
    } else {
      body[c.field] = c.value;
    }
    auto res = cli.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(res);
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_tokens(2);
    req.set_seed(3);
    if (std::string(c.field) == "temperature") req.set_temperature(static_cast<float>(c.value));
    if (std::string(c.field) == "top_p") req.set_top_p(static_cast<float>(c.value));
    if (std::string(c.field) == "max_tokens") req.set_max_tokens(static_cast<uint32_t>(c.value));
    const absl::StatusOr<v1::GenerateStats> grpc =
        GenerateOnMain(cluster->main_address(), req, nullptr);
    if (std::string(c.message).empty()) {
      CHECK(res->status == 200);
      CHECK(grpc.ok());
      continue;
    }
    CHECK(res->status == 400);
    const json err = json::parse(res->body)["error"];
    CHECK(err["message"] == c.message);
    CHECK(err["param"] == c.field);
    CHECK(absl::IsInvalidArgument(grpc.status()));
    // The client names the node before the node's message.
    CHECK(absl::EndsWith(grpc.status().message(), std::string(": ") + c.message));
  }
  // The prompt's checks too: ids outside the vocabulary, and the context.
  const int n_vocab = cluster->main().tokenizer().n_vocab();
  auto res = cli.Post("/v1/completions", json{{"prompt", {1, n_vocab}}}.dump(), "application/json");
  REQUIRE(res);
  CHECK(res->status == 400);
  const std::string vocab_message = json::parse(res->body)["error"]["message"];
  v1::GenerateRequest ids;
  ids.add_prompt_ids(1);
  ids.add_prompt_ids(n_vocab);
  ids.set_max_tokens(2);
  absl::StatusOr<v1::GenerateStats> grpc = GenerateOnMain(cluster->main_address(), ids, nullptr);
  CHECK(absl::IsInvalidArgument(grpc.status()));
  CHECK(absl::EndsWith(grpc.status().message(), ": " + vocab_message));
  res = cli.Post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 100000}}.dump(),
                 "application/json");
  REQUIRE(res);
  CHECK(res->status == 400);
  ids.set_max_tokens(100000);
  ids.set_prompt_ids(1, 2);
  grpc = GenerateOnMain(cluster->main_address(), ids, nullptr);
  CHECK(absl::IsOutOfRange(grpc.status()));
}

TEST_CASE("http: API key, queue limit, disconnect cancels", "[cluster][http][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  cfg.api_key = "sesame";
  cfg.max_queue = 0;  // only the running request; the next one gets 429
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  httplib::Client cli = Client(**cluster);
  const std::string body = R"({"prompt": "hi", "max_tokens": 2})";
  auto res = cli.Post("/v1/completions", body, "application/json");
  REQUIRE(res);
  CHECK(res->status == 401);
  CHECK(cli.Get("/metrics")->status == 401);
  CHECK(cli.Get("/health")->status == 200);  // health stays open for probes
  httplib::Headers auth = {{"Authorization", "Bearer sesame"}};
  res = cli.Post("/v1/completions", auth, body, "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);

  // A long streamed request holds the only turn: another one is refused.
  std::atomic<int> events{0};
  std::atomic<bool> hang_up{false};
  std::thread streamer([&] {
    httplib::Client s("127.0.0.1", (*cluster)->main().http_port());
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = auth;
    req.set_header("Content-Type", "application/json");
    req.body = R"({"prompt": "Once", "max_tokens": 400, "stream": true})";
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      ++events;
      return !hang_up.load();  // false: the client disconnects
    };
    s.send(req);
  });
  for (int i = 0; i < 500 && events.load() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(events.load() >= 3);
  res = cli.Post("/v1/completions", auth, body, "application/json");
  REQUIRE(res);
  CHECK(res->status == 429);
  CHECK(json::parse(res->body)["error"]["code"] == "queue_full");
  // Hanging up cancels the streamed request within a token; the turn frees.
  hang_up = true;
  streamer.join();
  int status = 0;
  for (int i = 0; i < 300 && status != 200; ++i) {
    res = cli.Post("/v1/completions", auth, body, "application/json");
    status = res ? res->status : 0;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(status == 200);
  res = cli.Get("/metrics", auth);
  REQUIRE(res);
  CHECK(res->body.find("odmoe_requests_total{api=\"http\",outcome=\"cancelled\"} 1") !=
        std::string::npos);
  CHECK(res->body.find("odmoe_requests_total{api=\"http\",outcome=\"busy\"}") != std::string::npos);
}

TEST_CASE("http: concurrent requests are all served, in order, none lost",
          "[cluster][http][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.http = true;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const std::vector<std::string> prompts = {
      "The sea",       "Once upon a time", "The meaning of life is",
      "A computer is", "In the beginning", "Hello"};
  std::vector<std::string> got(prompts.size());
  std::vector<int> status(prompts.size(), 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client cli = Client(**cluster);
      auto res = cli.Post("/v1/completions",
                          json{{"prompt", prompts[i]},
                               {"max_tokens", 10},
                               {"temperature", 0},
                               {"stream", i % 2 == 1}}
                              .dump(),
                          "application/json");
      if (!res) return;
      status[i] = res->status;
      if (i % 2 == 0) {
        got[i] = json::parse(res->body)["choices"][0]["text"];
      } else {
        for (const std::string& e : SseEvents(res->body)) {
          if (e != "[DONE]") got[i] += json::parse(e)["choices"][0]["text"].get<std::string>();
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO(prompts[i]);
    CHECK(status[i] == 200);
    CHECK(got[i] == ReferenceText(prompts[i], 10));
  }
}

TEST_CASE("http: a non-streaming client that hangs up cancels its request",
          "[cluster][http][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  std::thread client([&] {
    httplib::Client cli("127.0.0.1", (*cluster)->main().http_port());
    cli.set_read_timeout(std::chrono::milliseconds(300));  // gives up, closes the socket
    cli.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 480, "temperature": 0})",
             "application/json");
  });
  client.join();
  httplib::Client cli = Client(**cluster);
  std::string metrics;
  for (int i = 0; i < 300; ++i) {
    metrics = cli.Get("/metrics")->body;
    if (metrics.find("outcome=\"cancelled\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(metrics.find("odmoe_requests_total{api=\"http\",outcome=\"cancelled\"} 1") !=
        std::string::npos);
  // Had it run to its 480 tokens, the outcome would be "ok".
  CHECK(metrics.find("outcome=\"ok\"") == std::string::npos);
}

TEST_CASE("http: health is 503 with a reason until the cluster is complete", "[cluster][http]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  Topology t = MakeTopology(cfg);
  // Workers that are not there (yet): the main node keeps connecting.
  t.workers[0].address = "127.0.0.1:1";
  t.workers[1].address = "127.0.0.1:1";
  auto main = MainNode::Create(t, "main");
  REQUIRE(main.ok());
  REQUIRE((*main)->Start().ok());
  httplib::Client cli("127.0.0.1", (*main)->http_port());
  auto res = cli.Get("/health");
  REQUIRE(res);
  CHECK(res->status == 503);
  json j = json::parse(res->body);
  CHECK(j["status"] == "loading");
  CHECK(j["reason"].get<std::string>().find("connecting") != std::string::npos);
  res = cli.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  REQUIRE(res);
  CHECK(res->status == 503);
  (*main)->Shutdown();
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("http: concurrent completions are generated together, each the single process's",
          "[cluster][http][batching][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.http = true;
  cfg.max_running = 4;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const std::vector<std::string> prompts = {"Once upon a time", "The sea", "She said",
                                            "A long time ago"};
  std::vector<std::string> texts(prompts.size());
  std::vector<int> statuses(prompts.size(), 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client cli = Client(**cluster);
      const bool stream = i == 1;  // one of them streams
      auto res = cli.Post(
          "/v1/completions",
          json{{"prompt", prompts[i]}, {"max_tokens", 24}, {"temperature", 0}, {"stream", stream}}
              .dump(),
          "application/json");
      if (!res) return;
      statuses[i] = res->status;
      if (!stream) {
        texts[i] = json::parse(res->body)["choices"][0]["text"].get<std::string>();
        return;
      }
      for (const std::string& e : SseEvents(res->body)) {
        if (e == "[DONE]") break;
        texts[i] += json::parse(e)["choices"][0]["text"].get<std::string>();
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO(prompts[i]);
    CHECK(statuses[i] == 200);
    CHECK(texts[i] == ReferenceText(prompts[i], 24));
  }
  CHECK((*cluster)->main().engine().shared_iterations() > 0);
  httplib::Client cli = Client(**cluster);
  auto metrics = cli.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("odmoe_batched_iterations_total ") != std::string::npos);
  CHECK(metrics->body.find("odmoe_batched_iterations_total 0\n") == std::string::npos);
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("http: a speculative completion reports its drafts, and /metrics counts them",
          "[cluster][http][speculative]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.http = true;
  cfg.draft_tokens = 4;
  cfg.draft_wait_us = 2'000'000;  // every iteration verifies its drafts
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  httplib::Client cli = Client(**cluster);
  auto res =
      cli.Post("/v1/completions",
               json{{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}}.dump(),
               "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const json body = json::parse(res->body);
  CHECK(body["choices"][0]["text"].get<std::string>() == ReferenceText("Once upon a time", 24));
  const json& stats = body["odmoe"];
  CHECK(stats["draft_tokens"].get<int>() == 4);
  CHECK(stats["draft_acceptance"].get<double>() > 0.5);
  CHECK(stats["tokens_per_iteration"].get<double>() > 1.5);
  auto metrics = cli.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("odmoe_draft_tokens_total{outcome=\"accepted\"} ") != std::string::npos);
  CHECK(metrics->body.find("odmoe_draft_tokens_total{outcome=\"accepted\"} 0\n") ==
        std::string::npos);
  CHECK(metrics->body.find("odmoe_draft_acceptance 0.000000") == std::string::npos);
  CHECK(metrics->body.find("odmoe_decode_iteration_tokens_total ") != std::string::npos);
}

}  // namespace odmoe::test

namespace odmoe::test {

// The sampling chain (engine/sampler.h) runs in the main node's Sequence as
// in the single process: the same tokens for the same request, greedy with
// penalties, a ban and min_tokens whether or not the shadow drafts (a row
// processed without the drafts before it in the history would differ), and
// seeded sampling with the cuts.
TEST_CASE("http: the sampling chain is the single process's with drafts or without",
          "[cluster][http][speculative]") {
  static auto engine =
      ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  const std::string prompt = "Once upon a time";
  GenerateRequest plain;
  plain.prompt = prompt;
  plain.max_tokens = 24;
  const GenerateResult unchanged = engine->Generate(plain).value();
  REQUIRE_FALSE(unchanged.output_ids.empty());
  const int32_t banned = unchanged.output_ids.front();

  GenerateRequest greedy = plain;
  greedy.sampling.presence_penalty = 1.5f;
  greedy.sampling.frequency_penalty = 0.5f;
  greedy.sampling.repetition_penalty = 1.3f;
  greedy.sampling.repeat_last_n = -1;
  greedy.sampling.logit_bias = {{banned, kLogitBiasBan}};
  greedy.min_tokens = 4;
  const GenerateResult want = engine->Generate(greedy).value();
  CHECK(want.text != unchanged.text);
  const json body = {{"prompt", prompt},         {"max_tokens", 24},
                     {"temperature", 0},         {"presence_penalty", 1.5},
                     {"frequency_penalty", 0.5}, {"repetition_penalty", 1.3},
                     {"repeat_last_n", -1},      {"logit_bias", {{std::to_string(banned), -100}}},
                     {"min_tokens", 4}};
  for (const int drafts : {0, 4}) {
    INFO("draft tokens " << drafts);
    ClusterConfig cfg;
    cfg.workers = 4;
    cfg.http = true;
    cfg.draft_tokens = drafts;
    cfg.draft_wait_us = drafts > 0 ? 2'000'000 : 0;
    auto cluster = TestCluster::Start(cfg);
    REQUIRE(cluster.ok());
    httplib::Client cli = Client(**cluster);
    const json j = json::parse(PostOk(cli, "/v1/completions", body));
    CHECK(j["choices"][0]["text"].get<std::string>() == want.text);
    if (drafts > 0) {
      // Some drafts were taken: rows after them were processed with them.
      CHECK(j["odmoe"]["draft_tokens"].get<int>() == drafts);
      CHECK(j["odmoe"]["draft_acceptance"].get<double>() > 0.1);
      continue;
    }
    // Seeded sampling with every cut: the same random stream, the same tokens.
    GenerateRequest sampled = greedy;
    sampled.sampling.temperature = 0.9f;
    sampled.sampling.seed = 11;
    sampled.sampling.top_k = 50;
    sampled.sampling.top_p = 0.95f;
    sampled.sampling.min_p = 0.02f;
    sampled.sampling.typical_p = 0.98f;
    json seeded = body;
    seeded.update({{"temperature", 0.9},
                   {"seed", 11},
                   {"top_k", 50},
                   {"top_p", 0.95},
                   {"min_p", 0.02},
                   {"typical_p", 0.98}});
    const json s = json::parse(PostOk(cli, "/v1/completions", seeded));
    CHECK(s["choices"][0]["text"].get<std::string>() == engine->Generate(sampled).value().text);
  }
}

}  // namespace odmoe::test
