// The HTTP/2 frame scanner of the gRPC guard (cluster/h2_frame_scanner.h):
// the preface, frames split at every byte boundary, and the reset budgets.
#include "cluster/h2_frame_scanner.h"

#include <catch2/catch.hpp>
#include <string>

namespace odmoe {
namespace {

using Clock = H2ResetBudget::Clock;

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(uint8_t type, uint32_t stream, const std::string& payload = "") {
  std::string f;
  f += static_cast<char>((payload.size() >> 16) & 0xff);
  f += static_cast<char>((payload.size() >> 8) & 0xff);
  f += static_cast<char>(payload.size() & 0xff);
  f += static_cast<char>(type);
  f += '\0';  // flags
  f += static_cast<char>((stream >> 24) & 0x7f);
  f += static_cast<char>((stream >> 16) & 0xff);
  f += static_cast<char>((stream >> 8) & 0xff);
  f += static_cast<char>(stream & 0xff);
  return f + payload;
}
std::string Headers(uint32_t stream) { return Frame(0x1, stream, std::string(12, '\x82')); }
std::string Reset(uint32_t stream) { return Frame(0x3, stream, std::string("\0\0\0\x8", 4)); }
// A payload that looks like frame headers of RST_STREAM: must be skipped.
std::string Data(uint32_t stream) { return Frame(0x0, stream, Reset(1) + Reset(3) + Reset(5)); }

// What a gRPC client sends: preface, SETTINGS, a few calls, one cancelled.
std::string Conversation(int calls, int resets) {
  std::string s = kPreface + Frame(0x4, 0, std::string(6, '\0'));
  for (int i = 0; i < calls; ++i) {
    const uint32_t id = 2 * i + 1;
    s += Headers(id) + Data(id);
    if (i < resets) s += Reset(id);
  }
  return s;
}

}  // namespace

TEST_CASE("h2 frame scanner: a conversation passes whole, split at every byte", "[h2guard]") {
  const std::string bytes = Conversation(5, 2);
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    H2ResetBudget node(H2ResetBudget::NodeDefault());
    H2FrameScanner scanner(node);
    const auto now = Clock::now();
    const H2FrameScanner::Verdict a = scanner.Scan(bytes.data(), cut, now);
    const H2FrameScanner::Verdict b = scanner.Scan(bytes.data() + cut, bytes.size() - cut, now);
    INFO("cut at " << cut);
    REQUIRE(a.refusal == H2FrameScanner::Refusal::kNone);
    REQUIRE(b.refusal == H2FrameScanner::Refusal::kNone);
    CHECK(a.forward == cut);
    CHECK(b.forward == bytes.size() - cut);
    CHECK(scanner.streams_opened() == 5);
    CHECK(scanner.streams_reset() == 2);  // the RST_STREAM look-alikes in DATA are skipped
    CHECK(scanner.frames() == 1 + 5 * 2 + 2);
  }
  // One byte at a time.
  H2ResetBudget node(H2ResetBudget::NodeDefault());
  H2FrameScanner scanner(node);
  for (char ch : bytes) {
    REQUIRE(scanner.Scan(&ch, 1, Clock::now()).forward == 1);
  }
  CHECK(scanner.streams_reset() == 2);
}

TEST_CASE("h2 frame scanner: no client preface is refused at the first wrong byte", "[h2guard]") {
  for (const std::string& bytes :
       {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string("PRI * HTTP/1.1\r\n"),
        std::string("\x16\x03\x01\x02\x00", 5) /* a TLS ClientHello */}) {
    for (size_t cut = 0; cut <= bytes.size(); ++cut) {
      H2ResetBudget node(H2ResetBudget::NodeDefault());
      H2FrameScanner scanner(node);
      const H2FrameScanner::Verdict a = scanner.Scan(bytes.data(), cut, Clock::now());
      const H2FrameScanner::Verdict b =
          scanner.Scan(bytes.data() + cut, bytes.size() - cut, Clock::now());
      INFO(bytes << " cut at " << cut);
      const bool refused_first = a.refusal == H2FrameScanner::Refusal::kNotHttp2;
      CHECK((refused_first || b.refusal == H2FrameScanner::Refusal::kNotHttp2));
      CHECK((refused_first ? a.forward : b.forward) == 0);
      CHECK(scanner.Describe(H2FrameScanner::Refusal::kNotHttp2).find("preface") !=
            std::string::npos);
    }
  }
  // The preface alone, then nothing yet: fine.
  H2ResetBudget node(H2ResetBudget::NodeDefault());
  H2FrameScanner scanner(node);
  CHECK(scanner.Scan(kPreface.data(), 10, Clock::now()).refusal == H2FrameScanner::Refusal::kNone);
}

