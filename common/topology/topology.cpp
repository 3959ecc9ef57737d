#include "topology/topology.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "model/model_file.h"
#include "util/regular_file.h"
#include "util/status_macros.h"
#include "util/string_view.h"
#include "yaml-cpp/yaml.h"

namespace odmoe {
namespace {

// Reads one YAML mapping, remembering which keys were used so that unknown
// keys can be reported. Every error names the file and the key path.
class Section {
 public:
  Section(const YAML::Node& node, std::string path, const std::string& file)
      : node_(node), path_(std::move(path)), file_(file) {}

  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", Key(key), ": ", what));
  }
  std::string Key(const std::string& key) const {
    return path_.empty() ? key : absl::StrCat(path_, ".", key);
  }
  bool Has(const std::string& key) {
    used_.insert(key);
    return node_[key].IsDefined() && !node_[key].IsNull();
  }
  YAML::Node Get(const std::string& key) {
    used_.insert(key);
    return node_[key];
  }

  absl::Status String(const std::string& key, std::string* out, bool required) {
    if (!Has(key)) return required ? Error(key, "missing (expected a string)") : absl::OkStatus();
    const YAML::Node n = node_[key];
    if (!n.IsScalar()) return Error(key, "expected a string");
    *out = n.Scalar();
    if (out->empty()) return Error(key, "empty (expected a string)");
    return absl::OkStatus();
  }

  absl::Status Int(const std::string& key, int* out, int64_t min, int64_t max) {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node n = node_[key];
    int64_t v = 0;
    if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v) || v < min || v > max) {
      return Error(key, absl::StrFormat("'%s' is not valid (expected an integer in [%d, %d])",
                                        n.IsScalar() ? n.Scalar() : "<not a scalar>", min, max));
    }
    *out = static_cast<int>(v);
    return absl::OkStatus();
  }

  absl::Status Fraction(const std::string& key, double* out) {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node n = node_[key];
    double v = 0;
    if (!n.IsScalar() || !absl::SimpleAtod(n.Scalar(), &v) || !(v >= 0.0 && v <= 1.0)) {
      return Error(key, absl::StrFormat("'%s' is not valid (expected a number in [0, 1])",
                                        n.IsScalar() ? n.Scalar() : "<not a scalar>"));
    }
    *out = v;
    return absl::OkStatus();
  }

  template <typename E>
  absl::Status Enum(const std::string& key, E* out,
                    const std::vector<std::pair<std::string, E>>& names) {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node n = node_[key];
    std::string expected;
    for (const auto& [name, value] : names) {
      if (n.IsScalar() && n.Scalar() == name) {
        *out = value;
        return absl::OkStatus();
      }
      absl::StrAppend(&expected, expected.empty() ? "" : " | ", name);
    }
    return Error(key, absl::StrFormat("'%s' is not valid (expected %s)",
                                      n.IsScalar() ? n.Scalar() : "<not a scalar>", expected));
  }

  absl::Status Bool(const std::string& key, bool* out) {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node n = node_[key];
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) {
      *out = n.Scalar() == "true";
      return absl::OkStatus();
    }
    return Error(key, absl::StrFormat("'%s' is not valid (expected true | false)",
                                      n.IsScalar() ? n.Scalar() : "<not a scalar>"));
  }

  absl::Status Bytes(const std::string& key, uint64_t* out) {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node n = node_[key];
    if (!n.IsScalar()) return Error(key, "expected a byte size such as 96MiB or auto");
    if (n.Scalar() == "auto") {
      *out = 0;
      return absl::OkStatus();
    }
    absl::StatusOr<uint64_t> v = ParseByteSize(n.Scalar());
    if (!v.ok()) return Error(key, std::string(v.status().message()));
    *out = *v;
    return absl::OkStatus();
  }

  // "250us", "1.5ms", "0" -> microseconds (at most 10 s; a unit is required
  // except for 0).
  absl::Status Micros(const std::string& key, int64_t* out) {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node n = node_[key];
    const std::string text = n.IsScalar() ? n.Scalar() : "";
    std::string v = text;
    double scale = 0;  // 0 = no unit
    for (const auto& [unit, factor] : std::vector<std::pair<std::string, double>>{
             {"us", 1.0}, {"ms", 1e3}, {"s", 1e6}}) {
      if (v.size() > unit.size() && v.compare(v.size() - unit.size(), unit.size(), unit) == 0) {
        v.resize(v.size() - unit.size());
        scale = factor;
        break;
      }
    }
    double x = 0;
    const bool zero = text == "0";
    if (!zero && (scale == 0 || !absl::SimpleAtod(v, &x) || !(x >= 0) || x * scale > 1e7)) {
      return Error(key, absl::StrFormat("'%s' is not a delay (expected e.g. 250us, 1.5ms or 0; "
                                        "at most 10s)",
                                        n.IsScalar() ? text : "<not a scalar>"));
    }
    *out = zero ? 0 : static_cast<int64_t>(std::llround(x * scale));
    return absl::OkStatus();
  }

  absl::Status Rate(const std::string& key, uint64_t* out) {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node n = node_[key];
    if (!n.IsScalar()) return Error(key, "expected a rate such as 2GB/s or off");
    if (n.Scalar() == "off" || n.Scalar() == "0") {
      *out = 0;
      return absl::OkStatus();
    }
    absl::StatusOr<uint64_t> v = ParseByteRate(n.Scalar());
    if (!v.ok()) return Error(key, std::string(v.status().message()));
    *out = *v;
    return absl::OkStatus();
  }

  /// Every key of the mapping was read, and none appears twice (yaml-cpp
  /// would silently use the first).
  absl::Status CheckNoUnknownKeys() const {
    if (!node_.IsMap()) return absl::OkStatus();
    std::set<std::string> seen;
    for (const auto& kv : node_) {
      const std::string key = kv.first.Scalar();
      if (!seen.insert(key).second) return Error(key, "appears twice (expected each key once)");
      if (!used_.count(key)) {
        std::string known;
        for (const std::string& k : used_) absl::StrAppend(&known, known.empty() ? "" : ", ", k);
        return Error(key, absl::StrCat("unknown key (expected one of: ", known, ")"));
      }
    }
    return absl::OkStatus();
  }

 private:
  YAML::Node node_;
  std::string path_;
  const std::string& file_;
  std::set<std::string> used_;
};

