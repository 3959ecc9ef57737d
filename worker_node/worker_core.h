// The heart of a worker node (paper §3.1): one expert slot (or a few), fed by
// hints and tasks, in key order.
//
// Worker i of a group of G computes the positions i, i+G, ... of each of its
// layers' k experts (cluster/assignment.h): one expert per layer when G = k
// (the paper's testbed), several one after another when G < k, none when
// i >= k.
//   hint (token n, layer l, predicted experts)  -> this worker's experts by the
//        shared assignment, in position order; each is loaded as soon as a
//        slot is free, before its task comes (a prefetch).
//   task (key, expert, position, hidden rows)   -> if that expert is loaded:
//        compute (a hit when a prefetch started before the task arrived); else
//        load it now (a miss, the fallback stall), into the slot of the
//        prefetch made for that position if there is one (a reload: that
//        prediction was wrong), else a free slot, else in place of the
//        prefetch needed last; compute; send the result; evict at once
//        (unless more mini-batches of the same prefill expert follow, or
//        resident).
//
// One executor thread does loads and computes in order, so with one slot the
// worker never holds two experts: computing two experts of a layer, it loads
// the second after the first was computed and evicted. With two or more
// slots it prefetches the next expert while it waits for (or, on a device
// whose loads are asynchronous copies, while it computes) the current one;
// on a device it also starts the loads of the tasks queued behind the one it
// computes. Its own accounting (ExpertSlots) proves what it held.
// Which slot serves a task, what a miss evicts, what a hint prefetches and
// what an idle moment admits is the worker's slot policy
// (worker_node/slot_policy.h), one per workers.mode: on_demand (above),
// resident (every expert the worker can be asked for loaded once at start
// and never evicted, the "fully cached" reference; one more slot takes
// anything else), and the cache modes, where experts stay loaded after their
// task: lru_cache and lfu_cache (the caching baselines: hints ignored) and
// utility_cache (MoE-SpAc's utility-driven cache, fed by hints). WorkerCore
// loads, computes and counts; it asks its policy under its mutex, so the
// policy's state needs no lock of its own.
// Which layers a worker computes is the main node's schedule
// (cluster/schedule.h): a worker computes any valid task it is sent.
//
// Slots: `memory_budget` bytes hold the workspace and as many slots as fit
// (at least one). Auto (0): one slot when the worker computes at most one
// expert of a layer (k <= G), two when it computes several (k > G), so it
// can load the next while it computes the current.
//
//   WorkerCore::Options opt{.placement = p, .max_rows = 16};
//   ODMOE_ASSIGN_OR_RETURN(auto core, WorkerCore::Create(*model, *backend, opt));
//   core->AttachSink(1, [&](const v1::ExpertResult& r) { stream->Write(r); });
//   core->AddHint(hint);  core->SubmitTask(task);   // from the stream readers
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cluster/assignment.h"
#include "cluster/protocol.h"
#include "cluster/trace.h"
#include "engine/expert_ffn.h"
#include "model/model_file.h"
#include "worker_node/expert_slots.h"
#include "worker_node/expert_utility.h"
#include "worker_node/slot_policy.h"
#include "worker_node/worker_placement.h"

