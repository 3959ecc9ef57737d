#include "main_node/http_server.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/logging.h"

namespace odmoe {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

std::string HttpRequest::Header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (absl::EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

bool HttpRequest::HasHeader(const std::string& name) const {
  for (const auto& h : headers) {
    if (absl::EqualsIgnoreCase(h.first, name)) return true;
  }
  return false;
}

HttpResponse HttpResponse::Json(int status, std::string body, bool close) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.close = close;
  return r;
}

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
};

// One request/response exchange: the handler's HttpResponder. Output is
// queued here and taken by the session's strand.
class Exchange final : public HttpResponder {
 public:
  Exchange(std::weak_ptr<SessionLink> session, size_t cap, bool keep_alive)
      : session_(std::move(session)), cap_(cap), keep_alive_(keep_alive) {}

  bool ClientGone() const override { return gone_.load(); }
  void MarkGone() { gone_ = true; }

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

// %XX escapes in a request path decoded (as clients encode a model id);
// a malformed escape stays as it is.
std::string DecodePath(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    int hi = 0, lo = 0;
    auto hex = [](char c) {
      return absl::ascii_isdigit(c)    ? c - '0'
             : absl::ascii_isxdigit(c) ? (c | 0x20) - 'a' + 10
                                       : -1;
    };
    if (path[i] == '%' && i + 2 < path.size() && (hi = hex(path[i + 1])) >= 0 &&
        (lo = hex(path[i + 2])) >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += path[i];
    }
  }
  return out;
}

bool IsBodyLess(const bhttp::request_parser<bhttp::string_body>& p) { return p.is_done(); }

}  // namespace

struct HttpServer::Impl {
  // Declared first: sessions destroyed with io (below) still count down here.
  std::atomic<int> connections{0};
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable cv;
  int handlers_running = 0;
  std::unordered_map<const SessionLink*, std::weak_ptr<SessionLink>> sessions;

  HttpServerOptions opt;
  Routes routes;
  BeforeBody before_body;
  ErrorBody error_body;
  int port = 0;
  std::optional<asio::ssl::context> ssl;
  asio::io_context io;
  tcp::acceptor acceptor{asio::make_strand(io)};  // its handlers one at a time
  std::vector<std::thread> threads;

  HttpResponse Error(int status, const std::string& message, const std::string& code,
                     bool close) const {
    HttpResponse r;
    r.status = status;
    r.close = close;
    if (error_body) {
      r.body = error_body(status, message, code);
    } else {
      r.content_type = "text/plain";
      r.body = message + "\n";
    }
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
  void Unregister(const SessionLink* s) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(s);
    cv.notify_all();
  }

  void Accept();
  void Stop();
};

namespace {

tcp::socket& Lowest(tcp::socket& s) { return s; }
tcp::socket& Lowest(asio::ssl::stream<tcp::socket>& s) { return s.next_layer(); }

// One connection, plain (Stream = tcp::socket) or TLS. Everything runs on
// the socket's strand; the exchange's handler thread only posts to it.
template <class Stream>
class Session final : public SessionLink, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(HttpServer::Impl* server, Stream stream, bool refuse)
      : server_(server),
        stream_(std::move(stream)),
        timer_(Lowest(stream_).get_executor()),
        refuse_(refuse) {}
  ~Session() override {
    server_->Unregister(this);
    server_->connections--;
  }

  void PostPump() override {
    asio::post(Lowest(stream_).get_executor(), [self = this->shared_from_this()] { self->Pump(); });
  }
  void PostClose() override {
    asio::post(Lowest(stream_).get_executor(),
               [self = this->shared_from_this()] { self->Close(); });
  }

  /// Starts serving on the connection's strand.
  void Launch() {
    asio::post(Lowest(stream_).get_executor(),
               [self = this->shared_from_this()] { self->Start(); });
  }

