#include "util/step_progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/logging.h"

namespace odmoe {
namespace {
std::atomic<ProgressOutput> g_output{ProgressOutput::kStderr};
}  // namespace

void SetProgressOutput(ProgressOutput output) { g_output.store(output); }

std::string FormatBytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  if (bytes < (uint64_t{1} << 20)) return absl::StrFormat("%.1f KiB", b / 1024.0);
  if (bytes < (uint64_t{1} << 30)) return absl::StrFormat("%.1f MiB", b / (1024.0 * 1024.0));
  return absl::StrFormat("%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
}

StepProgress::StepProgress(std::string label, uint64_t total, std::string unit)
    : StepProgress(std::move(label), total, std::move(unit), Options{}) {}

StepProgress::StepProgress(std::string label, uint64_t total, std::string unit, Options options)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      options_(std::move(options)),
      start_(std::chrono::steady_clock::now()) {
  if (!options_.log && g_output.load() == ProgressOutput::kLog) {
    options_.log = [](const std::string& line) { ODMOE_LOG_INFO("{}", line); };
  }
}

StepProgress::~StepProgress() {
  // A step abandoned on an error: end the terminal line, claim nothing.
  if (line_ && !finished_) line_->Finish(absl::StrCat(label_, ": stopped at ", Text()));
}

double StepProgress::Seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string StepProgress::Text() const {
  const double fraction =
      total_ == 0 ? 1.0 : std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
  std::string text = absl::StrFormat("%.0f %% (%d of %d %s", 100.0 * fraction, done_, total_, unit_);
  if (bytes_ > 0) absl::StrAppend(&text, ", ", FormatBytes(bytes_));
  absl::StrAppend(&text, absl::StrFormat(", %.0f s)", Seconds()));
  return text;
}

void StepProgress::Advance(uint64_t units, uint64_t bytes) {
  done_ += units;
  bytes_ += bytes;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < options_.quiet_for) return;
  if (!shown_) {
    shown_ = true;
    if (!options_.log) line_ = std::make_unique<ProgressLine>(stderr, options_.interval);
  }
  if (line_ && line_->tty()) {
    const double fraction =
        total_ == 0 ? 1.0
                    : std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    line_->Update(absl::StrCat(label_, " [", std::string(static_cast<size_t>(filled), '#'),
                               std::string(static_cast<size_t>(kWidth - filled), '.'), "] ",
                               Text()));
    return;
  }
  if (line_) {  // ProgressLine throttles plain lines itself
    line_->Update(absl::StrCat(label_, ": ", Text()));
    return;
  }
  if (last_log_ != std::chrono::steady_clock::time_point{} && now - last_log_ < options_.interval) {
    return;
  }
  last_log_ = now;
  options_.log(absl::StrCat(label_, ": ", Text()));
}

void StepProgress::Finish() {
  if (finished_) return;
  finished_ = true;
  const double s = Seconds();
  if (!shown_ && std::chrono::steady_clock::now() - start_ < options_.quiet_for) return;
  if (!shown_ && !options_.log) line_ = std::make_unique<ProgressLine>(stderr, options_.interval);
  shown_ = true;
  std::string line = absl::StrFormat("%s: done, %d %s", label_, done_, unit_);
  if (bytes_ > 0) absl::StrAppend(&line, " (", FormatBytes(bytes_), ")");
  absl::StrAppend(&line, absl::StrFormat(" in %.1f s", s));
  if (line_) {
    line_->Finish(line);
  } else {
    options_.log(line);
  }
}

}  // namespace odmoe
