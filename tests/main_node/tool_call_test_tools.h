// The tools the tool-call tests declare (a weather lookup and a search), as a
// request would send them.
#pragma once

#include <vector>

#include "main_node/tool_request.h"
#include "nlohmann/json.hpp"

namespace odmoe::test {

inline std::vector<ToolDefinition> TestTools() {
  using nlohmann::json;
  ToolDefinition weather;
  weather.name = "get_weather";
  weather.description = "The weather in a city";
  weather.parameters = json::parse(R"({"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "unit": {"type": "string", "enum": ["C", "F"]}},
      "required": ["city"]})");
  ToolDefinition search;
  search.name = "search";
  search.parameters = json::parse(R"({"type": "object",
      "properties": {"query": {"type": "string"}, "filters": {"type": "object"},
                     "exact": {"type": "boolean"}},
      "required": ["query"]})");
  return {weather, search};
}

}  // namespace odmoe::test