std::string Resolve(const std::string& base_dir, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  return std::filesystem::absolute(p).lexically_normal().string();
}

absl::Status ParseAddress(Section& s, NodeSpec* node) {
  const size_t colon = node->address.rfind(':');
  int64_t port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(node->address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return s.Error("address", absl::StrFormat("'%s' is not valid (expected host:port with a "
                                              "port in 1..65535)",
                                              node->address));
  }
  node->host = node->address.substr(0, colon);
  if (node->host.size() > 2 && node->host.front() == '[' && node->host.back() == ']') {
    node->host = node->host.substr(1, node->host.size() - 2);
  }
  node->port = static_cast<int>(port);
  return absl::OkStatus();
}

// Letters, digits and `extra`, not starting with '-' or '.': ids name files
// (<run-dir>/<id>.log), netns and ssh targets become command arguments.
bool IsPlainName(const std::string& s, std::string_view extra) {
  if (s.empty() || s.size() > 64 || s[0] == '-' || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
           c == '.' || extra.find(c) != std::string_view::npos;
  });
}

absl::Status PlainName(Section& s, const std::string& key, const std::string& value,
                       std::string_view extra, const std::string& expected) {
  if (value.empty() || IsPlainName(value, extra)) return absl::OkStatus();
  return s.Error(key, absl::StrFormat("'%s' is not valid (expected %s)", value, expected));
}

absl::Status ParseNode(Section& s, NodeSpec* node, const std::string& default_backend) {
  ODMOE_RETURN_IF_ERROR(s.String("id", &node->id, true));
  ODMOE_RETURN_IF_ERROR(PlainName(s, "id", node->id, "",
                                  "up to 64 letters, digits, '_', '-' or '.', not starting "
                                  "with '-' or '.'"));
  ODMOE_RETURN_IF_ERROR(s.String("address", &node->address, true));
  ODMOE_RETURN_IF_ERROR(ParseAddress(s, node));
  node->backend = default_backend;
  ODMOE_RETURN_IF_ERROR(s.String("backend", &node->backend, false));
  ODMOE_RETURN_IF_ERROR(s.String("ssh", &node->ssh, false));
  ODMOE_RETURN_IF_ERROR(PlainName(s, "ssh", node->ssh, "@:%", "user@host or host"));
  ODMOE_RETURN_IF_ERROR(s.String("netns", &node->netns, false));
  ODMOE_RETURN_IF_ERROR(PlainName(s, "netns", node->netns, "",
                                  "a network namespace name: letters, digits, '_', '-' or '.'"));
  return absl::OkStatus();
}

YAML::Node Map(Section& parent, const std::string& key, absl::Status* status) {
  YAML::Node n = parent.Get(key);
  if (n.IsDefined() && !n.IsNull() && !n.IsMap()) {
    *status = parent.Error(key, "expected a mapping of keys");
  }
  return n;
}

