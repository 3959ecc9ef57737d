#include "main_node/http_request.h"

#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/scoring.h"
#include "main_node/http_reply.h"
#include "util/status_macros.h"

namespace odmoe {

using json = nlohmann::json;

absl::Status Bad(const std::string& param, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(param, ": ", what));
}

absl::StatusOr<json> ParseRequestJson(std::string_view text, size_t max_values) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Bad("body", absl::StrCat("a NUL byte at offset ", nul,
                                    " (JSON text has none; nothing may follow the value)"));
  }
  // Keys seen in each object being parsed (innermost last); the first key
  // named twice in one object.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  struct TooManyValues {};
  size_t values = 0;
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::value || event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        ++values > max_values) {
      throw TooManyValues{};
    }
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && !duplicate) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  json body;
  // nlohmann's parser throws; its message quotes the token it read last
  // (unbounded input): only the position is kept.
  try {
    body = json::parse(text.begin(), text.end(), check);
  } catch (const json::parse_error& e) {
    return Bad("body", absl::StrCat("not valid JSON (at byte ", e.byte, ")"));
  } catch (const json::out_of_range&) {  // 1e999: a number no double holds
    return Bad("body", "a number is out of range (larger than a double holds)");
  } catch (const json::exception&) {
    return Bad("body", "not valid JSON");
  } catch (const TooManyValues&) {
    return Bad("body", absl::StrCat("more than ", max_values,
                                    " JSON values (a prompt of token ids is at most the "
                                    "context's length)"));
  }
  if (duplicate) {
    return Bad("body", absl::StrCat("duplicate key '", ClipForMessage(*duplicate),
                                    "' (each key at most once per object)"));
  }
  if (!body.is_object()) return Bad("body", "expected a JSON object");
  return body;
}

namespace {

// A request field's JSON value (request_fields.h), checked against its type
// and bounds, stored into `g`; `key` is the name the client used.
absl::Status ReadField(const RequestField& f, const json& v, std::string_view key,
                       GenerateRequest* g) {
  switch (f.type) {
    case RequestFieldType::kBool:
      if (!v.is_boolean()) return RequestFieldTypeError(f, key);
      return SetRequestField(f, v.get<bool>() ? 1 : 0, g, key);
    case RequestFieldType::kUInt64:
      // Any 64-bit integer, as the reference API takes a seed; a negative one
      // as its two's complement.
      if (!v.is_number_integer()) return RequestFieldTypeError(f, key);
      SetRequestFieldBits(
          f, v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>()),
          g);
      return absl::OkStatus();
    case RequestFieldType::kInt:
      // 1e18 and 2.5 are JSON numbers with a fraction or exponent: not integers.
      if (!v.is_number_integer()) return RequestFieldTypeError(f, key);
      return SetRequestField(f, v.get<double>(), g, key);
    case RequestFieldType::kFloat:
      if (!v.is_number()) return RequestFieldTypeError(f, key);
      return SetRequestField(f, v.get<double>(), g, key);
  }
  return absl::OkStatus();
}

// The request field read under `key` when the body has it (null: not given).
absl::Status ReadFieldIfGiven(const json& body, const std::string& key, const RequestField& f,
                              GenerateRequest* g) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  return ReadField(f, *it, key, g);
}

}  // namespace

