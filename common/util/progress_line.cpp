#include "util/progress_line.h"

#include <unistd.h>

namespace odmoe {

ProgressLine::ProgressLine(std::FILE* out, std::chrono::milliseconds min_interval)
    : out_(out), tty_(isatty(fileno(out)) != 0), min_interval_(min_interval) {}

void ProgressLine::Update(const std::string& text) {
  if (text == shown_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    // Pad over what a longer previous text left on the line.
    const std::string pad(width_ > text.size() ? width_ - text.size() : 0, ' ');
    std::fprintf(out_, "\r%s%s", text.c_str(), pad.c_str());
    width_ = text.size();
  } else {
    // Throttled against the last line of any kind (an update or a final line).
    if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < min_interval_) return;
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
  shown_ = text;
  last_ = now;
}

void ProgressLine::Finish(const std::string& text) {
  if (tty_) {
    const std::string pad(width_ > text.size() ? width_ - text.size() : 0, ' ');
    std::fprintf(out_, "\r%s%s\n", text.c_str(), pad.c_str());
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
  shown_.clear();
  width_ = 0;
  last_ = std::chrono::steady_clock::now();
}

}  // namespace odmoe
