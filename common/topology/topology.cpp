#include "topology/topology.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "model/model_file.h"
#include "topology/topology_keys.h"
#include "util/regular_file.h"
#include "util/status_macros.h"
#include "util/string_view.h"
#include "yaml-cpp/yaml.h"

namespace odmoe {
namespace {

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
  // Rules between keys (each key's own type and bounds are in its
  // declaration, topology_keys.cpp).
  if (t.shadow && t.shadow->draft_tokens + 1 > t.main.batch) {
    return error("shadow.draft_tokens",
                 absl::StrFormat("%d drafted tokens and the verified one need a batch of %d "
                                 "rows; main.batch is %d",
                                 t.shadow->draft_tokens, t.shadow->draft_tokens + 1, t.main.batch));
  }
  if (t.utility.threshold > t.utility.levels) {
    return error("workers.utility.threshold",
                 absl::StrFormat("%d is above levels (%d)", t.utility.threshold, t.utility.levels));
  }
  if (t.node_tls.enabled()) {
    // One certificate per node or one for all: cert and key must agree, or
    // every node would present its own certificate with the same key.
    if (t.node_tls.per_node() != (t.node_tls.key.find(kNodeIdMarker) != std::string::npos)) {
      return error("node_tls",
                   "cert and key must both contain {id} (one certificate per node) "
                   "or neither (one certificate for all)");
    }
    if (t.node_tls.ca.find(kNodeIdMarker) != std::string::npos) {
      return error("node_tls.ca", "one CA for the whole cluster ({id} is for cert and key)");
    }
  }
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
    const std::string host =
        t.main.ssh.empty() ? CanonicalHost(t.main.http_host) : t.main.ssh + "/" + t.main.http_host;
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
    return error("workers.nodes",
                 absl::StrFormat("%d worker(s) is fewer than one group of %d", t.n_workers(), g));
  }
  if (t.n_workers() % g != 0) {
    return error("workers.nodes",
                 absl::StrFormat("%d workers do not form whole groups of %d (expected a "
                                 "multiple of the group size)",
                                 t.n_workers(), g));
  }
  if (t.n_workers() > kMaxWorkers) {  // topologies built in code (the reader checks first)
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
    ODMOE_RETURN_IF_ERROR(ReadTopologyKeys(root, file, base_dir, &t));
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
    return absl::InvalidArgumentError(absl::StrCat(file, ": model: ", model.status().message()));
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
  std::string s = absl::AsciiStrToLower(
      std::string(absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()))));
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
  if (s.empty() || !absl::SimpleAtod(s, &v) || !std::isfinite(v) || v < 0 || v * scale >= 1.8e19) {
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

}  // namespace odmoe