// Every parameter a request names is either one this server honours (the
// output's form: grammar, json_schema, response_format and a chat's tools,
// output_grammar.h), one
// accepted as the reference APIs accept it where it changes nothing here
// (metadata, store, service_tier, modalities ["text"], cache_prompt), or one
// whose value asks for nothing (no tools, best_of 1, ...): anything else is
// a 400 naming it, never silently ignored. null means "not given".
absl::Status CheckParameters(const json& body, bool chat) {
  // Besides the request fields offered by name (request_fields.h).
  static const std::set<std::string> kCommon = {"model", "max_tokens", "max_completion_tokens",
                                                "n",     "stream",     "stream_options",
                                                "stop",  "logprobs",   "user"};
  // The sampling chain's lists and llama-server's alias (ParseTokenLists,
  // ParseCommon), and those accepted only (CheckAcceptedOnly).
  static const std::set<std::string> kSampling = {"logit_bias", "stop_token_ids", "n_predict"};
  static const std::set<std::string> kAccepted = {"metadata", "store", "service_tier", "modalities",
                                                  "cache_prompt"};
  // The output's form, for both endpoints (output_grammar.h).
  static const std::set<std::string> kForm = {"grammar", "json_schema", "response_format"};
  static const std::set<std::string> kCompletions = {"prompt", "echo"};
  static const std::set<std::string> kChat = {
      "messages",    "top_logprobs",        "reasoning_effort", "chat_template_kwargs", "tools",
      "tool_choice", "parallel_tool_calls", "documents",        "add_generation_prompt"};
  for (const auto& [key, value] : body.items()) {
    if (value.is_null() || kCommon.count(key) || kSampling.count(key) || kAccepted.count(key) ||
        kForm.count(key) || (chat ? kChat : kCompletions).count(key)) {
      continue;
    }
    if (const RequestField* f = FindRequestField(key); f && (f->offered & kRequestFieldHttp)) {
      continue;
    }
    const bool neutral =
        (!chat && key == "best_of" && value.is_number_integer() && value.get<int64_t>() == 1) ||
        (!chat && key == "suffix" && value.is_string() && value.get<std::string>().empty()) ||
        (chat && key == "functions" && value.is_array() && value.empty());
    if (!neutral)
      return Bad(ClipForMessage(key), "this parameter (or this value of it) is not supported");
  }
  return absl::OkStatus();
}

