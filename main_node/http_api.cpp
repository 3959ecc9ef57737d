#include "main_node/http_api.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "httplib.h"
#include "main_node/chat_template.h"
#include "main_node/http_api_limits.h"
#include "main_node/http_request.h"
#include "main_node/main_node.h"
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

// The body of an error that happens while generating (the status line is
// already sent): OpenAI's shape, type server_error.
json ServerErrorBody(const absl::Status& s) {
  return {{"error",
           {{"message", std::string(s.message())},
            {"type", "server_error"},
            {"param", nullptr},
            {"code", nullptr}}}};
}

void SendError(httplib::Response& res, int http_status, const std::string& message,
               const std::string& type, const std::string& param = "",
               const std::string& code = "") {
  res.status = http_status;
  res.set_content(OpenAiErrorBody(message, type, param, code), "application/json");
}

// absl status -> the HTTP status and OpenAI error type. A context overflow
// names the request's input (`prompt_param`: "prompt" or "messages"), as the
// reference API does.
void SendStatus(httplib::Response& res, const absl::Status& s,
                const std::string& prompt_param = "prompt") {
  const std::string msg(s.message());
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return SendError(res, 400, msg, "invalid_request_error");
    case absl::StatusCode::kOutOfRange:
      return SendError(res, 400, msg, "invalid_request_error", prompt_param,
                       "context_length_exceeded");
    case absl::StatusCode::kResourceExhausted:
      return SendError(res, 429, msg, "rate_limit_error", "", "queue_full");
    case absl::StatusCode::kUnavailable:
      return SendError(res, 503, msg, "server_error", "", "unavailable");
    case absl::StatusCode::kCancelled:
      return SendError(res, 499, msg, "cancelled");
    default:
      return SendError(res, 500, msg, "server_error");
  }
}

