#include "worker_node/worker_core.h"

#include "engine/local_expert_executor.h"

#include <sys/prctl.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/backend_registry.h"
#include "cluster/assignment.h"
#include "cluster/precision_schedule.h"
#include "cluster/wire.h"
#include "util/logging.h"
#include "util/status_macros.h"
#include "util/step_progress.h"

namespace odmoe {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Experts a resident worker keeps: every expert of its decode layers (none
// when it has no position of a layer's k: G > k), and its prefill expert(s)
// of every layer.
std::vector<std::pair<int, int>> ResidentSet(const ModelConfig& c, const WorkerPlacement& p) {
  std::vector<std::pair<int, int>> set;
  const bool decodes = !p.positions(c.n_expert_used).empty();
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    const bool decode_layer = decodes && l % p.n_groups() == p.group();
    for (int e = 0; e < c.n_expert; ++e) {
      if (decode_layer || e % p.n_workers == p.worker_index) set.emplace_back(l, e);
    }
  }
  return set;
}

}  // namespace

uint64_t WorkerCore::WorkspaceBytes(const ModelConfig& c, int max_rows) {
  const uint64_t rows = static_cast<uint64_t>(std::max(max_rows, 0));
  return rows * (2 * static_cast<uint64_t>(c.n_ff) + 2 * static_cast<uint64_t>(c.n_embd)) *
         sizeof(float);
}

absl::StatusOr<std::unique_ptr<WorkerCore>> WorkerCore::Create(const ModelFile& model,
                                                               Backend& backend,
                                                               const Options& options) {
  const ModelConfig& c = model.config();
  const WorkerPlacement& p = options.placement;
  if (p.group_size < 1 || p.n_workers < p.group_size || p.worker_index < 0 ||
      p.worker_index >= p.n_workers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d of %d in groups of %d is not a valid placement", p.worker_index,
        p.n_workers, p.group_size));
  }
  if (options.max_rows < 1) return absl::InvalidArgumentError("max_rows must be >= 1");
  const uint64_t workspace = WorkspaceBytes(c, options.max_rows);
  // Any expert may come (the schedule moves layers when a group fails), so a
  // slot is sized for the largest expert of any layer.
  const uint64_t expert = LargestPackedExpert(c);
  const bool cache = options.cache != Options::Cache::kNone;
  if (options.resident && cache) {
    return absl::InvalidArgumentError("a worker is either resident or a cache, not both");
  }
  if (cache && options.cache_experts < 1) {
    return absl::InvalidArgumentError("an expert cache needs at least one expert");
  }
  const int needed = options.resident ? static_cast<int>(ResidentSet(c, p).size())
                     : cache          ? options.cache_experts
                                      : 1;
  int slots = needed;
  uint64_t budget = options.memory_budget;
  if (budget == 0) {
    // On demand, a worker computing several experts of a layer (k > G) gets
    // a second slot by default: it loads the next while it computes one.
    const bool several =
        static_cast<int>(PositionsOfWorker(0, p.group_size, c.n_expert_used).size()) > 1;
    if (!options.resident && !cache && several) slots = 2;
    budget = workspace + static_cast<uint64_t>(slots) * expert;
  } else {
    const uint64_t room = budget > workspace ? (budget - workspace) / expert : 0;
    if (room < static_cast<uint64_t>(needed)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "memory budget of %d bytes holds %d experts of %d bytes plus %d bytes of workspace; "
          "this worker needs %d (%s mode)",
          budget, room, expert, workspace, needed,
          options.resident ? "resident" : cache ? "cache" : "on-demand"));
    }
    // Resident workers need their set (plus the spill slot, below); on-demand
    // ones may prefetch further ahead with extra slots.
    slots = options.resident || cache ? needed
                                            : static_cast<int>(std::min<uint64_t>(room, 64));
  }
  // A resident worker keeps one more slot for experts outside its set, which
  // it is asked for when the schedule moves layers after a group failed.
  if (options.resident) {
    if (options.memory_budget == 0) {
      ++slots;
      budget += expert;
    } else if ((budget - workspace) / expert > static_cast<uint64_t>(needed)) {
      ++slots;
    }
  }
  // On a device, the experts an on-demand or caching worker is normally
  // asked for are packed into pinned host memory once, so that a load is one
  // asynchronous copy at the link's rate. A resident worker loads its set
  // once (through the staging entries) and keeps no pinned copy.
  std::unique_ptr<SlotDevice> device;
  if (options.slot_device) {
    device = options.slot_device();
  } else {
    ODMOE_ASSIGN_OR_RETURN(device, CreateSlotDevice(backend));
  }
  std::vector<ExpertSlots::ExpertId> host_set;
  if (device != nullptr && !options.resident) host_set = ResidentSet(c, p);
  ODMOE_ASSIGN_OR_RETURN(ExpertSlots expert_slots,
                         ExpertSlots::Create(model, backend, slots, std::move(device), host_set,
                                             options.low_model));
  if (expert_slots.device()) {
    ODMOE_LOG_INFO("{}: {} experts packed in {} bytes of pinned host memory; {} device slots",
                   backend.name(), host_set.size(), expert_slots.pinned_host_bytes(), slots);
  }
  expert_slots.set_load_bandwidth(options.load_bandwidth);
  ODMOE_ASSIGN_OR_RETURN(ExpertFfnScratch scratch,
                         ExpertFfnScratch::Create(backend, c.n_ff, options.max_rows));
  std::unique_ptr<WorkerCore> core(
      new WorkerCore(model, backend, options, std::move(expert_slots), std::move(scratch)));
  core->workspace_bytes_ = workspace;
  core->budget_ = budget;
  ODMOE_RETURN_IF_ERROR(core->AllocateWorkspace());
  if (options.host_compute) {
    if (options.host_compute_slowdown < 1) {
      return absl::InvalidArgumentError("host_compute_slowdown must be >= 1");
    }
    core->host_ = options.host_backend != nullptr           ? options.host_backend
                  : !core->slots_.device() ? &backend : nullptr;
    if (core->host_ == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host_compute on the ", backend.name(), " backend needs a host backend to compute on"));
    }
    ODMOE_ASSIGN_OR_RETURN(ExpertFfnScratch hs,
                           ExpertFfnScratch::Create(*core->host_, c.n_ff, options.max_rows));
    core->host_scratch_.emplace(std::move(hs));
    const size_t n = static_cast<size_t>(options.max_rows) * c.n_embd;
    ODMOE_ASSIGN_OR_RETURN(core->host_io_, core->host_->Allocate(2 * n * sizeof(float)));
  }
  if (options.resident) ODMOE_RETURN_IF_ERROR(core->LoadResident());
  if (options.cache == Options::Cache::kUtility) {
    core->utility_.emplace(c.n_layer, c.n_expert, options.utility);
  }
  if (options.cache == Options::Cache::kLfu) {
    core->uses_.assign(static_cast<size_t>(c.n_layer) * static_cast<size_t>(c.n_expert), 0);
  }
  core->stats_.slots = slots;
  core->stats_.expert_bytes = expert;
  core->stats_.workspace_bytes = workspace;
  core->stats_.memory_budget = budget;
  core->stats_.load_bandwidth = options.load_bandwidth;
  core->SyncSlotStatsLocked();
  core->thread_ = std::thread([c = core.get()] { c->Loop(); });
  return core;
}

