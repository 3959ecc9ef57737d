// Fuzz target: the HTTP/1.1 connection state machine (main_node/http_connection.h).
// The input's first two bytes pick how the rest is cut into reads and when
// the client's stream ends; the rest is the bytes a client sends (requests,
// pipelined or not, well formed or not). The same bytes fed at once and fed
// in those pieces must give the same requests, refusals and end, with every
// request answered before the next is parsed; never a crash or a hang.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "main_node/http_connection.h"

namespace {

struct Outcome {
  std::vector<std::string> seen;  // "METHOD target body" or "refused N"
  bool ended = false;
  bool operator==(const Outcome& o) const { return seen == o.seen && ended == o.ended; }
};

// Drives the connection as the server does (body limit 4 KiB, every request
// answered at once) over `pieces`, then the end of the stream when `end`.
Outcome Run(const std::vector<std::string_view>& pieces, bool end) {
  odmoe::HttpConnectionLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_body_bytes = 4096;
  limits.max_pipelined_bytes = 512;
  odmoe::HttpConnection conn(limits);
  Outcome out;
  auto pump = [&] {
    for (int guard = 0; guard < 100000; ++guard) {
      using Event = odmoe::HttpConnection::Event;
      const Event ev = conn.Next();
      if (ev == Event::kNeedBytes) return;
      if (ev == Event::kEnd) {
        out.ended = true;
        return;
      }
      if (ev == Event::kHeader) {
        conn.ReadBody(4096);
        continue;
      }
      if (ev == Event::kRefused) {
        out.seen.push_back("refused " + std::to_string(conn.refusal().status));
      } else {
        const odmoe::HttpRequest r = conn.TakeRequest();
        out.seen.push_back(r.method + " " + r.target + " " + r.body);
      }
      conn.Done();
    }
    odmoe::fuzz::Die("Next() does not settle");
  };
  for (std::string_view p : pieces) {
    if (!conn.WantsBytes()) break;
    conn.Feed(p);
    pump();
  }
  if (end) {
    conn.FeedEnd();
    pump();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t step = 1 + data[0] % 64;
  const bool end = (data[1] & 1) != 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  std::vector<std::string_view> pieces;
  for (size_t at = 0; at < bytes.size(); at += step) pieces.push_back(bytes.substr(at, step));
  const Outcome whole = Run({bytes}, end);
  const Outcome cut = Run(pieces, end);
  if (!(whole == cut)) odmoe::fuzz::Die("the cut stream parses differently from the whole");
  odmoe::fuzz::Consume(whole.seen.size());
  return 0;
}
