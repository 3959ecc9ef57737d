// odmoe-cluster's supervisor: restarts the nodes of a cluster that die
// unexpectedly (tools/odmoe_cluster.cpp, "Supervision"), with the policy of
// util/restart_policy.h, until SIGTERM or SIGINT; then stops every node.
// It runs in the process that started the nodes, so that waitpid tells how
// each one ended; nodes started by another odmoe-cluster command (scale) are
// watched by their pid files.
//
//   signal(SIGTERM, OnStopSignal);
//   ... start the nodes, write their pid files ...
//   return Supervise(options, topology);   // returns after a stop signal
#pragma once

#include <csignal>

#include "cluster_nodes.h"

namespace odmoe::cluster_tool {

/// The stop signal received (SIGTERM or SIGINT), 0 while none.
extern volatile sig_atomic_t g_stop_signal;
/// A signal handler that records the signal in g_stop_signal.
void OnStopSignal(int sig);

/// Watches and restarts the nodes of `t` until a stop signal, then stops
/// every node and returns 0. Logs to stdout, one line per event.
int Supervise(const Options& o, const Topology& t);

}  // namespace odmoe::cluster_tool
