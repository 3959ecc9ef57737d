// A raw HTTP/1.1 client over a plain socket for tests that must send what a
// well-behaved client would not: half a header, a body that never ends, a
// request and then no reads at all.
//
//   RawClient cli(port);
//   cli.Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
//   const std::string r = cli.ReadResponse(5);   // one Content-Length response
//   CHECK(StatusOf(r) == 200);
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>
#include <utility>

#include "absl/strings/numbers.h"

namespace odmoe::test {

inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A client socket on 127.0.0.1:port; closed when destroyed.
class RawClient {
 public:
  /// `rcvbuf` > 0: the receive buffer, set before connecting (a small one
  /// keeps the kernel from absorbing a slow reader's backlog).
  explicit RawClient(int port, int rcvbuf = 0, const char* from = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (from != nullptr) {  // another loopback address (127.0.0.2 ...): another client
      sockaddr_in local{};
      local.sin_family = AF_INET;
      REQUIRE(inet_pton(AF_INET, from, &local.sin_addr) == 1);
      REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~RawClient() { close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool Send(const std::string& data) {
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  /// Reads until the server closes or `timeout` passes; what arrived.
  std::string ReadUntilClosed(double timeout_s, bool* closed = nullptr) {
    std::string got = std::exchange(pending_, std::string());
    const auto start = std::chrono::steady_clock::now();
    bool eof = false;
    while (!eof && SecondsSince(start) < timeout_s) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        eof = true;
      } else {
        got.append(buf, static_cast<size_t>(n));
      }
    }
    if (closed) *closed = eof;
    return got;
  }
  /// Reads one whole response with a Content-Length (keep-alive); bytes past
  /// it (the next pipelined response) are kept for the next call.
  std::string ReadResponse(double timeout_s) {
    std::string& got = pending_;
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const size_t head_end = got.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t cl = got.find("Content-Length: ");
        uint64_t length = 0;
        if (cl != std::string::npos && cl < head_end &&
            absl::SimpleAtoi(got.substr(cl + 16, got.find("\r\n", cl) - cl - 16), &length) &&
            got.size() >= head_end + 4 + length) {
          std::string one = got.substr(0, head_end + 4 + length);
          got.erase(0, one.size());
          return one;
        }
      }
      if (SecondsSince(start) >= timeout_s) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return std::exchange(got, std::string());
  }
  /// Reads until `text` has arrived or `timeout_s` passes; whether it
  /// arrived. What was read through `text` is dropped, the rest kept.
  bool ReadUntil(const std::string& text, double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    while (pending_.find(text) == std::string::npos && SecondsSince(start) < timeout_s) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      pending_.append(buf, static_cast<size_t>(n));
    }
    const size_t at = pending_.find(text);
    if (at == std::string::npos) return false;
    pending_.erase(0, at + text.size());
    return true;
  }
  /// Ends this side of the connection (the server reads the end of the stream).
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }
  /// Reads at most one byte if one is there (a slow reader's sip).
  void Sip() {
    char c;
    recv(fd_, &c, 1, MSG_DONTWAIT);
  }

 private:
  int fd_ = -1;
  std::string pending_;  // read past the last whole response
};

/// How many of `clients` the server has closed (each given `wait_s` to show it).
inline int ClosedCount(std::vector<std::unique_ptr<RawClient>>& clients, double wait_s = 0.005) {
  int n = 0;
  for (auto& c : clients) {
    bool closed = false;
    c->ReadUntilClosed(wait_s, &closed);
    n += closed;
  }
  return n;
}

inline int StatusOf(const std::string& response) {
  int status = 0;
  if (response.size() >= 12) absl::SimpleAtoi(response.substr(9, 3), &status);
  return status;
}

inline std::string BodyOf(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

}  // namespace odmoe::test