TEST_CASE("h2 frame scanner: resets beyond the connection's budget close it before the reset",
          "[h2guard]") {
  H2ResetBudget node(H2ResetBudget::NodeDefault());
  H2FrameScanner scanner(node, {.burst = 100, .per_second = 50});
  const auto t0 = Clock::now();
  std::string bytes = kPreface;
  REQUIRE(scanner.Scan(bytes.data(), bytes.size(), t0).forward == bytes.size());
  // 100 opened and reset at once: within the burst.
  for (uint32_t i = 0; i < 100; ++i) {
    const std::string pair = Headers(2 * i + 1) + Reset(2 * i + 1);
    const H2FrameScanner::Verdict v = scanner.Scan(pair.data(), pair.size(), t0);
    REQUIRE(v.refusal == H2FrameScanner::Refusal::kNone);
  }
  // The 101st in the same instant: its HEADERS passes, the reset does not.
  const std::string pair = Headers(201) + Reset(201);
  const H2FrameScanner::Verdict v = scanner.Scan(pair.data(), pair.size(), t0);
  CHECK(v.refusal == H2FrameScanner::Refusal::kResetsTooFast);
  CHECK(v.forward == Headers(201).size());
  CHECK(scanner.streams_reset() == 100);
  CHECK(scanner.Describe(v.refusal).find("101 streams opened, 100 reset") != std::string::npos);
  // Once refused, nothing passes.
  CHECK(scanner.Scan(pair.data(), pair.size(), t0 + std::chrono::hours(1)).forward == 0);
}

TEST_CASE("h2 frame scanner: resets at the budget's rate go on for ever", "[h2guard]") {
  H2ResetBudget node(H2ResetBudget::NodeDefault());
  H2FrameScanner scanner(node, {.burst = 100, .per_second = 50});
  auto t = Clock::now();
  REQUIRE(scanner.Scan(kPreface.data(), kPreface.size(), t).forward == kPreface.size());
  // 40 a second (a cancelled call every 25 ms) for a minute.
  for (uint32_t i = 0; i < 2400; ++i) {
    t += std::chrono::milliseconds(25);
    const std::string pair = Headers(2 * i + 1) + Reset(2 * i + 1);
    REQUIRE(scanner.Scan(pair.data(), pair.size(), t).refusal == H2FrameScanner::Refusal::kNone);
  }
  CHECK(scanner.streams_reset() == 2400);
}

TEST_CASE("h2 frame scanner: the node's budget is shared by its connections", "[h2guard]") {
  H2ResetBudget node({.burst = 150, .per_second = 10});
  H2FrameScanner a(node, {.burst = 100, .per_second = 50});
  H2FrameScanner b(node, {.burst = 100, .per_second = 50});
  const auto t0 = Clock::now();
  a.Scan(kPreface.data(), kPreface.size(), t0);
  b.Scan(kPreface.data(), kPreface.size(), t0);
  std::string resets;
  for (uint32_t i = 0; i < 100; ++i) resets += Reset(2 * i + 1);
  CHECK(a.Scan(resets.data(), resets.size(), t0).refusal == H2FrameScanner::Refusal::kNone);
  // b is within its own budget but the node has 50 left.
  const H2FrameScanner::Verdict v = b.Scan(resets.data(), resets.size(), t0);
  CHECK(v.refusal == H2FrameScanner::Refusal::kResetsTooFast);
  CHECK(v.forward == 50 * Reset(1).size());
  CHECK(b.streams_reset() == 50);
}

}  // namespace odmoe
