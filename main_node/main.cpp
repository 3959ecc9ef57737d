// odmoe-main: embeddings, attention with its KV cache, norms, gates, LM head
// and sampling; takes completion requests and drives the workers.
#include "cluster/daemon_main.h"
#include "main_node/main_node.h"

int main(int argc, char** argv) {
  return odmoe::RunDaemon(
      argc, argv, "odmoe-main",
      "The odmoe main node: serves completions, runs everything but the experts.",
      odmoe::FactoryOf<odmoe::MainNode>());
}