namespace {

// logit_bias ({"token id": bias}, OpenAI's shape) and stop_token_ids ([ids],
// vLLM's), entry by entry through the request's checks (request_fields.h).
absl::Status ParseTokenLists(const json& body, GenerateRequest* g) {
  if (const auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("logit_bias", "expected an object of token id -> bias");
    for (const auto& [key, value] : it->items()) {
      ODMOE_RETURN_IF_ERROR(AddLogitBias(key, value.is_number() ? value.get<double>() : NAN, g));
    }
  }
  if (const auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return Bad("stop_token_ids", "expected an array of token ids");
    for (const json& id : *it) {
      if (!id.is_number_integer()) return Bad("stop_token_ids", "expected an array of token ids");
      ODMOE_RETURN_IF_ERROR(AddStopTokenId(
          id.is_number_unsigned()
              ? static_cast<int64_t>(std::min<uint64_t>(id.get<uint64_t>(), INT64_MAX))
              : id.get<int64_t>(),
          g));
    }
  }
  return absl::OkStatus();
}

// What the reference APIs take and this server has no use for, checked for
// the shape they have there: metadata (an object of strings), store (a
// bool), service_tier ("auto" or "default": there is one tier), modalities
// (["text"]: the output is text), cache_prompt (llama-server's; a bool:
// odmoe keeps no prompt cache to use or skip, every prompt runs).
absl::Status CheckAcceptedOnly(const json& body) {
  auto given = [&body](const char* key) { return body.contains(key) && !body[key].is_null(); };
  if (given("metadata")) {
    const json& m = body["metadata"];
    bool strings = m.is_object();
    for (auto it = m.begin(); strings && it != m.end(); ++it) strings = it->is_string();
    if (!strings) return Bad("metadata", "expected an object of strings");
  }
  for (const char* key : {"store", "cache_prompt"}) {
    if (given(key) && !body[key].is_boolean()) return Bad(key, "expected true or false");
  }
  if (given("service_tier") && body["service_tier"] != "auto" &&
      body["service_tier"] != "default") {
    return Bad("service_tier", "only \"auto\" or \"default\" (this server has one tier)");
  }
  if (given("modalities") && body["modalities"] != json::array({"text"})) {
    return Bad("modalities", "only [\"text\"] (this server outputs text)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseCommon(const json& body, const std::string& model_id, ParsedRequest* out) {
  const bool chat = out->prompt_param == "messages";
  ODMOE_RETURN_IF_ERROR(CheckParameters(body, chat));
  if (body.contains("model")) {
    if (!body["model"].is_string()) return Bad("model", "expected a string");
    const std::string m = body["model"];
    if (m != model_id) {
      return absl::NotFoundError(
          absl::StrFormat("The model '%s' does not exist; this server serves '%s' (GET /v1/models)",
                          ClipForMessage(m), model_id));
    }
  }
  GenerateRequest& g = out->gen;
  for (const RequestField& f : RequestFields()) {
    if (f.http_default) ODMOE_RETURN_IF_ERROR(SetRequestField(f, *f.http_default, &g));
  }
  for (const RequestField& f : RequestFields()) {
    if (f.offered & kRequestFieldHttp) {
      ODMOE_RETURN_IF_ERROR(ReadFieldIfGiven(body, std::string(f.name), f, &g));
    }
  }
  ODMOE_RETURN_IF_ERROR(ParseTokenLists(body, &g));
  ODMOE_RETURN_IF_ERROR(CheckAcceptedOnly(body));
  // max_completion_tokens (the reference API's newer name) wins over
  // max_tokens, and both over llama-server's n_predict, when a client sends
  // several; 0 asks for no generation (echo); n_predict -1: until the end of
  // the context (or EOS), as llama-server.
  const RequestField& max_tokens = RequestFieldNamed("max_tokens");
  bool until_context = false;
  if (body.contains("n_predict") && !body["n_predict"].is_null() &&
      body["n_predict"].is_number_integer() && body["n_predict"].get<int64_t>() == -1) {
    until_context = true;
  }
  for (const char* key : {"n_predict", "max_tokens", "max_completion_tokens"}) {
    if (until_context && std::string_view(key) == "n_predict") continue;
    if (!body.contains(key) || body[key].is_null()) continue;
    const bool echo =
        body.contains("echo") && body["echo"].is_boolean() && body["echo"].get<bool>();
    if (std::string_view(key) == "n_predict" && body[key].is_number_integer() &&
        body[key].get<int64_t>() < 0) {
      return Bad(key, absl::StrCat("expected -1 (until the end of the context) or an integer from "
                                   "1 to ",
                                   kMaxMaxTokens));
    }
    if (body[key].is_number_integer() && body[key].get<int64_t>() == 0) {
      if (!echo) return Bad(key, "must be at least 1 (0 only with echo)");
      out->no_generation = true;  // scoring only: the prompt's logprobs
    } else {
      ODMOE_RETURN_IF_ERROR(ReadField(max_tokens, body[key], key, &g));
      out->no_generation = false;
    }
    out->max_tokens_given = true;
    until_context = false;
  }
  // Chat has no 16-token default in the reference API: without a limit the
  // reply may fill the context.
  out->fill_context = until_context || (chat && !out->max_tokens_given);
  if (body.contains("n") && !body["n"].is_null()) {
    const json& n = body["n"];
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxChoices) {
      return Bad("n", "expected an integer from 1 to " + std::to_string(kMaxChoices));
    }
    out->n = static_cast<int>(n.get<int64_t>());
  }
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) return Bad("stream", "expected true or false");
    out->stream = body["stream"];
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& o = body["stream_options"];
    if (!out->stream) return Bad("stream_options", "only allowed when stream is true");
    if (!o.is_object()) return Bad("stream_options", "expected an object");
    for (const auto& [key, value] : o.items()) {
      if (key != "include_usage") {
        return Bad("stream_options", absl::StrCat("unknown option '", ClipForMessage(key), "'"));
      }
      if (!value.is_boolean())
        return Bad("stream_options", "include_usage: expected true or false");
      out->include_usage = value;
    }
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& s = body["stop"];
    if (s.is_string()) {
      out->stop.push_back(s);
    } else if (s.is_array() && s.size() <= 4) {
      for (const json& x : s) {
        if (!x.is_string()) return Bad("stop", "expected a string or up to 4 strings");
        out->stop.push_back(x);
      }
    } else {
      return Bad("stop", "expected a string or up to 4 strings");
    }
    for (const std::string& x : out->stop) {
      if (x.empty()) return Bad("stop", "stop sequences must not be empty");
    }
  }
  return absl::OkStatus();
}