// Holds back streamed text that could be the start of a stop sequence.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  bool stopped() const { return stopped_; }
  /// Adds generated text; returns what may be released now.
  std::string Push(std::string_view piece) {
    if (stopped_) return "";
    pending_ += piece;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) {
      const size_t at = pending_.find(s);
      if (at != std::string::npos && at < cut) cut = at;
    }
    if (cut != std::string::npos) {
      stopped_ = true;
      std::string out = pending_.substr(0, cut);
      pending_.clear();
      return out;
    }
    // Keep the longest tail that is a prefix of some stop sequence.
    size_t keep = 0;
    for (const std::string& s : stops_) {
      for (size_t n = std::min(s.size() - 1, pending_.size()); n > keep; --n) {
        if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
  }
  std::string Flush() {
    std::string out = stopped_ ? "" : pending_;
    pending_.clear();
    return out;
  }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

// Logprobs as the reference API shapes them. Alternatives are the
// distribution after the previous token (RowScore::top). `text_offset` is
// where the first token's text starts; it is advanced past the last.
json CompletionLogprobs(const Tokenizer& tok, const std::vector<int32_t>& ids,
                        const std::vector<std::optional<RowScore>>& scores, int top_n,
                        size_t* text_offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = tok.TokenToPiece(ids[i]);
    tokens.push_back(piece);
    offsets.push_back(*text_offset);
    *text_offset += piece.size();
    if (!scores[i].has_value()) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    lps.push_back(scores[i]->target_logprob);
    if (top_n == 0) {
      tops.push_back(nullptr);
      continue;
    }
    json alt = json::object();
    for (const TokenLogprob& t : scores[i]->top) alt[tok.TokenToPiece(t.id)] = t.logprob;
    tops.push_back(alt);
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json ChatLogprob(const Tokenizer& tok, int32_t id, const RowScore& score) {
  const std::string piece = tok.TokenToPiece(id);
  json top = json::array();
  for (const TokenLogprob& t : score.top) {
    const std::string p = tok.TokenToPiece(t.id);
    top.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", Bytes(p)}});
  }
  return {{"token", piece},
          {"logprob", score.target_logprob},
          {"bytes", Bytes(piece)},
          {"top_logprobs", top}};
}

}  // namespace

struct HttpApi::Impl {
  MainNode& node;
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  int port = 0;
  std::atomic<uint64_t> next_id{0};
  ChatFormat chat_format;
  int64_t model_created = 0;  // Unix seconds
  HttpGuard guard;            // body limit and API key, checked before work

  explicit Impl(MainNode& n) : node(n) {}

  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    const std::string& key = node.topology().main.api_key;
    if (key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + key) return true;
    SendError(res, 401, "Incorrect or missing API key (Authorization: Bearer <key>)",
              "invalid_request_error", "", "invalid_api_key");
    node.CountRejected("http", absl::UnauthenticatedError("api key"));
    return false;
  }

  // The body of a POST route (the API key and its framing were checked from
  // the headers: GuardBeforeBody), read within main.max_body_bytes whatever
  // its Content-Type, and parsed as a JSON object; false when the response
  // is an error.
  bool ReadJson(const httplib::ContentReader& reader, httplib::Response& res, json* body) {
    std::string text;
    if (!ReadBodyWithin(guard.max_body_bytes, reader, &text, res)) {
      node.CountRejected("http", absl::InvalidArgumentError("body"));
      return false;
    }
    *body = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (body->is_discarded() || !body->is_object()) {
      node.CountRejected("http", absl::InvalidArgumentError("json"));
      SendError(res, 400, "The body is not a JSON object", "invalid_request_error");
      return false;
    }
    return true;
  }

  // A request that failed its checks: 404 for an unknown model, else 400
  // naming the parameter (the part of the message before ':').
  void Reject(httplib::Response& res, const absl::Status& st) {
    node.CountRejected("http", st);
    const std::string message(st.message());
    if (absl::IsNotFound(st)) {
      return SendError(res, 404, message, "invalid_request_error", "model", "model_not_found");
    }
    SendError(res, 400, message, "invalid_request_error", message.substr(0, message.find(':')));
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
            {"expert_reloads", r.experts.reloads},
            {"ttft_seconds", r.result.stats.ttft_seconds},
            {"decode_tokens_per_second", r.result.stats.decode_tokens_per_second()}};
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
    const Tokenizer& tok = node.tokenizer();
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
    bool stopped = false;
    if (!parsed.no_generation) {
      StopMatcher stop(parsed.stop);
      ChatReplySplitter split(chat ? chat_format : ChatFormat{});
      auto take = [&](const ChatReplyPiece& p) {
        if (!stop.stopped()) reasoning += p.reasoning;
        text += stop.Push(p.content);
      };
      auto on_token = [&](int32_t id, std::string_view piece) { take(split.Push(id, piece)); };
      absl::StatusOr<ClusterGenerateResult> r = node.Generate(
          turn, parsed.gen, on_token, gone, [&] { return stop.stopped(); }, "http");
      if (!r.ok()) return r.status();
      take(split.Flush());
      text += stop.Flush();
      stopped = stop.stopped();
      gen = std::move(*r);
    } else {
      gen.result.stats.prompt_tokens = static_cast<int>(ids.size());
    }
    json choice = {{"index", 0},
                   {"finish_reason", parsed.no_generation ? "length" : Finish(gen, stopped)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
      if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
      if (parsed.gen.logprobs >= 0) {
        json content = json::array();
        for (size_t i = 0; i < gen.result.output_ids.size(); ++i) {
          content.push_back(ChatLogprob(tok, gen.result.output_ids[i], gen.result.logprobs[i]));
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
        choice["logprobs"] = CompletionLogprobs(tok, ids, scores, top_n, &offset);
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
  void Serve(const httplib::Request& req, const ParsedRequest& parsed, httplib::Response& res,
             bool chat) {
    if (absl::Status s = node.Validate(parsed.gen); !s.ok()) {
      node.CountRejected("http", s);
      return SendStatus(res, s, parsed.prompt_param);
    }
    // A non-streamed request is answered only when it is done: the client's
    // socket is watched so that one that hangs up (waiting for its turn or
    // while generating) cancels its request within a token.
    std::optional<ClientConnection> client;
    if (!parsed.stream) {
      client = ClientConnection::Find(req);
      if (!client) ODMOE_LOG_WARN("http: cannot watch the client's connection for a hang-up");
    }
    auto gone = [&client] { return client.has_value() && client->Gone(); };
    absl::StatusOr<RequestQueue::Turn> turn = node.Admit(gone);
    if (!turn.ok()) {
      node.CountRejected("http", turn.status());
      return SendStatus(res, turn.status(), parsed.prompt_param);
    }
    const std::string id = NewId(chat ? "chatcmpl" : "cmpl");
    const int64_t created = UnixNow();
    const std::string object = chat ? "chat.completion" : "text_completion";
    const Tokenizer& tok = node.tokenizer();
    const int top_n = std::max(0, parsed.gen.logprobs);
    if (!parsed.stream) {
      // Generated here, before the status line is sent, so that a request
      // that fails while generating (the last worker group lost mid-request)
      // still gets its own status (503 ...), never 200 with an error body.
      absl::StatusOr<json> body = Complete(*turn, parsed, chat, id, created, object, gone);
      if (!body.ok()) return SendStatus(res, body.status(), parsed.prompt_param);
      res.set_content(body->dump(), "application/json");
      return;
    }
    // Streaming: the turn moves into the provider, which runs the whole
    // generation on its first call and ends the stream.
    auto held = std::make_shared<RequestQueue::Turn>(std::move(*turn));
    const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, held, parsed, id, created, chunk_object, chat, &tok, top_n](
                                 size_t, httplib::DataSink& sink) {
          std::atomic<bool> gone{false};
          auto send = [&](const json& j) {
            const std::string event = "data: " + j.dump() + "\n\n";
            if (!gone && !sink.write(event.data(), event.size())) gone = true;
          };
          // Tokens generated since the last chunk, with their scores: each
          // chunk carries the logprobs of the tokens whose text it releases
          // (a stop sequence's held-back text releases with a later chunk).
          std::vector<int32_t> pending_ids;
          std::vector<std::optional<RowScore>> pending_scores;
          size_t text_offset = 0;
          auto chunk = [&](const std::string& text, const json& finish, bool reasoning = false) {
            json choice = {{"index", 0}, {"finish_reason", finish}};
            json lp = nullptr;
            if (parsed.gen.logprobs >= 0 && !pending_ids.empty()) {
              if (chat) {
                json content = json::array();
                for (size_t i = 0; i < pending_ids.size(); ++i) {
                  content.push_back(ChatLogprob(tok, pending_ids[i], *pending_scores[i]));
                }
                lp = {{"content", content}};
              } else {
                lp = CompletionLogprobs(tok, pending_ids, pending_scores, top_n, &text_offset);
              }
              pending_ids.clear();
              pending_scores.clear();
            }
            if (chat) {
              choice["delta"] =
                  text.empty() && finish.is_null()
                      ? json{{"role", "assistant"}}
                      : (text.empty() ? json::object()
                                      : json{{reasoning ? "reasoning_content" : "content", text}});
            } else {
              choice["text"] = text;
            }
            choice["logprobs"] = lp;
            json out = {{"id", id},
                        {"object", chunk_object},
                        {"created", created},
                        {"model", node.model_id()},
                        {"choices", {choice}}};
            // With stream_options.include_usage every chunk carries
            // "usage": null and one last chunk (no choices) the usage.
            if (parsed.include_usage) out["usage"] = nullptr;
            return out;
          };
          if (chat) send(chunk("", nullptr));
          StopMatcher stop(parsed.stop);
          // A reasoning model's reasoning streams as reasoning_content deltas;
          // stop sequences apply to the content.
          ChatReplySplitter split(chat ? chat_format : ChatFormat{});
          auto emit = [&](const ChatReplyPiece& p) {
            if (!p.reasoning.empty() && !stop.stopped()) {
              send(chunk(p.reasoning, nullptr, /*reasoning=*/true));
            }
            const std::string out = stop.Push(p.content);
            if (!out.empty()) send(chunk(out, nullptr));
          };
          auto on_token = [&](int32_t id, std::string_view piece) { emit(split.Push(id, piece)); };
          auto on_logprobs = [&](const RowScore& row) {
            pending_ids.push_back(row.target);
            pending_scores.push_back(row);
          };
          absl::StatusOr<ClusterGenerateResult> r = node.Generate(
              *held, parsed.gen, on_token, [&] { return gone.load(); },
              [&] { return stop.stopped(); }, "http", {}, on_logprobs);
          if (r.ok()) {
            emit(split.Flush());
            const std::string tail = stop.Flush();
            if (!tail.empty()) send(chunk(tail, nullptr));
            json last = chunk("", Finish(*r, stop.stopped()));
            last["odmoe"] = OdmoeStats(*r);
            send(last);
            if (parsed.include_usage) {
              send(json{{"id", id},
                        {"object", chunk_object},
                        {"created", created},
                        {"model", node.model_id()},
                        {"choices", json::array()},
                        {"usage", Usage(*r)}});
            }
          } else if (!gone) {
            send(ServerErrorBody(r.status()));
          }
          if (!gone) {
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
          }
          sink.done();
          return true;
        });
  }

  void Routes() {
    httplib::Server& s = *server;
    s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader) {
      json body;
      if (!ReadJson(reader, res, &body)) return;
      ParsedRequest parsed;
      const absl::Status st =
          ParseCompletionBody(body, node.model_id(), node.tokenizer(), &parsed);
      if (!st.ok()) return Reject(res, st);
      Serve(req, parsed, res, /*chat=*/false);
    });
    s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res,
                                          const httplib::ContentReader& reader) {
      json body;
      if (!ReadJson(reader, res, &body)) return;
      ParsedRequest parsed;
      std::vector<ChatMessage> messages;
      ChatOptions options;
      absl::Status st = ParseChatBody(body, node.model_id(), &parsed, &messages, &options);
      if (st.ok()) {
        absl::StatusOr<std::string> prompt = RenderChat(chat_format, messages, options);
        GenerateRequest size_probe;  // no tokenization of a prompt that cannot fit
        if (prompt.ok()) {
          size_probe.prompt = *prompt;
          st = node.CheckPromptSize(size_probe);
          if (!st.ok()) {
            node.CountRejected("http", st);
            return SendStatus(res, st, "messages");
          }
        }
        if (prompt.ok()) {
          parsed.gen.prompt = *prompt;
          // The template's special tokens (<|im_start|> ...) are tokens, not
          // text; the tokenizer's BOS unless the template wrote it.
          Tokenizer::EncodeOptions encode;
          encode.parse_special = true;
          encode.add_bos = chat_format.bos_text.empty() ||
                           !absl::StartsWith(parsed.gen.prompt, chat_format.bos_text);
          absl::StatusOr<std::vector<int32_t>> ids =
              node.tokenizer().Encode(parsed.gen.prompt, encode);
          if (ids.ok()) {
            parsed.gen.prompt_ids = std::move(*ids);
          } else {
            st = Bad("messages", std::string(ids.status().message()));
          }
        } else {
          st = prompt.status();
        }
      }
      // Chat has no 16-token default in the reference API: without a limit
      // the reply may fill the context.
      if (st.ok() && !parsed.max_tokens_given) {
        parsed.gen.max_tokens =
            std::max(1, node.n_ctx() - static_cast<int>(parsed.gen.prompt_ids.size()));
      }
      if (!st.ok()) return Reject(res, st);
      Serve(req, parsed, res, /*chat=*/true);
    });
    s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      res.set_content(json{{"object", "list"}, {"data", {Model()}}}.dump(), "application/json");
    });
    s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      const std::string id = req.matches[1];
      if (id != node.model_id()) {
        return SendError(res, 404,
                         absl::StrFormat("The model '%s' does not exist; this server serves '%s'",
                                         id, node.model_id()),
                         "invalid_request_error", "model", "model_not_found");
      }
      res.set_content(Model().dump(), "application/json");
    });
    s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      // 503 whenever the cluster does not serve as configured: it cannot
      // serve at all (loading, draining, no complete worker group), or it
      // serves "degraded" (prediction fell back to none: the shadow is gone).
      const absl::Status can = node.CanServe();
      const absl::Status health = can.ok() ? node.Health() : can;
      if (health.ok()) {
        res.set_content(json{{"status", "ok"}}.dump(), "application/json");
        return;
      }
      res.status = 503;
      const v1::NodeState st = node.state();
      const std::string status = can.ok()                        ? "degraded"
                                 : st == v1::NODE_STATE_STARTING ? "loading"
                                 : st == v1::NODE_STATE_DRAINING ? "draining"
                                                                 : "unavailable";
      res.set_content(json{{"status", status}, {"reason", std::string(health.message())}}.dump(),
                      "application/json");
    });
    s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      res.set_content(node.RenderMetrics(), "text/plain; version=0.0.4");
    });
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return GuardBeforeBody(guard, req, res);
    });
    s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty() || IsClosingResponse(res)) return;
      if (res.status == 404) {
        SendError(res, 404, "No route " + req.method + " " + req.path, "invalid_request_error");
      } else if (res.status == 413) {
        SendError(res, 413, "The request body is too large", "invalid_request_error");
      }
    });
  }
};

