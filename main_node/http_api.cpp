#include "main_node/http_api.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "main_node/chat_template.h"
#include "main_node/http_api_limits.h"
#include "main_node/http_reply.h"
#include "main_node/http_request.h"
#include "main_node/http_server.h"
#include "main_node/json_reply.h"
#include "main_node/main_node.h"
#include "main_node/output_grammar.h"
#include "main_node/reply_stream.h"
#include "main_node/tool_call_json.h"
#include "main_node/tool_call_syntax.h"
#include "nlohmann/json.hpp"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

using json = nlohmann::json;

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpResponse SendError(int http_status, const std::string& message, const std::string& type,
                       const std::string& param = "", const std::string& code = "") {
  return HttpResponse::Json(http_status, OpenAiErrorBody(message, type, param, code));
}

// absl status -> the HTTP status and OpenAI error type. A bad parameter is
// named in `param` (the part of the message before ':'); a prompt's error
// (and a context overflow) names the request's input (`prompt_param`:
// "prompt" or "messages"), as the reference API does.
HttpResponse SendStatus(const absl::Status& s, const std::string& prompt_param = "prompt") {
  std::string msg(s.message());
  if (prompt_param != "prompt" && absl::StartsWith(msg, "prompt:")) {
    msg = prompt_param + msg.substr(6);  // the engine's "prompt: ..." of a rendered chat
  }
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return SendError(400, msg, "invalid_request_error", msg.substr(0, msg.find(':')));
    case absl::StatusCode::kOutOfRange:
      return SendError(400, msg, "invalid_request_error", prompt_param, "context_length_exceeded");
    case absl::StatusCode::kResourceExhausted:
      return SendError(429, msg, "rate_limit_error", "", "queue_full");
    case absl::StatusCode::kUnavailable:
      return SendError(503, msg, "server_error", "", "unavailable");
    case absl::StatusCode::kCancelled:
      return SendError(499, msg, "cancelled");
    default:
      return SendError(500, msg, "server_error");
  }
}

}  // namespace

struct HttpApi::Impl {
  MainNode& node;
  std::unique_ptr<HttpServer> server;
  std::atomic<uint64_t> next_id{0};
  ChatFormat chat_format;
  ToolCallSyntax tool_syntax = ToolCallSyntax::kHermes;  // the model's (tool_call_syntax.h)
  uint64_t id_salt = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  std::atomic<uint64_t> next_reply{0};
  int64_t model_created = 0;  // Unix seconds
  HttpGuard guard;            // body limit and API key, checked before work

  explicit Impl(MainNode& n) : node(n) {}

  // The API key of a GET route; false when `r` got the 401.
  bool Authorized(const HttpRequest& req, HttpResponder& r) {
    if (HasApiKey(guard, req)) return true;
    r.Respond(SendError(401, "Incorrect or missing API key (Authorization: Bearer <key>)",
                        "invalid_request_error", "", "invalid_api_key"));
    node.CountRejected("http", absl::UnauthenticatedError("api key"));
    return false;
  }

  // The body of a POST route (the API key and its framing were checked from
  // the headers: GuardBeforeBody; the server read it within
  // main.max_body_bytes whatever its Content-Type), parsed strictly as one
  // JSON object (ParseRequestJson: no NUL, no trailing bytes, no duplicate
  // keys); false when `r` got the 400.
  bool ParseJson(const HttpRequest& req, HttpResponder& r, json* body) {
    // A body holds at most a few values per token of context besides the
    // parameters (token ids, logit_bias entries, messages).
    const size_t max_values = std::max<size_t>(1u << 16, 4u * static_cast<size_t>(node.n_ctx()));
    absl::StatusOr<json> parsed = ParseRequestJson(req.body, max_values);
    if (!parsed.ok()) {
      r.Respond(Reject(parsed.status()));
      return false;
    }
    *body = std::move(*parsed);
    return true;
  }

  // A request that failed its checks: 404 for an unknown model, else 400
  // naming the parameter (SendStatus).
  HttpResponse Reject(const absl::Status& st, const std::string& prompt_param = "prompt") {
    node.CountRejected("http", st);
    if (absl::IsNotFound(st)) {
      return SendError(404, std::string(st.message()), "invalid_request_error", "model",
                       "model_not_found");
    }
    return SendStatus(st, prompt_param);
  }

