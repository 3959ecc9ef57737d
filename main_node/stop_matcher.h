// Stop sequences over streamed text: releases what cannot be the start of a
// stop sequence, holds back the rest, and cuts the text where the first one
// matches (the stop sequence itself is never released).
//
//   StopMatcher stop({"\n\n", "END"});
//   std::string out = stop.Push("Hello\n");   // "Hello" ("\n" may start "\n\n")
//   out += stop.Push("\nmore");                // "" and stopped() is true
//   out += stop.Flush();                       // what was held back, unless stopped
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace odmoe {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  bool stopped() const { return stopped_; }
  /// Adds generated text; returns what may be released now.
  std::string Push(std::string_view piece);
  /// The end of the text: what was held back (nothing once stopped).
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace odmoe
