// The HTTP/2 "rapid reset" attack (CVE-2023-44487) as a test client: plain
// TCP to a gRPC port, the client preface and an empty SETTINGS frame, then in
// a loop a HEADERS frame opening a stream (a POST to `path`, a literal HPACK
// header block written by hand) followed at once by RST_STREAM(CANCEL) on it.
// No credential and no message is ever sent: what it costs the server is
// what anyone who can reach the port can cost it. A closed connection is
// opened again. It reads (and drops) whatever the server sends, so that the
// server's writes never block; it never acknowledges the server's SETTINGS
// (a limit the server announces there, such as max concurrent streams, is
// therefore never acknowledged either, as with a hostile client).
//
//   RapidReset attack({.port = 7700, .path = "/odmoe.v1.Main/Generate"});
//   attack.Start();
//   ... the server is busy ...
//   RapidReset::Result r = attack.Stop();   // r.streams, r.seconds, r.cpu_seconds
//
// POSIX sockets and the standard library only, so that it can also be built
// into a stand-alone program to measure a running daemon.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace odmoe::test {

class RapidReset {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;
    std::string path = "/odmoe.v1.Main/Generate";
    int connections = 1;          // each its own attacking thread
    int streams_per_write = 100;  // HEADERS + RST_STREAM pairs in one send()
    uint64_t max_streams = 0;     // each thread stops after this many (0: at Stop)
  };
  struct Result {
    uint64_t streams = 0;    // HEADERS + RST_STREAM pairs sent
    uint64_t connects = 0;   // connections opened (one more per server close)
    double seconds = 0;      // from Start to Stop
    double cpu_seconds = 0;  // the attacking threads' own CPU time
  };

  explicit RapidReset(Options options) : options_(std::move(options)) {}
  ~RapidReset() { Stop(); }
  RapidReset(const RapidReset&) = delete;
  RapidReset& operator=(const RapidReset&) = delete;

  void Start();
  /// Whether every thread has sent its max_streams (false without a maximum).
  bool Done() const { return options_.max_streams > 0 && finished_ == options_.connections; }
  /// Stops the threads (joins them) and returns what they did.
  Result Stop();

 private:
  void Attack();

  const Options options_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> streams_{0}, connects_{0}, cpu_ns_{0};
  std::atomic<int> finished_{0};
  std::vector<std::thread> threads_;
  double started_ = 0;
  Result result_;
};

}  // namespace odmoe::test
