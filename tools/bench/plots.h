// odmoe-bench's figures as PNG files, drawn from results.json: recall per
// output-token index (the paper's Fig. 3), the ablation bars (Fig. 8), the
// alignment-period heat map (Fig. 9) and decode throughput by deployment.
//
//   std::vector<std::string> files;
//   ODMOE_RETURN_IF_ERROR(WritePlots(results, out_dir, &files));  // "recall.png", ...
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace odmoe::bench {

/// Writes one PNG per experiment present in `results`; appends the file
/// names (relative to out_dir) to `files`.
absl::Status WritePlots(const nlohmann::json& results, const std::string& out_dir,
                        std::vector<std::string>* files);

}  // namespace odmoe::bench
