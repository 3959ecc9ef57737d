// One benchmark request on a cluster's main node (Main.Generate, greedy,
// batch 1, fixed output length), measured the way the paper's §4 reports it,
// plus what a cluster operator wants to know: load stalls, bytes moved.
//
//   RequestSpec spec{.prompt_ids = p, .max_tokens = 64, .experiment = e};
//   ODMOE_ASSIGN_OR_RETURN(RequestMetrics m, RunRequest(cluster, spec));
//   m.decode_tps, m.recall, m.bytes_loaded_per_token ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cluster_process.h"
#include "cluster/protocol.h"

namespace odmoe::bench {

struct RequestSpec {
  std::vector<int32_t> prompt_ids;
  int max_tokens = 64;
  v1::Experiment experiment;  // empty = the topology's prediction setup
};

struct RequestMetrics {
  int prompt_tokens = 0, output_tokens = 0;
  double ttft_s = 0;
  double decode_tps = 0;          // tokens/s over the decode iterations
  double output_tps = 0;          // output tokens / (prefill + decode time)
  double recall = 0;              // Eq. 3 (0 without prediction)
  std::vector<double> recall_per_token;
  std::vector<uint64_t> recall_layer_correct, recall_layer_slots;  // by layer
  uint64_t predictions_missing = 0;
  uint64_t hits = 0, misses = 0, reloads = 0;
  uint64_t host_computes = 0;  // misses computed on a worker's host (workers.host_compute)
  uint64_t substitutions = 0;  // misses computed with a substitute (workers.degrade, lossy)
  uint64_t low_precision = 0;  // tasks computed from the low-precision copy (mixed_precision)
  // Against the single process's greedy run (BenchContext::Run): the share
  // of output positions with its token, and the lossless model's perplexity
  // of this output and of its own.
  double agreement = 1, judged_ppl = 0, reference_judged_ppl = 0;
  double stall_per_token_s = 0;        // decode load stall / output token
  double bytes_loaded_per_token = 0;   // expert bytes loaded by workers / output token
  double network_bytes_per_token = 0;  // main node's link bytes / output token
  double alignment_bytes_per_token = 0;
  // CPU time the nodes' processes used per output token (prefill included).
  double cpu_ms_per_token_main = 0, cpu_ms_per_token_shadow = 0, cpu_ms_per_token_workers = 0;
  std::string prediction;  // what the main node used
  int token_period = 0, kv_period = 0;
  // Speculative decoding (0 without drafts): drafts per iteration asked for,
  // drafted tokens verified, those accepted, decode iterations and their tokens.
  int draft_tokens = 0;
  uint64_t drafted = 0, accepted = 0, decode_iterations = 0, iteration_tokens = 0;
  std::vector<int32_t> output_ids;
};

absl::StatusOr<RequestMetrics> RunRequest(const ClusterProcess& cluster, const RequestSpec& spec);

}  // namespace odmoe::bench