 private:
  void Start() {
    server_->Register(this->shared_from_this());
    ErrorCode ec;
    const tcp::endpoint peer = Lowest(stream_).remote_endpoint(ec);
    if (!ec) peer_ = absl::StrCat(peer.address().to_string(), ":", peer.port());
    Arm(server_->opt.header_timeout);  // TLS handshake and the first header
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

  enum class Phase { kWaitRequest, kHeader, kBody, kHandler, kLinger };

  void Begin() {
    if (refuse_) {
      phase_ = Phase::kHandler;
      exchange_ = std::make_shared<Exchange>(this->weak_from_this(), 1 << 20, false);
      exchange_->Respond(
          server_->Error(503,
                         absl::StrCat("The server has too many open connections (",
                                      server_->opt.max_connections, "); try again later"),
                         "too_many_connections", true));
      return;
    }
    NextRequest();
  }

  void Arm(absl::Duration d) {
    const uint64_t gen = ++timer_gen_;
    timer_.expires_after(ToChrono(d));
    timer_.async_wait([self = this->shared_from_this(), gen](const ErrorCode& ec) {
      if (ec || gen != self->timer_gen_ || self->closed_) return;
      self->Close();  // a deadline passed: header, body, write or idle
    });
  }
  void Disarm() {
    ++timer_gen_;
    timer_.cancel();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    Disarm();
    if (exchange_) exchange_->MarkGone();
    ErrorCode ec;
    Lowest(stream_).shutdown(tcp::socket::shutdown_both, ec);
    Lowest(stream_).close(ec);
  }

  void NextRequest() {
    if (server_->stopping) return Close();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(server_->opt.max_header_bytes, std::numeric_limits<uint32_t>::max())));
    // No limit while the header is read: the API key and route are checked
    // first (before_body), then the body's limit is set. (Beast 1.74 treats
    // boost::none as a limit of nothing for Content-Length bodies.)
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    exchange_.reset();
    request_ = HttpRequest{};
    // The first request's header deadline runs from the connection's start
    // (armed in Start); a later one's from its first byte, after an idle wait.
    first_ = !served_any_;
    served_any_ = true;
    if (buffer_.size() > 0) {
      if (!first_) Arm(server_->opt.header_timeout);
      return ReadHeader();
    }
    phase_ = Phase::kWaitRequest;
    if (!first_) Arm(server_->opt.idle_timeout);
    if (!reading_) ReadSome();  // else the read watching the last exchange goes on
  }

  // Reads what is there into buffer_: waiting for a request, watching for a
  // hang-up while a handler runs, or discarding while lingering.
  void ReadSome() {
    reading_ = true;
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](const ErrorCode& ec, size_t n) {
                              self->reading_ = false;
                              if (self->closed_) return;
                              if (ec)
                                return self->Close();  // hung up (also: a handler's client is gone)
                              self->buffer_.commit(n);
                              self->OnBytes();
                            });
  }

  void OnBytes() {
    switch (phase_) {
      case Phase::kWaitRequest:
        if (!first_) Arm(server_->opt.header_timeout);
        return ReadHeader();
      case Phase::kHandler:
        // Pipelined bytes: kept for the next request (and no more reads, so
        // the next request's header read is the only one).
        return;
      case Phase::kLinger:
        lingered_ += buffer_.size();
        buffer_.consume(buffer_.size());
        if (lingered_ > (1u << 20)) return Close();
        return ReadSome();
      default:
        return;
    }
  }

  void ReadHeader() {
    phase_ = Phase::kHeader;
    reading_ = true;
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](const ErrorCode& ec, size_t) {
                               self->reading_ = false;
                               if (self->closed_) return;
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(const ErrorCode& ec) {
    const HttpServerOptions& opt = server_->opt;
    if (ec == bhttp::error::header_limit) {
      return Refuse(server_->Error(
          431, absl::StrCat("The request header exceeds ", opt.max_header_bytes, " bytes"),
          "header_too_large", true));
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::ssl::error::stream_truncated) {
      return Close();
    }
    if (ec) {
      return Refuse(server_->Error(400, "Malformed HTTP request: " + ec.message(), "", true));
    }
    const auto& msg = parser_->get();
    request_.method = std::string(msg.method_string());
    request_.target = std::string(msg.target());
    request_.path = DecodePath(request_.target.substr(0, request_.target.find('?')));
    request_.peer = peer_;
    for (const auto& f : msg) {
      request_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    if (server_->before_body) {
      if (std::optional<HttpResponse> refusal = server_->before_body(request_)) {
        refusal->close = true;
        return Refuse(std::move(*refusal));
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
      const bool close = !IsBodyLess(*parser_);  // its body stays unread
      return Refuse(
          path_known ? server_->Error(
                           405, "Method " + request_.method + " is not allowed on " + request_.path,
                           "", close)
                     : server_->Error(404, "No route " + request_.method + " " + request_.path, "",
                                      close));
    }
    if (IsBodyLess(*parser_)) {
      Disarm();
      return Dispatch();
    }
    if (const auto length = parser_->content_length(); length && *length > opt.max_body_bytes) {
      return Refuse(server_->Error(
          413,
          absl::StrCat("The request body of ", *length, " bytes exceeds the limit of ",
                       opt.max_body_bytes, " bytes (main.max_body_bytes)"),
          "request_too_large", true));
    }
    parser_->body_limit(opt.max_body_bytes);
    phase_ = Phase::kBody;
    Arm(opt.body_timeout);
    if (absl::EqualsIgnoreCase(request_.Header("Expect"), "100-continue")) {
      continue_ = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(continue_),
                        [self = this->shared_from_this()](const ErrorCode& e, size_t) {
                          if (self->closed_) return;
                          if (e) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    reading_ = true;
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](const ErrorCode& ec, size_t) {
                        self->reading_ = false;
                        if (self->closed_) return;
                        self->OnBody(ec);
                      });
  }

  void OnBody(const ErrorCode& ec) {
    if (ec == bhttp::error::body_limit) {
      return Refuse(
          server_->Error(413,
                         absl::StrCat("The request body exceeds the limit of ",
                                      server_->opt.max_body_bytes, " bytes (main.max_body_bytes)"),
                         "request_too_large", true));
    }
    if (ec) {
      return Refuse(server_->Error(400,
                                   "The request body could not be read (bad chunked framing or "
                                   "a connection closed early?): " +
                                       ec.message(),
                                   "", true));
    }
    Disarm();
    request_.body = std::move(parser_->get().body());
    Dispatch();
  }

  // A response the server makes itself (no handler), its request's body
  // unread when `close`.
  void Refuse(HttpResponse r) {
    Disarm();
    phase_ = Phase::kHandler;
    exchange_ = std::make_shared<Exchange>(this->weak_from_this(), 1 << 20,
                                           parser_ && parser_->keep_alive());
    exchange_->Respond(std::move(r));
  }

  void Dispatch() {
    phase_ = Phase::kHandler;
    exchange_ = std::make_shared<Exchange>(
        this->weak_from_this(), server_->opt.max_stream_buffer_bytes, parser_->keep_alive());
    if (!route_->off_io_thread) {
      route_->handler(request_, *exchange_);
      if (!exchange_->answered()) {
        exchange_->Respond(server_->Error(500, "The handler gave no response", "", false));
      }
      return;
    }
    if (!server_->TryStartHandler()) {
      exchange_->Respond(
          server_->Error(503,
                         absl::StrCat("The server is busy (", server_->opt.max_handler_threads,
                                      " requests in progress); try again later"),
                         "busy", false));
      return;
    }
    // Bytes after the request (or the end of the stream: a hang-up) are
    // watched while the handler runs.
    if (!reading_) ReadSome();
    std::thread([server = server_, handler = route_->handler, request = std::move(request_),
                 exchange = exchange_] {
      handler(request, *exchange);
      if (!exchange->answered()) {
        exchange->Respond(server->Error(500, "The handler gave no response", "", false));
      }
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
      Arm(server_->opt.write_timeout);
      asio::async_write(stream_, asio::buffer(out_),
                        [self = this->shared_from_this()](const ErrorCode& ec, size_t) {
                          self->writing_ = false;
                          if (self->closed_) return;
                          if (ec) return self->Close();
                          self->Disarm();
                          if (self->exchange_) self->exchange_->Sent();
                          self->Pump();
                        });
      return;
    }
    if (!ended || phase_ != Phase::kHandler) return;
    if (exchange_->close_after() || refuse_ || server_->stopping) return Linger();
    NextRequest();
  }

  // After a response that closes the connection: stop sending, read and drop
  // what the client still sends (so that it gets the response, not a reset)
  // for a moment, then close.
  void Linger() {
    phase_ = Phase::kLinger;
    exchange_.reset();
    if constexpr (!std::is_same_v<Stream, tcp::socket>) {
      return Close();
    } else {
      ErrorCode ec;
      Lowest(stream_).shutdown(tcp::socket::shutdown_send, ec);
      buffer_.consume(buffer_.size());
      Arm(absl::Seconds(1));
      if (!reading_) ReadSome();
    }
  }

  HttpServer::Impl* server_;
  Stream stream_;
  asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  const bool refuse_;
  std::string peer_;
  boost::beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  HttpRequest request_;
  const HttpRoute* route_ = nullptr;
  std::shared_ptr<Exchange> exchange_;
  std::string out_;       // the write in flight
  std::string continue_;  // "100 Continue" in flight
  Phase phase_ = Phase::kWaitRequest;
  bool first_ = true;  // the connection's first request
  bool served_any_ = false;
  bool reading_ = false, writing_ = false, closed_ = false;
  size_t lingered_ = 0;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [this](const ErrorCode& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || stopping) return;
    if (!ec) {
      const int open = connections.load();
      // Over the limit: a 503 for up to 64 more, then a plain close.
      if (open >= opt.max_connections + 64) {
        ErrorCode ignored;
        socket.close(ignored);
      } else {
        const bool refuse = open >= opt.max_connections;
        connections++;
        if (opt.socket_send_buffer_bytes > 0) {
          ErrorCode ignored;
          socket.set_option(
              asio::socket_base::send_buffer_size(static_cast<int>(opt.socket_send_buffer_bytes)),
              ignored);
        }
        if (ssl) {
          std::make_shared<Session<asio::ssl::stream<tcp::socket>>>(
              this, asio::ssl::stream<tcp::socket>(std::move(socket), *ssl), refuse)
              ->Launch();
        } else {
          std::make_shared<Session<tcp::socket>>(this, std::move(socket), refuse)->Launch();
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
    impl.threads.emplace_back([&impl] { impl.io.run(); });
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
