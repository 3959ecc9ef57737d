// The gRPC port's guard (cluster/h2_guard.h) without gRPC: a fake server end
// that records what arrives, raw TCP clients, and the guard between them.
#include "cluster/h2_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace odmoe {
namespace {

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(uint8_t type, uint32_t stream, size_t payload) {
  std::string f = {static_cast<char>(payload >> 16),
                   static_cast<char>(payload >> 8),
                   static_cast<char>(payload),
                   static_cast<char>(type),
                   0,
                   static_cast<char>(stream >> 24),
                   static_cast<char>(stream >> 16),
                   static_cast<char>(stream >> 8),
                   static_cast<char>(stream)};
  return f + std::string(payload, '\0');
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// Reads until `want` bytes came or the peer closed (5 s at most).
std::string ReadSome(int fd, size_t want) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.size() < want && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Whether the peer closed `fd` within 5 s (after whatever it still sent).
bool Closed(int fd) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

// Sends all of `bytes` (the server ends are non-blocking sockets).
void SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    }
  }
}

struct FakeServer {
  std::mutex mu;
  std::vector<int> fds;
  void Serve(int fd) {
    std::lock_guard<std::mutex> lock(mu);
    fds.push_back(fd);
  }
  int Wait(size_t k) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (fds.size() > k) return fds[k];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("no connection reached the server");
    return -1;
  }
  ~FakeServer() {
    for (int fd : fds) close(fd);
  }
};

}  // namespace

TEST_CASE("h2 guard: relays both ways, 4 MB each, and reports the port", "[h2guard]") {
  FakeServer server;
  auto guard = H2Guard::Listen("127.0.0.1:0", {.name = "test"});
  REQUIRE(guard.ok());
  REQUIRE((*guard)->port() > 0);
  REQUIRE((*guard)->Start([&](int fd) { server.Serve(fd); }).ok());
  const int client = Connect((*guard)->port());
  const int grpc_end = server.Wait(0);
  // The client's HTTP/2 bytes: the preface, then DATA frames of 16 KiB.
  std::string up = kPreface;
  while (up.size() < 4u << 20) up += Frame(0x0, 1, 16384);
  std::string down(4u << 20, 'x');
  for (size_t i = 0; i < down.size(); ++i) down[i] = static_cast<char>(i * 7);
  std::thread writer([&] {
    SendAll(client, up);
    SendAll(grpc_end, down);
  });
  const std::string at_server = ReadSome(grpc_end, up.size());
  const std::string at_client = ReadSome(client, down.size());
  writer.join();
  CHECK(at_server == up);
  CHECK(at_client == down);
  CHECK((*guard)->stats().open == 1);
  // The client's address, for logs.
  CHECK(H2Guard::PeerAddress("fd:" + std::to_string(grpc_end)).rfind("ipv4:127.0.0.1:", 0) == 0);
  CHECK(H2Guard::PeerAddress("ipv4:10.0.0.1:5") == "ipv4:10.0.0.1:5");
  // The server closes: the client sees EOF.
  shutdown(grpc_end, SHUT_RDWR);
  CHECK(Closed(client));
  close(client);
}

TEST_CASE("h2 guard: closes a connection without the HTTP/2 preface", "[h2guard]") {
  FakeServer server;
  auto guard = H2Guard::Listen("127.0.0.1:0", {.name = "test"});
  REQUIRE(guard.ok());
  REQUIRE((*guard)->Start([&](int fd) { server.Serve(fd); }).ok());
  const int client = Connect((*guard)->port());
  const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  send(client, get.data(), get.size(), MSG_NOSIGNAL);
  CHECK(Closed(client));
  const int grpc_end = server.Wait(0);
  CHECK(ReadSome(grpc_end, 1).empty());  // nothing reached gRPC; its end sees EOF
  CHECK((*guard)->stats().refused_not_http2 == 1);
  close(client);
}

TEST_CASE("h2 guard: closes a rapid-reset connection, keeps a quiet one", "[h2guard]") {
  FakeServer server;
  auto guard = H2Guard::Listen("127.0.0.1:0", {.name = "test"});
  REQUIRE(guard.ok());
  REQUIRE((*guard)->Start([&](int fd) { server.Serve(fd); }).ok());
  const int quiet = Connect((*guard)->port());
  send(quiet, kPreface.data(), kPreface.size(), MSG_NOSIGNAL);
  const int quiet_end = server.Wait(0);
  const int attacker = Connect((*guard)->port());
  std::string bytes = kPreface;
  for (uint32_t id = 1; id < 2000; id += 2) bytes += Frame(0x1, id, 20) + Frame(0x3, id, 4);
  send(attacker, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  CHECK(Closed(attacker));
  CHECK((*guard)->stats().refused_resets == 1);
  const int attacker_end = server.Wait(1);
  // What reached the server: at most the connection's burst of 100 resets
  // (what the guard still held when it refused the connection is dropped).
  const std::string got = ReadSome(attacker_end, bytes.size());
  CHECK(got.size() <= kPreface.size() + 100 * 2 * (9 + 12) + 9 + 20);
  CHECK(got == bytes.substr(0, got.size()));
  // The quiet one still relays.
  const std::string ping = Frame(0x6, 0, 8);
  send(quiet, ping.data(), ping.size(), MSG_NOSIGNAL);
  CHECK(ReadSome(quiet_end, kPreface.size() + ping.size()).size() == kPreface.size() + ping.size());
  // Stop closes the listener and the connections.
  const int port = (*guard)->port();
  (*guard)->Stop();
  CHECK(Closed(quiet));
  const int again = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(connect(again, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0);
  close(again);
  close(quiet);
  close(attacker);
}

}  // namespace odmoe
