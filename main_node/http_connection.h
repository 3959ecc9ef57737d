// One HTTP/1.1 connection's request side as a state machine over bytes, with
// no sockets in it: the server (http_server.cpp) feeds it what it reads and
// acts on what it says; tests and the fuzzer (tests/fuzz/targets/
// fuzz_http_connection.cpp) feed it requests split at every byte and
// pipelined in every combination.
//
// Requests are answered one at a time, in order: after a request is complete
// the connection is busy until the server says its response was written
// (Done); bytes that arrive meanwhile (a pipelined request, a stray CRLF) are
// kept, up to `max_pipelined_bytes`, and parsed only then. Empty lines before
// a request line are skipped (RFC 9112 2.2). The end of the client's stream
// (FeedEnd: a hang-up or a half-close) while a request is served means the
// client no longer waits for it (client_ended(): the server cancels the work);
// requests already read in whole are still parsed and answered after it.
//
//   HttpConnection conn({.max_header_bytes = 16 << 10, .max_body_bytes = 8 << 20});
//   conn.Feed(bytes_read);
//   for (;;) {
//     switch (conn.Next()) {
//       case HttpConnection::Event::kNeedBytes: /* read more, if WantsBytes() */ break;
//       case HttpConnection::Event::kHeader:    // route and check the headers, then
//         conn.ReadBody(limit);                 // or conn.Refuse(): answer, then close
//         continue;
//       case HttpConnection::Event::kRequest:   // conn.TakeRequest(); answer it; then conn.Done()
//       case HttpConnection::Event::kRefused:   // conn.refusal(); answer it and close
//       case HttpConnection::Event::kEnd:       // close
//         break;
//     }
//     break;
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "main_node/http_message.h"

namespace odmoe {

struct HttpConnectionLimits {
  size_t max_header_bytes = 16u << 10;  // request line + headers; more: 431
  size_t max_body_bytes = 8u << 20;     // the most ReadBody may allow; more: 413
  // Bytes kept past a request while it is served; at this many WantsBytes()
  // is false until Done() (the client's own TCP window then holds the rest).
  size_t max_pipelined_bytes = 64u << 10;
};

class HttpConnection {
 public:
  enum class Event {
    kNeedBytes,  // nothing to do until more bytes (or the end) arrive
    kHeader,     // a request's header is complete: request() has all but the body
    kRequest,    // a whole request: TakeRequest(), answer, Done()
    kRefused,    // bad framing or over a limit: answer refusal() and close
    kEnd,        // the client's stream ended between requests (or after a refusal)
  };
  enum class State { kIdle, kHeader, kHeaderDone, kBody, kBusy, kClosed };
  struct Refusal {
    int status = 400;
    std::string message;
    std::string code;  // short machine-readable reason, or ""
  };

  explicit HttpConnection(HttpConnectionLimits limits);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  /// Bytes read from the client (any split, any time).
  void Feed(std::string_view bytes);
  /// The client's stream ended (it hung up or half-closed).
  void FeedEnd();

  /// Parses what is buffered as far as the state allows and says what the
  /// caller must do. Idempotent while nothing changes (kNeedBytes again).
  Event Next();

  /// After kHeader: the request so far (method, target, path, headers).
  const HttpRequest& request() const { return request_; }
  /// After kHeader: whether a body follows (Content-Length > 0 or chunked),
  /// and its announced length if it has one.
  bool body_expected() const;
  std::optional<uint64_t> content_length() const;
  /// After kHeader: go on and read the body, at most `limit` bytes (capped
  /// at max_body_bytes); over it Next() says kRefused with a 413.
  void ReadBody(size_t limit);
  /// After kHeader: the server answers without reading the body; the
  /// connection is busy until Done(), then ends if a body was left unread.
  /// While the body is read, or once the request is whole: the server
  /// refuses it after all (a shared limit); the connection ends after Done().
  void Refuse();
  /// After kRequest: the request, its body moved out.
  HttpRequest TakeRequest();
  /// The response to the current request (or refusal) is written. The next
  /// request is parsed by the next Next() — unless the request asked to
  /// close, its body was left unread, or it was refused for its framing:
  /// then Next() says kEnd.
  void Done();

  /// Whether the server should read now (false when closed, after the end,
  /// or when busy with max_pipelined_bytes kept).
  bool WantsBytes() const;
  /// Whether the client's stream ended (FeedEnd).
  bool client_ended() const { return ended_; }
  /// The request being answered asked to keep the connection (HTTP/1.1
  /// without "Connection: close", or HTTP/1.0 with keep-alive).
  bool keep_alive() const { return keep_alive_; }
  /// The response must close the connection (the body was left unread, the
  /// request asked for it, or the framing was bad).
  bool close_after() const { return close_after_; }
  /// Body bytes of the current request read so far.
  size_t body_bytes() const;
  /// Bytes read and not yet parsed.
  size_t buffered() const { return in_.size() - pos_; }
  /// Whether some bytes of the next request's header have been read (its
  /// header deadline runs).
  bool header_started() const;
  State state() const { return state_; }
  const Refusal& refusal() const { return refusal_; }

 private:
  struct Parser;  // Beast's request parser, kept out of this header
  void StartRequest();
  Event Fail(int status, std::string message, std::string code = "");
  void Compact();

  const HttpConnectionLimits limits_;
  std::unique_ptr<Parser> parser_;
  std::string in_;  // bytes read; in_[pos_..] not yet parsed
  size_t pos_ = 0;
  size_t scanned_ = 0;  // bytes of the header searched for its end so far
  State state_ = State::kIdle;
  HttpRequest request_;
  Refusal refusal_;
  bool ended_ = false;
  bool keep_alive_ = true;
  bool close_after_ = false;
  bool refused_ = false;  // the current request was refused (kRefused or Refuse())
};

/// %XX escapes in a request path decoded (as clients encode a model id); a
/// malformed escape stays as it is.
std::string DecodeHttpPath(std::string_view path);

}  // namespace odmoe
