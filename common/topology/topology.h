// The cluster topology: which node runs where, with what settings. One YAML
// file describes a whole cluster; every daemon and odmoe-cluster load the same
// file and find their own part by node id.
//
//   ODMOE_ASSIGN_OR_RETURN(Topology t, LoadTopology("deploy/testbed-10.yaml"));
//   const WorkerSpec* w = t.FindWorker("w3");
//   int group = t.GroupOfLayer(5);              // 5 mod (N_W / G)
//   const std::vector<int>& members = t.GroupMembers(group);  // worker indices
//
// File format: a mapping of sections, e.g. (paths are relative to the
// topology file's directory; unknown keys are errors):
//
//   model: ../models/tiny-mixtral-f16.gguf
//   prediction: shadow
//   main: { id: main, address: 127.0.0.1:7700, http: 127.0.0.1:8080 }
//   shadow: { id: shadow, address: 127.0.0.1:7701, quantization: q8_0 }
//   workers:
//     group_size: 2
//     memory_budget: auto
//     nodes:
//       - { id: w0, address: 127.0.0.1:7710 }
//       - { id: w1, address: 127.0.0.1:7711, memory_budget: 8MiB }
//
// Every key is declared once, in topology_keys.cpp (name, member below,
// kind, bounds, help; the default is the member's initializer); the key
// reference in docs/cluster.md is made from those declarations
// (odmoe-topology-keys). Adding a key: a member here and a line there.
//
// load_bandwidth emulates a slow host-to-device link on a CPU testbed (where a
// "load" is a RAM copy, far faster relative to compute than PCIe to a small
// GPU): every expert load takes at least expert_bytes / load_bandwidth
// seconds (the worker sleeps out the rest). Off (0) by default; benchmarks
// report it. lru_cache is the caching baseline of the paper's related work
// (Mixtral-Offloading): no prediction, each worker keeps its last
// cache_experts experts and evicts the least recently used.
//
// Every node also accepts `ssh: user@host` (odmoe-cluster starts it over ssh)
// and `netns: name` (odmoe-cluster starts it inside that network namespace).
// Node ids, ssh targets and namespace names are plain names (letters, digits,
// '_', '-', '.'; ssh also '@', ':'), as they name files and command arguments.
// A key written twice in one mapping is an error.
//
// Every file the topology names (model, shadow.model, node_tls, main.tls,
// cluster_secret_file) must be a regular file (a symlink to one is fine): a
// FIFO, directory or device is refused at once with an error naming the key
// (util/regular_file.h; opening a FIFO would block forever). The model must
// exist; the others may be missing here (the TLS files and the secret are
// made later by `odmoe-cluster certs` and `up`; the node that opens a missing
// one says so), but whatever is there must be a regular file.
//
// Safe default between nodes: a topology with a node address that is not
// loopback (127.0.0.0/8, ::1, localhost) and no node_tls is refused unless it
// says `insecure: true`: without TLS anyone who can reach a node's port can
// send it tasks, hints and admin calls. Loopback-only topologies (one machine)
// need neither.
//
// Errors name the file, the key path and what was expected, e.g.
//   deploy/x.yaml: workers.nodes[2].address: port 7710 is already used by
//   workers.nodes[1] (every node needs its own host:port)
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/dtype.h"
#include "topology/worker_mode.h"  // WorkerMode: workers.mode's table

