// Every key of the topology file, declared once (topology_keys.cpp: name,
// member of the typed struct, kind with its bounds, help). The reader
// (ParseTopology), the writer (TopologyToYaml) and the key reference in
// docs/cluster.md are made from those declarations.
//
// Adding a key: a member in topology.h (its default is the member's
// initializer) and one line in topology_keys.cpp's table of its section;
// then regenerate the reference (a test fails until the docs agree):
//
//   build/bin/odmoe-topology-keys --update docs/cluster.md
//
// A rule between keys (a bound that depends on another key) goes in
// CheckStructure (topology.cpp), the one validation function.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "topology/topology.h"

namespace YAML {
class Node;
}

namespace odmoe {

/// Reads every declared key of the YAML document `root` into `t`: types,
/// bounds, required keys, unknown and repeated keys; errors name `file` and
/// the key path. Relative paths are resolved against `base_dir`.
absl::Status ReadTopologyKeys(const YAML::Node& root, const std::string& file,
                              const std::string& base_dir, Topology* t);

/// The key reference: a Markdown table, one row per key and section.
std::string TopologyKeysMarkdown();

/// docs/cluster.md holds TopologyKeysMarkdown() between these lines.
inline constexpr char kTopologyKeysBegin[] =
    "<!-- topology-keys:begin (generated: build/bin/odmoe-topology-keys --update "
    "docs/cluster.md) -->";
inline constexpr char kTopologyKeysEnd[] = "<!-- topology-keys:end -->";

/// `doc` with what lies between the markers replaced by the current key
/// reference; an error when the markers are missing or out of order.
absl::StatusOr<std::string> WithTopologyKeys(std::string_view doc);

}  // namespace odmoe