absl::Status ParseDocument(const YAML::Node& root, const std::string& file,
                           const std::string& base_dir, Topology* t) {
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(file + ": expected a mapping at the top level");
  }
  Section top(root, "", file);
  std::string model;
  ODMOE_RETURN_IF_ERROR(top.String("model", &model, true));
  t->model = Resolve(base_dir, model);
  ODMOE_RETURN_IF_ERROR(top.Enum<PredictionMode>("prediction", &t->prediction,
                                                 {{"shadow", PredictionMode::kShadow},
                                                  {"random", PredictionMode::kRandom},
                                                  {"none", PredictionMode::kNone},
                                                  {"lookahead", PredictionMode::kLookahead}}));
  absl::Status st;
  YAML::Node lookahead = Map(top, "lookahead", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (lookahead.IsMap()) {
    Section s(lookahead, "lookahead", file);
    ODMOE_RETURN_IF_ERROR(s.Int("layers", &t->lookahead.layers, 1, kMaxLookaheadLayers));
    ODMOE_RETURN_IF_ERROR(s.Int("candidates", &t->lookahead.candidates, 0, 1 << 16));
    ODMOE_RETURN_IF_ERROR(s.Int("from_layer", &t->lookahead.from_layer, 0, 1 << 16));
    ODMOE_RETURN_IF_ERROR(s.CheckNoUnknownKeys());
  }
  YAML::Node prefill = Map(top, "prefill", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (prefill.IsMap()) {
    Section s(prefill, "prefill", file);
    if (const YAML::Node mb = s.Get("mini_batch"); mb.IsScalar() && mb.Scalar() == "auto") {
      t->prefill_mini_batch = Topology::kAutoMiniBatch;
    } else {
      ODMOE_RETURN_IF_ERROR(s.Int("mini_batch", &t->prefill_mini_batch, 1, kMaxBatchRows));
    }
    ODMOE_RETURN_IF_ERROR(s.Micros("message_cost", &t->prefill_message_cost_us));
    ODMOE_RETURN_IF_ERROR(s.CheckNoUnknownKeys());
  }
  YAML::Node wire = Map(top, "wire", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (wire.IsMap()) {
    Section s(wire, "wire", file);
    ODMOE_RETURN_IF_ERROR(s.Enum<WireDType>(
        "hidden_dtype", &t->wire_dtype, {{"f32", WireDType::kF32}, {"f16", WireDType::kF16}}));
    ODMOE_RETURN_IF_ERROR(s.Micros("emulated_delay", &t->wire_delay_us));
    ODMOE_RETURN_IF_ERROR(s.Rate("link_bandwidth", &t->link_bandwidth));
    ODMOE_RETURN_IF_ERROR(s.CheckNoUnknownKeys());
  }

  YAML::Node node_tls = Map(top, "node_tls", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (node_tls.IsMap()) {
    Section s(node_tls, "node_tls", file);
    std::string ca, cert, key;
    ODMOE_RETURN_IF_ERROR(s.String("ca", &ca, true));
    ODMOE_RETURN_IF_ERROR(s.String("cert", &cert, true));
    ODMOE_RETURN_IF_ERROR(s.String("key", &key, true));
    ODMOE_RETURN_IF_ERROR(s.CheckNoUnknownKeys());
    t->node_tls = {Resolve(base_dir, ca), Resolve(base_dir, cert), Resolve(base_dir, key)};
    // One certificate per node or one for all: cert and key must agree, or
    // every node would present its own certificate with the same key.
    if (t->node_tls.per_node() != (t->node_tls.key.find(kNodeIdMarker) != std::string::npos)) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": node_tls: cert and key must both contain {id} (one certificate per node) or "
                "neither (one certificate for all)"));
    }
    if (ca.find(kNodeIdMarker) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": node_tls.ca: one CA for the whole cluster ({id} is for cert and "
                             "key)"));
    }
  }
  ODMOE_RETURN_IF_ERROR(top.Bool("insecure", &t->insecure));
  std::string secret_file;
  ODMOE_RETURN_IF_ERROR(top.String("cluster_secret_file", &secret_file, false));
  if (!secret_file.empty()) t->cluster_secret_file = Resolve(base_dir, secret_file);

  YAML::Node main = Map(top, "main", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (!main.IsMap()) return top.Error("main", "missing (expected the main node's settings)");
  {
    Section s(main, "main", file);
    ODMOE_RETURN_IF_ERROR(ParseNode(s, &t->main, "cpu:1"));
    ODMOE_RETURN_IF_ERROR(s.Int("context", &t->main.context, 0, 1 << 20));
    ODMOE_RETURN_IF_ERROR(s.Int("batch", &t->main.batch, 1, kMaxBatchRows));
    ODMOE_RETURN_IF_ERROR(s.Int("max_running", &t->main.max_running, 1, 256));
    ODMOE_RETURN_IF_ERROR(s.Int("max_queue", &t->main.max_queue, 0, kMaxQueuedRequests));
    if (s.Has("max_body_bytes")) {
      uint64_t body = 0;
      ODMOE_RETURN_IF_ERROR(s.Bytes("max_body_bytes", &body));
      if (body < (4u << 10) || body > (1ull << 30)) {
        return s.Error("max_body_bytes",
                       absl::StrFormat("%d bytes is outside [4KiB, 1GiB] (expected a byte size "
                                       "such as 8MiB)",
                                       body));
      }
      t->main.max_body_bytes = body;
    }
    ODMOE_RETURN_IF_ERROR(
        s.Int("worker_timeout_ms", &t->main.worker_timeout_ms, 50, 24 * 3600 * 1000));
    ODMOE_RETURN_IF_ERROR(s.String("api_key", &t->main.api_key, false));
    YAML::Node limits = Map(s, "http_limits", &st);
    ODMOE_RETURN_IF_ERROR(st);
    if (limits.IsMap()) {
      Section ls(limits, "main.http_limits", file);
      HttpLimits& l = t->main.http_limits;
      constexpr int kHour = 3600 * 1000;
      ODMOE_RETURN_IF_ERROR(ls.Int("max_connections", &l.max_connections, 1, 100000));
      ODMOE_RETURN_IF_ERROR(
          ls.Int("max_connections_per_client", &l.max_connections_per_client, 1, 100000));
      ODMOE_RETURN_IF_ERROR(ls.Int("io_threads", &l.io_threads, 1, 64));
      ODMOE_RETURN_IF_ERROR(ls.Int("header_timeout_ms", &l.header_timeout_ms, 100, kHour));
      ODMOE_RETURN_IF_ERROR(ls.Int("body_timeout_ms", &l.body_timeout_ms, 100, kHour));
      ODMOE_RETURN_IF_ERROR(ls.Int("idle_timeout_ms", &l.idle_timeout_ms, 100, kHour));
      ODMOE_RETURN_IF_ERROR(ls.Int("write_timeout_ms", &l.write_timeout_ms, 100, kHour));
      for (auto [key, out, min, max] :
           {std::tuple<const char*, uint64_t*, uint64_t, uint64_t>{
                "max_header_bytes", &l.max_header_bytes, 1u << 10, 1u << 20},
            {"stream_buffer_bytes", &l.stream_buffer_bytes, 4u << 10, 1ull << 30},
            {"max_buffered_body_bytes", &l.max_buffered_body_bytes, 1u << 20, 64ull << 30},
            {"socket_send_buffer_bytes", &l.socket_send_buffer_bytes, 4u << 10, 64u << 20}}) {
        if (!ls.Has(key)) continue;
        uint64_t v = 0;
        ODMOE_RETURN_IF_ERROR(ls.Bytes(key, &v));
        const bool kernel_default = v == 0 && std::string(key) == "socket_send_buffer_bytes";
        if (!kernel_default && (v < min || v > max)) {
          return ls.Error(key, absl::StrFormat("%d bytes is outside [%d, %d] (expected a byte "
                                               "size such as 16KiB)",
                                               v, min, max));
        }
        *out = v;
      }
      ODMOE_RETURN_IF_ERROR(ls.CheckNoUnknownKeys());
    }
    ODMOE_RETURN_IF_ERROR(s.String("http", &t->main.http, false));
    if (!t->main.http.empty()) {
      NodeSpec http;
      http.address = t->main.http;
      Section hs(main, "main.http", file);
      absl::Status bad = ParseAddress(hs, &http);
      if (!bad.ok()) {
        return s.Error("http", absl::StrFormat("'%s' is not valid (expected host:port with a "
                                               "port in 1..65535)",
                                               t->main.http));
      }
      t->main.http_host = http.host;
      t->main.http_port = http.port;
    }
    YAML::Node tls = Map(s, "tls", &st);
    ODMOE_RETURN_IF_ERROR(st);
    if (tls.IsMap()) {
      Section ts(tls, "main.tls", file);
      std::string cert, key;
      ODMOE_RETURN_IF_ERROR(ts.String("cert", &cert, true));
      ODMOE_RETURN_IF_ERROR(ts.String("key", &key, true));
      ODMOE_RETURN_IF_ERROR(ts.CheckNoUnknownKeys());
      t->main.tls_cert = Resolve(base_dir, cert);
      t->main.tls_key = Resolve(base_dir, key);
    }
    ODMOE_RETURN_IF_ERROR(s.CheckNoUnknownKeys());
  }

  YAML::Node shadow = Map(top, "shadow", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (shadow.IsMap()) {
    Section s(shadow, "shadow", file);
    ShadowSpec spec;
    ODMOE_RETURN_IF_ERROR(ParseNode(s, &spec, "cpu:1"));
    ODMOE_RETURN_IF_ERROR(s.Enum<DType>(
        "quantization", &spec.quantization,
        {{"f16", DType::kF16},
         {"q8_0", DType::kQ8_0},
         {"q6_k", DType::kQ6_K},
         {"q5_k", DType::kQ5_K},
         {"q4_k", DType::kQ4_K},
         {"q4_0", DType::kQ4_0}}));
    std::string qmodel;
    ODMOE_RETURN_IF_ERROR(s.String("model", &qmodel, false));
    if (!qmodel.empty()) spec.model = Resolve(base_dir, qmodel);
    ODMOE_RETURN_IF_ERROR(s.Int("max_run_ahead", &spec.max_run_ahead, 1, kMaxRunAhead));
    ODMOE_RETURN_IF_ERROR(s.Int("draft_tokens", &spec.draft_tokens, 0, kMaxDraftTokens));
    ODMOE_RETURN_IF_ERROR(s.Micros("draft_wait", &spec.draft_wait_us));
    if (spec.draft_tokens + 1 > t->main.batch) {
      return s.Error("draft_tokens",
                     absl::StrFormat("%d drafted tokens and the verified one need a batch of %d "
                                     "rows; main.batch is %d",
                                     spec.draft_tokens, spec.draft_tokens + 1, t->main.batch));
    }
    YAML::Node align = Map(s, "alignment", &st);
    ODMOE_RETURN_IF_ERROR(st);
    if (align.IsMap()) {
      Section a(align, "shadow.alignment", file);
      ODMOE_RETURN_IF_ERROR(a.Int("token_period", &spec.token_period, 0, 1 << 20));
      ODMOE_RETURN_IF_ERROR(a.Int("kv_period", &spec.kv_period, 0, 1 << 20));
      ODMOE_RETURN_IF_ERROR(a.CheckNoUnknownKeys());
    }
    ODMOE_RETURN_IF_ERROR(s.CheckNoUnknownKeys());
    t->shadow = spec;
  }

  YAML::Node workers = Map(top, "workers", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (!workers.IsMap()) return top.Error("workers", "missing (expected the worker settings)");
  Section ws(workers, "workers", file);
  ODMOE_RETURN_IF_ERROR(ws.Int("group_size", &t->group_size, 1, kMaxGroupSize));
  ODMOE_RETURN_IF_ERROR(ws.Enum<WorkerMode>("mode", &t->worker_mode, WorkerModeChoices()));
  ODMOE_RETURN_IF_ERROR(ws.Int("cache_experts", &t->cache_experts, 1, 1 << 20));
  YAML::Node utility = Map(ws, "utility", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (utility.IsMap()) {
    Section u(utility, "workers.utility", file);
    ODMOE_RETURN_IF_ERROR(u.Int("window", &t->utility.window, 1, 1 << 16));
    ODMOE_RETURN_IF_ERROR(u.Int("levels", &t->utility.levels, 1, 64));
    ODMOE_RETURN_IF_ERROR(u.Int("threshold", &t->utility.threshold, 1, 64));
    if (t->utility.threshold > t->utility.levels) {
      return u.Error("threshold", absl::StrFormat("%d is above levels (%d)", t->utility.threshold,
                                                  t->utility.levels));
    }
    ODMOE_RETURN_IF_ERROR(u.CheckNoUnknownKeys());
  }
  ODMOE_RETURN_IF_ERROR(ws.Bool("host_compute", &t->host_compute));
  ODMOE_RETURN_IF_ERROR(ws.Int("host_compute_slowdown", &t->host_compute_slowdown, 1, 100000));
  ODMOE_RETURN_IF_ERROR(ws.Bool("sub_expert", &t->sub_expert));
  ODMOE_RETURN_IF_ERROR(ws.Bool("degrade", &t->degrade));
  YAML::Node mixed = Map(ws, "mixed_precision", &st);
  ODMOE_RETURN_IF_ERROR(st);
  if (mixed.IsMap()) {
    Section m(mixed, "workers.mixed_precision", file);
    MixedPrecisionSpec spec;
    ODMOE_RETURN_IF_ERROR(m.Enum<DType>("type", &spec.type,
                                        {{"q8_0", DType::kQ8_0},
                                         {"q6_k", DType::kQ6_K},
                                         {"q5_k", DType::kQ5_K},
                                         {"q4_k", DType::kQ4_K},
                                         {"q4_0", DType::kQ4_0}}));
    ODMOE_RETURN_IF_ERROR(m.Fraction("floor", &spec.floor));
    ODMOE_RETURN_IF_ERROR(m.CheckNoUnknownKeys());
    t->mixed_precision = spec;
  }
  uint64_t budget = 0;
  ODMOE_RETURN_IF_ERROR(ws.Bytes("memory_budget", &budget));
  uint64_t load_bandwidth = 0;
  ODMOE_RETURN_IF_ERROR(ws.Rate("load_bandwidth", &load_bandwidth));
  std::string backend = "cpu:1";
  ODMOE_RETURN_IF_ERROR(ws.String("backend", &backend, false));
  YAML::Node nodes = ws.Get("nodes");
  if (!nodes.IsSequence() || nodes.size() == 0) {
    return ws.Error("nodes", "missing or empty (expected a list of workers, each with id and "
                             "address)");
  }
  if (nodes.size() > static_cast<size_t>(kMaxWorkers)) {
    return ws.Error("nodes", absl::StrFormat("%d workers is more than the %d a cluster may have "
                                             "(each holds a stream and a thread on the main "
                                             "node; expected at most %d)",
                                             nodes.size(), kMaxWorkers, kMaxWorkers));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string path = absl::StrCat("workers.nodes[", i, "]");
    if (!nodes[i].IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": ", path, ": expected a mapping with id and address"));
    }
    Section s(nodes[i], path, file);
    WorkerSpec w;
    ODMOE_RETURN_IF_ERROR(ParseNode(s, &w, backend));
    w.memory_budget = budget;
    ODMOE_RETURN_IF_ERROR(s.Bytes("memory_budget", &w.memory_budget));
    w.load_bandwidth = load_bandwidth;
    ODMOE_RETURN_IF_ERROR(s.Rate("load_bandwidth", &w.load_bandwidth));
    ODMOE_RETURN_IF_ERROR(s.CheckNoUnknownKeys());
    t->workers.push_back(w);
  }
  ODMOE_RETURN_IF_ERROR(ws.CheckNoUnknownKeys());
  return top.CheckNoUnknownKeys();
}

std::string NodeKey(const Topology& t, const NodeSpec* n) {
  if (n == &t.main) return "main";
  if (t.shadow && n == &*t.shadow) return "shadow";
  for (size_t i = 0; i < t.workers.size(); ++i) {
    if (n == &t.workers[i]) return absl::StrCat("workers.nodes[", i, "]");
  }
  return "?";
}

std::string CanonicalHost(const std::string& host) {
  const std::string h = absl::AsciiStrToLower(host);
  return h == "localhost" || h == "::1" ? "127.0.0.1" : h;
}

absl::Status CheckStructure(const Topology& t, const std::string& file) {
  auto error = [&](const std::string& key, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": ", what));
  };
  if (t.prediction == PredictionMode::kShadow && !t.shadow) {
    return error("prediction",
                 "'shadow' needs a shadow section (or choose lookahead | random | none)");
  }
  absl::Status hints = CheckWorkerModeHints(t.worker_mode, PredictionModeName(t.prediction));
  if (!hints.ok()) return error("prediction", std::string(hints.message()));
  std::map<std::string, std::string> ids;
  std::map<std::pair<std::string, int>, std::string> endpoints;
  for (const NodeSpec* n : t.AllNodes()) {
    const std::string key = NodeKey(t, n);
    if (n->id == kOperatorId) {
      return error(key + ".id", absl::StrFormat("'%s' is reserved for the operator's tools (their "
                                                "credential and certificate use it)",
                                                kOperatorId));
    }
    if (auto [it, fresh] = ids.emplace(n->id, key); !fresh) {
      return error(key + ".id", absl::StrFormat("'%s' is already used by %s (every node needs "
                                                "its own id)",
                                                n->id, it->second));
    }
    if (n->port == 0) continue;  // tests: any free port
    const std::string host = n->ssh.empty() ? CanonicalHost(n->host) : n->ssh + "/" + n->host;
    if (auto [it, fresh] = endpoints.emplace(std::make_pair(host, n->port), key); !fresh) {
      return error(key + ".address",
                   absl::StrFormat("port %d is already used by %s (every node needs its own "
                                   "host:port)",
                                   n->port, it->second));
    }
  }
  if (t.main.http_port != 0) {
    const std::string host = t.main.ssh.empty() ? CanonicalHost(t.main.http_host)
                                                : t.main.ssh + "/" + t.main.http_host;
    if (auto it = endpoints.find({host, t.main.http_port}); it != endpoints.end()) {
      return error("main.http", absl::StrFormat("port %d is already used by %s (the HTTP API "
                                                "needs its own host:port)",
                                                t.main.http_port, it->second));
    }
  }
  if (!t.node_tls.enabled() && !t.insecure) {
    if (const NodeSpec* n = t.FirstNonLoopbackNode()) {
      return error(
          NodeKey(t, n) + ".address",
          absl::StrFormat("'%s' is not a loopback address and the topology has no node_tls: "
                          "any host that can reach this port could send the node tasks, hints "
                          "and admin calls over plain TCP (expected node_tls: { ca, cert, key } "
                          "for mutual TLS between nodes, or `insecure: true` at the top level "
                          "to accept plain TCP on a network you trust)",
                          n->address));
    }
  }
  const int g = t.group_size > 0 ? t.group_size : 1;
  if (t.n_workers() < g) {
    return error("workers.nodes", absl::StrFormat("%d worker(s) is fewer than one group of %d",
                                                  t.n_workers(), g));
  }
  if (t.n_workers() % g != 0) {
    return error("workers.nodes",
                 absl::StrFormat("%d workers do not form whole groups of %d (expected a "
                                 "multiple of the group size)",
                                 t.n_workers(), g));
  }
  if (t.n_workers() > kMaxWorkers) {  // topologies built in code (ParseDocument checks first)
    return error("workers.nodes",
                 absl::StrFormat("%d workers is more than %d", t.n_workers(), kMaxWorkers));
  }
  if (t.group_size > 0 && t.n_workers() / g > kMaxGroups) {  // (0: the model's top-k, later)
    return error("workers.nodes",
                 absl::StrFormat("%d workers in groups of %d make %d groups, more than %d (layer "
                                 "l goes to group l mod groups: most would only stand by; "
                                 "expected at most %d groups, or a larger group_size)",
                                 t.n_workers(), g, t.n_workers() / g, kMaxGroups, kMaxGroups));
  }
  return absl::OkStatus();
}

