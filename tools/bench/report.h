// odmoe-bench's Markdown summary of results.json: the tables a reader wants
// (deployments side by side with the OD-MoE / resident headline, peak memory
// per node, recall by shadow and alignment, the ablation cases, the
// alignment-period grid, the Eq. 1 timing model) and the emulation that was on.
//
//   std::string md = MarkdownSummary(results);   // results.json as written
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace odmoe::bench {

std::string MarkdownSummary(const nlohmann::json& results);

}  // namespace odmoe::bench
