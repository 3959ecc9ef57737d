// odmoe-bench-load: how fast a worker can stream experts into a GPU.
//
//   1. cudaMemcpyAsync host-to-device of `--mib` MiB from pinned memory
//      (cudaHostAlloc) and from pageable memory, timed with events;
//   2. the worker's path: ExpertSlotArena loads from a PinnedExpertStore on
//      the arena's copy stream (device time of each load);
//   3. overlap: the same loads while the compute stream multiplies by the
//      previously loaded expert (a Q4_0 decode GEMV over it), against the
//      loads alone and the compute alone.
// Bandwidths are reported in GB/s (1e9 bytes) and as a fraction of the peak:
// the PCIe link's theoretical rate per direction, read from sysfs
// (current_link_speed x current_link_width, 128b/130b coding from 8 GT/s
// on), or --peak-gbps when given. The copy engine cannot reach the link's
// theoretical rate (packet headers): about 85-90% of it is the practical
// ceiling.
//
//   odmoe-bench-load --device 0 --mib 128 --reps 20
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "cuda_resources.h"
#include "cuda_slot_device.h"
#include "expert_slot_arena.h"
#include "util/cli_args.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int device = 0;
  int mib = 128;
  int reps = 20;
  float peak_gbps = 0.0f;
};

/// Theoretical GB/s of the device's PCIe link per direction, or 0.
double LinkPeakGbps(int device) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) return 0.0;
  std::string id(bus);
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string dir = "/sys/bus/pci/devices/" + id + "/";
  double gts = 0.0;
  int width = 0;
  std::ifstream(dir + "current_link_speed") >> gts;  // "32.0 GT/s PCIe"
  std::ifstream(dir + "current_link_width") >> width;
  if (gts <= 0.0 || width <= 0) return 0.0;
  const double coding = gts >= 8.0 ? 128.0 / 130.0 : 0.8;
  return gts * width * coding / 8.0;
}

/// GB/s of `reps` host-to-device copies of `bytes` from `src` on `stream`.
absl::StatusOr<double> CopyBandwidth(const void* src, void* dst, size_t bytes, int reps,
                                     cudaStream_t stream) {
  ODMOE_ASSIGN_OR_RETURN(cuda::EventPtr start, cuda::CreateEvent(true));
  ODMOE_ASSIGN_OR_RETURN(cuda::EventPtr stop, cuda::CreateEvent(true));
  ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "warm-up copy"));
  ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(cudaEventRecord(start.get(), stream), "event"));
  for (int r = 0; r < reps; ++r) {
    ODMOE_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "copy"));
  }
  ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(cudaEventRecord(stop.get(), stream), "event"));
  ODMOE_RETURN_IF_ERROR(cuda::CudaStatus(cudaEventSynchronize(stop.get()), "sync"));
  float ms = 0.0f;
  ODMOE_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaEventElapsedTime(&ms, start.get(), stop.get()), "time"));
  return static_cast<double>(bytes) * reps / (ms * 1e-3) / 1e9;
}

void Report(const char* what, double gbps, double peak) {
  if (peak > 0.0) {
    std::printf("%-44s %7.2f GB/s  %5.1f%% of peak\n", what, gbps, 100.0 * gbps / peak);
  } else {
    std::printf("%-44s %7.2f GB/s\n", what, gbps);
  }
}

/// Wall seconds of `reps` rounds of `round(r)`, then a sync of the backend.
template <class Fn>
absl::StatusOr<double> TimeRounds(CudaBackend& be, int reps, Fn round) {
  ODMOE_RETURN_IF_ERROR(be.Synchronize());
  const auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) ODMOE_RETURN_IF_ERROR(round(r));
  ODMOE_RETURN_IF_ERROR(be.Synchronize());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

