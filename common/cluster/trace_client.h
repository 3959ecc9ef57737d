// Collecting timing spans from running nodes (Node.Trace), for odmoe-bench's
// timing diagram. The node's clock offset against this machine is estimated
// from the round trip of a QUERY (Cristian's method: the node's clock was
// read about halfway through), so spans of several machines line up to
// within about half a round trip.
//
//   ODMOE_ASSIGN_OR_RETURN(auto op, PeerAuth::ForOperator(topology, run_dir));
//   ODMOE_RETURN_IF_ERROR(TraceNode(addr, v1::TraceRequest::START, op.get()).status());
//   ... run requests ...
//   ODMOE_ASSIGN_OR_RETURN(NodeTrace t, CollectTrace(addr, op.get()));
//   for (const v1::TraceEvent& e : t.reply.events()) e.start_us() - t.offset_us ...
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/peer_auth.h"
#include "cluster/protocol.h"

namespace odmoe {

/// One Node.Trace call, with a credential of `auth` (an operator's,
/// PeerAuth::ForOperator; nodes refuse Trace from anyone else).
absl::StatusOr<v1::TraceReply> TraceNode(const std::string& address,
                                         v1::TraceRequest::Action action, const PeerAuth* auth,
                                         absl::Duration timeout = absl::Seconds(10));

struct NodeTrace {
  v1::TraceReply reply;    // the spans (node clock)
  int64_t offset_us = 0;   // node clock - local clock
  int64_t rtt_us = 0;      // of the best QUERY
};

/// Estimates the offset (best of a few QUERYs), then STOPs and takes the spans.
absl::StatusOr<NodeTrace> CollectTrace(const std::string& address, const PeerAuth* auth);

}  // namespace odmoe
