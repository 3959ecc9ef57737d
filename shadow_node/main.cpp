// odmoe-shadow: runs a quantized copy of the model ahead of the main node and
// tells the workers which experts each layer will need.
#include "cluster/daemon_main.h"
#include "shadow_node/shadow_node.h"

int main(int argc, char** argv) {
  return odmoe::RunDaemon(
      argc, argv, "odmoe-shadow",
      "An odmoe shadow node: predicts the experts of every layer ahead of the main node.",
      odmoe::FactoryOf<odmoe::ShadowNode>());
}