namespace odmoe {

struct WorkerStats {
  uint64_t tasks = 0, task_errors = 0;
  uint64_t hits = 0, misses = 0, reloads = 0;  // decode tasks only
  // The most decode experts it computed for one step (request, token, layer):
  // 1 with G = k, up to ceil(k / G) with G < k.
  uint64_t step_experts_peak = 0;
  uint64_t hints_received = 0, hints_rejected = 0, hints_stale = 0;
  uint64_t host_computes = 0;  // decode tasks computed on the host (host_compute)
  uint64_t admissions = 0;     // utility cache: hot experts loaded while idle
  uint64_t substitutions = 0;  // decode tasks computed with a substitute (degradable tasks)
  uint64_t loads = 0, bytes_loaded = 0;
  double load_seconds = 0, compute_seconds = 0, stall_seconds = 0;
  int held = 0, peak_held = 0, slots = 0;
  // expert_bytes: one slot, the largest packed expert of any layer (layers
  // may store their experts in different types).
  uint64_t expert_bytes = 0, workspace_bytes = 0, memory_budget = 0;
  uint64_t peak_bytes = 0;  // slots holding an expert at most x expert_bytes + workspace
  uint64_t load_bandwidth = 0;  // emulated cap (bytes/s), 0 = none
  std::vector<std::pair<int, int>> held_experts;  // (layer, expert) in the slots now, sorted
};

class WorkerCore {
 public:
  struct Options {
    WorkerPlacement placement;
    WorkerMode mode = WorkerMode::kOnDemand;  // its slot policy (slot_policy.h)
    int cache_experts = 8;                    // the cache modes: slots
    ExpertUtility::Options utility;           // utility_cache
    int max_rows = 64;           // largest task (prefill mini-batch)
    // Bytes; 0 = auto: workspace plus one largest expert (two when the worker
    // computes several experts of a layer: k > G), or all resident ones.
    uint64_t memory_budget = 0;
    uint64_t load_bandwidth = 0; // bytes/s cap on loads (emulation, ExpertSlots); 0 = off
    TraceRecorder* trace = nullptr;  // EL/EC spans when recording (may be null)
    // Makes the SlotDevice to load through; empty = the backend's own
    // (CreateSlotDevice: none for a host backend). Tests pass a fake that
    // stands for a GPU.
    std::function<std::unique_ptr<SlotDevice>()> slot_device;
    // DAOP's compute on a miss: a decode task whose expert is not loaded is
    // computed on `host_backend` from the model's weights when that is
    // estimated quicker than a load and the compute (the estimates: this
    // worker's measured loads, computes and host computes). The result has
    // the same bits (the CPU and device kernels agree). On a host backend
    // the worker's own backend serves (host_backend may be null).
    bool host_compute = false;
    Backend* host_backend = nullptr;
    // FIRM's sub-expert streaming: an expert loaded for a task that is
    // waiting for it (a miss, a prefill task) moves in three units (gate, up,
    // down: ExpertSlots::LoadStreamed) and its compute starts on each unit
    // as it lands, so the gate and up products overlap the rest of the load.
    bool sub_expert = false;
    // DyMoE's mixed precision (lossy): a copy of the model in a lower
    // precision (null: off). Tasks marked low_precision load from it, and
    // ranked hints prefetch the ranks the depth schedule makes sub-critical
    // (cluster/precision_schedule.h, retention `mixed_floor` at the last
    // layer) from it. A slot holds one precision; a high-precision copy
    // serves a low-precision task, a low one is replaced for a task that is
    // not.
    const ModelFile* low_model = nullptr;
    double mixed_floor = 0.5;
    // EMULATION (CPU testbeds): a host compute takes this many times its
    // measured time (the rest is slept), standing for a CPU slower than
    // the device.
    int host_compute_slowdown = 1;
  };
  using ResultSink = std::function<void(const v1::ExpertResult&)>;

  static absl::StatusOr<std::unique_ptr<WorkerCore>> Create(const ModelFile& model,
                                                            Backend& backend,
                                                            const Options& options);
  /// The bytes of a worker's budget that are not expert slots: the FFN
  /// workspace and I/O rows of a task of `max_rows` rows. A budget of
  /// WorkspaceBytes + n x LargestPackedExpert (model/expert_pack.h) gives an
  /// on-demand worker n slots.
  static uint64_t WorkspaceBytes(const ModelConfig& config, int max_rows);
  ~WorkerCore();

  /// Results go to the sink attached last; `id` identifies it for Detach.
  void AttachSink(uint64_t id, ResultSink sink);
  void DetachSink(uint64_t id);

  /// Validates and queues a hint; INVALID_ARGUMENT (and counted) if malformed
  /// or for a layer this worker's group does not own.
  absl::Status AddHint(const v1::Hint& hint);
  /// Validates and queues a task. A malformed task is answered at once with
  /// an error result (and the returned status); the worker carries on.
  absl::Status SubmitTask(const v1::ExpertTask& task);

  WorkerStats stats() const;
  /// Utility cache: the utility of (layer, expert) now (0 in other modes).
  int utility(int layer, int expert) const;
  const WorkerPlacement& placement() const { return options_.placement; }
  const ModelFile& model() const { return model_; }
  WorkerMode mode() const { return options_.mode; }

  /// Ends the executor thread (queued tasks are dropped). Idempotent.
  void Stop();

 private:
  using Key = StepKey;
  struct Task {
    v1::ExpertTask msg;  // input data already decoded into `input`
    std::vector<float> input;
    int64_t rows = 0;
    std::chrono::steady_clock::time_point received;
  };

  // What serves a task (ServeLocked's decision).
  struct Serving {
    enum class Kind { kHeld, kSubstitute, kHost, kLoad, kNoSlot } kind = Kind::kNoSlot;
    int slot = -1;
    bool hit = false, reloaded = false;
    int substitute = -1;  // workers.degrade: the expert computed in the task's one's place
  };

