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

// An integer parameter in [min, max]; the error says the bound it broke
// ("must be at most 16777216"), or the range for what is not an integer
// (1e18 and 2.5 are JSON numbers with a fraction or exponent).
absl::StatusOr<int64_t> IntegerIn(const json& v, const std::string& key, int64_t min, int64_t max) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
    return Bad(key, absl::StrCat("must be at most ", max));
  }
  if (!v.is_number_integer()) {
    return Bad(key, absl::StrCat("expected an integer from ", min, " to ", max));
  }
  const int64_t n = v.get<int64_t>();
  if (n < min) return Bad(key, absl::StrCat("must be at least ", min));
  if (n > max) return Bad(key, absl::StrCat("must be at most ", max));
  return n;
}

}  // namespace

// Every parameter a request names is either one this server honours or one
// whose value asks for nothing (a penalty of 0, no logit bias, ...): anything
// else is a 400 naming it, never silently ignored. null means "not given".
absl::Status CheckParameters(const json& body, bool chat) {
  static const std::set<std::string> kCommon = {
      "model", "max_tokens", "max_completion_tokens", "temperature", "top_p",    "seed",
      "n",     "stream",     "stream_options",        "stop",        "logprobs", "user"};
  static const std::set<std::string> kCompletions = {"prompt", "echo"};
  static const std::set<std::string> kChat = {"messages", "top_logprobs", "reasoning_effort",
                                              "chat_template_kwargs"};
  for (const auto& [key, value] : body.items()) {
    if (value.is_null() || kCommon.count(key) || (chat ? kChat : kCompletions).count(key)) continue;
    const bool neutral =
        ((key == "frequency_penalty" || key == "presence_penalty") && value.is_number() &&
         value.get<double>() == 0) ||
        (key == "logit_bias" && value.is_object() && value.empty()) ||
        (!chat && key == "best_of" && value.is_number_integer() && value.get<int64_t>() == 1) ||
        (!chat && key == "suffix" && value.is_string() && value.get<std::string>().empty()) ||
        (chat && (key == "tools" || key == "functions") && value.is_array() && value.empty()) ||
        (chat && key == "tool_choice" && value == "none") ||
        (chat && key == "response_format" && value.is_object() && value.size() == 1 &&
         value.value("type", "") == "text");
    if (!neutral)
      return Bad(ClipForMessage(key), "this parameter (or this value of it) is not supported");
  }
  return absl::OkStatus();
}

