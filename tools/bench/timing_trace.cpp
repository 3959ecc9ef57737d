#include "bench/timing_trace.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "cluster/trace_client.h"

namespace odmoe::bench {
namespace {

// The request traced: the largest request id any main-node span carries.
uint64_t LastRequest(const ClusterTrace& t) {
  uint64_t last = 0;
  for (const NodeSpans& n : t.nodes) {
    for (const v1::TraceEvent& e : n.events) last = std::max<uint64_t>(last, e.request());
  }
  return last;
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

absl::Status StartTracing(const std::vector<std::string>& addresses, const PeerAuth* auth) {
  for (const std::string& a : addresses) {
    absl::StatusOr<v1::TraceReply> r = TraceNode(a, v1::TraceRequest::START, auth);
    if (!r.ok()) return r.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<ClusterTrace> CollectClusterTrace(const std::vector<std::string>& addresses,
                                                 const PeerAuth* auth) {
  ClusterTrace out;
  for (const std::string& a : addresses) {
    absl::StatusOr<NodeTrace> t = CollectTrace(a, auth);
    if (!t.ok()) return t.status();
    NodeSpans n;
    n.node_id = t->reply.node_id();
    n.role = RoleName(t->reply.role());
    n.offset_us = t->offset_us;
    n.rtt_us = t->rtt_us;
    n.dropped = t->reply.dropped();
    for (v1::TraceEvent e : t->reply.events()) {
      e.set_start_us(e.start_us() - t->offset_us);
      n.events.push_back(std::move(e));
    }
    out.nodes.push_back(std::move(n));
  }
  return out;
}

nlohmann::json ToPerfetto(const ClusterTrace& trace, uint32_t first_token, uint32_t last_token) {
  const uint64_t request = LastRequest(trace);
  int64_t t0 = INT64_MAX;
  auto wanted = [&](const v1::TraceEvent& e) {
    return e.request() == request && e.token() >= first_token && e.token() <= last_token;
  };
  for (const NodeSpans& n : trace.nodes) {
    for (const v1::TraceEvent& e : n.events) {
      if (wanted(e)) t0 = std::min<int64_t>(t0, e.start_us());
    }
  }
  nlohmann::json events = nlohmann::json::array();
  for (size_t pid = 0; pid < trace.nodes.size(); ++pid) {
    const NodeSpans& n = trace.nodes[pid];
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"args", {{"name", n.role + " " + n.node_id}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    std::map<std::string, int> lanes;
    for (const v1::TraceEvent& e : n.events) {
      if (!wanted(e)) continue;
      auto [it, fresh] = lanes.emplace(e.lane(), static_cast<int>(lanes.size()));
      if (fresh) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", pid},
                          {"tid", it->second},
                          {"args", {{"name", e.lane()}}}});
      }
      std::string name = e.name();
      if (e.layer() >= 0) name += std::to_string(e.layer());
      if (e.expert() >= 0) name += " e" + std::to_string(e.expert());
      events.push_back({{"name", name},
                        {"cat", e.name()},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", it->second},
                        {"ts", e.start_us() - t0},
                        {"dur", std::max<int64_t>(e.duration_us(), 1)},
                        {"args",
                         {{"token", e.token()}, {"layer", e.layer()}, {"expert", e.expert()}}}});
    }
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"request", request}, {"first_token", first_token}, {"last_token", last_token}}}};
}

TimingModel MeasureTimingModel(const ClusterTrace& trace, int groups) {
  const uint64_t request = LastRequest(trace);
  std::vector<double> m, w, load, compute, head;
  for (const NodeSpans& n : trace.nodes) {
    if (n.role != "worker") continue;
    for (const v1::TraceEvent& e : n.events) {
      if (e.request() != request || e.token() < 2) continue;
      if (e.name() == "EL") load.push_back(static_cast<double>(e.duration_us()));
      if (e.name() == "EC") compute.push_back(static_cast<double>(e.duration_us()));
    }
  }
  std::map<std::pair<uint32_t, int32_t>, std::pair<int64_t, int64_t>> expert_windows;
  for (const NodeSpans& n : trace.nodes) {
    if (n.role != "main") continue;
    for (const v1::TraceEvent& e : n.events) {
      if (e.request() != request || e.token() < 2) continue;
      if (e.name() == "M") m.push_back(static_cast<double>(e.duration_us()));
      if (e.name() == "head") head.push_back(static_cast<double>(e.duration_us()));
      if (e.name() == "experts") {
        expert_windows[{e.token(), e.layer()}] = {e.start_us(), e.start_us() + e.duration_us()};
      }
    }
  }
  // A load that ends inside a layer's window made the main node wait: t^W
  // counts the window without that wait (the longest such overlap).
  std::map<std::pair<uint32_t, int32_t>, int64_t> waited;
  for (const NodeSpans& n : trace.nodes) {
    if (n.role != "worker") continue;
    for (const v1::TraceEvent& e : n.events) {
      if (e.name() != "EL" || e.request() != request) continue;
      auto it = expert_windows.find({e.token(), e.layer()});
      if (it == expert_windows.end()) continue;
      const int64_t end = e.start_us() + e.duration_us();
      const int64_t overlap = end - std::max<int64_t>(e.start_us(), it->second.first);
      if (overlap > 0) waited[it->first] = std::max(waited[it->first], overlap);
    }
  }
  for (const auto& [key, window] : expert_windows) {
    auto it = waited.find(key);
    w.push_back(static_cast<double>(window.second - window.first -
                                    (it == waited.end() ? 0 : it->second)));
  }
  TimingModel t;
  t.groups = groups;
  t.layers = static_cast<int>(expert_windows.size());
  t.t_main_us = Mean(m);
  t.t_worker_us = Mean(w);
  t.t_load_us = Mean(load);
  t.t_compute_us = Mean(compute);
  t.t_head_us = Mean(head);
  t.t_maxload_us = groups * t.t_main_us + (groups - 1) * t.t_worker_us;
  t.io_bound = t.t_load_us > t.t_maxload_us;
  t.verdict = absl::StrFormat(
      "expert load %.0f us %s t^maxload = %d x %.0f + %d x %.0f = %.0f us: %s", t.t_load_us,
      t.io_bound ? ">" : "<=", groups, t.t_main_us, groups - 1, t.t_worker_us, t.t_maxload_us,
      t.io_bound ? "I/O-bound (loads cannot be hidden even with perfect prediction)"
                 : "not I/O-bound (correctly predicted loads can be hidden)");
  return t;
}

}  // namespace odmoe::bench
