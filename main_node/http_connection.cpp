#include "main_node/http_connection.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace odmoe {

namespace bhttp = boost::beast::http;

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

std::string DecodeHttpPath(std::string_view path) {
  auto hex = [](char c) {
    return absl::ascii_isdigit(c)    ? c - '0'
           : absl::ascii_isxdigit(c) ? (c | 0x20) - 'a' + 10
                                     : -1;
  };
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    int hi = 0, lo = 0;
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

struct HttpConnection::Parser {
  bhttp::request_parser<bhttp::string_body> p;
  uint64_t body_limit = 0;
};

HttpConnection::HttpConnection(HttpConnectionLimits limits) : limits_(limits) {}
HttpConnection::~HttpConnection() = default;

void HttpConnection::Feed(std::string_view bytes) {
  if (state_ == State::kClosed || ended_) return;
  in_.append(bytes);
}

void HttpConnection::FeedEnd() { ended_ = true; }

void HttpConnection::StartRequest() {
  parser_ = std::make_unique<Parser>();
  parser_->p.header_limit(static_cast<uint32_t>(
      std::min<size_t>(limits_.max_header_bytes, std::numeric_limits<uint32_t>::max())));
  // No body limit while the header is read: the server checks the route and
  // the API key first, then ReadBody sets it. (Beast 1.74 treats boost::none
  // as a limit of nothing for Content-Length bodies.)
  parser_->p.body_limit(std::numeric_limits<uint64_t>::max());
  request_ = HttpRequest{};
  refusal_ = Refusal{};
  scanned_ = 0;
  keep_alive_ = true;
  close_after_ = false;
  refused_ = false;
  state_ = State::kHeader;
}

HttpConnection::Event HttpConnection::Fail(int status, std::string message, std::string code) {
  refusal_ = Refusal{status, std::move(message), std::move(code)};
  refused_ = true;
  close_after_ = true;
  state_ = State::kBusy;
  return Event::kRefused;
}

void HttpConnection::Compact() {
  if (pos_ == in_.size()) {
    in_.clear();
    pos_ = 0;
  } else if (pos_ >= 4096 && pos_ * 2 >= in_.size()) {
    in_.erase(0, pos_);
    pos_ = 0;
  }
}

HttpConnection::Event HttpConnection::Next() {
  for (;;) {
    switch (state_) {
      case State::kClosed:
        return Event::kEnd;
      case State::kBusy:
        return Event::kNeedBytes;
      case State::kHeaderDone:
        return Event::kHeader;
      case State::kIdle: {
        // Empty lines before a request line are skipped.
        while (pos_ < in_.size() && (in_[pos_] == '\r' || in_[pos_] == '\n')) ++pos_;
        Compact();
        if (buffered() == 0) {
          if (!ended_) return Event::kNeedBytes;
          state_ = State::kClosed;
          return Event::kEnd;
        }
        StartRequest();
        continue;
      }
      case State::kHeader: {
        // The parser sees a header only once it is whole (or past its
        // limit): Beast judges a first buffer eagerly and later ones only
        // when complete, so handing it pieces would make the outcome depend
        // on how the bytes were cut.
        const std::string_view pending(in_.data() + pos_, buffered());
        const size_t from = scanned_ > 3 ? scanned_ - 3 : 0;
        const size_t eom = pending.find("\r\n\r\n", from);
        scanned_ = pending.size();
        if (eom == std::string_view::npos || eom + 4 > limits_.max_header_bytes) {
          if (pending.size() > limits_.max_header_bytes) {
            return Fail(431, absl::StrCat("The request header exceeds ", limits_.max_header_bytes,
                                          " bytes"),
                        "header_too_large");
          }
          if (!ended_) return Event::kNeedBytes;
          state_ = State::kClosed;  // half a header, then the end: nobody to answer
          return Event::kEnd;
        }
        boost::system::error_code ec;
        const size_t used = parser_->p.put(boost::asio::buffer(pending.data(), eom + 4), ec);
        pos_ += used;
        if (ec == bhttp::error::need_more) {
          return Fail(400, "Malformed HTTP request: the header does not end where it should");
        }
        if (ec == bhttp::error::header_limit) {
          return Fail(431, absl::StrCat("The request header exceeds ", limits_.max_header_bytes,
                                        " bytes"),
                      "header_too_large");
        }
        if (ec) return Fail(400, "Malformed HTTP request: " + ec.message());
        if (!parser_->p.is_header_done()) return Event::kNeedBytes;
        Compact();
        const auto& msg = parser_->p.get();
        request_.method = std::string(msg.method_string());
        request_.target = std::string(msg.target());
        request_.path = DecodeHttpPath(std::string_view(request_.target).substr(
            0, std::min(request_.target.size(), request_.target.find('?'))));
        for (const auto& f : msg) {
          request_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
        }
        keep_alive_ = parser_->p.keep_alive();
        close_after_ = !keep_alive_;
        state_ = State::kHeaderDone;
        return Event::kHeader;
      }
      case State::kBody: {
        const auto length = parser_->p.content_length();
        if (length && *length > parser_->body_limit) {
          return Fail(413, absl::StrCat("The request body of ", *length,
                                        " bytes exceeds the limit of ", parser_->body_limit,
                                        " bytes"),
                      "request_too_large");
        }
        if (!parser_->p.is_done() && buffered() > 0) {
          boost::system::error_code ec;
          const size_t used =
              parser_->p.put(boost::asio::buffer(in_.data() + pos_, buffered()), ec);
          pos_ += used;
          Compact();
          if (ec == bhttp::error::body_limit) {
            return Fail(413,
                        absl::StrCat("The request body exceeds the limit of ",
                                     parser_->body_limit, " bytes"),
                        "request_too_large");
          }
          if (ec && ec != bhttp::error::need_more) {
            return Fail(400, "The request body could not be read (bad chunked framing?): " +
                                 ec.message());
          }
        }
        if (!parser_->p.is_done()) {
          if (!ended_) return Event::kNeedBytes;
          return Fail(400, "The request body ended early: the client closed its side");
        }
        state_ = State::kBusy;
        return Event::kRequest;
      }
    }
  }
}

bool HttpConnection::body_expected() const {
  return parser_ != nullptr && parser_->p.is_header_done() && !parser_->p.is_done();
}

std::optional<uint64_t> HttpConnection::content_length() const {
  if (parser_ == nullptr || !parser_->p.is_header_done()) return std::nullopt;
  const auto length = parser_->p.content_length();
  return length ? std::optional<uint64_t>(*length) : std::nullopt;
}

void HttpConnection::ReadBody(size_t limit) {
  if (state_ != State::kHeaderDone) return;
  parser_->body_limit = std::min<uint64_t>(limit, limits_.max_body_bytes);
  parser_->p.body_limit(parser_->body_limit);
  parser_->p.eager(true);
  state_ = State::kBody;
}

void HttpConnection::Refuse() {
  if (state_ == State::kHeaderDone) {
    close_after_ = close_after_ || body_expected();
  } else if (state_ == State::kBody || state_ == State::kBusy) {
    close_after_ = true;
  } else {
    return;
  }
  refused_ = true;
  state_ = State::kBusy;
}

HttpRequest HttpConnection::TakeRequest() {
  if (parser_ != nullptr && parser_->p.is_done()) {
    request_.body = std::move(parser_->p.get().body());
  }
  return std::move(request_);
}

void HttpConnection::Done() {
  if (state_ != State::kBusy) return;
  parser_.reset();
  request_ = HttpRequest{};
  state_ = close_after_ ? State::kClosed : State::kIdle;
}

bool HttpConnection::WantsBytes() const {
  if (state_ == State::kClosed || ended_) return false;
  if (state_ == State::kBusy) return buffered() < limits_.max_pipelined_bytes;
  return true;
}

size_t HttpConnection::body_bytes() const {
  if (parser_ == nullptr || !parser_->p.is_header_done()) return 0;
  return parser_->p.get().body().size();
}

bool HttpConnection::header_started() const { return state_ == State::kHeader; }

}  // namespace odmoe