  WorkerCore(const ModelFile& model, Backend& backend, const Options& options, ExpertSlots slots,
             ExpertFfnScratch scratch, std::unique_ptr<SlotPolicy> policy)
      : model_(model),
        backend_(backend),
        options_(options),
        keeps_experts_(IsCacheMode(options.mode)),
        slots_(std::move(slots)),
        scratch_(std::move(scratch)),
        policy_(std::move(policy)) {}
  absl::Status AllocateWorkspace();
  absl::Status LoadPreloaded();
  void Loop();
  // Loads, computes and counts one task: what serves it is decided under the
  // lock once (ServeLocked), the load and compute run without it, and the
  // result is counted under it once.
  void Process(Task& task);
  Serving ServeLocked(const Task& task, bool low_ok);
  // Starts the load of the task's expert into empty slot `slot` (streamed:
  // workers.sub_expert).
  absl::Status LoadForTask(const Task& task, int slot, bool low_ok);
  // The task is done (`ok`: computed): evicts its expert unless kept, tells
  // the policy, counts, and drops the plan of its position.
  void CountLocked(const Task& task, const Serving& serve, bool ok, double stall, double compute);
  // Computes the task on `slot`'s expert; a streamed load's units are waited
  // for one by one, the seconds the compute waited for them added to *stall.
  absl::Status Compute(Task& task, int slot, v1::ExpertResult* result, double* stall);
  // host_compute: whether computing `layer`'s expert on the host now beats
  // loading it and computing it (or it is time to measure the host again);
  // and that compute.
  bool HostComputeWins(int layer) const;
  absl::Status ComputeOnHost(Task& task, int layer, int expert, v1::ExpertResult* result);
  // Starts the load the policy's NextLoad names (a prefetch from the hints,
  // or an admission); true if it did.
  bool IdleLoadLocked(std::unique_lock<std::mutex>& lock);
  // The slots as the policy sees them (mu_ held).
  std::vector<SlotView> ViewLocked() const;
  // Device path: while a task computes, starts the loads of the queued
  // tasks' experts, then prefetches, into the free slots.
  void LoadAhead();
  // The slot holding the prefetch made for (key, position), or -1.
  int PrefetchFor(const Key& key, uint32_t position) const;
  void PruneLocked();
  void Deliver(const v1::ExpertResult& result);
  void SyncSlotStatsLocked();  // slot accounting -> stats_ (mu_ held)
  // The EL span of a device load, from its start to when it was seen done.
  void TraceDeviceLoad(int slot, const v1::StepKey& key);

  const ModelFile& model_;
  Backend& backend_;
  const Options options_;
  const bool keeps_experts_;  // a cache mode: experts stay after their task
  uint64_t workspace_bytes_ = 0;
  uint64_t budget_ = 0;

  // Executor-thread state (slots_ also read under mu_ for stats).
  ExpertSlots slots_;
  ExpertFfnScratch scratch_;
  std::unique_ptr<BackendBuffer> io_;  // x and y rows
  std::vector<float> host_out_;
  // host_compute: the host backend (the worker's own on a host backend), its
  // scratch and rows, the experts' weights there (views of the mapped file on
  // a CPU backend), and the running estimates (seconds; < 0 = none yet).
  Backend* host_ = nullptr;
  std::optional<ExpertFfnScratch> host_scratch_;
  std::unique_ptr<BackendBuffer> host_io_;
  std::map<std::pair<int, int>, ExpertWeights> host_weights_;
  std::vector<std::unique_ptr<BackendBuffer>> host_storage_;
  double device_compute_s_ = -1, host_compute_s_ = -1;
  mutable uint64_t host_lost_ = 0;  // misses the host lost (HostComputeWins probes every 32nd)
  // A prefetched slot -> the step and position it was loaded for (mu_).
  std::map<int, PlanRef> slot_hint_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  // This worker's predicted experts per step, in position order, until each
  // position's task is done (or the step has passed).
  StepPlans hints_;
  Key last_done_{0, 0, 0};
  Key step_key_{0, 0, 0};    // the decode step of the last task...
  uint64_t step_tasks_ = 0;  // ...and how many of its experts this worker computed
  bool stop_ = false;
  WorkerStats stats_;
  uint64_t held_list_changes_ = ~uint64_t{0};  // slots_.changes() at the last held_experts
  // Asked under mu_ (its thread-safety: slot_policy.h); sized in Create.
  std::unique_ptr<SlotPolicy> policy_;

  std::mutex sink_mu_;
  uint64_t sink_id_ = 0;
  ResultSink sink_;

  std::thread thread_;
};

}  // namespace odmoe
