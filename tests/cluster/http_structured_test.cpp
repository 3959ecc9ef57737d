// Structured output and tool calls through the HTTP API of an in-process
// cluster: the grammar a request asks for (response_format, json_schema,
// grammar, a required tool call) holds for every sampled reply, and the
// cluster's tokens are the single process's with the same grammar.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "client_python.h"
#include "engine/reference_engine.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "http_cluster.h"
#include "httplib.h"
#include "main_node/output_grammar.h"
#include "nlohmann/json.hpp"
#include "shell.h"
#include "sse_events.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;

const char* const kWeatherSchema = R"({"type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12},
                   "celsius": {"type": "integer", "minimum": -60, "maximum": 60},
                   "sunny": {"type": "boolean"}},
    "required": ["city", "celsius", "sunny"], "additionalProperties": false})";

// Whether `text` is a JSON object of kWeatherSchema's shape (the checks a
// validator makes for this schema, written out).
bool IsWeather(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || j.size() != 3) return false;
  if (!j.contains("city") || !j["city"].is_string()) return false;
  if (!j.contains("celsius") || !j["celsius"].is_number_integer()) return false;
  if (!j.contains("sunny") || !j["sunny"].is_boolean()) return false;
  const int64_t c = j["celsius"].get<int64_t>();
  // maxLength counts code points.
  size_t code_points = 0;
  for (unsigned char ch : j["city"].get<std::string>()) code_points += (ch & 0xC0) != 0x80;
  return c >= -60 && c <= 60 && code_points <= 12;
}

// Room for the tools the fallback template lists and a reply whose JSON the
// tiny model pads with whitespace.
ClusterConfig StructuredConfig(int draft_tokens = 0) {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.context = 2048;
  cfg.draft_tokens = draft_tokens;
  return cfg;
}

// POSTs the body's text (an ordered_json's dump keeps its key order), requires 200.
json Post(httplib::Client& cli, const std::string& path, const std::string& body) {
  auto res = cli.Post(path, body, "application/json");
  REQUIRE(res);
  INFO(body << " -> " << res->body);
  REQUIRE(res->status == 200);
  return json::parse(res->body);
}
json Post(httplib::Client& cli, const std::string& path, const json& body) {
  return Post(cli, path, body.dump());
}

