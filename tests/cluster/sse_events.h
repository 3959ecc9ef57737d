// The data lines of a server-sent-events body ("data: ...\n\n" each), in
// order, "[DONE]" included: what a streamed completion's chunks are.
//
//   for (const std::string& data : SseEvents(res->body)) {
//     if (data == "[DONE]") break;
//     const nlohmann::json chunk = nlohmann::json::parse(data);
//   }
#pragma once

#include <string>
#include <vector>

namespace odmoe::test {

inline std::vector<std::string> SseEvents(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6));
    if (end == std::string::npos) break;
    at = end;
  }
  return out;
}

}  // namespace odmoe::test