  // The served model as the reference API describes one; `created` is the
  // model file's modification time (when it was made, as near as we know).
  json Model() const {
    return {{"id", node.model_id()},
            {"object", "model"},
            {"created", model_created},
            {"owned_by", "odmoe"},
            {"context_length", node.n_ctx()}};
  }

  // A token's raw bytes, as the reply builders take them (http_reply.h).
  TokenPieceFn Pieces() const {
    const Tokenizer& tok = node.tokenizer();
    return [&tok](int32_t id) { return tok.TokenToPiece(id); };
  }

  // The grammar a request asks its output to follow (output_grammar.h; a
  // chat's tools are in parsed->tools already). Schemas are read from the
  // body parsed again in order (nlohmann::json sorts keys): a schema's
  // properties come in the order the client declared them.
  // `ordered`: the body already parsed in order (chat), else null.
  absl::Status SetOutputGrammar(const HttpRequest& req, const json& body, ParsedRequest* parsed,
                                const nlohmann::ordered_json* ordered = nullptr) {
    const bool asks = parsed->tools.choice.kind == ToolChoiceKind::kRequired ||
                      parsed->tools.choice.kind == ToolChoiceKind::kNamed ||
                      body.contains("grammar") || body.contains("json_schema") ||
                      body.contains("response_format");
    if (!asks) return absl::OkStatus();
    nlohmann::ordered_json parsed_here;
    if (ordered == nullptr) {
      parsed_here = nlohmann::ordered_json::parse(req.body, nullptr, false);
      ordered = &parsed_here;
    }
    const Tokenizer& tok = node.tokenizer();
    auto is_control = [&tok](std::string_view text) {
      const int32_t id = tok.TokenId(text);
      return id >= 0 && static_cast<size_t>(id) < tok.vocab().token_types.size() &&
             tok.vocab().token_types[id] == TokenType::kControl;
    };
    absl::StatusOr<std::string> grammar =
        OutputGrammar(*ordered, parsed->tools, tool_syntax, is_control);
    if (!grammar.ok()) return grammar.status();
    parsed->gen.grammar = std::move(*grammar);
    return absl::OkStatus();
  }

  // The reply pipeline of a request (reply_stream.h): a chat's reasoning and
  // tool calls apart, then its stop sequences.
  ReplyStream::Options ReplyOptions(const ParsedRequest& parsed, bool chat) {
    ReplyStream::Options o;
    o.stop = parsed.stop;
    if (!chat) return o;
    o.format = &chat_format;
    // A template that opened <think> starts the reply in its reasoning, unless
    // a grammar fixes the reply (a required call, structured output): then the
    // reply is what the grammar writes, from its first byte.
    if (parsed.gen.grammar.empty()) o.prompt = parsed.gen.prompt;
    o.tools = &parsed.tools;
    o.syntax = tool_syntax;
    // Call ids differ between requests and between runs of the server.
    o.id_seed = id_salt + next_reply.fetch_add(1);
    const Tokenizer& tok = node.tokenizer();
    o.special_text = [&tok](int32_t id) {
      return id < 0 || id >= tok.n_vocab() ? std::string() : tok.vocab().tokens[id];
    };
    return o;
  }

  std::string NewId(const char* prefix) {
    return absl::StrFormat("%s-%x%04x", prefix, UnixNow(), ++next_id % 0x10000);
  }

  json Usage(const ClusterGenerateResult& r) const {
    const int p = r.result.stats.prompt_tokens;
    const int c = static_cast<int>(r.result.output_ids.size());
    return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
  }

  json OdmoeStats(const ClusterGenerateResult& r) const {
    return {{"recall", r.recall.overall},
            {"prediction", std::string(PredictionModeName(r.prediction))},
            {"expert_hits", r.experts.hits},
            {"expert_misses", r.experts.misses},
            {"expert_host_computes", r.experts.host_computes},
            {"expert_substitutions", r.experts.substitutions},
            {"expert_low_precision", r.experts.low_precision},
            {"expert_reloads", r.experts.reloads},
            {"ttft_seconds", r.result.stats.ttft_seconds},
            {"decode_tokens_per_second", r.result.stats.decode_tokens_per_second()},
            {"draft_tokens", r.speculation.draft_tokens},
            {"draft_acceptance", r.speculation.acceptance()},
            {"tokens_per_iteration", r.speculation.tokens_per_iteration()}};
  }