namespace odmoe {

// kLookahead: the main node predicts layer l+1's experts by applying its
// router to layer l's MoE input (gate look-ahead, as DAOP / DyMoE / FIRM do);
// no shadow node. The first MoE layer of each token goes unpredicted.
enum class PredictionMode { kShadow, kRandom, kNone, kLookahead };

/// The gate look-ahead's variants (`lookahead:`; main_node/lookahead_vote.h).
/// Layer l+1 is predicted from the MoE inputs of layers l-P+1 .. l of the
/// same token (P = `layers`): each is put through layer l+1's router and
/// names its `candidates` best experts, and the prediction is the experts
/// every one of them names (FIRM-MoE's Meeting-of-Layers; P = 1 with the
/// model's top-k is the plain look-ahead). Layers below `from_layer` are not
/// predicted: their experts load after their own gate (DAOP, which trusts the
/// look-ahead only from its fifth layer on).
struct LookaheadSpec {
  int layers = 1;      // P, 1..kMaxLookaheadLayers
  int candidates = 0;  // K; 0 = the model's n_expert_used (capped at n_expert)
  int from_layer = 0;  // >= 0
  bool operator==(const LookaheadSpec&) const = default;
};
inline constexpr int kMaxLookaheadLayers = 8;
/// workers.mixed_precision: DyMoE's depth schedule (cluster/precision_schedule.h).
struct MixedPrecisionSpec {
  DType type = DType::kQ4_0;  // the sub-critical experts' copy
  double floor = 0.5;         // lambda: the retention ratio at the last layer
  bool operator==(const MixedPrecisionSpec&) const = default;
};
/// workers.utility: MoE-SpAc's utility estimation (worker_node/expert_utility.h).
struct UtilitySpec {
  int window = 8;     // gamma: predicted iterations per cycle
  int levels = 4;     // K: utilities 0..K
  int threshold = 1;  // tau: hot at utility >= tau (1..K)
  bool operator==(const UtilitySpec&) const = default;
};
/// How hidden states travel on the wire.
enum class WireDType { kF32, kF16 };

std::string_view PredictionModeName(PredictionMode m);  // "shadow" | "random" | "none" | "lookahead"
std::string_view WireDTypeName(WireDType t);            // "f32" | "f16"

/// What every node has.
struct NodeSpec {
  std::string id;
  std::string address;  // "host:port" as written
  std::string host;     // parsed from address
  int port = 0;         // 1..65535 (0 only in topologies built by tests: pick any)
  std::string backend = "cpu:1";
  std::string ssh;    // "user@host" to start it over ssh; empty = this machine
  std::string netns;  // network namespace to start it in; empty = none
};

/// The HTTP server's connection limits and deadlines (main.http_limits;
/// main_node/http_server.h, docs/operations.md).
struct HttpLimits {
  int max_connections = 512;
  int max_connections_per_client = 128;
  uint64_t max_buffered_body_bytes = 64u << 20;
  int io_threads = 2;
  uint64_t max_header_bytes = 16u << 10;
  int header_timeout_ms = 10000;
  int body_timeout_ms = 60000;
  int idle_timeout_ms = 60000;
  int write_timeout_ms = 30000;
  uint64_t stream_buffer_bytes = 4u << 20;
  uint64_t socket_send_buffer_bytes = 0;  // 0 = the kernel's (autotuned)
};

struct MainSpec : NodeSpec {
  int context = 0;  // 0 = the model's training context (capped at 4096)
  int batch = 64;   // prefill chunk rows
  // The OpenAI-compatible HTTP API (docs/operations.md).
  std::string http;       // "host:port" to serve it on; empty = no HTTP API
  std::string http_host;  // parsed from http
  int http_port = 0;
  std::string api_key;    // required as "Authorization: Bearer <key>" when set
  std::string tls_cert;   // PEM files (absolute); both set = HTTPS
  std::string tls_key;
  int max_running = 4;    // requests generated at once (batched); each has its own KV cache
  int max_queue = 16;     // requests that may wait for their turn; more get 429
  // The largest HTTP request body (Content-Length or chunked), counted while
  // it is read; a larger one is refused with 413 before it is all read.
  uint64_t max_body_bytes = 8u << 20;
  HttpLimits http_limits;
  int worker_timeout_ms = 10000;  // a task unanswered this long = the worker failed
};

/// The most tokens the shadow drafts per iteration (shadow.draft_tokens).
inline constexpr int kMaxDraftTokens = 16;

// Bounds that reflect what a cluster can serve; the check refuses a value
// past one with an error naming the key, the value and the bound.
/// workers.nodes: the main node keeps a stream, a reader thread and a
/// channel per worker and fans every layer out to a group; a thousand
/// workers is far past any MoE model's useful split (layers x top-k).
inline constexpr int kMaxWorkers = 1024;
/// workers.group_size: a worker of a group computes positions i, i+G, ...
/// of a layer's top-k experts; no model has a top-k anywhere near 64.
inline constexpr int kMaxGroupSize = 64;
/// N_W / G: decoding gives layer l to group l mod groups; no MoE model has
/// 128 layers, so beyond 256 groups most would only ever stand by.
inline constexpr int kMaxGroups = 256;
/// main.batch and prefill.mini_batch: rows of one prefill chunk / message;
/// every worker sizes its workspace for them (rows x feed-forward width).
inline constexpr int kMaxBatchRows = 4096;
/// main.max_queue: waiting requests, each holding its whole body.
inline constexpr int kMaxQueuedRequests = 4096;
/// shadow.max_run_ahead: iterations whose predictions the shadow may hold.
inline constexpr int kMaxRunAhead = 1024;
/// The topology file itself (a 1024-worker file is about 60 KiB).
inline constexpr uint64_t kMaxTopologyFileBytes = 4u << 20;

struct ShadowSpec : NodeSpec {
  // kF16 | kQ8_0 | kQ6_K | kQ5_K | kQ4_K | kQ4_0: every converted tensor in
  // this type (a row it cannot hold falls back: model/quant_mix.h).
  DType quantization = DType::kQ8_0;
  std::string model;                  // absolute path of a pre-quantized copy, or empty
  int token_period = 1;               // >= 0; 0 = never align tokens
  int kv_period = 1;                  // >= 0; 0 = never align KV rows
  int max_run_ahead = 4;              // >= 1
  // Speculative decoding with the shadow as drafter (docs/operations.md):
  // tokens the shadow drafts for each decode iteration, verified by the main
  // node in one iteration of up to draft_tokens + 1 rows. 0 = off.
  int draft_tokens = 0;               // 0..kMaxDraftTokens, + 1 <= main.batch
  // How long an iteration may wait for the shadow to have drafted all
  // draft_tokens; 0 = never wait (verify the drafts that are ready).
  int64_t draft_wait_us = 0;
};

struct WorkerSpec : NodeSpec {
  // Bytes; 0 = auto: workspace + one expert slot (two when the worker computes
  // several experts of a layer, top-k > group_size), or all resident ones.
  uint64_t memory_budget = 0;
  uint64_t load_bandwidth = 0; // bytes/s cap on expert loads (emulation); 0 = off
};

/// The id under which the operator's tools (odmoe-cluster, odmoe-bench,
/// odmoe complete --topology) sign calls and find their certificate; no node
/// may use it.
inline constexpr char kOperatorId[] = "operator";
/// What `{id}` in node_tls.cert and node_tls.key stands for.
inline constexpr char kNodeIdMarker[] = "{id}";

/// TLS for the gRPC links between nodes (mutual: every node presents its
/// certificate and checks its peers against the CA). Absolute PEM paths;
/// cert and key may contain `{id}` (kNodeIdMarker): one certificate per
/// node (cluster/node_certificate.h), resolved by ForNode.
struct NodeTls {
  std::string ca;
  std::string cert;
  std::string key;
  bool enabled() const { return !cert.empty(); }
  /// True when cert names one file per node (contains `{id}`).
  bool per_node() const;
  /// The files node `id` (or kOperatorId) presents: `{id}` replaced.
  NodeTls ForNode(std::string_view id) const;
};

struct Topology {
  std::string path;   // the file it was loaded from ("" when parsed from text)
  NodeTls node_tls;   // empty = plain TCP between nodes
  // Plain TCP between nodes accepted on non-loopback addresses (`insecure:
  // true`); without it and without node_tls such a topology is refused.
  bool insecure = false;
  // The cluster secret (absolute path; cluster/peer_auth.h): every node call
  // carries a credential made with it. "" = not in the file: a daemon then
  // needs --cluster-secret-file (odmoe-cluster up passes the one it generates).
  std::string cluster_secret_file;
  std::string model;  // absolute path of the model GGUF
  PredictionMode prediction = PredictionMode::kShadow;
  LookaheadSpec lookahead;      // prediction: lookahead (also per request)
  // Rows per prefill message; kAutoMiniBatch: chosen per layer from the link
  // and the workers' costs (cluster/prefill_split.h), at most main.batch.
  static constexpr int kAutoMiniBatch = 0;
  int prefill_mini_batch = kAutoMiniBatch;
  int64_t prefill_message_cost_us = 30;  // auto: fixed cost of one message
  uint64_t link_bandwidth = 0;           // bytes/s of the main node's link; 0 = unlimited
  WireDType wire_dtype = WireDType::kF32;
  int64_t wire_delay_us = 0;  // emulated one-way delay on received messages (0 = none)
  MainSpec main;
  std::optional<ShadowSpec> shadow;
  // G: workers per group (the model's top-k k unless the file says
  // otherwise). Worker i of the group computing a layer computes the
  // positions i, i+G, ... of that layer's k experts (cluster/assignment.h):
  // ceil(k/G) or floor(k/G) each, none for i >= k. The worker count is a
  // multiple of G (whole groups only).
  int group_size = 0;
  WorkerMode worker_mode = WorkerMode::kOnDemand;
  int cache_experts = 8;  // the cache modes: experts each worker keeps (>= 1)
  UtilitySpec utility;    // utility_cache mode
  // DAOP's compute on a miss: a decode task whose expert is not loaded is
  // computed on the worker's host from its host copy when that is estimated
  // quicker than loading it and computing it on the device (same bits).
  bool host_compute = false;
  // EMULATION for CPU testbeds, where the "device" is the same CPU: the host
  // compute takes this many times as long as the measured compute (>= 1).
  int host_compute_slowdown = 1;
  // FIRM's sub-expert streaming: an expert a task waits for loads as three
  // units (gate, up, down) and its compute starts on each as it lands.
  bool sub_expert = false;
  // DAOP's graceful degradation (LOSSY, off by default): a decode task of an
  // expert that is not the row's top-1 and is not loaded is computed with
  // the expert its worker prefetched for that position (the predictor's
  // choice there), with the replaced expert's routing weight.
  bool degrade = false;
  // DyMoE's mixed precision by depth (LOSSY, off when absent): the experts
  // its schedule makes sub-critical (cluster/precision_schedule.h) are loaded
  // from a copy of the model in `type`.
  std::optional<MixedPrecisionSpec> mixed_precision;
  std::vector<WorkerSpec> workers;  // in file order; index = worker index