absl::Status WorkerCore::AllocateWorkspace() {
  const size_t n = static_cast<size_t>(options_.max_rows) * model_.config().n_embd;
  ODMOE_ASSIGN_OR_RETURN(io_, backend_.Allocate(2 * n * sizeof(float)));
  host_out_.resize(n);
  return absl::OkStatus();
}

absl::Status WorkerCore::LoadResident() {
  const std::vector<std::pair<int, int>> set = ResidentSet(model_.config(), options_.placement);
  StepProgress progress(absl::StrCat("loading the resident experts onto ", backend_.name()),
                        set.size(), "experts");
  for (const auto& [layer, expert] : set) {
    ODMOE_RETURN_IF_ERROR(
        slots_.Load(slots_.FreeSlot(), layer, expert, /*prefetched=*/false, /*pinned=*/true));
    progress.Advance(1, slots_.expert_bytes(layer));
  }
  for (int i = 0; i < slots_.size(); ++i) {
    if (slots_.slot(i).loaded) ODMOE_RETURN_IF_ERROR(slots_.WaitLoaded(i).status());
  }
  progress.Finish();
  ODMOE_LOG_INFO("resident: {} experts loaded ({} bytes)", slots_.held(), slots_.bytes_held());
  return absl::OkStatus();
}

WorkerCore::~WorkerCore() { Stop(); }

void WorkerCore::SyncSlotStatsLocked() {
  stats_.loads = slots_.loads();
  stats_.bytes_loaded = slots_.bytes_loaded();
  stats_.load_seconds = slots_.load_seconds();
  stats_.held = slots_.held();
  stats_.peak_held = slots_.peak_held();
  stats_.peak_bytes = slots_.peak_bytes_held() + workspace_bytes_;
  // The list of held experts is rebuilt only when the slots changed (a
  // resident worker's never do).
  if (slots_.changes() == held_list_changes_) return;
  held_list_changes_ = slots_.changes();
  stats_.held_experts.clear();
  for (int i = 0; i < slots_.size(); ++i) {
    const ExpertSlots::Slot& s = slots_.slot(i);
    if (s.loaded) stats_.held_experts.emplace_back(s.layer, s.expert);
  }
  std::sort(stats_.held_experts.begin(), stats_.held_experts.end());
}

