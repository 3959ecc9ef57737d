// odmoe-worker: holds every expert in host memory, loads the one it is about
// to compute into its small device memory, computes it, evicts it.
#include "cluster/daemon_main.h"
#include "worker_node/worker_node.h"

int main(int argc, char** argv) {
  return odmoe::RunDaemon(
      argc, argv, "odmoe-worker",
      "An odmoe worker node: loads experts just in time and computes them.",
      odmoe::FactoryOf<odmoe::WorkerNode>());
}
