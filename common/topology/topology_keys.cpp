// The topology's keys, one line each, section by section (topology_keys.h).
// Defaults are the struct members' initializers in topology.h.
#include "topology/topology_keys.h"

#include <initializer_list>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "topology/key_table.h"
#include "util/status_macros.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

using keys::ByteRate;
using keys::ByteSize;
using keys::DelayUpTo;
using keys::Field;
using keys::FieldOf;
using keys::FilePath;
using keys::Group;
using keys::IntIn;
using keys::Kind;
using keys::Mapping;
using keys::NumberIn;
using keys::OneOf;
using keys::PlainName;
using keys::Section;
using keys::Table;
using keys::Text;
using keys::TrueFalse;

// The enum keys' name tables, {name, value}: the names come from the enum's
// own name function, in the order errors list them.
template <typename E, typename NameOf>
std::vector<std::pair<std::string, E>> NamesOf(NameOf name_of, std::initializer_list<E> values) {
  std::vector<std::pair<std::string, E>> names;
  for (E v : values) names.emplace_back(std::string(name_of(v)), v);
  return names;
}
std::string DTypeKeyName(DType t) { return absl::AsciiStrToLower(ToAbsl(Traits(t).name)); }

const auto kPredictionModes =
    NamesOf(PredictionModeName, {PredictionMode::kShadow, PredictionMode::kRandom,
                                 PredictionMode::kNone, PredictionMode::kLookahead});
// workers.mode: the live table of worker modes (topology/worker_mode.h), so
// that a mode registered at run time (RegisterSlotPolicy) is a value too.
Kind<WorkerMode> WorkerModeKind() {
  Kind<WorkerMode> k = OneOf<WorkerMode>(WorkerModeChoices());
  k.parse = [](const YAML::Node& n, const Mapping&) -> absl::StatusOr<WorkerMode> {
    if (n.IsScalar()) {
      if (absl::StatusOr<WorkerMode> m = FindWorkerMode(n.Scalar()); m.ok()) return m;
    }
    return absl::InvalidArgumentError("'" + (n.IsScalar() ? n.Scalar() : "<not a scalar>") +
                                      "' is not valid (expected " + WorkerModeValues() + ")");
  };
  k.show = [](const WorkerMode& m) { return std::string(m.name()); };
  return k;
}
const auto kWireDTypes = NamesOf(WireDTypeName, {WireDType::kF32, WireDType::kF16});
const auto kShadowQuantizations = NamesOf(DTypeKeyName, {DType::kF16, DType::kQ8_0, DType::kQ6_K,
                                                         DType::kQ5_K, DType::kQ4_K, DType::kQ4_0});
const auto kMixedPrecisionTypes =
    NamesOf(DTypeKeyName, {DType::kQ8_0, DType::kQ6_K, DType::kQ5_K, DType::kQ4_K, DType::kQ4_0});

constexpr int kHourMs = 3600 * 1000;
constexpr int64_t kTenSecondsUs = 10'000'000;

// What main, shadow and every worker have.
template <typename S>
Table<S> NodeKeys() {
  return {
      FieldOf<S>("id", &NodeSpec::id,
                 PlainName("",
                           "up to 64 letters, digits, '_', '-' or '.', not starting with '-' "
                           "or '.'"),
                 "the node's name (its log and pid files are named after it)")
          .Required(),
      keys::Address<S>("address", &NodeSpec::address, &NodeSpec::host, &NodeSpec::port,
                       "where the node listens for the others")
          .Required(),
      FieldOf<S>("backend", &NodeSpec::backend, Text(), "`cpu`, `cpu:N` or `cuda:N`"),
      FieldOf<S>("ssh", &NodeSpec::ssh, PlainName("@:%", "user@host or host"),
                 "start the node over ssh (docs/cluster.md, Nodes on other machines)")
          .Default("this machine"),
      FieldOf<S>("netns", &NodeSpec::netns,
                 PlainName("", "a network namespace name: letters, digits, '_', '-' or '.'"),
                 "start the node inside this network namespace")
          .Default("none"),
  };
}