  static const char* Finish(const ClusterGenerateResult& r, bool stopped) {
    if (stopped) return "stop";
    return r.result.stop_reason == GenerateResult::StopReason::kMaxTokens ? "length" : "stop";
  }

  // Both endpoints: `prompt` is the rendered prompt; `chat` picks the shapes.
  // echo: the prompt's tokens with their scores (the first has none), in the
  // caller's turn, before the generation.
  absl::Status EchoScores(const RequestQueue::Turn& turn, const ParsedRequest& parsed,
                          std::vector<int32_t>* ids, std::vector<std::optional<RowScore>>* scores) {
    if (!parsed.gen.prompt_ids.empty()) {
      *ids = parsed.gen.prompt_ids;
    } else {
      ODMOE_ASSIGN_OR_RETURN(*ids, node.tokenizer().Encode(parsed.gen.prompt));
    }
    ScoreOptions opt;
    opt.top_n = std::max(0, parsed.gen.logprobs);
    ODMOE_ASSIGN_OR_RETURN(ClusterScoreResult r, node.Score(turn, *ids, opt));
    scores->assign(ids->size(), std::nullopt);
    for (size_t i = 1; i < ids->size(); ++i) {
      RowScore row;
      row.target = (*ids)[i];
      row.target_logprob = r.score.next_logprobs[i - 1];
      row.top1 = r.score.top1[i - 1];
      if (opt.top_n > 0) row.top = r.score.top[i - 1];
      (*scores)[i] = std::move(row);
    }
    return absl::OkStatus();
  }

  // A non-streamed completion in the caller's turn: the response body, or why
  // it could not be made (the caller picks the HTTP status from it).
  absl::StatusOr<json> Complete(const RequestQueue::Turn& turn, const ParsedRequest& parsed,
                                bool chat, const std::string& id, int64_t created,
                                const std::string& object, const std::function<bool()>& gone) {
    const TokenPieceFn pieces = Pieces();
    const int top_n = std::max(0, parsed.gen.logprobs);
    std::vector<int32_t> ids;
    std::vector<std::optional<RowScore>> scores;
    if (parsed.echo) {
      if (absl::Status st = EchoScores(turn, parsed, &ids, &scores); !st.ok()) {
        return st;
      }
    }
    ClusterGenerateResult gen;
    std::string text;
    std::string reasoning;  // chat with a reasoning model: not part of `text`
    std::vector<ToolCall> calls;
    std::string finish = "length";  // max_tokens 0 with echo
    if (!parsed.no_generation) {
      ReplyStream reply(ReplyOptions(parsed, chat));
      std::vector<ReplyEvent> events;  // the whole reply is the stream's sum
      auto on_token = [&](int32_t id, std::string_view piece) {
        events.clear();
        reply.Push(id, piece, &events);
      };
      absl::StatusOr<ClusterGenerateResult> r = node.Generate(
          turn, parsed.gen, on_token, gone, [&] { return reply.stopped(); }, "http");
      if (!r.ok()) return r.status();
      reply.Finish(&events);
      text = reply.content();
      reasoning = reply.reasoning();
      calls = reply.tool_calls();
      finish = reply.FinishReason(Finish(*r, reply.stopped()));
      gen = std::move(*r);
    } else {
      gen.result.stats.prompt_tokens = static_cast<int>(ids.size());
    }
    json choice = {{"index", 0}, {"finish_reason", finish}};
    if (chat) {
      // A reply that only calls tools has no content (null, as OpenAI sends it).
      choice["message"] = {{"role", "assistant"},
                           {"content", calls.empty() || !text.empty() ? json(text) : json()}};
      if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
      if (!calls.empty()) choice["message"]["tool_calls"] = ToolCallsJson(calls);
      if (parsed.gen.logprobs >= 0) {
        json content = json::array();
        for (size_t i = 0; i < gen.result.output_ids.size(); ++i) {
          content.push_back(ChatLogprob(pieces, gen.result.output_ids[i], gen.result.logprobs[i]));
        }
        choice["logprobs"] = {{"content", content}};
      } else {
        choice["logprobs"] = nullptr;
      }
    } else {
      choice["text"] = parsed.echo ? parsed.gen.prompt + text : text;
      if (parsed.gen.logprobs >= 0) {
        for (size_t i = 0; i < gen.result.output_ids.size(); ++i) {
          ids.push_back(gen.result.output_ids[i]);
          scores.push_back(gen.result.logprobs[i]);
        }
        if (parsed.echo && gen.result.eos_logprob) {
          // The end-of-sequence token ends the text but is listed with its
          // score: a harness that asks for prompt + one token gets both.
          ids.push_back(gen.result.eos_logprob->target);
          scores.push_back(*gen.result.eos_logprob);
        }
        size_t offset = 0;
        choice["logprobs"] = CompletionLogprobs(pieces, ids, scores, top_n, &offset);
      } else {
        choice["logprobs"] = nullptr;
      }
    }
    json body = {{"id", id},
                 {"object", object},
                 {"created", created},
                 {"model", node.model_id()},
                 {"choices", {choice}},
                 {"usage", Usage(gen)}};
    if (!parsed.no_generation) body["odmoe"] = OdmoeStats(gen);
    return body;
  }

