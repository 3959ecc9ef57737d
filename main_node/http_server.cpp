#include "main_node/http_server.h"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/status.hpp>
#include <array>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <malloc.h>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "main_node/http_connection.h"
#include "util/budget.h"
#include "util/logging.h"

namespace odmoe {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

namespace {

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

std::string StatusLine(int status) {
  std::string reason(bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status))));
  if (status == 499) reason = "Client Closed Request";
  if (reason.empty() || reason[0] == '<') reason = "Status";
  return absl::StrFormat("HTTP/1.1 %d %s\r\n", status, reason);
}

// The status line and headers; `length` < 0: chunked.
std::string ResponseHead(int status, const std::string& content_type,
                         const std::vector<std::pair<std::string, std::string>>& headers,
                         int64_t length, bool close) {
  std::string out = StatusLine(status);
  if (!content_type.empty()) absl::StrAppend(&out, "Content-Type: ", content_type, "\r\n");
  for (const auto& [k, v] : headers) absl::StrAppend(&out, k, ": ", v, "\r\n");
  if (length >= 0) {
    absl::StrAppend(&out, "Content-Length: ", length, "\r\n");
  } else {
    out += "Transfer-Encoding: chunked\r\n";
  }
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

// What a session offers its exchange (type-erased over plain / TLS).
class SessionLink {
 public:
  virtual ~SessionLink() = default;
  virtual void PostPump() = 0;   // drain the exchange's output (any thread)
  virtual void PostClose() = 0;  // end the connection (any thread)
  /// When the connection began to wait for its next request with nothing
  /// read of it (steady-clock nanoseconds), or 0 while it is not idle; an
  /// eviction takes it (exchanges it for 0) so that only one closes it.
  virtual int64_t TakeIdleSince(bool take) = 0;
};

// One request/response exchange: the handler's HttpResponder. Output is
// queued here and taken by the session's strand.
class Exchange final : public HttpResponder {
 public:
  Exchange(std::weak_ptr<SessionLink> session, size_t cap, bool keep_alive)
      : session_(std::move(session)), cap_(cap), keep_alive_(keep_alive) {}

  bool ClientGone() const override { return gone_.load(); }
  void MarkGone() { gone_ = true; }
  /// The handler failed after its response began: the client must not take
  /// a cut-short stream for a whole one, so the connection is closed.
  void Abort() {
    gone_ = true;
    if (auto s = session_.lock()) s->PostClose();
  }

  void Respond(HttpResponse r) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (started_) return;
      started_ = ended_ = true;
      close_ = r.close || !keep_alive_;
      pending_ = ResponseHead(r.status, r.content_type, r.headers,
                              static_cast<int64_t>(r.body.size()), close_);
      pending_ += r.body;
    }
    Kick();
  }

  bool StartStream(int status, const std::string& content_type,
                   std::vector<std::pair<std::string, std::string>> headers) override {
    if (gone_) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (started_) return false;
      started_ = true;
      close_ = !keep_alive_;
      pending_ = ResponseHead(status, content_type, headers, -1, close_);
    }
    Kick();
    return true;
  }

  bool Write(std::string_view data) override {
    if (gone_) return false;
    if (data.empty()) return true;
    bool over = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || ended_) return false;
      if (pending_.size() + in_flight_ + data.size() > cap_) {
        over = true;
      } else {
        absl::StrAppendFormat(&pending_, "%x\r\n", data.size());
        pending_.append(data);
        pending_ += "\r\n";
      }
    }
    if (over) {
      gone_ = true;
      if (auto s = session_.lock()) s->PostClose();
      return false;
    }
    Kick();
    return true;
  }

  void EndStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || ended_) return;
      ended_ = true;
      pending_ += "0\r\n\r\n";
    }
    Kick();
  }

  // Session side. Moves the queued output into `out`; true when the response
  // is complete with that (nothing more will come).
  bool Take(std::string* out) {
    std::lock_guard<std::mutex> lock(mu_);
    out->swap(pending_);
    pending_.clear();
    in_flight_ = out->size();
    return ended_;
  }
  void Sent() {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_ = 0;
  }
  bool answered() const {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }
  bool close_after() const {
    std::lock_guard<std::mutex> lock(mu_);
    return close_;
  }

 private:
  void Kick() {
    if (auto s = session_.lock()) s->PostPump();
  }

  std::weak_ptr<SessionLink> session_;
  const size_t cap_;
  const bool keep_alive_;
  std::atomic<bool> gone_{false};
  mutable std::mutex mu_;
  std::string pending_;
  size_t in_flight_ = 0;
  bool started_ = false, ended_ = false, close_ = false;
};

}  // namespace

