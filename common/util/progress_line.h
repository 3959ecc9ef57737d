// One line of progress for a long step, on a stream (stderr by default): on a
// terminal the line is rewritten in place (carriage return) as often as it
// changes; elsewhere (a log file, a pipe, CI) a plain line is written when
// the text changed and at least `min_interval` passed since the last line
// (an update or a final one), so logs stay short.
// Finish() ends the line (on a terminal) and always writes the last text.
//
//   ProgressLine progress(stderr);
//   for (...) progress.Update(absl::StrFormat("writing %d / %d MiB", done, total));
//   progress.Finish("wrote 3.4 GiB in 23 s");
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace odmoe {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out = stderr,
                        std::chrono::milliseconds min_interval = std::chrono::seconds(5));
  /// True when the stream is a terminal (updates rewrite one line).
  bool tty() const { return tty_; }
  /// Shows `text` now (terminal) or when due (otherwise).
  void Update(const std::string& text);
  /// Writes `text` as the step's final line.
  void Finish(const std::string& text);

 private:
  std::FILE* out_;
  bool tty_;
  std::chrono::milliseconds min_interval_;
  std::chrono::steady_clock::time_point last_{};
  std::string shown_;
  size_t width_ = 0;  // characters on the terminal line now
};

}  // namespace odmoe
