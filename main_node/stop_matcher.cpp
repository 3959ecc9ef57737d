#include "main_node/stop_matcher.h"

#include <algorithm>

namespace odmoe {

std::string StopMatcher::Push(std::string_view piece) {
  if (stopped_) return "";
  pending_ += piece;
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos && at < cut) cut = at;
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Keep the longest tail that is a prefix of some stop sequence.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > keep; --n) {
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  std::string out = stopped_ ? "" : pending_;
  pending_.clear();
  return out;
}

}  // namespace odmoe