template <typename S>
Table<S> With(Table<S> a, const Table<S>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Table<LookaheadSpec> LookaheadKeys() {
  return {
      Field("layers", &LookaheadSpec::layers, IntIn(1, kMaxLookaheadLayers),
            "FIRM's Meeting-of-Layers: the MoE inputs of the last P layers each name candidates"),
      Field("candidates", &LookaheadSpec::candidates, IntIn(0, 1 << 16),
            "experts each names (0 = the model's top-k)"),
      Field("from_layer", &LookaheadSpec::from_layer, IntIn(0, 1 << 16),
            "DAOP: layers below go unpredicted"),
  };
}

Table<HttpLimits> HttpLimitKeys() {
  return {
      Field("max_connections", &HttpLimits::max_connections, IntIn(1, 100000),
            "open at once; at the limit the longest-idle keep-alive connection is closed for a "
            "new one, else 503 + close"),
      Field("max_connections_per_client", &HttpLimits::max_connections_per_client, IntIn(1, 100000),
            "open at once from one address; more: 503"),
      Field("max_buffered_body_bytes", &HttpLimits::max_buffered_body_bytes,
            ByteSize(1u << 20, 64ull << 30),
            "request bodies held at once, all connections together; more: 503"),
      Field("io_threads", &HttpLimits::io_threads, IntIn(1, 64),
            "threads serving every connection"),
      Field("max_header_bytes", &HttpLimits::max_header_bytes, ByteSize(1u << 10, 1u << 20),
            "request line + headers; more: 431"),
      Field("header_timeout_ms", &HttpLimits::header_timeout_ms, IntIn(100, kHourMs),
            "a whole request header"),
      Field("body_timeout_ms", &HttpLimits::body_timeout_ms, IntIn(100, kHourMs),
            "a whole request body"),
      Field("idle_timeout_ms", &HttpLimits::idle_timeout_ms, IntIn(100, kHourMs),
            "keep-alive between requests"),
      Field("write_timeout_ms", &HttpLimits::write_timeout_ms, IntIn(100, kHourMs),
            "one write to a client"),
      Field("stream_buffer_bytes", &HttpLimits::stream_buffer_bytes, ByteSize(4u << 10, 1ull << 30),
            "streamed output queued for a slow reader; more: its request is cancelled"),
      Field("socket_send_buffer_bytes", &HttpLimits::socket_send_buffer_bytes,
            ByteSize(4u << 10, 64u << 20, "auto"), "SO_SNDBUF per connection; auto = the kernel's"),
  };
}

Table<MainSpec> MainKeys() {
  return With(NodeKeys<MainSpec>(),
              {
                  Field("context", &MainSpec::context, IntIn(0, 1 << 20),
                        "KV capacity in tokens; 0 = the model's training context (capped at 4096)"),
                  Field("batch", &MainSpec::batch, IntIn(1, kMaxBatchRows), "prefill chunk rows"),
                  Field("max_running", &MainSpec::max_running, IntIn(1, 256),
                        "requests generated at once, batched (each holds a KV cache of `context`)"),
                  Field("max_queue", &MainSpec::max_queue, IntIn(0, kMaxQueuedRequests),
                        "waiting requests before 429"),
                  Field("max_body_bytes", &MainSpec::max_body_bytes, ByteSize(4u << 10, 1ull << 30),
                        "largest HTTP request body, chunked or not; larger: 413"),
                  Field("worker_timeout_ms", &MainSpec::worker_timeout_ms, IntIn(50, 24 * kHourMs),
                        "an unanswered task = a failed worker"),
                  Field("api_key", &MainSpec::api_key, Text(),
                        "required as `Authorization: Bearer <key>` when set")
                      .Default("none"),
                  Section("http_limits", &MainSpec::http_limits, HttpLimitKeys(),
                          "the HTTP server under load (docs/operations.md)"),
                  keys::Address<MainSpec>("http", &MainSpec::http, &MainSpec::http_host,
                                          &MainSpec::http_port, "the OpenAI-compatible HTTP API")
                      .Default("none"),
                  Group<MainSpec>(
                      "tls",
                      {Field("cert", &MainSpec::tls_cert, FilePath(), "PEM certificate").Required(),
                       Field("key", &MainSpec::tls_key, FilePath(), "PEM private key").Required()},
                      "HTTPS for the HTTP API"),
              });
}

Table<ShadowSpec> ShadowKeys() {
  return With(
      NodeKeys<ShadowSpec>(),
      {
          Field("quantization", &ShadowSpec::quantization, OneOf<DType>(kShadowQuantizations),
                "every converted tensor in this type (model/quant_mix.h)"),
          Field("model", &ShadowSpec::model, FilePath(), "a pre-quantized copy (odmoe-quantize)")
              .Default("none"),
          Field("max_run_ahead", &ShadowSpec::max_run_ahead, IntIn(1, kMaxRunAhead),
                "iterations ahead of main"),
          Field("draft_tokens", &ShadowSpec::draft_tokens, IntIn(0, kMaxDraftTokens),
                "speculative decoding: tokens drafted per iteration (0 = off; + 1 <= "
                "main.batch)"),
          Field("draft_wait", &ShadowSpec::draft_wait_us, DelayUpTo(kTenSecondsUs),
                "longest wait for the drafts per iteration (0 = verify those ready)"),
          Group<ShadowSpec>("alignment",
                            {Field("token_period", &ShadowSpec::token_period, IntIn(0, 1 << 20),
                                   "align the shadow's tokens every N iterations (0 = never)"),
                             Field("kv_period", &ShadowSpec::kv_period, IntIn(0, 1 << 20),
                                   "align the shadow's KV rows every N iterations (0 = never)")},
                            "how often the shadow is put back on the main node's path"),
      });
}

Table<WorkerSpec> WorkerKeys() {
  return With(
      NodeKeys<WorkerSpec>(),
      {
          Field("memory_budget", &WorkerSpec::memory_budget, ByteSize(0, UINT64_MAX, "auto"),
                "as many expert slots as fit (at least one); auto = 1 slot, 2 when top-k "
                "> group_size"),
          Field("load_bandwidth", &WorkerSpec::load_bandwidth, ByteRate(),
                "EMULATION: cap on expert loads"),
      });
}

Table<UtilitySpec> UtilityKeys() {
  return {
      Field("window", &UtilitySpec::window, IntIn(1, 1 << 16), "predicted iterations per cycle"),
      Field("levels", &UtilitySpec::levels, IntIn(1, 64), "utilities 0..levels"),
      Field("threshold", &UtilitySpec::threshold, IntIn(1, 64),
            "hot at utility >= threshold (<= levels)"),
  };
}

Table<MixedPrecisionSpec> MixedPrecisionKeys() {
  return {
      Field("type", &MixedPrecisionSpec::type, OneOf<DType>(kMixedPrecisionTypes),
            "the sub-critical experts' copy"),
      Field("floor", &MixedPrecisionSpec::floor, NumberIn(0, 1),
            "the retention ratio at the last layer"),
  };
}

Table<Topology> WorkersGroupKeys() {
  return {
      Field("group_size", &Topology::group_size, IntIn(1, kMaxGroupSize),
            "G: workers per group; the worker count is a multiple of it")
          .Default("the model's top-k"),
      Field("mode", &Topology::worker_mode, WorkerModeKind(),
            "how a worker keeps experts"),
      Field("cache_experts", &Topology::cache_experts, IntIn(1, 1 << 20),
            "the *_cache modes: experts each worker keeps"),
      Section("utility", &Topology::utility, UtilityKeys(),
              "utility_cache (MoE-SpAc Alg. 1, worker_node/expert_utility.h)"),
      Field("host_compute", &Topology::host_compute, TrueFalse(),
            "DAOP: a decode miss computed on the host CPU when quicker than loading it"),
      Field("host_compute_slowdown", &Topology::host_compute_slowdown, IntIn(1, 100000),
            "EMULATION: host computes take N x"),
      Field("sub_expert", &Topology::sub_expert, TrueFalse(),
            "FIRM: a miss loads gate, up, down as units and computes each as it lands"),
      Field("degrade", &Topology::degrade, TrueFalse(),
            "DAOP (LOSSY): a decode miss of a row's lower experts computed with the expert "
            "prefetched for its position"),
      keys::OptionalSection("mixed_precision", &Topology::mixed_precision, MixedPrecisionKeys(),
                            "DyMoE (LOSSY): sub-critical experts from a low-precision copy "
                            "(cluster/precision_schedule.h)"),
      keys::List("nodes", &Topology::workers, WorkerKeys(),
                 {"memory_budget", "load_bandwidth", "backend"},
                 {kMaxWorkers, "workers", "id and address",
                  "each holds a stream and a thread on the main node"},
                 "the workers, in groups of group_size in file order; at most 256 groups"),
  };
}

const Table<Topology>& TopologyKeys() {
  static const Table<Topology> table = {
      Field("model", &Topology::model, FilePath(), "the model GGUF").Required(),
      Field("prediction", &Topology::prediction, OneOf<PredictionMode>(kPredictionModes),
            "what prefetches experts: the shadow node, the gate look-ahead, random, nothing"),
      Section("lookahead", &Topology::lookahead, LookaheadKeys(),
              "prediction: lookahead's variants (main_node/lookahead_vote.h)"),
      Group<Topology>(
          "prefill",
          {Field("mini_batch", &Topology::prefill_mini_batch,
                 IntIn(1, kMaxBatchRows, "auto", Topology::kAutoMiniBatch),
                 "rows per prefill message; auto: chosen from the link, the row size and the "
                 "workers' costs (cluster/prefill_split.h)"),
           Field("message_cost", &Topology::prefill_message_cost_us, DelayUpTo(kTenSecondsUs),
                 "auto: the fixed cost of one message")},
          "how prefill is split into messages"),
      Group<Topology>(
          "wire",
          {Field("hidden_dtype", &Topology::wire_dtype, OneOf<WireDType>(kWireDTypes),
                 "hidden states on the wire: f32 is exact, f16 halves the bytes but rounds"),
           Field("emulated_delay", &Topology::wire_delay_us, DelayUpTo(kTenSecondsUs),
                 "EMULATION: one-way delay on every message a node receives "
                 "(cluster/delay_line.h)"),
           Field("link_bandwidth", &Topology::link_bandwidth, ByteRate(),
                 "the main node's link, for auto mini-batches (off = not the bottleneck)")},
          "the links between nodes"),
      Section("node_tls", &Topology::node_tls,
              {Field("ca", &NodeTls::ca, FilePath(), "the cluster's CA").Required(),
               Field("cert", &NodeTls::cert, FilePath(), "`{id}` = each node's own id").Required(),
               Field("key", &NodeTls::key, FilePath(), "`{id}` = each node's own id").Required()},
              "mutual TLS on every link between nodes (`odmoe-cluster certs` issues them)"),
      Field("insecure", &Topology::insecure, TrueFalse(),
            "plain TCP between nodes on non-loopback addresses (else refused)"),
      Field("cluster_secret_file", &Topology::cluster_secret_file, FilePath(),
            "the secret every node call is signed with (owner-only file)")
          .Default("generated by `odmoe-cluster up`"),
      Section("main", &Topology::main, MainKeys(), "the main node")
          .Required("the main node's settings"),
      keys::OptionalSection("shadow", &Topology::shadow, ShadowKeys(),
                            "the shadow node; required when prediction is shadow"),
      Group<Topology>("workers", WorkersGroupKeys(), "the workers").Required("the worker settings"),
  };
  return table;
}

}  // namespace