struct HttpServer::Impl {
  // Declared first: sessions destroyed with io (below) still count down here.
  std::atomic<int> connections{0};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_request_id{0};
  std::mutex mu;
  std::condition_variable cv;
  int handlers_running = 0;
  std::unordered_map<const SessionLink*, std::weak_ptr<SessionLink>> sessions;
  std::unordered_map<std::string, int> per_client;  // open connections by address

  HttpServerOptions opt;
  Routes routes;
  BeforeBody before_body;
  ErrorBody error_body;
  std::unique_ptr<Budget> bodies;  // max_buffered_body_bytes
  int port = 0;
  std::optional<asio::ssl::context> ssl;
  asio::io_context io;
  // Keeps the I/O threads running while no operation is pending (a handler
  // thread may still post its response) until Stop.
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  tcp::acceptor acceptor{asio::make_strand(io)};  // its handlers one at a time
  std::vector<std::thread> threads;

  // A response the server makes itself. `error_body` is the API's; should it
  // throw, a plain-text body stands in (the process goes on).
  HttpResponse Error(int status, const std::string& message, const std::string& code,
                     bool close) const {
    HttpResponse r;
    r.status = status;
    r.close = close;
    if (error_body) {
      try {
        r.body = error_body(status, message, code);
        return r;
      } catch (const std::exception& e) {
        ODMOE_LOG_ERROR("http: the error body of a {} failed: {}", status, e.what());
      }
    }
    r.content_type = "text/plain";
    r.body = absl::StrCat(status, " ", code.empty() ? "error" : code, "\n");
    if (!error_body) r.body = message + "\n";
    return r;
  }

  bool TryStartHandler() {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping || handlers_running >= opt.max_handler_threads) return false;
    ++handlers_running;
    return true;
  }
  void HandlerDone() {
    std::lock_guard<std::mutex> lock(mu);
    --handlers_running;
    cv.notify_all();
  }
  void Register(const std::shared_ptr<SessionLink>& s) {
    std::lock_guard<std::mutex> lock(mu);
    sessions[s.get()] = s;
  }
  void Unregister(const SessionLink* s, const std::string& client) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(s);
    if (auto it = per_client.find(client); it != per_client.end() && --it->second <= 0) {
      per_client.erase(it);
    }
    cv.notify_all();
  }
  // Counts a connection from `client`; false (not counted) past the limit.
  bool AddClient(const std::string& client) {
    std::lock_guard<std::mutex> lock(mu);
    int& n = per_client[client];
    if (n >= opt.max_connections_per_client) {
      if (n == 0) per_client.erase(client);
      return false;
    }
    ++n;
    return true;
  }
  // Closes the connection that has waited longest for its next request;
  // false when none waits.
  bool EvictIdle() {
    // Sessions are looked at (and, should one be the last owner, released)
    // outside the lock: a session's destructor takes it.
    std::vector<std::shared_ptr<SessionLink>> live;
    {
      std::lock_guard<std::mutex> lock(mu);
      live.reserve(sessions.size());
      for (auto& [ptr, weak] : sessions) {
        if (auto s = weak.lock()) live.push_back(std::move(s));
      }
    }
    SessionLink* oldest = nullptr;
    int64_t oldest_since = 0;
    for (const auto& s : live) {
      const int64_t since = s->TakeIdleSince(false);
      if (since != 0 && (oldest == nullptr || since < oldest_since)) {
        oldest = s.get();
        oldest_since = since;
      }
    }
    if (oldest == nullptr || oldest->TakeIdleSince(true) == 0) return false;
    oldest->PostClose();
    return true;
  }
  // A large body's memory back to the system once its request is done and
  // no other large body is held (the last of a burst trims): glibc keeps
  // freed heap otherwise (30 requests of 8 MB left ~290 MB behind).
  void TrimAfter(size_t body_bytes) {
    if (body_bytes < (1u << 20) || bodies->in_use() >= (1u << 20)) return;
    malloc_trim(0);
  }

  void Accept();
  void Stop();
};