// `path` (the file of topology key `key`) must be a regular file; with
// `may_be_missing`, nothing there is fine too (made later).
absl::Status CheckNamedFile(const std::string& file, const std::string& key,
                            const std::string& path, bool may_be_missing) {
  absl::Status s = CheckRegularFile(path);
  if (s.ok() || (may_be_missing && absl::IsNotFound(s))) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": ", s.message()));
}

// Every file the topology names is a regular file, before anything opens one.
absl::Status CheckTopologyFiles(const Topology& t, const std::string& file) {
  ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "model", t.model, false));
  if (t.shadow && !t.shadow->model.empty()) {
    ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "shadow.model", t.shadow->model, true));
  }
  if (t.node_tls.enabled()) {
    std::vector<std::string> ids = {kOperatorId};
    if (t.node_tls.per_node()) {
      for (const NodeSpec* n : t.AllNodes()) ids.push_back(n->id);
    }
    ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "node_tls.ca", t.node_tls.ca, true));
    for (const std::string& id : ids) {
      const NodeTls mine = t.node_tls.ForNode(id);
      ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "node_tls.cert", mine.cert, true));
      ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "node_tls.key", mine.key, true));
    }
  }
  if (!t.main.tls_cert.empty()) {
    ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "main.tls.cert", t.main.tls_cert, true));
    ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "main.tls.key", t.main.tls_key, true));
  }
  if (!t.cluster_secret_file.empty()) {
    ODMOE_RETURN_IF_ERROR(CheckNamedFile(file, "cluster_secret_file", t.cluster_secret_file, true));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view PredictionModeName(PredictionMode m) {
  switch (m) {
    case PredictionMode::kShadow:
      return "shadow";
    case PredictionMode::kRandom:
      return "random";
    case PredictionMode::kNone:
      return "none";
    case PredictionMode::kLookahead:
      return "lookahead";
  }
  return "none";
}

std::string_view WireDTypeName(WireDType t) { return t == WireDType::kF16 ? "f16" : "f32"; }

std::vector<int> Topology::GroupMembers(int group) const {
  std::vector<int> members;
  for (int i = 0; i < group_size; ++i) members.push_back(group * group_size + i);
  return members;
}

const WorkerSpec* Topology::FindWorker(std::string_view id) const {
  const int i = WorkerIndex(id);
  return i < 0 ? nullptr : &workers[static_cast<size_t>(i)];
}

int Topology::WorkerIndex(std::string_view id) const {
  for (size_t i = 0; i < workers.size(); ++i) {
    if (workers[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

bool NodeTls::per_node() const { return cert.find(kNodeIdMarker) != std::string::npos; }

NodeTls NodeTls::ForNode(std::string_view id) const {
  const auto fill = [&](const std::string& path) {
    return absl::StrReplaceAll(path, {{kNodeIdMarker, ToAbsl(id)}});
  };
  return {ca, fill(cert), fill(key)};
}

const NodeSpec* Topology::FindNode(std::string_view id) const {
  for (const NodeSpec* n : AllNodes()) {
    if (n->id == id) return n;
  }
  return nullptr;
}

std::vector<const NodeSpec*> Topology::AllNodes() const {
  std::vector<const NodeSpec*> nodes = {&main};
  if (shadow) nodes.push_back(&*shadow);
  for (const WorkerSpec& w : workers) nodes.push_back(&w);
  return nodes;
}

const NodeSpec* Topology::FirstNonLoopbackNode() const {
  for (const NodeSpec* n : AllNodes()) {
    if (!IsLoopbackHost(n->host)) return n;
  }
  return nullptr;
}

bool IsLoopbackHost(std::string_view host) {
  std::string h = absl::AsciiStrToLower(absl::string_view(host.data(), host.size()));
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

absl::StatusOr<Topology> ParseTopology(std::string_view yaml_text, const std::string& path) {
  const std::string file = path.empty() ? "<topology>" : path;
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: line %d: not valid YAML: %s", file, e.mark.line + 1, e.msg));
  }
  Topology t;
  t.path = path;
  try {
    ODMOE_RETURN_IF_ERROR(ParseDocument(root, file, base_dir, &t));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: line %d: %s", file, e.mark.line + 1, e.msg));
  }
  ODMOE_RETURN_IF_ERROR(CheckStructure(t, file));
  return t;
}

absl::Status ValidateTopologyWithModel(Topology& t) {
  const std::string file = t.path.empty() ? "<topology>" : t.path;
  ODMOE_RETURN_IF_ERROR(CheckTopologyFiles(t, file));
  absl::StatusOr<std::unique_ptr<ModelFile>> model = ModelFile::Open(t.model);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": model: ", model.status().message()));
  }
  const ModelConfig& c = (*model)->config();
  // Any group size works: worker i of a group computes the positions i, i+G,
  // ... of a layer's k experts (cluster/assignment.h). The default is the
  // paper's one expert per worker.
  if (t.group_size == 0) t.group_size = c.n_expert_used;
  ODMOE_RETURN_IF_ERROR(CheckStructure(t, file));
  for (size_t i = 0; i < t.workers.size(); ++i) {
    const uint64_t budget = t.workers[i].memory_budget;
    if (budget != 0 && budget < c.expert_bytes_max) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: workers.nodes[%d].memory_budget: %d bytes cannot hold the largest expert of this "
          "model (expected at least %d bytes plus workspace)",
          file, i, budget, c.expert_bytes_max));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Topology> LoadTopology(const std::string& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxTopologyFileBytes);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat(path, ": cannot read the topology file: ", text.status().message()));
  }
  ODMOE_ASSIGN_OR_RETURN(Topology t, ParseTopology(*text, path));
  ODMOE_RETURN_IF_ERROR(ValidateTopologyWithModel(t));
  return t;
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  std::string s = absl::AsciiStrToLower(std::string(absl::StripAsciiWhitespace(
      absl::string_view(text.data(), text.size()))));
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
      {"kb", 1e3},     {"mb", 1e6},        {"gb", 1e9},           {"tb", 1e12},
      {"k", 1024.0},   {"m", 1048576.0},   {"g", 1073741824.0},   {"b", 1.0}};
  double scale = 1.0;
  for (const auto& [unit, factor] : kUnits) {
    if (s.size() > unit.size() && s.compare(s.size() - unit.size(), unit.size(), unit) == 0) {
      s = s.substr(0, s.size() - unit.size());
      scale = factor;
      break;
    }
  }
  double v = 0;
  if (s.empty() || !absl::SimpleAtod(s, &v) || !std::isfinite(v) || v < 0 ||
      v * scale >= 1.8e19) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not a byte size (expected e.g. 96MiB, 1.5GiB, 512KiB, 64MB or 1048576)",
        std::string(text)));
  }
  return static_cast<uint64_t>(std::llround(v * scale));
}