absl::StatusOr<std::unique_ptr<HttpApi>> HttpApi::Start(MainNode& node) {
  const MainSpec& spec = node.topology().main;
  std::unique_ptr<HttpApi> api(new HttpApi());
  api->impl_ = std::make_unique<Impl>(node);
  Impl& impl = *api->impl_;
  if (!spec.tls_cert.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(spec.tls_cert.c_str(), spec.tls_key.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "main.tls: cannot use certificate %s with key %s (unreadable or not PEM?)", spec.tls_cert,
          spec.tls_key));
    }
    impl.server = std::move(ssl);
  } else {
    impl.server = std::make_unique<httplib::Server>();
  }
  const Tokenizer& tok = node.tokenizer();
  auto token_text = [&tok](int32_t id) {
    return id < 0 || id >= tok.n_vocab() ? std::string() : tok.vocab().tokens[id];
  };
  const ChatVocab vocab{token_text(tok.bos_id()), token_text(tok.eos_id()),
                        [&tok](std::string_view t) { return tok.TokenId(t); }};
  impl.chat_format =
      DetectChatFormat(node.model().gguf().GetString("tokenizer.chat_template"), vocab);
  if (impl.chat_format.has_template && impl.chat_format.family == ChatFamily::kDefault) {
    ODMOE_LOG_WARN(
        "tokenizer.chat_template is not a chat format odmoe knows (docs/chat_templates.md): "
        "chat prompts use the default format (one 'role: content' line per message)");
  }
  struct stat st {};
  impl.model_created =
      stat(node.topology().model.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : UnixNow();
  impl.guard.max_body_bytes = spec.max_body_bytes;
  impl.guard.api_key = spec.api_key;
  impl.guard.on_refused = [&node](int status) {
    node.CountRejected("http", status == 401 ? absl::UnauthenticatedError("api key")
                                             : absl::InvalidArgumentError("refused"));
  };
  // The library's own check of a declared Content-Length (GuardBeforeBody
  // refuses those first; chunked bodies are counted by ReadBodyWithin).
  impl.server->set_payload_max_length(spec.max_body_bytes);
  impl.server->set_read_timeout(std::chrono::seconds(30));
  impl.Routes();
  const bool bound = spec.http_port == 0
                         ? (impl.port = impl.server->bind_to_any_port(spec.http_host)) > 0
                         : impl.server->bind_to_port(spec.http_host, spec.http_port);
  if (!bound) {
    return absl::UnavailableError(absl::StrFormat(
        "main.http: cannot listen on %s (address in use or not local?)", spec.http));
  }
  if (spec.http_port != 0) impl.port = spec.http_port;
  impl.thread = std::thread([s = impl.server.get()] { s->listen_after_bind(); });
  if (spec.api_key.empty() && !IsLoopbackHost(spec.http_host)) {
    ODMOE_LOG_WARN(
        "HTTP API on {} without main.api_key: anyone who can reach it can use the model "
        "(set main.api_key, or listen on 127.0.0.1)",
        spec.http);
  }
  ODMOE_LOG_INFO("HTTP API on {}://{}:{} (chat format {}{})",
                 spec.tls_cert.empty() ? "http" : "https", spec.http_host, impl.port,
                 ChatFamilyName(impl.chat_format.family), spec.api_key.empty() ? "" : ", API key");
  return api;
}

HttpApi::~HttpApi() { Stop(); }

int HttpApi::port() const { return impl_->port; }

void HttpApi::Stop() {
  if (!impl_ || !impl_->server) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace odmoe
