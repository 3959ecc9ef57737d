// odmoe-topology-keys: the topology file's key reference, made from the key
// declarations (common/topology/topology_keys.cpp), as a Markdown table.
//
//   odmoe-topology-keys                            # the table on stdout
//   odmoe-topology-keys --update docs/cluster.md   # rewrite the table between its markers
#include <fstream>
#include <iostream>

#include "topology/topology_keys.h"
#include "util/cli_args.h"
#include "util/regular_file.h"

int main(int argc, char** argv) {
  odmoe::CliArgs args("odmoe-topology-keys",
                      "Print the topology key reference (Markdown), or update it in a document.");
  std::string update;
  args.AddString("update", &update, "FILE",
                 "rewrite the table between the topology-keys markers of FILE (docs/cluster.md)");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (update.empty()) {
    std::cout << odmoe::TopologyKeysMarkdown();
    return 0;
  }
  absl::StatusOr<std::string> doc = odmoe::ReadRegularFile(update, 16u << 20);
  absl::StatusOr<std::string> updated =
      doc.ok() ? odmoe::WithTopologyKeys(*doc) : absl::StatusOr<std::string>(doc.status());
  if (!updated.ok()) {
    std::cerr << "odmoe-topology-keys: " << update << ": " << updated.status().message() << "\n";
    return 1;
  }
  if (*updated == *doc) return 0;
  std::ofstream out(update, std::ios::binary | std::ios::trunc);
  out << *updated;
  if (!out.flush()) {
    std::cerr << "odmoe-topology-keys: " << update << ": cannot write\n";
    return 1;
  }
  std::cout << "odmoe-topology-keys: updated " << update << "\n";
  return 0;
}