absl::Status ReadTopologyKeys(const YAML::Node& root, const std::string& file,
                              const std::string& base_dir, Topology* t) {
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(file + ": expected a mapping at the top level");
  }
  keys::Mapping top(root, "", file, base_dir);
  return keys::ReadKeys(TopologyKeys(), top, *t);
}

std::string TopologyToYaml(const Topology& t) {
  YAML::Emitter out;
  out << keys::WriteKeys(TopologyKeys(), t);
  return std::string(out.c_str()) + "\n";
}

std::string TopologyKeysMarkdown() { return keys::DocMarkdown(keys::DocKeys(TopologyKeys())); }

absl::StatusOr<std::string> WithTopologyKeys(std::string_view doc) {
  const size_t begin = doc.find(kTopologyKeysBegin);
  const size_t end = doc.find(kTopologyKeysEnd);
  if (begin == std::string_view::npos || end == std::string_view::npos || end < begin) {
    return absl::NotFoundError(absl::StrCat("the key reference's markers (", kTopologyKeysBegin,
                                            " ... ", kTopologyKeysEnd, ") are missing"));
  }
  const size_t after_begin = begin + std::string_view(kTopologyKeysBegin).size();
  return absl::StrCat(ToAbsl(doc.substr(0, after_begin)), "\n", TopologyKeysMarkdown(),
                      ToAbsl(doc.substr(end)));
}

}  // namespace odmoe
