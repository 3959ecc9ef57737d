// odmoe-main: embeddings, attention with its KV cache, norms, gates, LM head
// and sampling; takes completion requests and drives the workers.
#include "cluster/daemon_main.h"
#include "main_node/main_node.h"

int main(int argc, char** argv) {
  return odmoe::RunDaemon(
      argc, argv, "odmoe-main",
      "The odmoe main node: serves completions, runs everything but the experts.",
      [](const odmoe::Topology& t, const std::string& id)
          -> absl::StatusOr<std::unique_ptr<odmoe::NodeDaemon>> {
        auto m = odmoe::MainNode::Create(t, id);
        if (!m.ok()) return m.status();
        return std::unique_ptr<odmoe::NodeDaemon>(std::move(*m));
      });
}