namespace {

using ojson = nlohmann::ordered_json;

// reasoning_effort, chat_template_kwargs (any keys, passed to the template;
// enable_thinking must be a bool and reasoning_effort a string), tools and
// documents (arrays, passed as sent) and add_generation_prompt (llama-server's).
absl::Status ParseTemplateInputs(const ojson& body, ChatOptions* out) {
  auto effort = [out](const ojson& v, const std::string& param) {
    if (!v.is_string()) return Bad(param, "expected low, medium or high");
    out->reasoning_effort = v.get<std::string>();
    return absl::OkStatus();
  };
  auto given = [&body](const char* key) { return body.contains(key) && !body[key].is_null(); };
  if (given("chat_template_kwargs")) {
    const ojson& k = body["chat_template_kwargs"];
    if (!k.is_object()) return Bad("chat_template_kwargs", "expected an object");
    for (auto it = k.begin(); it != k.end(); ++it) {
      const std::string& key = it.key();
      if (key == "enable_thinking") {
        if (!it.value().is_boolean()) {
          return Bad("chat_template_kwargs.enable_thinking", "expected true or false");
        }
        out->enable_thinking = it.value().get<bool>();
      } else if (key == "reasoning_effort") {
        ODMOE_RETURN_IF_ERROR(effort(it.value(), "chat_template_kwargs.reasoning_effort"));
      } else if (key == "messages" || key == "tools" || key == "documents" || key == "bos_token" ||
                 key == "eos_token" || key == "add_generation_prompt") {
        return Bad("chat_template_kwargs." + ClipForMessage(key), "is set by the request itself");
      } else {
        out->template_kwargs[key] = it.value();
      }
    }
  }
  if (given("reasoning_effort"))
    ODMOE_RETURN_IF_ERROR(effort(body["reasoning_effort"], "reasoning_effort"));
  for (const char* key : {"tools", "documents"}) {
    if (!given(key)) continue;
    if (!body[key].is_array()) return Bad(key, "expected an array");
    (std::string(key) == "tools" ? out->tools : out->documents) = body[key];
  }
  if (given("add_generation_prompt")) {
    if (!body["add_generation_prompt"].is_boolean())
      return Bad("add_generation_prompt", "expected true or false");
    out->add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  return absl::OkStatus();
}

// One assistant tool call: {id, type: "function", function: {name, arguments}}.
absl::Status ParseToolCall(const ojson& c, const std::string& param, ChatToolCall* out) {
  if (!c.is_object()) return Bad(param, "expected {id, type, function: {name, arguments}}");
  if (c.contains("id") && !c["id"].is_null()) {
    if (!c["id"].is_string()) return Bad(param + ".id", "expected a string");
    out->id = c["id"].get<std::string>();
  }
  if (c.contains("type") && !c["type"].is_null()) {
    if (c["type"] != "function") return Bad(param + ".type", "expected \"function\"");
  }
  const ojson f = c.value("function", ojson());
  if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) {
    return Bad(param + ".function", "expected {name: string, arguments: string}");
  }
  out->name = f["name"].get<std::string>();
  const ojson args = f.value("arguments", ojson());
  if (args.is_string()) {
    // A JSON object string reaches the template as a dict (vLLM's rule).
    ojson parsed = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    out->arguments = parsed.is_object() ? parsed : args;
  } else if (args.is_object()) {
    out->arguments = args;
  } else if (args.is_null()) {
    out->arguments = ojson::object();
  } else {
    return Bad(param + ".function.arguments", "expected a JSON string");
  }
  return absl::OkStatus();
}

absl::Status ParseMessage(const ojson& m, const std::string& param, ChatMessage* out) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
      m["role"].get<std::string>().empty()) {
    return Bad(param, "expected {\"role\": string, \"content\": string}");
  }
  out->role = m["role"].get<std::string>();
  if (!m.contains("content") && !m.contains("tool_calls")) {
    return Bad(param, "expected {\"role\": string, \"content\": string}");
  }
  const ojson content = m.value("content", ojson());
  if (content.is_string()) {
    out->content = content.get<std::string>();
  } else if (content.is_array()) {
    for (size_t j = 0; j < content.size(); ++j) {
      const ojson& part = content[j];
      if (!part.is_object() || part.value("type", ojson()) != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        return Bad(absl::StrCat(param, ".content[", j, "]"),
                   "only text parts {type: \"text\", text} are supported");
      }
    }
    out->content_parts = content;
  } else if (content.is_null() && (m.contains("tool_calls") || out->role == "assistant")) {
    out->content_null = true;  // an assistant turn that only calls tools
  } else {
    return Bad(param + ".content", "expected a string or an array of text parts");
  }
  const ojson r = m.value("reasoning_content", ojson());
  if (r.is_string()) {
    out->reasoning_content = r.get<std::string>();
  } else if (!r.is_null()) {
    return Bad(param + ".reasoning_content", "expected a string");
  }
  const ojson calls = m.value("tool_calls", ojson());
  if (!calls.is_null()) {
    if (!calls.is_array()) return Bad(param + ".tool_calls", "expected an array");
    for (size_t j = 0; j < calls.size(); ++j) {
      out->tool_calls.emplace_back();
      ODMOE_RETURN_IF_ERROR(ParseToolCall(calls[j], absl::StrCat(param, ".tool_calls[", j, "]"),
                                          &out->tool_calls.back()));
    }
  }
  for (const char* key : {"tool_call_id", "name"}) {
    const ojson v = m.value(key, ojson());
    if (v.is_null()) continue;
    if (!v.is_string()) return Bad(param + "." + key, "expected a string");
    (std::string(key) == "name" ? out->name : out->tool_call_id) = v.get<std::string>();
  }
  return absl::OkStatus();
}

}  // namespace