absl::StatusOr<uint64_t> ParseByteRate(std::string_view text) {
  std::string s(text);
  // Bits per second, as links are sold: 100Mbit/s, 1Gbit/s, 10Gbit/s.
  for (const auto& [unit, bits] : std::vector<std::pair<std::string, double>>{
           {"kbit/s", 1e3}, {"Mbit/s", 1e6}, {"Gbit/s", 1e9}}) {
    if (s.size() > unit.size() && s.compare(s.size() - unit.size(), unit.size(), unit) == 0) {
      double x = 0;
      if (!absl::SimpleAtod(s.substr(0, s.size() - unit.size()), &x) || !(x > 0) ||
          x * bits / 8 > 1e15) {
        break;
      }
      return static_cast<uint64_t>(std::llround(x * bits / 8));
    }
  }
  if (s.size() > 2 && (s.substr(s.size() - 2) == "/s" || s.substr(s.size() - 2) == "/S")) {
    s.resize(s.size() - 2);
  }
  absl::StatusOr<uint64_t> v = ParseByteSize(s);
  if (!v.ok() || *v == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not a rate (expected bytes per second, e.g. 2GB/s, 800MiB/s or 1000000000, "
        "or bits per second, e.g. 1Gbit/s)",
        std::string(text)));
  }
  return *v;
}