void WorkerCore::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WorkerCore::AttachSink(uint64_t id, ResultSink sink) {
  std::lock_guard<std::mutex> lock(sink_mu_);
  sink_id_ = id;
  sink_ = std::move(sink);
}

void WorkerCore::DetachSink(uint64_t id) {
  std::lock_guard<std::mutex> lock(sink_mu_);
  if (sink_id_ == id) sink_ = nullptr;
}

void WorkerCore::Deliver(const v1::ExpertResult& result) {
  std::lock_guard<std::mutex> lock(sink_mu_);
  if (sink_) sink_(result);
}

absl::Status WorkerCore::AddHint(const v1::Hint& hint) {
  const ModelConfig& c = model_.config();
  absl::Status s = ValidateStepKey(hint.key(), c);
  if (s.ok()) s = ValidateExpertList(hint.experts(), c, /*allow_union=*/true);
  if (s.ok() && hint.key().token() == 0) {
    s = absl::InvalidArgumentError("hints are for decode steps (token >= 1)");
  }
  for (int i = 0; s.ok() && i < hint.positions_size(); ++i) {
    if (hint.positions(i) >= static_cast<uint32_t>(hint.experts_size()) ||
        (i > 0 && hint.positions(i) <= hint.positions(i - 1))) {
      s = absl::InvalidArgumentError(absl::StrFormat(
          "hint positions must ascend within the %d experts listed", hint.experts_size()));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hints_received;
  if (!s.ok()) {
    ++stats_.hints_rejected;
    return s;
  }
  const Key key{hint.key().request(), hint.key().token(), hint.key().layer()};
  if (key <= last_done_) {
    ++stats_.hints_stale;
    return absl::OkStatus();
  }
  if (options_.cache == Options::Cache::kLru || options_.cache == Options::Cache::kLfu) {
    return absl::OkStatus();  // the caching baselines predict nothing
  }
  std::vector<int32_t> predicted(hint.experts().begin(), hint.experts().end());
  const std::vector<int32_t> hinted = HintedAssignment(predicted);
  std::vector<int> positions;
  if (hint.positions_size() > 0) {  // the main node's placement of a shared step
    for (uint32_t p : hint.positions()) positions.push_back(static_cast<int>(p));
  } else {
    positions = options_.placement.positions(static_cast<int>(hinted.size()));
  }
  std::vector<Planned> plan;
  // Mixed precision: a ranked hint of one row says which experts the depth
  // schedule makes sub-critical (rank t_l and below): prefetched low.
  const int critical =
      options_.low_model != nullptr && hint.ranked() && hint.positions_size() == 0
          ? CriticalExperts(static_cast<int>(hint.key().layer()), c.n_layer,
                            static_cast<int>(predicted.size()), options_.mixed_floor)
          : static_cast<int>(predicted.size());
  for (int position : positions) {
    const int32_t e = hinted[static_cast<size_t>(position)];
    const auto rank = std::find(predicted.begin(), predicted.end(), e) - predicted.begin();
    plan.push_back({static_cast<uint32_t>(position), e, rank >= critical});
  }
  if (plan.empty()) return absl::OkStatus();  // G > k: nothing of this layer is ours
  if (utility_) {
    std::vector<int32_t> mine;
    for (const Planned& e : plan) mine.push_back(e.expert);
    utility_->Observe(static_cast<int>(std::get<2>(key)), {std::get<0>(key), std::get<1>(key)},
                      mine);
  }
  // A corrected hint for the same step replaces the plan; prefetches of
  // experts it no longer names are dropped by PruneLocked.
  hints_[key] = std::move(plan);
  while (hints_.size() > 4096) hints_.erase(std::prev(hints_.end()));
  cv_.notify_all();
  return absl::OkStatus();
}

absl::Status WorkerCore::SubmitTask(const v1::ExpertTask& msg) {
  const ModelConfig& c = model_.config();
  Task task;
  task.received = std::chrono::steady_clock::now();
  absl::Status s = ValidateStepKey(msg.key(), c);
  if (s.ok()) s = ValidateExpert(msg.expert(), c);
  if (s.ok() && msg.mini_batches() > 0 && msg.mini_batch() >= msg.mini_batches()) {
    s = absl::InvalidArgumentError(absl::StrFormat("mini-batch %d of %d", msg.mini_batch(),
                                                   msg.mini_batches()));
  }
  if (s.ok() && msg.position() >= static_cast<uint32_t>(c.n_expert)) {
    s = absl::InvalidArgumentError(absl::StrFormat(
        "position %d out of range (a layer's assignment has at most the model's %d positions)",
        msg.position(), c.n_expert));
  }
  if (s.ok()) {
    absl::StatusOr<int64_t> rows =
        DecodeRows(msg.input(), c.n_embd, options_.max_rows, &task.input, "task input");
    if (rows.ok()) {
      task.rows = *rows;
    } else {
      s = rows.status();
    }
  }
  if (!s.ok()) {
    v1::ExpertResult r;
    r.set_task_id(msg.task_id());
    *r.mutable_key() = msg.key();
    r.set_expert(msg.expert());
    r.set_error_code(static_cast<int>(s.code()));
    r.set_error_message(std::string(s.message()));
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.task_errors;
    }
    Deliver(r);
    return s;
  }
  task.msg = msg;
  task.msg.clear_input();
  task.msg.mutable_input()->set_dtype(msg.input().dtype());
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
  return absl::OkStatus();
}

void WorkerCore::PruneLocked() {
  while (!hints_.empty() && hints_.begin()->first < last_done_) hints_.erase(hints_.begin());
  // A prefetch is alive while its step's plan still names its expert at its
  // position: it dies when that position's task is done (a wrong prediction
  // computed elsewhere), a corrected hint names another expert, or the step
  // has passed without claiming it.
  for (auto it = slot_hint_.begin(); it != slot_hint_.end();) {
    const ExpertSlots::Slot& s = slots_.slot(it->first);
    if (!s.loaded || !s.prefetched) {
      it = slot_hint_.erase(it);
      continue;
    }
    bool alive = false;
    if (auto plan = hints_.find(it->second.key); plan != hints_.end()) {
      for (const Planned& e : plan->second) {
        alive = alive || (e.position == it->second.position && e.expert == s.expert);
      }
    }
    if (alive) {
      ++it;
    } else if (utility_) {
      // A cache keeps it, planned for nothing now (its utility decides).
      slots_.ClearPrefetched(it->first);
      it = slot_hint_.erase(it);
    } else {
      slots_.Evict(it->first);
      it = slot_hint_.erase(it);
    }
  }
}

int WorkerCore::SubstituteFor(const Key& key, uint32_t position) const {
  std::lock_guard<std::mutex> lock(mu_);
  return PrefetchFor(key, position);
}

int WorkerCore::PrefetchFor(const Key& key, uint32_t position) const {
  for (const auto& [slot, h] : slot_hint_) {
    if (h.key == key && h.position == position && slots_.slot(slot).loaded &&
        slots_.slot(slot).prefetched) {
      return slot;
    }
  }
  return -1;
}

bool WorkerCore::PrefetchLocked(std::unique_lock<std::mutex>& lock) {
  if (options_.resident || (caching() && !utility_)) return false;
  PruneLocked();
  int free = slots_.FreeSlot();
  if (free < 0 && utility_) {
    // A full cache makes room for a hinted expert: the lowest utility that
    // no pending step is planned on.
    free = VictimLocked();
    if (free >= 0 && slot_hint_.count(free) > 0) free = -1;
    bool wanted = false;
    for (const auto& [key, plan] : hints_) {
      for (const Planned& planned : plan) {
        wanted = wanted ||
                 slots_.FindLoaded(static_cast<int>(std::get<2>(key)), planned.expert) < 0;
      }
    }
    if (free >= 0 && wanted) {
      slots_.Evict(free);
    } else {
      free = -1;
    }
  }
  if (free < 0) return AdmitHotLocked(lock);
  for (const auto& [key, plan] : hints_) {
    const int layer = static_cast<int>(std::get<2>(key));
    for (const Planned& planned : plan) {
      if (slots_.FindLoaded(layer, planned.expert) >= 0) continue;
      const Key k = key;
      const Planned want = planned;
      lock.unlock();
      absl::Status loaded;
      {
        // On a device the load only starts here: its span is recorded when it
        // is waited for (TraceDeviceLoad).
        TraceSpan span(slots_.device() ? nullptr : options_.trace, "EL", "load", std::get<0>(k),
                       std::get<1>(k), layer, want.expert);
        loaded = slots_.Load(free, layer, want.expert, /*prefetched=*/true, /*pinned=*/false,
                             want.low);
      }
      lock.lock();
      if (!loaded.ok()) {
        ODMOE_LOG_ERROR("prefetch of layer {} expert {} failed: {}", layer, want.expert,
                        loaded.message());
        hints_.erase(k);
        return false;
      }
      slot_hint_[free] = SlotHint{k, want.position};
      SyncSlotStatsLocked();
      return true;
    }
  }
  return AdmitHotLocked(lock);
}

int WorkerCore::VictimLocked() const {
  if (options_.cache == Options::Cache::kLru) return slots_.LeastRecentlyUsed();
  const int n_expert = model_.config().n_expert;
  auto rank = [&](int i) {
    const ExpertSlots::Slot& s = slots_.slot(i);
    const uint64_t score =
        utility_ ? static_cast<uint64_t>(utility_->utility(s.layer, s.expert))
                 : uses_[static_cast<size_t>(s.layer) * static_cast<size_t>(n_expert) +
                         static_cast<size_t>(s.expert)];
    return std::make_tuple(slot_hint_.count(i) > 0, score, s.last_used);
  };
  int best = -1;
  for (int i = 0; i < slots_.size(); ++i) {
    if (!slots_.slot(i).loaded || slots_.slot(i).pinned) continue;
    if (best < 0 || rank(i) < rank(best)) best = i;
  }
  return best;
}

bool WorkerCore::AdmitHotLocked(std::unique_lock<std::mutex>& lock) {
  if (!utility_) return false;
  for (const auto& [layer, expert] : utility_->Hot()) {
    if (slots_.FindLoaded(layer, expert) >= 0) continue;
    int slot = slots_.FreeSlot();
    if (slot < 0) {
      // In place of a colder one only (and never of a planned prefetch).
      slot = VictimLocked();
      if (slot < 0 || slot_hint_.count(slot) > 0 ||
          utility_->utility(slots_.slot(slot).layer, slots_.slot(slot).expert) >=
              utility_->utility(layer, expert)) {
        return false;
      }
      slots_.Evict(slot);
    }
    lock.unlock();
    absl::Status loaded;
    {
      TraceSpan span(slots_.device() ? nullptr : options_.trace, "EL", "load", 0, 0, layer, expert);
      loaded = slots_.Load(slot, layer, expert, /*prefetched=*/false);
    }
    lock.lock();
    if (!loaded.ok()) {
      ODMOE_LOG_ERROR("admission of layer {} expert {} failed: {}", layer, expert,
                      loaded.message());
      return false;
    }
    ++stats_.admissions;
    SyncSlotStatsLocked();
    return true;  // the hottest first: one at a time, tasks may be waiting
  }
  return false;
}

void WorkerCore::LoadAhead() {
  if (options_.resident || (caching() && !utility_)) return;
  std::unique_lock<std::mutex> lock(mu_);
  // The experts of the tasks already queued come first: they are certain.
  // (Only the executor thread pops tasks, so indices stay valid while the
  // lock is released for a load.)
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const int free = slots_.FreeSlot();
    if (free < 0) return;
    const int layer = static_cast<int>(tasks_[i].msg.key().layer());
    const int expert = static_cast<int>(tasks_[i].msg.expert());
    const bool low = tasks_[i].msg.low_precision() && slots_.has_low();
    if (slots_.FindLoaded(layer, expert) >= 0) continue;  // (a low copy: the task replaces it)
    lock.unlock();
    const absl::Status loaded =
        slots_.Load(free, layer, expert, /*prefetched=*/false, /*pinned=*/false, low);
    lock.lock();
    // A failed load is retried, and reported, by the task itself.
    if (!loaded.ok()) return;
    SyncSlotStatsLocked();
  }
  while (PrefetchLocked(lock)) {
  }
}