// `body` with its objects' keys in order (sorted: nlohmann::json's order),
// after the depth check (dump recurses).
static absl::StatusOr<ojson> Ordered(const json& body) {
  if (jinja::JsonDepth(body) > static_cast<size_t>(jinja::kMaxValueDepth)) {
    return Bad("body", absl::StrCat("nested deeper than ", jinja::kMaxValueDepth, " levels"));
  }
  return ojson::parse(body.dump());
}

absl::Status ParseChatOptions(const json& body, ChatOptions* out) {
  ODMOE_ASSIGN_OR_RETURN(ojson ordered, Ordered(body));
  return ParseTemplateInputs(ordered, out);
}

absl::Status ParseChatMessages(const nlohmann::ordered_json& body,
                               std::vector<ChatMessage>* messages, ChatOptions* options) {
  // The template's values nest at most jinja::kMaxValueDepth (the messages
  // list and a message take two levels); checked before anything copies them.
  if (body.is_object()) {
    for (auto it = body.begin(); it != body.end(); ++it) {
      if (jinja::JsonDepth(it.value()) + 2 > static_cast<size_t>(jinja::kMaxValueDepth)) {
        return Bad(ClipForMessage(it.key()),
                   absl::StrCat("nested deeper than ", jinja::kMaxValueDepth - 2, " levels"));
      }
    }
  }
  const ojson& m = body.contains("messages") ? body["messages"] : ojson();
  if (!m.is_array()) return Bad("messages", "expected an array of {role, content}");
  for (size_t i = 0; i < m.size(); ++i) {
    messages->emplace_back();
    ODMOE_RETURN_IF_ERROR(ParseMessage(m[i], absl::StrCat("messages[", i, "]"), &messages->back()));
  }
  return ParseTemplateInputs(body, options);
}

