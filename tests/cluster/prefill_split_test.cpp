// The prefill's messages per expert (`prefill.mini_batch: auto`): one message
// where the link is cheap or a worker's call is dear, several where large
// rows cross a slow link to fast workers, never worse than sending each
// expert's rows whole by the model, and the workers' costs learned from their
// reported compute times.
#include "cluster/prefill_split.h"

#include <catch2/catch.hpp>

#include <random>

namespace odmoe {

TEST_CASE("prefill split: loopback and dear calls send each expert's rows whole",
          "[cluster][prefill]") {
  // The tiny model on loopback: nothing to hide behind compute.
  PrefillCosts loopback{.message_s = 30e-6, .row_bytes = 512, .link_bytes_per_s = 0,
                        .call_s = 5e-6, .row_s = 0.1e-6};
  CHECK(ChooseMessagesPerExpert(8, 66, 64, loopback) == 2);  // max_rows 64 caps a message
  CHECK(ChooseMessagesPerExpert(8, 60, 64, loopback) == 1);
  // The tiny model over 1 Gbit/s: the per-message cost outweighs the tail.
  PrefillCosts tiny_gbit = loopback;
  tiny_gbit.link_bytes_per_s = 125e6;
  CHECK(ChooseMessagesPerExpert(8, 60, 64, tiny_gbit) == 1);
  // A Mixtral-sized expert computed on a CPU (each call reads 187 MB) on a
  // fast link: a second weight pass costs more than any overlap gains.
  PrefillCosts cpu_mixtral{.message_s = 30e-6, .row_bytes = 16384, .link_bytes_per_s = 0,
                           .call_s = 19e-3, .row_s = 0.2e-3};
  CHECK(ChooseMessagesPerExpert(8, 60, 64, cpu_mixtral) == 1);
  // On 1 Gbit/s the link is the bottleneck (63 ms for the layer's rows): a
  // few messages let the last expert's compute overlap the link.
  cpu_mixtral.link_bytes_per_s = 125e6;
  const int64_t b = ChooseMessagesPerExpert(8, 60, 64, cpu_mixtral);
  CHECK(b > 1);
  CHECK(b < 8);
}

TEST_CASE("prefill split: large rows on a slow link to fast workers go in several messages",
          "[cluster][prefill]") {
  // A Mixtral-sized row (16 KiB in f32) over 1 Gbit/s to GPU workers.
  PrefillCosts gpu{.message_s = 30e-6, .row_bytes = 16384, .link_bytes_per_s = 125e6,
                   .call_s = 60e-6, .row_s = 1e-6};
  const int64_t b = ChooseMessagesPerExpert(8, 64, 64, gpu);
  CHECK(b > 1);
  CHECK(PrefillLayerSeconds(8, 64, b, gpu) < 0.95 * PrefillLayerSeconds(8, 64, 1, gpu));
  // One expert alone (a short prompt's layer): its whole transfer is tail.
  const int64_t b1 = ChooseMessagesPerExpert(1, 64, 64, gpu);
  CHECK(b1 > b);
  CHECK(PrefillLayerSeconds(1, 64, b1, gpu) < 0.6 * PrefillLayerSeconds(1, 64, 1, gpu));
}

TEST_CASE("prefill split: the choice is never worse than the fewest messages, within max_rows",
          "[cluster][prefill]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> log10(-7, -2);
  std::uniform_int_distribution<int> experts(1, 16), rows(1, 128), cap(1, 64);
  for (int i = 0; i < 2000; ++i) {
    PrefillCosts c{.message_s = std::pow(10.0, log10(rng)),
                   .row_bytes = 256.0 * (1 + rng() % 64),
                   .link_bytes_per_s = rng() % 4 == 0 ? 0.0 : 1e6 * (1 + rng() % 10000),
                   .call_s = std::pow(10.0, log10(rng)),
                   .row_s = std::pow(10.0, log10(rng))};
    const int e = experts(rng);
    const int64_t n = rows(rng), max_rows = cap(rng);
    const int64_t fewest = (n + max_rows - 1) / max_rows;
    const int64_t b = ChooseMessagesPerExpert(e, n, max_rows, c);
    INFO("experts " << e << " rows " << n << " max_rows " << max_rows);
    CHECK(b >= fewest);
    CHECK(b <= n);
    CHECK(PrefillLayerSeconds(e, n, b, c) <= PrefillLayerSeconds(e, n, fewest, c));
  }
  CHECK(ChooseMessagesPerExpert(4, 0, 16, PrefillCosts{}) == 1);
}

TEST_CASE("prefill split: a worker's call and row costs are learned from its tasks",
          "[cluster][prefill]") {
  PrefillCostTracker t;
  t.Observe(10, 0.5);  // no call cost known yet: ignored
  CHECK(t.row_s() == 0);
  t.Observe(1, 0.010);
  CHECK(t.call_s() == Approx(0.010));
  t.Observe(11, 0.030);  // 10 ms + 11 rows x 20/11 ms
  CHECK(t.row_s() == Approx(0.020 / 11));
  t.Observe(1, 0.020);  // moves towards newer observations
  CHECK(t.call_s() > 0.010);
  CHECK(t.call_s() < 0.020);
  t.Observe(0, 1.0);   // nonsense is ignored
  t.Observe(4, -1.0);
  CHECK(t.call_s() < 0.020);
}

}  // namespace odmoe