void WorkerCore::Loop() {
  // An emulated load sleeps for tens of microseconds: ask the kernel to wake
  // this thread on time (the default slack is 50 us).
  if (options_.load_bandwidth > 0) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!tasks_.empty()) {
      Task task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      Process(task);
      lock.lock();
      continue;
    }
    if (PrefetchLocked(lock)) continue;  // loaded one; look again
    cv_.wait(lock);
  }
}

void WorkerCore::Process(Task& task) {
  const v1::ExpertTask& msg = task.msg;
  const int layer = static_cast<int>(msg.key().layer());
  const int expert = static_cast<int>(msg.expert());
  const bool decode = msg.key().token() > 0;
  const Key key{msg.key().request(), msg.key().token(), msg.key().layer()};
  v1::ExpertResult result;
  result.set_task_id(msg.task_id());
  *result.mutable_key() = msg.key();
  result.set_expert(msg.expert());

  // Mixed precision: the low-precision copy serves a task marked for it; a
  // task that is not replaces a low copy it finds (one precision per expert).
  const bool low_ok = msg.low_precision() && slots_.has_low();
  int slot = slots_.FindLoaded(layer, expert);
  if (slot >= 0 && !low_ok && slots_.slot(slot).low) {
    std::lock_guard<std::mutex> lock(mu_);
    slots_.Evict(slot);
    slot_hint_.erase(slot);
    slot = -1;
  }
  bool hit = false, reloaded = false, on_host = false;
  int substitute = -1;  // workers.degrade: the expert computed in this one's place
  double load_seconds = 0;
  std::optional<std::chrono::steady_clock::time_point> load_from;  // a streamed load's start
  absl::Status status;
  // The load stall of a task is the time it waited for its expert after it
  // arrived: the rest of a load still running then, or a load now.
  double stall = 0;
  if (slot >= 0) {
    const ExpertSlots::Slot& held = slots_.slot(slot);
    // A hit: the prediction put it there before the task arrived.
    // In a cache, anything loaded before the task came is a hit.
    hit = ((held.prefetched || caching()) && held.issued_at <= task.received) || held.pinned;
    const bool was_ready = held.ready;
    absl::StatusOr<std::chrono::steady_clock::time_point> loaded_at = slots_.WaitLoaded(slot);
    if (loaded_at.ok()) {
      stall = std::max(0.0, std::chrono::duration<double>(*loaded_at - task.received).count());
      if (!was_ready) TraceDeviceLoad(slot, msg.key());
    } else {
      status = loaded_at.status();
    }
    slots_.ClearPrefetched(slot);
  } else if (decode && msg.degradable() && (slot = SubstituteFor(key, msg.position())) >= 0) {
    // DAOP's graceful degradation (lossy, asked for by the main node): the
    // expert prefetched for this position, the predictor's choice there,
    // computes in place of the one that is not loaded.
    substitute = slots_.slot(slot).expert;
    absl::StatusOr<std::chrono::steady_clock::time_point> loaded_at = slots_.WaitLoaded(slot);
    if (loaded_at.ok()) {
      stall = std::max(0.0, std::chrono::duration<double>(*loaded_at - task.received).count());
    } else {
      status = loaded_at.status();
    }
    slots_.ClearPrefetched(slot);
  } else if (decode && HostComputeWins(layer)) {
    on_host = true;  // DAOP: no load; any prefetch for this position stays
  } else {
    // The prefetch made for this task's position holds another expert: the
    // prediction was wrong and that worker reloads in its place (the
    // paper's fallback).
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot = decode ? PrefetchFor(key, msg.position()) : -1;
    }
    if (slot >= 0) {
      reloaded = true;
      slots_.Evict(slot);
    } else {
      slot = slots_.FreeSlot();
    }
    if (slot < 0 && caching()) {
      std::lock_guard<std::mutex> lock(mu_);
      slot = VictimLocked();
      if (slot >= 0) {
        reloaded = slot_hint_.count(slot) > 0;
        slots_.Evict(slot);
      }
    }
    if (slot < 0) {
      // Evict the prefetch needed furthest in the future (with one slot, the
      // only one): a prediction for a later step, or one that came too late.
      // A load started for a queued task (LoadAhead) goes last.
      std::lock_guard<std::mutex> lock(mu_);
      auto rank = [&](int i) {
        auto h = slot_hint_.find(i);
        return h == slot_hint_.end() ? std::make_tuple(false, Key{}, uint32_t{0})
                                     : std::make_tuple(true, h->second.key, h->second.position);
      };
      for (int i = 0; i < slots_.size(); ++i) {
        if (slots_.slot(i).pinned) continue;
        if (slot < 0 || rank(i) > rank(slot)) slot = i;
      }
      if (slot >= 0) {
        reloaded = slots_.slot(slot).prefetched;
        slots_.Evict(slot);
      }
    }
    if (slot < 0) {
      status = absl::ResourceExhaustedError(absl::StrFormat(
          "no slot for layer %d expert %d: every slot holds a resident expert", layer, expert));
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      {
        TraceSpan span(slots_.device() ? nullptr : options_.trace, "EL", "load",
                       msg.key().request(), msg.key().token(), layer, expert);
        status = options_.sub_expert
                     ? slots_.LoadStreamed(slot, layer, expert, low_ok)
                     : slots_.Load(slot, layer, expert, /*prefetched=*/false, /*pinned=*/false,
                                   low_ok);
      }
      if (status.ok() && slots_.slot(slot).streamed) {
        // Compute waits for each unit as it needs it (Compute adds that to
        // the stall); the load's own time is known once it is complete.
        load_from = t0;
      } else if (status.ok()) {
        absl::StatusOr<std::chrono::steady_clock::time_point> loaded_at = slots_.WaitLoaded(slot);
        if (loaded_at.ok()) {
          load_seconds = std::chrono::duration<double>(*loaded_at - t0).count();
          stall = load_seconds;
          if (slots_.device()) TraceDeviceLoad(slot, msg.key());
        } else {
          status = loaded_at.status();
        }
      }
    }
  }
  if (slot >= 0 && status.ok()) slots_.Touch(slot);
  const auto compute_start = std::chrono::steady_clock::now();
  if (status.ok()) {
    TraceSpan span(options_.trace, "EC", on_host ? "host compute" : "compute",
                   msg.key().request(), msg.key().token(), layer, expert);
    status = on_host ? ComputeOnHost(task, layer, expert, &result)
                     : Compute(task, slot, &result, &stall);
  }
  double compute = Since(compute_start);
  if (load_from.has_value() && status.ok()) {
    // A streamed load: the compute's own time excludes its waits for units.
    compute = std::max(0.0, compute - stall);
    absl::StatusOr<std::chrono::steady_clock::time_point> loaded_at = slots_.WaitLoaded(slot);
    if (loaded_at.ok()) {
      load_seconds = std::chrono::duration<double>(*loaded_at - *load_from).count();
      if (slots_.device()) {
        // On a device the host never waits for a unit: the load until its
        // last unit landed (an upper bound of the compute's wait).
        stall = load_seconds;
        TraceDeviceLoad(slot, msg.key());
      }
    } else {
      status = loaded_at.status();
    }
  }
  if (status.ok() && decode) {
    // The estimates HostComputeWins compares (moving averages).
    double& estimate = on_host ? host_compute_s_ : device_compute_s_;
    estimate = estimate < 0 ? compute : 0.8 * estimate + 0.2 * compute;
  }
  const bool computed_low = !on_host && slot >= 0 && status.ok() && slots_.slot(slot).low;
  const bool more = msg.mini_batch() + 1 < msg.mini_batches();
  if (slot >= 0 && !slots_.slot(slot).pinned && !more && !caching()) slots_.Evict(slot);
  if (!uses_.empty() && status.ok()) {
    ++uses_[static_cast<size_t>(layer) * static_cast<size_t>(model_.config().n_expert) +
            static_cast<size_t>(expert)];
  }

  if (!status.ok()) {
    result.clear_output();
    result.set_error_code(static_cast<int>(status.code()));
    result.set_error_message(std::string(status.message()));
  } else {
    result.set_prefetched(hit);
    result.set_reloaded(reloaded);
    result.set_computed_on_host(on_host);
    result.set_substituted(substitute >= 0);
    result.set_low_precision(computed_low);
    if (substitute >= 0) result.set_substitute(static_cast<uint32_t>(substitute));
    result.set_stall_seconds(stall);
    result.set_load_seconds(load_seconds);
    result.set_compute_seconds(compute);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_done_ = std::max(last_done_, key);
    ++stats_.tasks;
    if (!status.ok()) ++stats_.task_errors;
    if (decode && status.ok()) {
      ++(on_host           ? stats_.host_computes
         : substitute >= 0 ? stats_.substitutions
         : hit             ? stats_.hits
                           : stats_.misses);
      if (reloaded) ++stats_.reloads;
      step_tasks_ = key == step_key_ ? step_tasks_ + 1 : 1;
      step_key_ = key;
      stats_.step_experts_peak = std::max(stats_.step_experts_peak, step_tasks_);
    }
    stats_.stall_seconds += stall;
    stats_.compute_seconds += compute;
    SyncSlotStatsLocked();
    slot_hint_.erase(slot);
    // This position (and this expert, wherever it was planned) is done.
    if (auto plan = hints_.find(key); decode && plan != hints_.end()) {
      std::erase_if(plan->second, [&](const Planned& e) {
        return e.position == msg.position() || e.expert == expert;
      });
      if (plan->second.empty()) hints_.erase(plan);
    }
    PruneLocked();
  }
  Deliver(result);
}

