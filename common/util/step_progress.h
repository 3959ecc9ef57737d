// Progress of one long start-up step counted in units (layers, experts,
// bytes): loading weights onto a device, packing experts into pinned memory,
// loading a resident worker's experts. A step that ends within `quiet_for`
// (1 s) prints nothing. Past it, a tool writes to its stderr (a bar redrawn
// in place on a terminal, a plain line at most every `interval` (5 s)
// otherwise) and a daemon to its log (SetProgressOutput(kLog), info lines
// at most every `interval`); Finish() reports the total time.
//
//   StepProgress progress("loading weights onto cuda:0", n_layer, "layers");
//   for (int l = 0; l < n_layer; ++l) { ...; progress.Advance(1, layer_bytes); }
//   progress.Finish();
//
// Not thread-safe: one thread drives a step.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "util/progress_line.h"

namespace odmoe {

class StepProgress {
 public:
  struct Options {
    std::chrono::milliseconds quiet_for{1000};
    std::chrono::milliseconds interval{5000};
    // Where the lines go instead of the process's progress output (tests).
    std::function<void(const std::string&)> log;
  };
  StepProgress(std::string label, uint64_t total, std::string unit);
  StepProgress(std::string label, uint64_t total, std::string unit, Options options);
  ~StepProgress();
  StepProgress(const StepProgress&) = delete;
  StepProgress& operator=(const StepProgress&) = delete;

  /// `units` more done, `bytes` of them (0 when bytes mean nothing here).
  void Advance(uint64_t units, uint64_t bytes = 0);
  /// Reports the step done (if it was shown or took longer than quiet_for).
  void Finish();

  /// "37 % (12 of 32 layers, 3.1 GiB, 6 s)": the text of a progress line.
  std::string Text() const;

 private:
  double Seconds() const;

  std::string label_, unit_;
  uint64_t total_, done_ = 0, bytes_ = 0;
  Options options_;
  std::chrono::steady_clock::time_point start_, last_log_;
  bool shown_ = false, finished_ = false;
  std::unique_ptr<ProgressLine> line_;  // stderr output, once shown
};

/// Where StepProgress writes when its Options name no sink: kStderr (the
/// default: tools) or kLog (daemons: their log at info level).
enum class ProgressOutput { kStderr, kLog };
void SetProgressOutput(ProgressOutput output);

/// "512 B", "3.0 KiB", "12.5 MiB", "3.10 GiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace odmoe