std::string TopologyToYaml(const Topology& t) {
  YAML::Emitter out;
  auto node = [&](const NodeSpec& n) {
    out << YAML::Key << "id" << YAML::Value << n.id;
    out << YAML::Key << "address" << YAML::Value << n.address;
    out << YAML::Key << "backend" << YAML::Value << n.backend;
    if (!n.ssh.empty()) out << YAML::Key << "ssh" << YAML::Value << n.ssh;
    if (!n.netns.empty()) out << YAML::Key << "netns" << YAML::Value << n.netns;
  };
  out << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << t.model;
  out << YAML::Key << "prediction" << YAML::Value << std::string(PredictionModeName(t.prediction));
  if (!(t.lookahead == LookaheadSpec{})) {
    out << YAML::Key << "lookahead" << YAML::Value << YAML::BeginMap << YAML::Key << "layers"
        << YAML::Value << t.lookahead.layers << YAML::Key << "candidates" << YAML::Value
        << t.lookahead.candidates << YAML::Key << "from_layer" << YAML::Value
        << t.lookahead.from_layer << YAML::EndMap;
  }
  out << YAML::Key << "prefill" << YAML::Value << YAML::BeginMap << YAML::Key << "mini_batch";
  if (t.prefill_mini_batch == Topology::kAutoMiniBatch) {
    out << YAML::Value << "auto";
  } else {
    out << YAML::Value << t.prefill_mini_batch;
  }
  out << YAML::Key << "message_cost" << YAML::Value
      << absl::StrCat(t.prefill_message_cost_us, "us") << YAML::EndMap;
  out << YAML::Key << "wire" << YAML::Value << YAML::BeginMap << YAML::Key << "hidden_dtype"
      << YAML::Value << std::string(WireDTypeName(t.wire_dtype));
  if (t.wire_delay_us > 0) {
    out << YAML::Key << "emulated_delay" << YAML::Value << absl::StrCat(t.wire_delay_us, "us");
  }
  if (t.link_bandwidth > 0) {
    out << YAML::Key << "link_bandwidth" << YAML::Value << t.link_bandwidth;
  }
  out << YAML::EndMap;
  if (t.node_tls.enabled()) {
    out << YAML::Key << "node_tls" << YAML::Value << YAML::BeginMap << YAML::Key << "ca"
        << YAML::Value << t.node_tls.ca << YAML::Key << "cert" << YAML::Value << t.node_tls.cert
        << YAML::Key << "key" << YAML::Value << t.node_tls.key << YAML::EndMap;
  }
  if (t.insecure) out << YAML::Key << "insecure" << YAML::Value << true;
  if (!t.cluster_secret_file.empty()) {
    out << YAML::Key << "cluster_secret_file" << YAML::Value << t.cluster_secret_file;
  }
  out << YAML::Key << "main" << YAML::Value << YAML::BeginMap;
  node(t.main);
  out << YAML::Key << "context" << YAML::Value << t.main.context;
  out << YAML::Key << "batch" << YAML::Value << t.main.batch;
  out << YAML::Key << "max_running" << YAML::Value << t.main.max_running;
  out << YAML::Key << "max_queue" << YAML::Value << t.main.max_queue;
  out << YAML::Key << "max_body_bytes" << YAML::Value << t.main.max_body_bytes;
  out << YAML::Key << "worker_timeout_ms" << YAML::Value << t.main.worker_timeout_ms;
  {
    const HttpLimits& l = t.main.http_limits;
    out << YAML::Key << "http_limits" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "max_connections" << YAML::Value << l.max_connections;
    out << YAML::Key << "max_connections_per_client" << YAML::Value
        << l.max_connections_per_client;
    out << YAML::Key << "max_buffered_body_bytes" << YAML::Value << l.max_buffered_body_bytes;
    out << YAML::Key << "io_threads" << YAML::Value << l.io_threads;
    out << YAML::Key << "max_header_bytes" << YAML::Value << l.max_header_bytes;
    out << YAML::Key << "header_timeout_ms" << YAML::Value << l.header_timeout_ms;
    out << YAML::Key << "body_timeout_ms" << YAML::Value << l.body_timeout_ms;
    out << YAML::Key << "idle_timeout_ms" << YAML::Value << l.idle_timeout_ms;
    out << YAML::Key << "write_timeout_ms" << YAML::Value << l.write_timeout_ms;
    out << YAML::Key << "stream_buffer_bytes" << YAML::Value << l.stream_buffer_bytes;
    out << YAML::Key << "socket_send_buffer_bytes" << YAML::Value << l.socket_send_buffer_bytes;
    out << YAML::EndMap;
  }
  if (!t.main.http.empty()) out << YAML::Key << "http" << YAML::Value << t.main.http;
  if (!t.main.api_key.empty()) out << YAML::Key << "api_key" << YAML::Value << t.main.api_key;
  if (!t.main.tls_cert.empty()) {
    out << YAML::Key << "tls" << YAML::Value << YAML::BeginMap << YAML::Key << "cert"
        << YAML::Value << t.main.tls_cert << YAML::Key << "key" << YAML::Value << t.main.tls_key
        << YAML::EndMap;
  }
  out << YAML::EndMap;
  if (t.shadow) {
    const ShadowSpec& s = *t.shadow;
    out << YAML::Key << "shadow" << YAML::Value << YAML::BeginMap;
    node(s);
    out << YAML::Key << "quantization" << YAML::Value
        << absl::AsciiStrToLower(ToAbsl(Traits(s.quantization).name));
    if (!s.model.empty()) out << YAML::Key << "model" << YAML::Value << s.model;
    out << YAML::Key << "alignment" << YAML::Value << YAML::BeginMap << YAML::Key
        << "token_period" << YAML::Value << s.token_period << YAML::Key << "kv_period"
        << YAML::Value << s.kv_period << YAML::EndMap;
    out << YAML::Key << "max_run_ahead" << YAML::Value << s.max_run_ahead;
    if (s.draft_tokens > 0) out << YAML::Key << "draft_tokens" << YAML::Value << s.draft_tokens;
    if (s.draft_wait_us > 0) {
      out << YAML::Key << "draft_wait" << YAML::Value << absl::StrCat(s.draft_wait_us, "us");
    }
    out << YAML::EndMap;
  }
  out << YAML::Key << "workers" << YAML::Value << YAML::BeginMap;
  if (t.group_size > 0) out << YAML::Key << "group_size" << YAML::Value << t.group_size;
  out << YAML::Key << "mode" << YAML::Value << std::string(WorkerModeName(t.worker_mode));
  if (IsCacheMode(t.worker_mode)) {
    out << YAML::Key << "cache_experts" << YAML::Value << t.cache_experts;
  }
  if (!(t.utility == UtilitySpec{})) {
    out << YAML::Key << "utility" << YAML::Value << YAML::BeginMap << YAML::Key << "window"
        << YAML::Value << t.utility.window << YAML::Key << "levels" << YAML::Value
        << t.utility.levels << YAML::Key << "threshold" << YAML::Value << t.utility.threshold
        << YAML::EndMap;
  }
  if (t.host_compute) out << YAML::Key << "host_compute" << YAML::Value << true;
  if (t.host_compute_slowdown != 1) {
    out << YAML::Key << "host_compute_slowdown" << YAML::Value << t.host_compute_slowdown;
  }
  if (t.sub_expert) out << YAML::Key << "sub_expert" << YAML::Value << true;
  if (t.degrade) out << YAML::Key << "degrade" << YAML::Value << true;
  if (t.mixed_precision) {
    out << YAML::Key << "mixed_precision" << YAML::Value << YAML::BeginMap << YAML::Key << "type"
        << YAML::Value << absl::AsciiStrToLower(ToAbsl(Traits(t.mixed_precision->type).name))
        << YAML::Key << "floor" << YAML::Value << t.mixed_precision->floor << YAML::EndMap;
  }
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const WorkerSpec& w : t.workers) {
    out << YAML::BeginMap;
    node(w);
    if (w.memory_budget) out << YAML::Key << "memory_budget" << YAML::Value << w.memory_budget;
    if (w.load_bandwidth) {
      out << YAML::Key << "load_bandwidth" << YAML::Value << w.load_bandwidth;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace odmoe
