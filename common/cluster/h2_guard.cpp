#include "cluster/h2_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/log_limiter.h"
#include "util/logging.h"

namespace odmoe {
namespace {

using Clock = H2ResetBudget::Clock;

// "fd:N" -> the client's address, for PeerAddress (every guard of the process).
struct PeerTable {
  std::mutex mu;
  std::map<int, std::string> by_fd;
};
PeerTable& Peers() {
  static PeerTable* table = new PeerTable();
  return *table;
}

std::string AddressText(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    return absl::StrCat("ipv4:", host, ":", ntohs(v4->sin_port));
  }
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
    return absl::StrCat("ipv6:[", host, "]:", ntohs(v6->sin6_port));
  }
  return "unknown";
}

// A byte buffer between two sockets: [begin, end) is waiting to be written.
struct Buffer {
  std::unique_ptr<char[]> data;
  size_t capacity = 0, begin = 0, end = 0;
  bool empty() const { return begin == end; }
  size_t space() const { return data ? capacity - end : capacity; }
};

}  // namespace

struct H2Guard::Impl {
  // One side of a connection: the client's TCP socket or our socketpair end.
  struct Conn;
  struct Side {
    Conn* conn;
    int fd = -1;
    uint32_t events = 0;       // what epoll watches now
    bool read_closed = false;  // EOF or error read
    bool write_shut = false;   // shutdown(SHUT_WR) done
  };
  struct Conn {
    Side client, server;  // client = TCP, server = the socketpair end we keep
    Buffer to_server, to_client;
    H2FrameScanner scanner;
    std::string peer;
    int grpc_fd = -1;
    bool dead = false;
    Conn(H2ResetBudget& node, H2ResetBudget::Limits limits) : scanner(node, limits) {
      client.conn = this;
      server.conn = this;
    }
  };

  Options options;
  std::vector<int> listeners;
  int epoll_fd = -1, wake_fd = -1;
  std::thread thread;
  std::function<void(int)> serve;
  std::mutex accept_mu;  // held while accepting; StopAccepting takes it
  bool accepting = false;
  std::atomic<bool> stopping{false};
  H2ResetBudget node_budget{H2ResetBudget::NodeDefault()};
  std::unordered_set<Conn*> conns;  // relay thread only
  std::atomic<uint64_t> accepted{0}, refused_not_http2{0}, refused_resets{0}, open{0};
  LogLimiter log_limiter{10, std::chrono::seconds(10)};

  explicit Impl(Options o) : options(std::move(o)), node_budget(options.node_resets) {}
  ~Impl() {
    for (int fd : listeners) close(fd);
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
  }

  void Loop();
  void Accept(int listener);
  void Handle(Side& side, uint32_t events);
  void Pump(Conn& c, bool read_client, bool read_server);
  void Watch(Side& side, uint32_t events);
  void Refuse(Conn& c, H2FrameScanner::Refusal why);
  void Close(Conn& c);
};

H2Guard::H2Guard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

H2Guard::~H2Guard() { Stop(); }

absl::StatusOr<std::unique_ptr<H2Guard>> H2Guard::Listen(const std::string& address,
                                                         Options options) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("listen address '%s' is not host:port", address));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                          &hints, &found);
      e != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("listen address '%s': %s", address, gai_strerror(e)));
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (port != 0) {  // every address on the port the first one got
      if (a->ai_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_port = htons(port);
      if (a->ai_family == AF_INET6) {
        reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_port = htons(port);
      }
    }
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      last_error = std::strerror(errno);
      close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    impl->listeners.push_back(fd);
  }
  freeaddrinfo(found);
  if (impl->listeners.empty()) {
    return absl::UnavailableError(absl::StrFormat("cannot listen on %s: %s", address, last_error));
  }
  std::unique_ptr<H2Guard> guard(new H2Guard(std::move(impl)));
  guard->port_ = port;
  return guard;
}