absl::Status WorkerCore::Compute(Task& task, int slot, v1::ExpertResult* result, double* stall) {
  const int64_t d = model_.config().n_embd;
  const int64_t n = task.rows;
  float* x = static_cast<float*>(io_->data());
  float* y = x + static_cast<size_t>(options_.max_rows) * d;
  ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(x, task.input.data(), n * d * sizeof(float)));
  static_assert(ExpertSlots::kUnits == kExpertFfnStages);
  if (slots_.slot(slot).streamed) {
    for (int u = 0; u < kExpertFfnStages; ++u) {
      ODMOE_ASSIGN_OR_RETURN(const ExpertWeights weights, slots_.AcquireUnit(slot, u, stall));
      RunExpertFfnStage(backend_, static_cast<ExpertFfnStage>(u), weights, ConstMat(x, n, d),
                        scratch_, Mat{y, n, d});
    }
  } else {
    ODMOE_ASSIGN_OR_RETURN(const ExpertWeights weights, slots_.Acquire(slot));
    RunExpertFfn(backend_, weights, ConstMat(x, n, d), scratch_, Mat{y, n, d});
  }
  ODMOE_RETURN_IF_ERROR(slots_.Release(slot));
  // On a device the compute is queued and loads are asynchronous copies: the
  // next experts start copying now, while this one computes (on the host a
  // load would only delay this result: it comes after, when idle).
  if (slots_.device()) LoadAhead();
  ODMOE_RETURN_IF_ERROR(backend_.CopyToHost(host_out_.data(), y, n * d * sizeof(float)));
  EncodeRows(host_out_.data(), n, d, task.msg.input().dtype(), result->mutable_output());
  return absl::OkStatus();
}

