#include "cluster/prefill_split.h"

#include <algorithm>
#include <cmath>

namespace odmoe {

double PrefillLayerSeconds(int experts, int64_t rows, int64_t messages, const PrefillCosts& c) {
  if (experts < 1 || rows < 1) return 0;
  messages = std::clamp<int64_t>(messages, 1, rows);
  const double m = std::ceil(static_cast<double>(rows) / static_cast<double>(messages));
  const double per_row_link = c.link_bytes_per_s > 0 ? c.row_bytes / c.link_bytes_per_s : 0.0;
  const double send_one = c.message_s + m * per_row_link;  // one message on the link
  const double compute_one = c.call_s + m * c.row_s;
  // The link carries every message of the layer, one after another; the
  // last one is then computed and comes back.
  const double link = static_cast<double>(experts) *
                      (static_cast<double>(messages) * c.message_s +
                       static_cast<double>(rows) * per_row_link);
  const double by_link = link + compute_one + send_one;
  // A worker computes its expert's messages one after another, starting
  // when the first has landed.
  const double by_worker = send_one + static_cast<double>(messages) * compute_one + send_one;
  return std::max(by_link, by_worker);
}

int64_t ChooseMessagesPerExpert(int experts, int64_t rows, int64_t max_rows, const PrefillCosts& c) {
  if (rows < 1) return 1;
  const int64_t cap = std::max<int64_t>(1, max_rows);
  const int64_t fewest = (rows + cap - 1) / cap;
  int64_t best = fewest;
  double best_s = PrefillLayerSeconds(experts, rows, fewest, c);
  for (int64_t b = fewest + 1; b <= rows; ++b) {
    const double s = PrefillLayerSeconds(experts, rows, b, c);
    if (s < best_s) {
      best = b;
      best_s = s;
    }
  }
  return best;
}

void PrefillCostTracker::Observe(int64_t rows, double compute_seconds) {
  constexpr double kWeight = 0.2;
  if (rows < 1 || !(compute_seconds >= 0)) return;
  if (rows == 1) {
    call_s_ = have_call_ ? (1 - kWeight) * call_s_ + kWeight * compute_seconds : compute_seconds;
    have_call_ = true;
    return;
  }
  if (!have_call_) return;  // the per-row cost needs the call's first
  const double per_row = std::max(0.0, (compute_seconds - call_s_) / static_cast<double>(rows));
  row_s_ = have_row_ ? (1 - kWeight) * row_s_ + kWeight * per_row : per_row;
  have_row_ = true;
}

}  // namespace odmoe