absl::Status Run(const Options& o) {
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> be, CudaBackend::Create({o.device}));
  const double peak = o.peak_gbps > 0.0f ? o.peak_gbps : LinkPeakGbps(o.device);
  // A Q4_0 matrix of 4096 columns of about --mib MiB: the "expert".
  const int64_t k = 4096;
  const size_t row_bytes = RowBytes(DType::kQ4_0, k);
  const int64_t rows = std::max<int64_t>(1, (int64_t{o.mib} << 20) / row_bytes);
  const size_t bytes = row_bytes * static_cast<size_t>(rows);
  std::printf("device %d, %s; transfer %.1f MiB x %d; peak %s\n", o.device, be->name().c_str(),
              bytes / 1048576.0, o.reps,
              peak > 0.0 ? (std::to_string(peak) + " GB/s").c_str() : "unknown");

  ODMOE_ASSIGN_OR_RETURN(PinnedExpertStore store, PinnedExpertStore::Create(2, bytes));
  for (int e = 0; e < 2; ++e) std::memset(store.entry(e), 0x11 + e, bytes);  // valid Q4_0 blocks
  std::vector<uint8_t> pageable(bytes, 0x11);
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> dst, be->Allocate(bytes));
  ODMOE_ASSIGN_OR_RETURN(cuda::StreamPtr stream, cuda::CreateStream());
  ODMOE_ASSIGN_OR_RETURN(double pinned,
                         CopyBandwidth(store.entry(0), dst->data(), bytes, o.reps, stream.get()));
  Report("cudaMemcpyAsync H2D, pinned", pinned, peak);
  ODMOE_ASSIGN_OR_RETURN(double paged,
                         CopyBandwidth(pageable.data(), dst->data(), bytes, o.reps, stream.get()));
  Report("cudaMemcpyAsync H2D, pageable", paged, peak);
  dst.reset();

  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<SlotDevice> dev, MakeCudaSlotDevice(*be));
  ODMOE_ASSIGN_OR_RETURN(
      std::unique_ptr<ExpertSlotArena> arena,
      ExpertSlotArena::Create(std::move(dev), {bytes, 2 * ExpertSlotArena::SlotStride(bytes)}));
  // Loads alone: device time per load.
  double load_seconds = 0.0;
  for (int r = 0; r < o.reps; ++r) {
    ODMOE_ASSIGN_OR_RETURN(int slot, arena->Load({0, r}, store.entry(r % 2)));
    ODMOE_ASSIGN_OR_RETURN(double s, arena->WaitLoaded(slot));
    load_seconds += s;
  }
  Report("ExpertSlotArena load (copy stream)", bytes * o.reps / load_seconds / 1e9, peak);

  // Overlap: compute on the current expert while the next one loads.
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> act, be->Allocate(k * sizeof(float)));
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> out, be->Allocate(rows * sizeof(float)));
  ODMOE_RETURN_IF_ERROR(
      be->CopyToBackend(act->data(), std::vector<float>(k, 0.5f).data(), k * sizeof(float)));
  const ConstMat x(static_cast<const float*>(act->data()), 1, k);
  const Mat y{static_cast<float*>(out->data()), 1, rows};
  int key = 1000;
  ODMOE_ASSIGN_OR_RETURN(int cur, arena->Load({0, key}, store.entry(0)));
  auto compute = [&](int slot) -> absl::Status {
    ODMOE_ASSIGN_OR_RETURN(const void* w, arena->Acquire(slot));
    be->MatMul(WeightRef{DType::kQ4_0, w, rows, k}, x, y);
    return arena->Release(slot);
  };
  ODMOE_ASSIGN_OR_RETURN(double t_compute,
                         TimeRounds(*be, o.reps, [&](int) { return compute(cur); }));
  ODMOE_ASSIGN_OR_RETURN(
      double t_load, TimeRounds(*be, o.reps, [&](int r) -> absl::Status {
        ODMOE_ASSIGN_OR_RETURN(int s, arena->Load({1, ++key}, store.entry(r % 2)));
        return arena->WaitLoaded(s).status();
      }));
  cur = arena->Find({1, key});
  ODMOE_ASSIGN_OR_RETURN(
      double t_both, TimeRounds(*be, o.reps, [&](int r) -> absl::Status {
        ODMOE_ASSIGN_OR_RETURN(int next, arena->Load({2, ++key}, store.entry(r % 2)));
        ODMOE_RETURN_IF_ERROR(compute(cur));
        cur = next;
        return absl::OkStatus();
      }));
  const double hidden = (t_load + t_compute - t_both) / std::min(t_load, t_compute);
  std::printf(
      "per expert: load %.3f ms, GEMV %.3f ms, both overlapped %.3f ms (%.0f%% of the "
      "shorter one hidden)\n",
      1e3 * t_load / o.reps, 1e3 * t_compute / o.reps, 1e3 * t_both / o.reps,
      100.0 * std::clamp(hidden, 0.0, 1.0));
  Report("load while computing (effective)", bytes * o.reps / t_both / 1e9, peak);
  return absl::OkStatus();
}

}  // namespace
}  // namespace odmoe

int main(int argc, char** argv) {
  odmoe::Options o;
  odmoe::CliArgs args("odmoe-bench-load",
                      "Host-to-device expert load bandwidth (pinned vs pageable, arena, overlap).");
  args.AddInt("device", &o.device, "N", "CUDA device (default 0)");
  args.AddInt("mib", &o.mib, "MIB", "size of one transfer / expert in MiB (default 128)");
  args.AddInt("reps", &o.reps, "N", "transfers per measurement (default 20)");
  args.AddFloat("peak-gbps", &o.peak_gbps, "GBPS", "peak to compare with (default: PCIe link)");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (o.mib < 1 || o.reps < 1 || o.device < 0) {
    std::fprintf(stderr, "odmoe-bench-load: --mib, --reps must be >= 1 and --device >= 0\n");
    return 2;
  }
  const absl::Status s = odmoe::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "odmoe-bench-load: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