bool WorkerCore::HostComputeWins(int layer) const {
  if (host_ == nullptr) return false;
  // A load of this expert: at the rate loads ran so far, and never quicker
  // than an emulated link allows. Nothing known yet: load.
  const double bytes = static_cast<double>(slots_.expert_bytes(layer));
  double load = -1;
  if (slots_.bytes_loaded() > 0 && slots_.load_seconds() > 0) {
    load = bytes * slots_.load_seconds() / static_cast<double>(slots_.bytes_loaded());
  }
  if (options_.load_bandwidth > 0) {
    load = std::max(load, bytes / static_cast<double>(options_.load_bandwidth));
  }
  if (load < 0) return false;
  const double device = std::max(device_compute_s_, 0.0);
  // Before the first host compute: the device's time stretched by the
  // emulated slowdown (1 on a real host: the first one measures it).
  const double host = host_compute_s_ >= 0 ? host_compute_s_
                                           : device * options_.host_compute_slowdown;
  if (host < load + device) return true;
  // The host's estimate only moves when it computes: one slow host compute
  // (a preempted thread) would keep it out for good. Every kHostProbe-th
  // miss it loses, it computes once more to measure again.
  constexpr int kHostProbe = 32;
  return ++host_lost_ % kHostProbe == 0;
}