  // Both endpoints: `prompt` is the rendered prompt; `chat` picks the shapes.
  // Runs on a handler thread of its own (the server's off-I/O routes).
  void Serve(ParsedRequest& parsed, HttpResponder& res, bool chat) {
    // No limit (chat without max_tokens, n_predict -1): the reply may fill
    // the context (checked with one token, then filled).
    const bool fill = parsed.fill_context;
    if (fill) parsed.gen.max_tokens = 1;
    // Every check of the request (its fields, the prompt, the context), once.
    absl::StatusOr<std::vector<int32_t>> ids = node.Validate(parsed.gen);
    if (!ids.ok()) return res.Respond(Reject(ids.status(), parsed.prompt_param));
    parsed.gen.prompt_ids = std::move(*ids);  // tokenized once
    if (fill) parsed.gen.max_tokens = node.n_ctx() - static_cast<int>(parsed.gen.prompt_ids.size());
    // The server watches the connection: a client that hangs up (waiting for
    // its turn or while generating), or a streamed one whose output falls
    // too far behind (http_server.h), cancels its request within a token.
    auto gone = [&res] { return res.ClientGone(); };
    if (parsed.n > 1) return ServeChoices(parsed, res, chat);
    absl::StatusOr<RequestQueue::Turn> turn = node.Admit(gone);
    if (!turn.ok()) {
      node.CountRejected("http", turn.status());
      return res.Respond(SendStatus(turn.status(), parsed.prompt_param));
    }
    const std::string id = NewId(chat ? "chatcmpl" : "cmpl");
    const int64_t created = UnixNow();
    const std::string object = chat ? "chat.completion" : "text_completion";
    if (!parsed.stream) {
      // Generated here, before the status line is sent, so that a request
      // that fails while generating (the last worker group lost mid-request)
      // still gets its own status (503 ...), never 200 with an error body.
      absl::StatusOr<json> body = Complete(*turn, parsed, chat, id, created, object, gone);
      PassTurn(std::move(*turn));
      if (!body.ok()) return res.Respond(SendStatus(body.status(), parsed.prompt_param));
      return res.Respond(HttpResponse::Json(200, DumpJson(*body)));
    }
    // Streaming: each event is queued on the connection (never blocking this
    // thread); a client that cannot keep up loses its connection and the
    // generation stops (ClientGone).
    if (!res.StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) return;
    (void)StreamCompletion(*turn, parsed, chat, id, created, res);
    PassTurn(std::move(*turn));
    res.Write("data: [DONE]\n\n");
    res.EndStream();
  }

