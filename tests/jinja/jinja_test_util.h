// What the Jinja tests share: the fixed strftime_now of
// scripts/fixtures/jinja_env.py (FIXED_NOW), so renders compare byte for byte.
#pragma once

#include <map>
#include <string>

#include "jinja/template.h"

namespace odmoe::jinja {

inline RenderOptions TestRenderOptions() {
  RenderOptions options;
  options.strftime_now = [](const std::string& format) {
    static const std::map<std::string, std::string> kFixed = {{"%Y-%m-%d", "2026-11-26"},
                                                              {"%d %b %Y", "26 Nov 2026"},
                                                              {"%B %d, %Y", "November 26, 2026"}};
    auto it = kFixed.find(format);
    return it == kFixed.end() ? std::string("2026-11-26") : it->second;
  };
  return options;
}

}  // namespace odmoe::jinja