absl::Status ParseCompletionBody(const json& body, const std::string& model_id,
                                 const Tokenizer& tokenizer, ParsedRequest* out) {
  if (!body.is_object()) return Bad("body", "expected a JSON object");
  out->prompt_param = "prompt";
  ODMOE_RETURN_IF_ERROR(ParseCommon(body, model_id, out));
  const json& whole = body.contains("prompt") ? body["prompt"] : json();
  // The reference API takes a batch of prompts (an array of strings or of
  // token-id arrays); one prompt per request here, so a batch of one is
  // that prompt (evaluation harnesses send their tokenization as [[ids]]).
  if (whole.is_array() && whole.size() > 1 && (whole[0].is_string() || whole[0].is_array())) {
    return Bad("prompt",
               absl::StrCat("a batch of ", whole.size(), " prompts: send one prompt per request"));
  }
  const json& p = whole.is_array() && whole.size() == 1 && whole[0].is_array() ? whole[0] : whole;
  // A string, a one-string array, or token ids (as the reference API
  // allows; evaluation harnesses send their own tokenization so).
  const bool ids = p.is_array() && !p.empty() && p[0].is_number_integer();
  if (p.is_string()) {
    out->gen.prompt = p;
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    out->gen.prompt = p[0];
  } else if (ids) {
    // Their range is the vocabulary's, checked with the rest of the prompt
    // (PreparePrompt); here only that each is a 32-bit integer. Decode
    // skips ids outside the vocabulary.
    for (const json& t : p) {
      if (!t.is_number_integer() || t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX ||
          (t.is_number_unsigned() && t.get<uint64_t>() > INT32_MAX)) {
        return Bad("prompt", "expected a string or an array of token ids (32-bit integers)");
      }
      out->gen.prompt_ids.push_back(t.get<int32_t>());
    }
    out->gen.prompt = tokenizer.Decode(out->gen.prompt_ids);
  } else {
    return Bad("prompt", "expected a string or an array of token ids");
  }
  ODMOE_RETURN_IF_ERROR(
      ReadFieldIfGiven(body, "logprobs", RequestFieldNamed("logprobs"), &out->gen));
  if (body.contains("echo") && !body["echo"].is_null()) {
    if (!body["echo"].is_boolean()) return Bad("echo", "expected true or false");
    out->echo = body["echo"];
    if (out->echo && out->stream) return Bad("echo", "not supported with stream");
  }
  // Scoring only (echo, max_tokens 0): validated as a one-token request.
  if (out->no_generation) out->gen.max_tokens = 1;
  return absl::OkStatus();
}

absl::Status ParseChatBody(const json& body, const std::string& model_id, ParsedRequest* out,
                           std::vector<ChatMessage>* messages, ChatOptions* options,
                           const nlohmann::ordered_json* ordered) {
  if (!body.is_object()) return Bad("body", "expected a JSON object");
  out->prompt_param = "messages";
  ODMOE_RETURN_IF_ERROR(ParseCommon(body, model_id, out));
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    if (!body["logprobs"].is_boolean()) return Bad("logprobs", "expected true or false");
    if (body["logprobs"] == true) out->gen.logprobs = 0;
  }
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
    const bool asked = out->gen.logprobs >= 0;
    ODMOE_RETURN_IF_ERROR(
        ReadFieldIfGiven(body, "top_logprobs", RequestFieldNamed("logprobs"), &out->gen));
    if (!asked) return Bad("top_logprobs", "needs logprobs: true");
  }
  if (out->no_generation) return Bad("max_tokens", "must be at least 1");
  // The template sees objects in the order the client wrote them (tojson).
  if (ordered != nullptr) return ParseChatMessages(*ordered, messages, options);
  ODMOE_ASSIGN_OR_RETURN(ojson copy, Ordered(body));
  return ParseChatMessages(copy, messages, options);
}

}  // namespace odmoe