  // n > 1: choice i is the request with seed + i (greedy choices are alike,
  // as in the reference API), each generated in a turn of its own on a
  // thread of its own, so the choices run batched together (up to
  // main.max_running at once; the others wait in the queue like requests).
  // A choice that cannot run (the queue is full, the cluster fails) fails
  // the whole request: non-streamed with its status, streamed with an error
  // event. Usage counts the prompt once and every choice's tokens.
  void ServeChoices(const ParsedRequest& parsed, HttpResponder& res, bool chat) {
    const std::string id = NewId(chat ? "chatcmpl" : "cmpl");
    const int64_t created = UnixNow();
    const std::string object = chat ? "chat.completion" : "text_completion";
    auto gone = [&res] { return res.ClientGone(); };
    const int n = parsed.n;
    std::vector<ParsedRequest> each(static_cast<size_t>(n), parsed);
    for (int i = 0; i < n; ++i) each[i].gen.sampling.seed += static_cast<uint64_t>(i);
    if (parsed.stream &&
        !res.StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) {
      return;
    }
    std::vector<absl::StatusOr<json>> results(static_cast<size_t>(n), json());
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        absl::StatusOr<RequestQueue::Turn> turn = node.Admit(gone);
        if (!turn.ok()) {
          node.CountRejected("http", turn.status());
          results[i] = turn.status();
          if (parsed.stream && !res.ClientGone())
            res.Write(SseEvent(StreamErrorBody(turn.status())));
          return;
        }
        if (parsed.stream) {
          results[i] = StreamCompletion(*turn, each[i], chat, id, created, res, i);
        } else {
          results[i] = Complete(*turn, each[i], chat, id, created, object, gone);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    json usage = {{"prompt_tokens", 0}, {"completion_tokens", 0}, {"total_tokens", 0}};
    json body;
    for (int i = 0; i < n; ++i) {
      if (!results[i].ok()) {
        if (!parsed.stream)
          return res.Respond(SendStatus(results[i].status(), parsed.prompt_param));
        continue;
      }
      const json& u = parsed.stream ? *results[i] : (*results[i])["usage"];
      usage["prompt_tokens"] = u["prompt_tokens"];
      usage["completion_tokens"] =
          usage["completion_tokens"].get<int>() + u["completion_tokens"].get<int>();
      if (parsed.stream) continue;
      if (i == 0) {
        body = std::move(*results[0]);
      } else {
        json choice = std::move((*results[i])["choices"][0]);
        choice["index"] = i;
        body["choices"].push_back(std::move(choice));
      }
    }
    usage["total_tokens"] =
        usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>();
    if (!parsed.stream) {
      body["usage"] = usage;
      return res.Respond(HttpResponse::Json(200, DumpJson(body)));
    }
    if (parsed.include_usage) {
      const StreamChunkHead head{id, chat ? "chat.completion.chunk" : "text_completion", created,
                                 node.model_id(), true};
      res.Write(SseEvent(UsageChunk(head, usage)));
    }
    res.Write("data: [DONE]\n\n");
    res.EndStream();
  }

  // The next request's turn starts before this one's response ends: a client
  // that sends its next request as soon as it has this answer finds the queue
  // free (the response is written by the server's I/O threads meanwhile).
  static void PassTurn(RequestQueue::Turn turn) { (void)turn; }

  // A streamed completion in the caller's turn, as server-sent events (an
  // error after the status line: an error event); the caller ends the stream
  // with "data: [DONE]".
  // `index`: the choice's (n > 1: ServeChoices sends the usage chunk once for
  // all, from the usage each choice returns). Returns the choice's usage, or
  // why it failed (already sent as an error event).
  absl::StatusOr<json> StreamCompletion(const RequestQueue::Turn& turn, const ParsedRequest& parsed,
                                        bool chat, const std::string& id, int64_t created,
                                        HttpResponder& res, int index = -1) {
    const TokenPieceFn pieces = Pieces();
    const int top_n = std::max(0, parsed.gen.logprobs);
    const StreamChunkHead head{id, chat ? "chat.completion.chunk" : "text_completion", created,
                               node.model_id(), parsed.include_usage};
    auto gone = [&res] { return res.ClientGone(); };
    auto send = [&](json j) {
      if (index > 0 && j.contains("choices") && !j["choices"].empty()) {
        j["choices"][0]["index"] = index;
      }
      res.Write(SseEvent(j));
    };
    // Tokens generated since the last chunk, with their scores: each
    // chunk carries the logprobs of the tokens whose text it releases
    // (a stop sequence's held-back text releases with a later chunk).
    std::vector<int32_t> pending_ids;
    std::vector<std::optional<RowScore>> pending_scores;
    size_t text_offset = 0;
    auto chunk = [&](const std::string& text, const json& finish, bool reasoning = false) {
      json lp = nullptr;
      if (parsed.gen.logprobs >= 0 && !pending_ids.empty()) {
        if (chat) {
          json content = json::array();
          for (size_t i = 0; i < pending_ids.size(); ++i) {
            content.push_back(ChatLogprob(pieces, pending_ids[i], *pending_scores[i]));
          }
          lp = {{"content", content}};
        } else {
          lp = CompletionLogprobs(pieces, pending_ids, pending_scores, top_n, &text_offset);
        }
        pending_ids.clear();
        pending_scores.clear();
      }
      return StreamChunk(head, chat, text, finish, reasoning, lp);
    };
    if (chat) send(chunk("", nullptr));
    // A reasoning model's reasoning streams as reasoning_content deltas, tool
    // calls as delta.tool_calls; stop sequences apply to the content.
    ReplyStream reply(ReplyOptions(parsed, chat));
    std::vector<ReplyEvent> events;
    auto emit = [&] {
      for (const ReplyEvent& e : events) {
        switch (e.kind) {
          case ReplyEvent::Kind::kReasoning:
            send(chunk(e.text, nullptr, /*reasoning=*/true));
            break;
          case ReplyEvent::Kind::kContent:
            send(chunk(e.text, nullptr));
            break;
          case ReplyEvent::Kind::kToolCallBegin:
            send(ToolCallChunk(head, ToolCallBeginDelta(e.index, e.id, e.name)));
            break;
          case ReplyEvent::Kind::kToolCallArguments:
            send(ToolCallChunk(head, ToolCallArgumentsDelta(e.index, e.text)));
            break;
        }
      }
      events.clear();
    };
    auto on_token = [&](int32_t id, std::string_view piece) {
      reply.Push(id, piece, &events);
      emit();
    };
    auto on_logprobs = [&](const RowScore& row) {
      pending_ids.push_back(row.target);
      pending_scores.push_back(row);
    };
    absl::StatusOr<ClusterGenerateResult> r = node.Generate(
        turn, parsed.gen, on_token, gone, [&] { return reply.stopped(); }, "http", {}, on_logprobs);
    if (r.ok()) {
      reply.Finish(&events);
      emit();
      json last = chunk("", reply.FinishReason(Finish(*r, reply.stopped())));
      last["odmoe"] = OdmoeStats(*r);
      send(last);
      if (parsed.include_usage && index < 0) send(UsageChunk(head, Usage(*r)));
      return Usage(*r);
    }
    if (!res.ClientGone()) send(StreamErrorBody(r.status()));
    return r.status();
  }

  HttpServer::Routes Routes() {
    HttpServer::Routes routes;
    // Generation blocks: it runs off the server's I/O threads. /metrics
    // does not (the workers' series are a snapshot refreshed on a thread of
    // its own: WorkerMetricsPoller), so a scrape never takes a handler slot.
    routes.push_back({"POST", "/v1/completions", false, /*off_io_thread=*/true,
                      [this](const HttpRequest& req, HttpResponder& res) {
                        json body;
                        if (!ParseJson(req, res, &body)) return;
                        ParsedRequest parsed;
                        absl::Status st =
                            ParseCompletionBody(body, node.model_id(), node.tokenizer(), &parsed);
                        if (st.ok()) st = SetOutputGrammar(req, body, &parsed);
                        if (!st.ok()) return res.Respond(Reject(st));
                        Serve(parsed, res, /*chat=*/false);
                      }});
    routes.push_back({"POST", "/v1/chat/completions", false, /*off_io_thread=*/true,
                      [this](const HttpRequest& req, HttpResponder& res) { Chat(req, res); }});
    // llama-server's: the prompt a chat body renders to, nothing generated.
    routes.push_back(
        {"POST", "/apply-template", false, /*off_io_thread=*/true,
         [this](const HttpRequest& req, HttpResponder& res) {
           json body;
           if (!ParseJson(req, res, &body)) return;
           std::vector<ChatMessage> messages;
           ChatOptions options;
           const absl::Status st = ParseChatMessages(
               nlohmann::ordered_json::parse(req.body, nullptr, false), &messages, &options);
           absl::StatusOr<std::string> prompt = st.ok() ? RenderChat(chat_format, messages, options)
                                                        : absl::StatusOr<std::string>(st);
           if (!prompt.ok()) return res.Respond(Reject(prompt.status(), "messages"));
           res.Respond(HttpResponse::Json(200, DumpJson(json{{"prompt", *prompt}})));
         }});
    routes.push_back(
        {"GET", "/v1/models", false, false, [this](const HttpRequest& req, HttpResponder& res) {
           if (!Authorized(req, res)) return;
           res.Respond(
               HttpResponse::Json(200, DumpJson(json{{"object", "list"}, {"data", {Model()}}})));
         }});
    routes.push_back(
        {"GET", "/v1/models/", /*prefix=*/true, false,
         [this](const HttpRequest& req, HttpResponder& res) {
           if (!Authorized(req, res)) return;
           const std::string& id = req.path_rest;
           if (id != node.model_id()) {
             return res.Respond(
                 SendError(404,
                           absl::StrFormat("The model '%s' does not exist; this server serves '%s'",
                                           ClipForMessage(id), node.model_id()),
                           "invalid_request_error", "model", "model_not_found"));
           }
           res.Respond(HttpResponse::Json(200, DumpJson(Model())));
         }});
    routes.push_back({"GET", "/health", false, false,
                      [this](const HttpRequest&, HttpResponder& res) { res.Respond(Health()); }});
    routes.push_back({"GET", "/metrics", false, /*off_io_thread=*/false,
                      [this](const HttpRequest& req, HttpResponder& res) {
                        if (!Authorized(req, res)) return;
                        HttpResponse r;
                        r.content_type = "text/plain; version=0.0.4";
                        r.body = node.RenderMetrics();
                        res.Respond(std::move(r));
                      }});
    return routes;
  }

  void Chat(const HttpRequest& req, HttpResponder& res) {
    json body;
    if (!ParseJson(req, res, &body)) return;
    ParsedRequest parsed;
    std::vector<ChatMessage> messages;
    ChatOptions options;
    // Checked strictly above; parsed again with its key order (the template's tojson).
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(req.body, nullptr, false);
    absl::Status st = ParseChatBody(body, node.model_id(), &parsed, &messages, &options, &ordered);
    if (st.ok()) {
      absl::StatusOr<ToolRequest> tools = ParseToolRequest(ordered);
      if (tools.ok()) {
        parsed.tools = std::move(*tools);
        st = SetOutputGrammar(req, body, &parsed, &ordered);
      } else {
        st = tools.status();
      }
    }
    if (st.ok()) {
      absl::StatusOr<std::string> prompt = RenderChat(chat_format, messages, options);
      if (prompt.ok()) {
        parsed.gen.prompt = std::move(*prompt);
        // The template's special tokens (<|im_start|> ...) are tokens, not
        // text; the tokenizer's BOS unless the template wrote it.
        parsed.gen.encode.parse_special = true;
        parsed.gen.encode.add_bos = chat_format.bos_text.empty() ||
                                    !absl::StartsWith(parsed.gen.prompt, chat_format.bos_text);
      } else {
        st = prompt.status();
      }
    }
    if (!st.ok()) return res.Respond(Reject(st));
    Serve(parsed, res, /*chat=*/true);
  }

  // 503 whenever the cluster does not serve as configured: it cannot serve
  // at all (loading, draining, no complete worker group), or it serves
  // "degraded" (prediction fell back to none: the shadow is gone).
  HttpResponse Health() {
    const absl::Status can = node.CanServe();
    const absl::Status health = can.ok() ? node.Health() : can;
    if (health.ok()) return HttpResponse::Json(200, DumpJson(json{{"status", "ok"}}));
    const v1::NodeState st = node.state();
    const std::string status = can.ok()                        ? "degraded"
                               : st == v1::NODE_STATE_STARTING ? "loading"
                               : st == v1::NODE_STATE_DRAINING ? "draining"
                                                               : "unavailable";
    return HttpResponse::Json(
        503, DumpJson(json{{"status", status}, {"reason", std::string(health.message())}}));
  }
};

absl::StatusOr<std::unique_ptr<HttpApi>> HttpApi::Start(MainNode& node) {
  const MainSpec& spec = node.topology().main;
  std::unique_ptr<HttpApi> api(new HttpApi());
  api->impl_ = std::make_unique<Impl>(node);
  Impl& impl = *api->impl_;
  const Tokenizer& tok = node.tokenizer();
  auto token_text = [&tok](int32_t id) {
    return id < 0 || id >= tok.n_vocab() ? std::string() : tok.vocab().tokens[id];
  };
  const ChatVocab vocab{token_text(tok.bos_id()), token_text(tok.eos_id()),
                        [&tok](std::string_view t) { return tok.TokenId(t); }};
  absl::StatusOr<ChatFormat> chat_format =
      CompileChatFormat(node.model().gguf().GetString("tokenizer.chat_template"), vocab,
                        node.model().gguf().GetString("tokenizer.chat_template.tool_use"));
  if (!chat_format.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        node.topology().model, ": tokenizer.chat_template: ", chat_format.status().message()));
  }
  impl.chat_format = std::move(*chat_format);
  if (!impl.chat_format.has_template) {
    ODMOE_LOG_WARN(
        "the model file has no tokenizer.chat_template: chat prompts use the fallback format "
        "(one 'role: content' line per message, docs/models.md)");
  }
  impl.tool_syntax =
      ToolCallSyntaxFor(node.model().gguf().GetString("tokenizer.chat_template").value_or(""),
                        [&tok](std::string_view t) { return tok.TokenId(t) >= 0; });
  struct stat st {};
  impl.model_created =
      stat(node.topology().model.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : UnixNow();
  impl.guard.max_body_bytes = spec.max_body_bytes;
  impl.guard.api_key = spec.api_key;
  impl.guard.on_refused = [&node](int status) {
    node.CountRejected("http", status == 401 ? absl::UnauthenticatedError("api key")
                                             : absl::InvalidArgumentError("refused"));
  };
  const HttpLimits& limits = spec.http_limits;
  HttpServerOptions opt;
  opt.host = spec.http_host;
  opt.port = spec.http_port;
  opt.tls_cert = spec.tls_cert;
  opt.tls_key = spec.tls_key;
  opt.io_threads = limits.io_threads;
  opt.max_connections = limits.max_connections;
  opt.max_connections_per_client = limits.max_connections_per_client;
  opt.max_buffered_body_bytes = limits.max_buffered_body_bytes;
  // Every request that may wait for its turn, the one running, and room for
  // /metrics and requests being parsed; more are refused (503) at once.
  opt.max_handler_threads = spec.max_queue + spec.max_running + 16;
  opt.max_header_bytes = limits.max_header_bytes;
  opt.max_body_bytes = spec.max_body_bytes;
  opt.header_timeout = absl::Milliseconds(limits.header_timeout_ms);
  opt.body_timeout = absl::Milliseconds(limits.body_timeout_ms);
  opt.idle_timeout = absl::Milliseconds(limits.idle_timeout_ms);
  opt.write_timeout = absl::Milliseconds(limits.write_timeout_ms);
  opt.max_stream_buffer_bytes = limits.stream_buffer_bytes;
  opt.socket_send_buffer_bytes = limits.socket_send_buffer_bytes;
  Impl* raw = &impl;
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      opt, impl.Routes(),
      [raw](const HttpRequest& req) { return GuardBeforeBody(raw->guard, req); },
      [&node](int status, const std::string& message, const std::string& code) {
        // A request the server refused while reading it (bad framing, a
        // body or header over its limit) counts as invalid, as the guard's.
        if (status == 400 || status == 413 || status == 431) {
          node.CountRejected("http", absl::InvalidArgumentError("refused"));
        }
        return OpenAiServerErrorBody(status, message, code);
      });
  if (absl::IsUnavailable(server.status())) {
    return absl::UnavailableError(
        absl::StrFormat("main.http: cannot listen on %s (address in use or not local?): %s",
                        spec.http, server.status().message()));
  }
  if (!server.ok()) return server.status();
  impl.server = std::move(*server);
  if (spec.api_key.empty() && !IsLoopbackHost(spec.http_host)) {
    ODMOE_LOG_WARN(
        "HTTP API on {} without main.api_key: anyone who can reach it can use the model "
        "(set main.api_key, or listen on 127.0.0.1)",
        spec.http);
  }
  ODMOE_LOG_INFO(
      "HTTP API on {}://{}:{} (chat template {}, replies {}, tool calls {}{}; at most {} "
      "connections)",
      spec.tls_cert.empty() ? "http" : "https", spec.http_host, impl.server->port(),
      impl.chat_format.has_template ? "the model's" : "fallback",
      ChatFamilyName(impl.chat_format.family), ToolCallSyntaxName(impl.tool_syntax),
      spec.api_key.empty() ? "" : ", API key", limits.max_connections);
  return api;
}

HttpApi::~HttpApi() { Stop(); }

int HttpApi::port() const { return impl_->server->port(); }

void HttpApi::Stop() {
  if (impl_ && impl_->server) impl_->server->Stop();
}

}  // namespace odmoe