absl::Status WorkerCore::ComputeOnHost(Task& task, int layer, int expert,
                                       v1::ExpertResult* result) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model_.config();
  auto it = host_weights_.find({layer, expert});
  if (it == host_weights_.end()) {
    // On a CPU backend these are views of the mapped file (nothing copied).
    ODMOE_ASSIGN_OR_RETURN(ExpertWeights w,
                           LoadExpertWeights(*host_, model_, layer, expert, &host_storage_));
    it = host_weights_.emplace(std::make_pair(layer, expert), w).first;
  }
  const int64_t d = c.n_embd;
  const int64_t n = task.rows;
  float* x = static_cast<float*>(host_io_->data());
  float* y = x + static_cast<size_t>(options_.max_rows) * d;
  ODMOE_RETURN_IF_ERROR(host_->CopyToBackend(x, task.input.data(), n * d * sizeof(float)));
  RunExpertFfn(*host_, it->second, ConstMat(x, n, d), *host_scratch_, Mat{y, n, d});
  ODMOE_RETURN_IF_ERROR(host_->CopyToHost(host_out_.data(), y, n * d * sizeof(float)));
  if (options_.host_compute_slowdown > 1) {
    // EMULATION: a host slower than the device computes as long as this.
    const auto took = std::chrono::steady_clock::now() - t0;
    std::this_thread::sleep_for(took * (options_.host_compute_slowdown - 1));
  }
  EncodeRows(host_out_.data(), n, d, task.msg.input().dtype(), result->mutable_output());
  return absl::OkStatus();
}

void WorkerCore::TraceDeviceLoad(int slot, const v1::StepKey& key) {
  if (options_.trace == nullptr || !options_.trace->enabled()) return;
  const ExpertSlots::Slot& s = slots_.slot(slot);
  TraceEvent e;
  e.name = "EL";
  e.lane = "load";
  e.start_us = s.issued_wall_us;
  e.duration_us =
      std::chrono::duration_cast<std::chrono::microseconds>(s.loaded_at - s.issued_at).count();
  e.request = key.request();
  e.token = key.token();
  e.layer = s.layer;
  e.expert = s.expert;
  options_.trace->Record(std::move(e));
}

int WorkerCore::utility(int layer, int expert) const {
  std::lock_guard<std::mutex> lock(mu_);
  return utility_ ? utility_->utility(layer, expert) : 0;
}

WorkerStats WorkerCore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace odmoe