  int n_workers() const { return static_cast<int>(workers.size()); }
  /// The most rows one expert task carries (what workers size their
  /// workspace for): a prefill mini-batch, or the rows of a speculative
  /// verification (shadow.draft_tokens + 1). A request's own draft_tokens
  /// (experiments) must fit it too.
  int max_task_rows() const {
    const int prefill = prefill_mini_batch == kAutoMiniBatch ? main.batch : prefill_mini_batch;
    return std::max(prefill, shadow ? shadow->draft_tokens + 1 : 1);
  }
  int n_groups() const { return group_size > 0 ? n_workers() / group_size : 0; }
  /// Decoding: layer l is computed by group l mod (N_W / G).
  int GroupOfLayer(int layer) const { return layer % n_groups(); }
  /// Worker indices of group g: [g*G, (g+1)*G).
  std::vector<int> GroupMembers(int group) const;
  /// Prefill: expert e of every layer goes to worker e mod N_W.
  int PrefillWorkerOfExpert(int expert) const { return expert % n_workers(); }

  const WorkerSpec* FindWorker(std::string_view id) const;  // null if absent
  int WorkerIndex(std::string_view id) const;                // -1 if absent
  /// The node with this id (main, shadow or a worker), or null.
  const NodeSpec* FindNode(std::string_view id) const;
  /// Every node: main, shadow (if any), then the workers.
  std::vector<const NodeSpec*> AllNodes() const;
  /// The first node (in AllNodes order) whose address is not loopback, or
  /// null when every node listens on loopback (a one-machine cluster).
  const NodeSpec* FirstNonLoopbackNode() const;
};

/// True for hosts that only this machine can reach: IPv4 127.0.0.0/8, IPv6
/// ::1 (also written [::1] or as ::ffff:127.x.y.z) and "localhost" (any
/// case). Any other name or address, 0.0.0.0 included, is not loopback.
bool IsLoopbackHost(std::string_view host);

/// Parses YAML text. `path` names the source in errors and anchors relative
/// paths (its directory; "" = the current directory). Checks everything that
/// needs no model file: types, ranges, unknown keys, duplicate ids and
/// host:port pairs, prediction: shadow without a shadow, group_size >= 1,
/// at least one whole group, a worker count that is a multiple of group_size,
/// and non-loopback node addresses without node_tls or `insecure: true`.
absl::StatusOr<Topology> ParseTopology(std::string_view yaml_text, const std::string& path);

/// Checks a parsed topology against the model it names: group_size defaults
/// to the model's top-k (any G >= 1 is valid); every named file is a regular
/// file (see above); the model must open and every worker's memory budget
/// must hold its largest expert.
absl::Status ValidateTopologyWithModel(Topology& topology);

/// Reads the file (a regular file of at most kMaxTopologyFileBytes),
/// ParseTopology, ValidateTopologyWithModel.
absl::StatusOr<Topology> LoadTopology(const std::string& path);

/// "96MiB", "1.5GiB", "512KiB", "1000000", "64MB" (SI) -> bytes.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);
/// A byte size per second: "2GB/s", "800MiB/s", "1e9" (the "/s" is optional).
absl::StatusOr<uint64_t> ParseByteRate(std::string_view text);

/// Renders a topology back to YAML: every declared key that is set (not 0,
/// empty or false at its default; topology_keys.cpp), paths absolute, so that
/// ParseTopology reads back the same struct (odmoe-bench writes the topology
/// each deployment uses; tests round-trip it).
std::string TopologyToYaml(const Topology& topology);

}  // namespace odmoe