absl::Status H2Guard::Start(std::function<void(int fd)> serve) {
  Impl& m = *impl_;
  m.serve = std::move(serve);
  m.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  m.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m.epoll_fd < 0 || m.wake_fd < 0) {
    return absl::UnavailableError(absl::StrCat("H2Guard: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake fd
  epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, m.wake_fd, &ev);
  for (int fd : m.listeners) {
    // A listener's data: its fd, tagged by the lowest bit (Side pointers are aligned).
    ev.data.u64 = (static_cast<uint64_t>(fd) << 1) | 1;
    epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  m.accepting = true;
  m.thread = std::thread([&m] { m.Loop(); });
  return absl::OkStatus();
}

void H2Guard::StopAccepting() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.accept_mu);
  m.accepting = false;
  for (int fd : m.listeners) {
    if (m.epoll_fd >= 0) epoll_ctl(m.epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
  }
  m.listeners.clear();
}

void H2Guard::Stop() {
  if (!impl_) return;
  StopAccepting();
  Impl& m = *impl_;
  if (m.thread.joinable()) {
    m.stopping = true;
    const uint64_t one = 1;
    (void)!write(m.wake_fd, &one, sizeof(one));
    m.thread.join();
  }
}

H2Guard::Stats H2Guard::stats() const {
  return {impl_->accepted.load(), impl_->refused_not_http2.load(), impl_->refused_resets.load(),
          impl_->open.load()};
}

std::string H2Guard::PeerAddress(const std::string& grpc_peer) {
  int fd = -1;
  if (grpc_peer.rfind("fd:", 0) != 0 || !absl::SimpleAtoi(grpc_peer.substr(3), &fd)) {
    return grpc_peer;
  }
  PeerTable& t = Peers();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_fd.find(fd);
  return it == t.by_fd.end() ? grpc_peer : it->second;
}

void H2Guard::Impl::Loop() {
  epoll_event events[64];
  std::vector<Conn*> touched;
  while (!stopping) {
    const int n = epoll_wait(epoll_fd, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      ODMOE_LOG_ERROR("{}: the gRPC guard's epoll_wait failed: {}", options.name,
                      std::strerror(errno));
      break;
    }
    touched.clear();
    for (int i = 0; i < n; ++i) {
      const uint64_t data = events[i].data.u64;
      if (data == 0) continue;  // the wake fd: `stopping` is checked above
      if (data & 1) {
        Accept(static_cast<int>(data >> 1));
        continue;
      }
      Side& side = *static_cast<Side*>(events[i].data.ptr);
      if (side.conn->dead) continue;
      Handle(side, events[i].events);
      touched.push_back(side.conn);
    }
    // A connection whose two sides both had events is in `touched` twice:
    // it is looked up before it is read, so the second entry never reads a
    // deleted connection.
    for (Conn* c : touched) {
      const auto it = conns.find(c);
      if (it != conns.end() && c->dead) {
        conns.erase(it);
        delete c;
      }
    }
  }
  for (Conn* c : conns) {
    Close(*c);
    delete c;
  }
  conns.clear();
}

void H2Guard::Impl::Accept(int listener) {
  std::lock_guard<std::mutex> lock(accept_mu);
  if (!accepting) return;
  for (int k = 0; k < 64; ++k) {  // then other connections' bytes get a turn
    sockaddr_storage from{};
    socklen_t len = sizeof(from);
    const int tcp =
        accept4(listener, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (tcp < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        static LogLimiter limiter(10, std::chrono::seconds(10));
        if (limiter.Allow()) {
          ODMOE_LOG_WARN("{}: accept failed: {}", options.name, std::strerror(errno));
        }
      }
      return;
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
      close(tcp);
      return;
    }
    const int one = 1;
    setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto* c = new Conn(node_budget, options.connection_resets);
    c->client.fd = tcp;
    c->server.fd = pair[0];
    c->grpc_fd = pair[1];
    c->peer = AddressText(from);
    c->to_server.capacity = c->to_client.capacity = options.buffer_bytes;
    conns.insert(c);
    ++accepted;
    ++open;
    {
      PeerTable& t = Peers();
      std::lock_guard<std::mutex> peers(t.mu);
      t.by_fd[c->grpc_fd] = c->peer;
    }
    Watch(c->client, EPOLLIN);
    Watch(c->server, EPOLLIN);
    serve(c->grpc_fd);  // gRPC owns (and closes) that end from here
  }
}

void H2Guard::Impl::Watch(Side& side, uint32_t want) {
  if (side.fd < 0 || want == side.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &side;
  const int op = side.events == 0 ? EPOLL_CTL_ADD : (want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD);
  epoll_ctl(epoll_fd, op, side.fd, want == 0 ? nullptr : &ev);
  side.events = want;
}

void H2Guard::Impl::Handle(Side& side, uint32_t events) {
  // EPOLLHUP / EPOLLERR: the read that follows returns the EOF or the error.
  const bool readable = (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0;
  Pump(*side.conn, readable && &side == &side.conn->client,
       readable && &side == &side.conn->server);
}

// Moves bytes both ways until nothing more can move now (reading only the
// sides epoll said were readable, until a short read drains them: each
// message costs a read and a write); updates what epoll watches and closes
// the connection when both directions are done or one fails.
void H2Guard::Impl::Pump(Conn& c, bool read_client, bool read_server) {
  // Reads from `from` into `buf` (compacting it when full); whether `from`
  // may have more to read now. A read error closes `from` for reading.
  auto read_into = [](Side& from, Buffer& buf, ssize_t* got) -> bool {
    *got = 0;
    if (!buf.data) buf.data.reset(new char[buf.capacity]);
    if (buf.empty()) buf.begin = buf.end = 0;
    if (buf.space() == 0 && buf.begin > 0) {
      std::memmove(buf.data.get(), buf.data.get() + buf.begin, buf.end - buf.begin);
      buf.end -= buf.begin;
      buf.begin = 0;
    }
    if (buf.space() == 0) return false;  // epoll reports it again once there is room
    const size_t room = buf.space();
    const ssize_t r = recv(from.fd, buf.data.get() + buf.end, room, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      from.read_closed = true;
      return false;
    }
    *got = r > 0 ? r : 0;
    return r > 0 && static_cast<size_t>(r) == room;
  };
  auto write_from = [](Side& to, Buffer& buf) -> bool {
    while (!buf.empty()) {
      const ssize_t w = send(to.fd, buf.data.get() + buf.begin, buf.end - buf.begin, MSG_NOSIGNAL);
      if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      buf.begin += static_cast<size_t>(w);
    }
    return true;
  };
  for (int round = 0; round < 16 && (read_client || read_server || round == 0); ++round) {
    // Client -> server, through the scanner.
    if (read_client && !c.client.read_closed) {
      ssize_t r = 0;
      read_client = read_into(c.client, c.to_server, &r);
      if (r > 0) {
        char* fresh = c.to_server.data.get() + c.to_server.end;
        const H2FrameScanner::Verdict v =
            c.scanner.Scan(fresh, static_cast<size_t>(r), Clock::now());
        c.to_server.end += v.forward;
        if (v.refusal != H2FrameScanner::Refusal::kNone) {
          Refuse(c, v.refusal);
          return;
        }
      }
    } else {
      read_client = false;
    }
    if (!write_from(c.server, c.to_server)) {
      Close(c);
      return;
    }
    // Server -> client, as it is.
    if (read_server && !c.server.read_closed) {
      ssize_t r = 0;
      read_server = read_into(c.server, c.to_client, &r);
      c.to_client.end += static_cast<size_t>(r);
    } else {
      read_server = false;
    }
    if (!write_from(c.client, c.to_client)) {
      Close(c);
      return;
    }
  }
  // Half-closes: an EOF passes on once its direction's bytes are written.
  if (c.client.read_closed && c.to_server.empty() && !c.server.write_shut) {
    shutdown(c.server.fd, SHUT_WR);
    c.server.write_shut = true;
  }
  if (c.server.read_closed && c.to_client.empty() && !c.client.write_shut) {
    shutdown(c.client.fd, SHUT_WR);
    c.client.write_shut = true;
  }
  if (c.server.write_shut && c.client.write_shut) {
    Close(c);
    return;
  }
  // An idle connection holds no buffer.
  if (c.to_server.empty()) c.to_server.data.reset();
  if (c.to_client.empty()) c.to_client.data.reset();
  auto want = [](bool read, bool write) {
    return (read ? uint32_t{EPOLLIN} : 0u) | (write ? uint32_t{EPOLLOUT} : 0u);
  };
  Watch(c.client, want(!c.client.read_closed && (c.to_server.space() > 0 || c.to_server.begin > 0),
                       !c.to_client.empty()));
  Watch(c.server, want(!c.server.read_closed && (c.to_client.space() > 0 || c.to_client.begin > 0),
                       !c.to_server.empty()));
}

void H2Guard::Impl::Refuse(Conn& c, H2FrameScanner::Refusal why) {
  if (why == H2FrameScanner::Refusal::kNotHttp2) {
    ++refused_not_http2;
  } else {
    ++refused_resets;
  }
  uint64_t dropped = 0;
  if (log_limiter.Allow(&dropped)) {
    ODMOE_LOG_WARN(
        "{}: closed the gRPC connection from {}: {}{}", options.name, c.peer,
        c.scanner.Describe(why),
        dropped > 0 ? absl::StrFormat(" (%d more closings not logged)", dropped) : std::string());
  }
  Close(c);
}

void H2Guard::Impl::Close(Conn& c) {
  if (c.dead) return;
  c.dead = true;
  for (Side* s : {&c.client, &c.server}) {
    Watch(*s, 0);
    close(s->fd);
    s->fd = -1;
  }
  {
    PeerTable& t = Peers();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.by_fd.find(c.grpc_fd);
    if (it != t.by_fd.end() && it->second == c.peer) t.by_fd.erase(it);
  }
  --open;
}

}  // namespace odmoe