namespace {

tcp::socket& Lowest(tcp::socket& s) { return s; }
tcp::socket& Lowest(asio::ssl::stream<tcp::socket>& s) { return s.next_layer(); }

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A request target for the logs: at most 200 bytes, escaped.
std::string LoggedTarget(const std::string& target) {
  return absl::CHexEscape(target.substr(0, 200)) + (target.size() > 200 ? "..." : "");
}

// Runs a route's handler; an exception out of it is this request's 500 (or,
// with its response begun, the connection's end), logged with its number.
void RunHandler(const HttpServer::Impl& server, const HttpRoute& route, const HttpRequest& req,
                Exchange& exchange) {
  std::string failure;
  try {
    route.handler(req, exchange);
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "an exception of unknown type";
  }
  if (!failure.empty()) {
    ODMOE_LOG_ERROR("http: request {} ({} {} from {}) failed: {}", req.id, req.method,
                    LoggedTarget(req.target), req.peer, failure);
    if (exchange.answered()) {
      exchange.Abort();
    } else {
      exchange.Respond(server.Error(
          500, absl::StrCat("Internal error while handling request ", req.id, " (logged)"),
          "internal_error", false));
    }
    return;
  }
  if (!exchange.answered()) {
    exchange.Respond(server.Error(500, "The handler gave no response", "", false));
  }
}

// One connection, plain (Stream = tcp::socket) or TLS. Everything runs on
// the socket's strand; the exchange's handler thread only posts to it. The
// requests are parsed by an HttpConnection from the bytes this session reads
// (one read outstanding at any time: MaybeRead); the session decides the
// route, the limits and the deadlines, and writes the responses.
template <class Stream>
class Session final : public SessionLink, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // `refusal`: answer it and close (too many connections).
  Session(HttpServer::Impl* server, Stream stream, std::string client,
          std::optional<HttpResponse> refusal)
      : server_(server),
        stream_(std::move(stream)),
        timer_(Lowest(stream_).get_executor()),
        client_(std::move(client)),
        refusal_(std::move(refusal)),
        conn_(HttpConnectionLimits{server->opt.max_header_bytes, server->opt.max_body_bytes,
                                   server->opt.max_pipelined_bytes}) {}
  ~Session() override {
    server_->Unregister(this, refusal_ ? std::string() : client_);
    server_->connections--;
  }

  void PostPump() override {
    asio::post(Lowest(stream_).get_executor(), [self = this->shared_from_this()] { self->Pump(); });
  }
  void PostClose() override {
    asio::post(Lowest(stream_).get_executor(),
               [self = this->shared_from_this()] { self->Close(); });
  }
  int64_t TakeIdleSince(bool take) override {
    return take ? idle_since_.exchange(0) : idle_since_.load();
  }

  /// Starts serving on the connection's strand.
  void Launch() {
    asio::post(Lowest(stream_).get_executor(),
               [self = this->shared_from_this()] { self->Start(); });
  }

 private:
  // What the connection's timer guards.
  enum class Deadline { kNone, kFirst, kIdle, kHeader, kBody, kWrite, kLinger };