absl::Status ParseCommon(const json& body, const std::string& model_id, ParsedRequest* out) {
  ODMOE_RETURN_IF_ERROR(CheckParameters(body, out->prompt_param == "messages"));
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
  g.max_tokens = kDefaultMaxTokens;
  g.sampling.temperature = 1.0f;
  // max_completion_tokens (the reference API's newer name) wins over
  // max_tokens when a client sends both.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    const bool echo =
        body.contains("echo") && body["echo"].is_boolean() && body["echo"].get<bool>();
    if (!body[key].is_number_integer() || body[key].get<int64_t>() != 0) {
      ODMOE_RETURN_IF_ERROR(IntegerIn(body[key], key, 1, kMaxMaxTokens).status());
    }
    const int64_t n = body[key];
    if (n == 0 && echo) {
      out->no_generation = true;  // scoring only: the prompt's logprobs
    } else if (n == 0) {
      return Bad(key, "must be at least 1 (0 only with echo)");
    } else {
      g.max_tokens = static_cast<int>(n);
      out->no_generation = false;
    }
    out->max_tokens_given = true;
  }
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    if (!body["temperature"].is_number()) return Bad("temperature", "expected a number");
    const double t = body["temperature"];
    if (t < 0 || t > 2) return Bad("temperature", "must be between 0 and 2");
    g.sampling.temperature = static_cast<float>(t);
  }
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    if (!body["top_p"].is_number()) return Bad("top_p", "expected a number");
    const double p = body["top_p"];
    if (p <= 0 || p > 1) return Bad("top_p", "must be in (0, 1]");
    g.sampling.top_p = static_cast<float>(p);
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) return Bad("seed", "expected an integer");
    g.sampling.seed = body["seed"].get<int64_t>();
  }
  if (body.contains("n") && !(body["n"].is_number_integer() && body["n"] == 1)) {
    return Bad("n", "only n = 1 is supported");
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

// What chat templates read besides the messages: reasoning_effort (the
// reference API's name) and chat_template_kwargs {enable_thinking,
// reasoning_effort} (as other servers take them); RenderChat checks that the
// model's chat format has them.
absl::Status ParseChatOptions(const json& body, ChatOptions* out) {
  auto effort = [out](const json& v, const std::string& param) {
    if (!v.is_string()) return Bad(param, "expected low, medium or high");
    out->reasoning_effort = v.get<std::string>();
    return absl::OkStatus();
  };
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    const json& k = body["chat_template_kwargs"];
    if (!k.is_object()) return Bad("chat_template_kwargs", "expected an object");
    for (const auto& [key, value] : k.items()) {
      if (key == "enable_thinking") {
        if (!value.is_boolean()) {
          return Bad("chat_template_kwargs.enable_thinking", "expected true or false");
        }
        out->enable_thinking = value.get<bool>();
      } else if (key == "reasoning_effort") {
        ODMOE_RETURN_IF_ERROR(effort(value, "chat_template_kwargs.reasoning_effort"));
      } else {
        return Bad("chat_template_kwargs", absl::StrCat("unknown key '", ClipForMessage(key),
                                                        "' (enable_thinking, reasoning_effort)"));
      }
    }
  }
  if (body.contains("reasoning_effort") && !body["reasoning_effort"].is_null()) {
    ODMOE_RETURN_IF_ERROR(effort(body["reasoning_effort"], "reasoning_effort"));
  }
  return absl::OkStatus();
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
    for (const json& t : p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= tokenizer.n_vocab()) {
        return Bad("prompt",
                   absl::StrCat("token ids must be integers in [0, ", tokenizer.n_vocab(), ")"));
      }
      out->gen.prompt_ids.push_back(t.get<int32_t>());
    }
    out->gen.prompt = tokenizer.Decode(out->gen.prompt_ids);
  } else {
    return Bad("prompt", "expected a string or an array of token ids");
  }
  if (out->gen.prompt.empty() && out->gen.prompt_ids.empty()) {
    return Bad("prompt", "must not be empty");
  }
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    ODMOE_ASSIGN_OR_RETURN(const int64_t l,
                           IntegerIn(body["logprobs"], "logprobs", 0, kMaxScoreTopN));
    out->gen.logprobs = static_cast<int>(l);
  }
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
                           std::vector<ChatMessage>* messages, ChatOptions* options) {
  if (!body.is_object()) return Bad("body", "expected a JSON object");
  out->prompt_param = "messages";
  ODMOE_RETURN_IF_ERROR(ParseCommon(body, model_id, out));
  const json& m = body.contains("messages") ? body["messages"] : json();
  if (!m.is_array()) return Bad("messages", "expected an array of {role, content}");
  for (size_t i = 0; i < m.size(); ++i) {
    if (!m[i].is_object() || !m[i].contains("role") || !m[i]["role"].is_string() ||
        !m[i].contains("content") || !m[i]["content"].is_string()) {
      return Bad(absl::StrCat("messages[", i, "]"),
                 "expected {\"role\": string, \"content\": string}");
    }
    messages->push_back({m[i]["role"], m[i]["content"], std::nullopt});
    // A reasoning model's earlier reply, sent back with its reasoning.
    const json r = m[i].value("reasoning_content", json());
    if (r.is_string()) {
      messages->back().reasoning_content = r.get<std::string>();
    } else if (!r.is_null()) {
      return Bad(absl::StrCat("messages[", i, "].reasoning_content"), "expected a string");
    }
  }
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    if (!body["logprobs"].is_boolean()) return Bad("logprobs", "expected true or false");
    if (body["logprobs"] == true) out->gen.logprobs = 0;
  }
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
    ODMOE_ASSIGN_OR_RETURN(const int64_t t,
                           IntegerIn(body["top_logprobs"], "top_logprobs", 0, kMaxScoreTopN));
    if (out->gen.logprobs < 0) return Bad("top_logprobs", "needs logprobs: true");
    out->gen.logprobs = static_cast<int>(t);
  }
  if (out->no_generation) return Bad("max_tokens", "must be at least 1");
  return ParseChatOptions(body, options);
}

}  // namespace odmoe
