// How many messages a prefill sends each expert's rows in (paper §3.3's
// mini-batches), chosen from the link and the workers' costs
// (`prefill.mini_batch: auto`), so that pipelining is never worse than
// sending each expert's rows whole, by the model below, and better where rows
// are large against the per-message cost.
//
// The model of one layer: `experts` experts of `rows` rows each go out over
// the main node's link one message after another (each costs message_s plus
// its rows' bytes over the link's bandwidth); a worker computes a message
// (call_s + m * row_s for m rows: one pass over the expert's weights plus
// the rows' work) as soon as it has landed, one after another, and sends it
// back. Splitting each expert into b messages adds (b - 1) per-message costs
// per expert on the link and b - 1 weight passes per worker, and shortens the
// tail: what happens after the last message went out (its compute and its
// way back). Every cost is known to the main node: the link from the
// topology (wire.link_bandwidth, prefill.message_cost), the row size from the
// model and the wire type, a worker's call and row costs from the compute
// times its results report (PrefillCostTracker).
//
//   PrefillCosts c{.message_s = 30e-6, .row_bytes = 16384, .link_bytes_per_s = 125e6,
//                  .call_s = 60e-6, .row_s = 1e-6};
//   int64_t b = ChooseMessagesPerExpert(/*experts=*/8, /*rows=*/66, /*max_rows=*/64, c);
//   double t = PrefillLayerSeconds(8, 66, b, c);
#pragma once

#include <cstdint>

namespace odmoe {

struct PrefillCosts {
  double message_s = 30e-6;     // fixed cost of one message on the link
  double row_bytes = 0;         // one hidden row on the wire
  double link_bytes_per_s = 0;  // the main node's link; 0 = unlimited (loopback)
  double call_s = 0;            // a worker's expert call: one pass over the weights
  double row_s = 0;             // ... plus this per row
};

/// The model's time for one layer whose `experts` experts have `rows` rows
/// each, every expert's rows sent in `messages` messages (>= 1, <= rows).
double PrefillLayerSeconds(int experts, int64_t rows, int64_t messages, const PrefillCosts& c);

/// The number of messages per expert (from ceil(rows / max_rows) to rows)
/// with the least PrefillLayerSeconds; ties go to fewer messages.
int64_t ChooseMessagesPerExpert(int experts, int64_t rows, int64_t max_rows, const PrefillCosts& c);

/// A worker's expert call costs, learned from the tasks' reported compute
/// times: one-row tasks give the call's cost, larger ones the per-row cost on
/// top of it (exponential moving averages). Not thread-safe.
class PrefillCostTracker {
 public:
  void Observe(int64_t rows, double compute_seconds);
  double call_s() const { return call_s_; }
  double row_s() const { return row_s_; }

 private:
  double call_s_ = 0, row_s_ = 0;
  bool have_call_ = false, have_row_ = false;
};

}  // namespace odmoe