  void Start() {
    server_->Register(this->shared_from_this());
    ErrorCode ec;
    const tcp::endpoint peer = Lowest(stream_).remote_endpoint(ec);
    if (!ec) peer_ = absl::StrCat(peer.address().to_string(), ":", peer.port());
    // The TLS handshake and the first request's header, from the start.
    SetDeadline(Deadline::kFirst);
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      Begin();
    } else {
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](const ErrorCode& e) {
                                if (self->closed_) return;
                                if (e) return self->Close();
                                self->Begin();
                              });
    }
  }

  void Begin() {
    if (refusal_) {
      exchange_ = std::make_shared<Exchange>(this->weak_from_this(), 1 << 20, false);
      exchange_->Respond(std::move(*refusal_));
      return;
    }
    Drive();
  }

  void SetDeadline(Deadline d) {
    if (d == deadline_) return;
    deadline_ = d;
    const HttpServerOptions& opt = server_->opt;
    switch (d) {
      case Deadline::kNone:
        return Disarm();
      case Deadline::kFirst:
      case Deadline::kHeader:
        return Arm(opt.header_timeout);
      case Deadline::kIdle:
        return Arm(opt.idle_timeout);
      case Deadline::kBody:
        return Arm(opt.body_timeout);
      case Deadline::kWrite:
        return Arm(opt.write_timeout);
      case Deadline::kLinger:
        return Arm(absl::Seconds(1));
    }
  }
  void Arm(absl::Duration d) {
    const uint64_t gen = ++timer_gen_;
    timer_.expires_after(ToChrono(d));
    timer_.async_wait([self = this->shared_from_this(), gen](const ErrorCode& ec) {
      if (ec || gen != self->timer_gen_ || self->closed_) return;
      self->Close();  // a deadline passed: header, body, write, idle or linger
    });
  }
  void Disarm() {
    ++timer_gen_;
    timer_.cancel();
  }

  // The deadline and idleness the connection's state calls for now.
  void Settle() {
    if (closed_ || lingering_) return;
    const bool idle = conn_.state() == HttpConnection::State::kIdle && conn_.buffered() == 0;
    if (idle) {
      int64_t expected = 0;
      idle_since_.compare_exchange_strong(expected, SteadyNowNs());
    } else {
      idle_since_ = 0;
    }
    if (writing_) return SetDeadline(Deadline::kWrite);
    switch (conn_.state()) {
      case HttpConnection::State::kIdle:
      case HttpConnection::State::kHeader:
        // The first request's header deadline runs from the connection's
        // start; a later one's from its first byte, after an idle wait.
        if (first_) return SetDeadline(Deadline::kFirst);
        return SetDeadline(conn_.header_started() ? Deadline::kHeader : Deadline::kIdle);
      case HttpConnection::State::kBody:
        return SetDeadline(Deadline::kBody);
      default:
        return SetDeadline(Deadline::kNone);
    }
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    idle_since_ = 0;
    Disarm();
    if (exchange_) exchange_->MarkGone();
    ErrorCode ec;
    Lowest(stream_).shutdown(tcp::socket::shutdown_both, ec);
    Lowest(stream_).close(ec);
  }

  // The only place a read starts: at most one is outstanding.
  void MaybeRead() {
    if (reading_ || closed_) return;
    if (!lingering_ && !conn_.WantsBytes()) return;
    reading_ = true;
    stream_.async_read_some(
        asio::buffer(read_buf_), [self = this->shared_from_this()](const ErrorCode& ec, size_t n) {
          self->reading_ = false;
          if (self->closed_) return;
          self->OnRead(ec, n);
        });
  }

  void OnRead(const ErrorCode& ec, size_t n) {
    if (lingering_) {
      lingered_ += n;
      if (ec || lingered_ > (1u << 20)) return Close();
      return MaybeRead();
    }
    if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
      conn_.FeedEnd();  // the client hung up or half-closed
    } else if (ec) {
      return Close();  // reset and the like: nothing more can be sent
    } else {
      conn_.Feed(std::string_view(read_buf_.data(), n));
    }
    Drive();
  }

  // Acts on what the connection has parsed, then reads if it wants bytes.
  void Drive() {
    while (!closed_ && !lingering_) {
      const HttpConnection::Event ev = conn_.Next();
      if (ev == HttpConnection::Event::kNeedBytes) {
        if (conn_.state() == HttpConnection::State::kBody && !HoldBody()) continue;
        break;
      }
      if (ev == HttpConnection::Event::kEnd) return Close();
      if (ev == HttpConnection::Event::kRefused) {
        const HttpConnection::Refusal& r = conn_.refusal();
        std::string message = r.message;
        if (r.status == 413) absl::StrAppend(&message, " (main.max_body_bytes)");
        Answer(server_->Error(r.status, message, r.code, true));
        break;
      }
      if (ev == HttpConnection::Event::kHeader) {
        OnHeader();
        continue;
      }
      // kRequest
      if (!HoldBody()) continue;
      Dispatch();
      break;
    }
    // A client that hung up or half-closed no longer waits for its answer.
    if (exchange_ && conn_.client_ended()) exchange_->MarkGone();
    Settle();
    MaybeRead();
  }

  // Keeps the body read so far within the server's shared budget; false
  // (the request refused: 503) when it cannot.
  bool HoldBody() {
    const size_t need = std::max<size_t>(conn_.body_bytes(), announced_);
    if (need <= hold_.amount()) return true;
    // Chunked bodies grow by steps, not per byte.
    const size_t step = announced_ > 0 ? need : std::max(need, hold_.amount() + (64u << 10));
    if (hold_.GrowTo(std::min(step, server_->opt.max_body_bytes)) || hold_.GrowTo(need)) {
      return true;
    }
    conn_.Refuse();
    Answer(server_->Error(
        503,
        absl::StrCat("The server holds too many request bodies at once (",
                     server_->opt.max_buffered_body_bytes,
                     " bytes, main.http_limits.max_buffered_body_bytes); try again later"),
        "busy", true));
    return false;
  }

  void OnHeader() {
    const HttpServerOptions& opt = server_->opt;
    first_ = false;
    request_ = conn_.request();
    request_.peer = peer_;
    request_.id = ++server_->next_request_id;
    announced_ = 0;
    hold_ = server_->bodies->Empty();
    if (server_->before_body) {
      std::optional<HttpResponse> refusal;
      try {
        refusal = server_->before_body(request_);
      } catch (const std::exception& e) {
        ODMOE_LOG_ERROR("http: request {}: the check before the body failed: {}", request_.id,
                        e.what());
        refusal = server_->Error(500, "Internal error in the check before the body", "", true);
      }
      if (refusal) {
        conn_.Refuse();
        refusal->close = true;
        return Answer(std::move(*refusal));
      }
    }
    route_ = nullptr;
    bool path_known = false;
    for (const HttpRoute& r : server_->routes) {
      const bool match =
          r.prefix ? absl::StartsWith(request_.path, r.path) && request_.path.size() > r.path.size()
                   : request_.path == r.path;
      if (!match) continue;
      path_known = true;
      if (r.method == request_.method) {
        route_ = &r;
        if (r.prefix) request_.path_rest = request_.path.substr(r.path.size());
        break;
      }
    }
    if (route_ == nullptr) {
      conn_.Refuse();  // its body, if any, stays unread: the connection closes
      return Answer(path_known ? server_->Error(405,
                                                "Method " + request_.method +
                                                    " is not allowed on " + request_.path,
                                                "", conn_.close_after())
                               : server_->Error(404,
                                                "No route " + request_.method + " " + request_.path,
                                                "", conn_.close_after()));
    }
    if (!conn_.body_expected()) return conn_.ReadBody(0);
    if (const auto length = conn_.content_length(); length && *length > opt.max_body_bytes) {
      conn_.Refuse();
      return Answer(server_->Error(
          413,
          absl::StrCat("The request body of ", *length, " bytes exceeds the limit of ",
                       opt.max_body_bytes, " bytes (main.max_body_bytes)"),
          "request_too_large", true));
    }
    announced_ = conn_.content_length().value_or(0);
    conn_.ReadBody(opt.max_body_bytes);
    if (!HoldBody()) return;
    if (absl::EqualsIgnoreCase(request_.Header("Expect"), "100-continue")) {
      continue_ = "HTTP/1.1 100 Continue\r\n\r\n";
      writing_ = true;
      asio::async_write(stream_, asio::buffer(continue_),
                        [self = this->shared_from_this()](const ErrorCode& e, size_t) {
                          self->writing_ = false;
                          if (self->closed_) return;
                          if (e) return self->Close();
                          self->Settle();
                          self->Pump();  // a response that waited for this write
                        });
    }
  }

  // A response the server makes itself (no handler).
  void Answer(HttpResponse r) {
    exchange_ = std::make_shared<Exchange>(this->weak_from_this(), 1 << 20,
                                           conn_.keep_alive() && !conn_.close_after());
    exchange_->Respond(std::move(r));
  }

  void Dispatch() {
    HttpRequest request = conn_.TakeRequest();
    request.peer = std::move(request_.peer);
    request.id = request_.id;
    request.path_rest = std::move(request_.path_rest);
    exchange_ = std::make_shared<Exchange>(this->weak_from_this(),
                                           server_->opt.max_stream_buffer_bytes,
                                           conn_.keep_alive() && !conn_.close_after());
    if (!route_->off_io_thread) {
      RunHandler(*server_, *route_, request, *exchange_);
      hold_.Release();
      return;
    }
    if (!server_->TryStartHandler()) {
      hold_.Release();
      exchange_->Respond(
          server_->Error(503,
                         absl::StrCat("The server is busy (", server_->opt.max_handler_threads,
                                      " requests in progress); try again later"),
                         "busy", false));
      return;
    }
    // The connection is read on meanwhile (Drive): a hang-up or half-close
    // marks the exchange gone, later requests wait in the connection. The
    // handler keeps the session alive (no read may be outstanding: the
    // client ended, or pipelined max_pipelined_bytes).
    std::thread([self = this->shared_from_this(), server = server_, route = route_,
                 request = std::move(request), exchange = exchange_,
                 hold = std::move(hold_)]() mutable {
      RunHandler(*server, *route, request, *exchange);
      const size_t held = hold.amount();
      request = HttpRequest{};
      hold.Release();
      server->TrimAfter(held);
      self.reset();  // before HandlerDone
      server->HandlerDone();
    }).detach();
  }

  // Writes what the exchange queued; when its response is complete, serves
  // the next request or closes.
  void Pump() {
    if (closed_ || writing_ || !exchange_) return;
    const bool ended = exchange_->Take(&out_);
    if (!out_.empty()) {
      writing_ = true;
      Settle();
      asio::async_write(stream_, asio::buffer(out_),
                        [self = this->shared_from_this()](const ErrorCode& ec, size_t) {
                          self->writing_ = false;
                          if (self->closed_) return;
                          if (ec) return self->Close();
                          if (self->exchange_) self->exchange_->Sent();
                          self->Settle();
                          self->Pump();
                        });
      return;
    }
    if (!ended) return;
    const bool close = exchange_->close_after() || refusal_ || server_->stopping;
    exchange_.reset();
    conn_.Done();
    if (close || conn_.state() == HttpConnection::State::kClosed) return Linger();
    Drive();  // the next request, from the bytes already read, or a read for it
  }

  // After a response that closes the connection: stop sending, read and drop
  // what the client still sends (so that it gets the response, not a reset)
  // for a moment, then close.
  void Linger() {
    lingering_ = true;
    idle_since_ = 0;
    if constexpr (!std::is_same_v<Stream, tcp::socket>) {
      return Close();
    } else {
      ErrorCode ec;
      Lowest(stream_).shutdown(tcp::socket::shutdown_send, ec);
      SetDeadline(Deadline::kLinger);
      MaybeRead();
    }
  }

  HttpServer::Impl* server_;
  Stream stream_;
  asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  Deadline deadline_ = Deadline::kNone;
  const std::string client_;  // the peer's address (per-client connection count)
  std::optional<HttpResponse> refusal_;
  std::string peer_;
  HttpConnection conn_;
  std::array<char, 16384> read_buf_{};
  HttpRequest request_;  // the header of the request being read (peer, id, path_rest)
  const HttpRoute* route_ = nullptr;
  Budget::Share hold_;
  size_t announced_ = 0;  // the body's Content-Length, 0 for chunked
  std::shared_ptr<Exchange> exchange_;
  std::string out_;       // the write in flight
  std::string continue_;  // "100 Continue" in flight
  std::atomic<int64_t> idle_since_{0};
  bool first_ = true;  // no request header complete yet
  bool reading_ = false, writing_ = false, closed_ = false, lingering_ = false;
  size_t lingered_ = 0;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [this](const ErrorCode& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || stopping) return;
    if (!ec) {
      ErrorCode peer_ec;
      const tcp::endpoint peer = socket.remote_endpoint(peer_ec);
      const std::string client = peer_ec ? std::string() : peer.address().to_string();
      // At the limit, the connection that has waited longest for a request
      // makes room; with none waiting, a 503 for up to 64 more, then a plain
      // close.
      const int open = connections.load();
      const bool full = open >= opt.max_connections && !EvictIdle();
      if (full && open >= opt.max_connections + 64) {
        ErrorCode ignored;
        socket.close(ignored);
      } else {
        std::optional<HttpResponse> refusal;
        if (full) {
          refusal = Error(503,
                          absl::StrCat("The server has too many open connections (",
                                       opt.max_connections, "); try again later"),
                          "too_many_connections", true);
        } else if (!AddClient(client)) {
          refusal = Error(503,
                          absl::StrCat("Too many connections from ", client, " (",
                                       opt.max_connections_per_client,
                                       ", main.http_limits.max_connections_per_client); close "
                                       "some or try again later"),
                          "too_many_connections", true);
        }
        connections++;
        if (opt.socket_send_buffer_bytes > 0) {
          ErrorCode ignored;
          socket.set_option(
              asio::socket_base::send_buffer_size(static_cast<int>(opt.socket_send_buffer_bytes)),
              ignored);
        }
        if (ssl) {
          std::make_shared<Session<asio::ssl::stream<tcp::socket>>>(
              this, asio::ssl::stream<tcp::socket>(std::move(socket), *ssl), client,
              std::move(refusal))
              ->Launch();
        } else {
          std::make_shared<Session<tcp::socket>>(this, std::move(socket), client,
                                                 std::move(refusal))
              ->Launch();
        }
      }
    } else {
      ODMOE_LOG_WARN("http: accept failed: {}", ec.message());
      // Out of file descriptors and the like: wait a moment rather than spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Accept();
  });
}