TEST_CASE("structured output: every sampled reply of the tiny model validates against its schema",
          "[engine][grammar]") {
  // The single process, sampling at temperature 1 over many seeds: the
  // grammar, not the model, makes each reply valid.
  ReferenceEngine& engine = TinyReference();
  const nlohmann::ordered_json body = {
      {"response_format",
       {{"type", "json_schema"},
        {"json_schema",
         {{"name", "w"},
          {"strict", true},
          {"schema", nlohmann::ordered_json::parse(kWeatherSchema)}}}}}};
  absl::StatusOr<std::string> grammar = OutputGrammar(body, ToolRequest{}, ToolCallSyntax::kHermes);
  REQUIRE(grammar.ok());
  int complete = 0;
  json finished = json::array();  // the replies that ended on their own
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    GenerateRequest req;
    req.prompt = "Weather report:";
    req.max_tokens = 360;
    req.sampling.temperature = 1.0f;
    req.sampling.seed = seed;
    req.grammar = *grammar;
    absl::StatusOr<GenerateResult> r = engine.Generate(req);
    REQUIRE(r.ok());
    INFO("seed " << seed << ": " << r->text);
    if (r->stop_reason == GenerateResult::StopReason::kEos) {
      CHECK(IsWeather(r->text));
      finished.push_back(r->text);
      ++complete;
    } else {
      // Cut by max_tokens: a prefix of a valid reply, never anything else.
      CHECK(r->stop_reason == GenerateResult::StopReason::kMaxTokens);
    }
  }
  // The bounds keep replies short: nearly all finish.
  CHECK(complete >= 180);

  // The reference validator agrees (Python's jsonschema, from the client venv).
  const std::string python = ClientPython();
  if (Sh(python + " -c 'import jsonschema' 2>&1").exit_code != 0) {
    WARN("jsonschema not installed (scripts/client_venv.sh): the reference validation skipped");
    return;
  }
  const std::filesystem::path dir = std::filesystem::path(BinaryPath("test-cache")) / "structured";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "schema.json") << kWeatherSchema;
  std::ofstream(dir / "replies.json") << finished.dump();
  const ShellResult v =
      Sh(python + " " + SourcePath("tests/clients/validate_json.py") + " " +
         (dir / "schema.json").string() + " " + (dir / "replies.json").string() + " 2>&1");
  INFO(v.output);
  CHECK(v.exit_code == 0);
  CHECK(v.output.find(std::to_string(complete) + " valid of " + std::to_string(complete)) !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("http: response_format and tool_choice are the single process's tokens under a grammar",
          "[cluster][http][grammar]") {
  std::unique_ptr<TestCluster> cluster = StartHttpCluster(StructuredConfig());
  httplib::Client cli = HttpClientOf(*cluster);
  ReferenceEngine& engine = TinyReference();

  // A completion with a json_schema (llama-server's field), sampled: the
  // cluster's text is the single process's with the same grammar and seed.
  // (ordered_json: the request keeps the schema's property order.)
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(kWeatherSchema);
  for (uint64_t seed : {3u, 11u}) {
    nlohmann::ordered_json body = {
        {"prompt", "Weather report:"}, {"max_tokens", 360}, {"temperature", 0.9}, {"seed", seed}};
    body["json_schema"] = schema;
    const json j = Post(cli, "/v1/completions", body.dump());
    GenerateRequest req;
    req.prompt = "Weather report:";
    req.max_tokens = 360;
    req.sampling.temperature = 0.9f;
    req.sampling.seed = seed;
    absl::StatusOr<std::string> g = OutputGrammar(
        nlohmann::ordered_json{{"json_schema", nlohmann::ordered_json::parse(kWeatherSchema)}},
        ToolRequest{}, ToolCallSyntax::kHermes);
    REQUIRE(g.ok());
    req.grammar = *g;
    absl::StatusOr<GenerateResult> r = engine.Generate(req);
    REQUIRE(r.ok());
    CHECK(j["choices"][0]["text"] == r->text);
    if (j["choices"][0]["finish_reason"] == "stop") CHECK(IsWeather(r->text));
  }

  // Chat with response_format json_schema: valid JSON content.
  nlohmann::ordered_json chat_body = {
      {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
      {"max_tokens", 360},
      {"temperature", 0}};
  chat_body["response_format"] = {{"type", "json_schema"},
                                  {"json_schema", {{"name", "w"}, {"schema", schema}}}};
  const json chat = Post(cli, "/v1/chat/completions", chat_body.dump());
  CHECK(chat["choices"][0]["finish_reason"] == "stop");
  CHECK(IsWeather(chat["choices"][0]["message"]["content"].get<std::string>()));

  // tool_choice required: a call in the model's syntax (the tiny model has no
  // template: Hermes), parsed into message.tool_calls.
  const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"]}}}])");
  const json ask = {{"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                    {"max_tokens", 360},
                    {"temperature", 0},
                    {"tools", tools},
                    {"tool_choice", "required"},
                    {"parallel_tool_calls", false}};
  const json called = Post(cli, "/v1/chat/completions", ask);
  const json& message = called["choices"][0]["message"];
  INFO(called.dump());
  CHECK(called["choices"][0]["finish_reason"] == "tool_calls");
  CHECK(message["content"].is_null());
  REQUIRE(message["tool_calls"].size() == 1);
  const json& call = message["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK(call["id"].get<std::string>().rfind("call_", 0) == 0);
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  if (call["function"]["name"] == "get_weather") {
    CHECK(args["city"].is_string());
  } else {
    CHECK(call["function"]["name"] == "get_time");
    CHECK((args["zone"] == "UTC" || args["zone"] == "CET"));
  }

  // Streamed: the deltas add up to the same call.
  json streamed_ask = ask;
  streamed_ask["stream"] = true;
  auto res = cli.Post("/v1/chat/completions", streamed_ask.dump(), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  std::string name, arguments, finish;
  for (const std::string& data : SseEvents(res->body)) {
    if (data == "[DONE]") break;
    const json e = json::parse(data);
    const json& choice = e["choices"][0];
    if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    const json& d = choice["delta"]["tool_calls"][0];
    CHECK(d["index"] == 0);
    if (d["function"].contains("name")) name += d["function"]["name"].get<std::string>();
    if (d["function"].contains("arguments")) {
      arguments += d["function"]["arguments"].get<std::string>();
    }
  }
  CHECK(finish == "tool_calls");
  CHECK(name == call["function"]["name"]);
  CHECK(arguments == call["function"]["arguments"]);

  // A named function is the one called.
  json named = ask;
  named["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  const json t = Post(cli, "/v1/chat/completions", named);
  CHECK(t["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_time");

  // Errors are 400s naming the field.
  auto bad = cli.Post("/v1/chat/completions",
                      json{{"messages", {{{"role", "user"}, {"content", "x"}}}},
                           {"response_format", {{"type", "yaml"}}}}
                          .dump(),
                      "application/json");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(json::parse(bad->body)["error"]["param"] == "response_format.type");
  bad = cli.Post("/v1/completions", json{{"prompt", "x"}, {"grammar", "root ::= missing"}}.dump(),
                 "application/json");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(json::parse(bad->body)["error"]["param"] == "grammar");
}

TEST_CASE("http: a grammar with speculative decoding keeps greedy tokens and valid sampled replies",
          "[cluster][http][grammar][speculative]") {
  // The shadow drafts without knowing the grammar; each row is masked before
  // the rejection rule, so drafts the grammar forbids are refused. Greedy:
  // the single process's tokens exactly. Sampled: the rejection rule keeps
  // the distribution, not the random stream's tokens (how many drafts an
  // iteration gets depends on timing), so those replies are checked against
  // the schema; the distribution itself is tests/engine/
  // sampling_speculative_test.cpp's (a mask among its setups).
  std::unique_ptr<TestCluster> cluster = StartHttpCluster(StructuredConfig(/*draft_tokens=*/3));
  httplib::Client cli = HttpClientOf(*cluster);
  ReferenceEngine& engine = TinyReference();
  absl::StatusOr<std::string> grammar = OutputGrammar(
      nlohmann::ordered_json{{"json_schema", nlohmann::ordered_json::parse(kWeatherSchema)}},
      ToolRequest{}, ToolCallSyntax::kHermes);
  REQUIRE(grammar.ok());
  int drafts = 0;
  auto ask = [&](const std::string& prompt, double temperature, int seed) {
    nlohmann::ordered_json body = {
        {"prompt", prompt}, {"max_tokens", 360}, {"temperature", temperature}, {"seed", seed}};
    body["json_schema"] = nlohmann::ordered_json::parse(kWeatherSchema);
    const json j = Post(cli, "/v1/completions", body.dump());
    drafts += j["odmoe"]["draft_tokens"].get<int>();
    return j;
  };
  for (const char* prompt : {"Weather report:", "The forecast for Oslo"}) {
    const json j = ask(prompt, 0.0, 0);
    GenerateRequest req;
    req.prompt = prompt;
    req.max_tokens = 360;
    req.grammar = *grammar;
    absl::StatusOr<GenerateResult> r = engine.Generate(req);
    REQUIRE(r.ok());
    INFO(prompt);
    CHECK(j["choices"][0]["text"] == r->text);
  }
  for (int seed : {3, 7, 11}) {
    const json j = ask("Weather report:", 0.9, seed);
    INFO("seed " << seed << ": " << j.dump());
    if (j["choices"][0]["finish_reason"] == "stop") {
      CHECK(IsWeather(j["choices"][0]["text"].get<std::string>()));
    }
  }
  CHECK(drafts > 0);  // the shadow did draft
}

TEST_CASE("http: a required call on a template that opened <think> is a call and not reasoning",
          "[cluster][http][grammar]") {
  // The template ends the prompt inside a think block (as DeepSeek-R1's and
  // GLM's do); under the call's grammar the reply is the call from its first
  // byte, so it must not be read as reasoning.
  const std::string model = (std::filesystem::path(BinaryPath("test-cache")) /
                             ("think_template_" + std::to_string(getpid()) + ".gguf"))
                                .string();
  {
    auto f = GgufFile::Open(SourcePath("models/tiny-mixtral-f16.gguf"));
    REQUIRE(f.ok());
    GgufWriter w;
    for (const auto& [key, value] : (*f)->metadata()) w.SetMetadata(key, value);
    w.SetMetadata("tokenizer.chat_template",
                  GgufValue::String("{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
                                    "{% endfor %}assistant: <think>\n{# </think> #}"));
    for (const TensorView& t : (*f)->tensors()) REQUIRE(w.AddTensorView(t).ok());
    REQUIRE(w.WriteFile(model).ok());
  }
  ClusterConfig cfg = StructuredConfig();
  cfg.model = model;
  std::unique_ptr<TestCluster> cluster = StartHttpCluster(cfg);
  httplib::Client cli = HttpClientOf(*cluster);
  const json called = Post(cli, "/v1/chat/completions",
                           json{{"messages", {{{"role", "user"}, {"content", "Time?"}}}},
                                {"max_tokens", 200},
                                {"temperature", 0},
                                {"tools", json::parse(R"([{"type": "function", "function":
                                    {"name": "get_time", "parameters": {"type": "object",
                                    "properties": {"zone": {"enum": ["UTC"]}},
                                    "required": ["zone"]}}}])")},
                                {"tool_choice", "required"}});
  INFO(called.dump());
  CHECK(called["choices"][0]["finish_reason"] == "tool_calls");
  REQUIRE(called["choices"][0]["message"]["tool_calls"].size() >= 1);
  CHECK(called["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_time");
  CHECK_FALSE(called["choices"][0]["message"].contains("reasoning_content"));
  cluster.reset();
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace odmoe::test