void HttpServer::Impl::Stop() {
  if (stopping.exchange(true)) return;
  asio::post(acceptor.get_executor(), [this] {
    ErrorCode ec;
    acceptor.close(ec);
  });
  std::vector<std::shared_ptr<SessionLink>> open;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [ptr, weak] : sessions) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  for (auto& s : open) s->PostClose();
  open.clear();
  std::unique_lock<std::mutex> lock(mu);
  // Handlers see ClientGone() and return (a generation stops within a token).
  cv.wait(lock, [this] { return handlers_running == 0; });
  cv.wait_for(lock, std::chrono::seconds(5), [this] { return sessions.empty(); });
  lock.unlock();
  work.reset();
  io.stop();
  for (std::thread& t : threads) t.join();
  threads.clear();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              Routes routes, BeforeBody before_body,
                                                              ErrorBody error_body) {
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->impl_ = std::make_shared<Impl>();
  Impl& impl = *server->impl_;
  impl.opt = options;
  impl.opt.io_threads = std::max(1, options.io_threads);
  impl.routes = std::move(routes);
  impl.before_body = std::move(before_body);
  impl.error_body = std::move(error_body);
  impl.opt.max_connections_per_client = std::max(1, options.max_connections_per_client);
  impl.bodies = std::make_unique<Budget>(options.max_buffered_body_bytes);
  if (!options.tls_cert.empty()) {
    impl.ssl.emplace(asio::ssl::context::tls_server);
    ErrorCode ec;
    impl.ssl->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                          asio::ssl::context::no_tlsv1_1);
    impl.ssl->use_certificate_chain_file(options.tls_cert, ec);
    if (!ec) impl.ssl->use_private_key_file(options.tls_key, asio::ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "main.tls: cannot use certificate %s with key %s (unreadable or not PEM?): %s",
          options.tls_cert, options.tls_key, ec.message()));
    }
  }
  ErrorCode ec;
  tcp::resolver resolver(impl.io);
  auto endpoints = resolver.resolve(options.host, std::to_string(options.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::UnavailableError(absl::StrFormat("http: cannot resolve %s: %s", options.host,
                                                  ec ? ec.message() : "no address"));
  }
  const tcp::endpoint at = endpoints.begin()->endpoint();
  impl.acceptor.open(at.protocol(), ec);
  if (!ec) impl.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(at, ec);
  if (!ec) impl.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrFormat("http: cannot listen on %s:%d: %s", options.host,
                                                  options.port, ec.message()));
  }
  impl.port = impl.acceptor.local_endpoint().port();
  impl.Accept();
  for (int i = 0; i < impl.opt.io_threads; ++i) {
    impl.threads.emplace_back([&impl] {
      // Nothing a connection does may end the process: an exception out of
      // a completion handler is logged and the thread serves on.
      for (;;) {
        try {
          impl.io.run();
          return;
        } catch (const std::exception& e) {
          ODMOE_LOG_ERROR("http: an I/O handler failed: {}", e.what());
        } catch (...) {
          ODMOE_LOG_ERROR("http: an I/O handler failed with an exception of unknown type");
        }
      }
    });
  }
  return server;
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

int HttpServer::connections() const { return impl_->connections.load(); }

void HttpServer::Stop() {
  if (impl_) impl_->Stop();
}

}  // namespace odmoe
