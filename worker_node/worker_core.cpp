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
  ODMOE_ASSIGN_OR_RETURN(
      std::unique_ptr<SlotPolicy> policy,
      CreateSlotPolicy(options.mode, {.config = c,
                                      .placement = p,
                                      .cache_experts = options.cache_experts,
                                      .utility = options.utility}));
  const int needed = policy->SlotsNeeded();
  int slots = needed;
  uint64_t budget = options.memory_budget;
  if (budget == 0) {
    slots = policy->AutoSlots();
    budget = workspace + static_cast<uint64_t>(slots) * expert;
  } else {
    const uint64_t room = budget > workspace ? (budget - workspace) / expert : 0;
    if (room < static_cast<uint64_t>(needed)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "memory budget of %d bytes holds %d experts of %d bytes plus %d bytes of workspace; "
          "this worker needs %d (%s mode)",
          budget, room, expert, workspace, needed, options.mode.name()));
    }
    slots = policy->SlotsInBudget(static_cast<int>(std::min<uint64_t>(room, 1 << 20)));
  }
  // On a device, the experts a worker is normally asked for are packed into
  // pinned host memory once, so that a load is one asynchronous copy at the
  // link's rate. A worker that preloads its set (resident) loads it once
  // (through the staging entries) and keeps no pinned copy.
  std::unique_ptr<SlotDevice> device;
  if (options.slot_device) {
    device = options.slot_device();
  } else {
    ODMOE_ASSIGN_OR_RETURN(device, CreateSlotDevice(backend));
  }
  std::vector<ExpertSlots::ExpertId> host_set;
  if (device != nullptr && policy->Preload().empty()) host_set = UsualExperts(c, p);
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
  std::unique_ptr<WorkerCore> core(new WorkerCore(
      model, backend, options, std::move(expert_slots), std::move(scratch), std::move(policy)));
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
  ODMOE_RETURN_IF_ERROR(core->LoadPreloaded());
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

absl::Status WorkerCore::LoadPreloaded() {
  const std::vector<std::pair<int, int>> set = policy_->Preload();
  if (set.empty()) return absl::OkStatus();
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
  if (!policy_->Prefetches()) return absl::OkStatus();  // counted, not used
  std::vector<int32_t> predicted(hint.experts().begin(), hint.experts().end());
  const std::vector<int32_t> hinted = HintedAssignment(predicted);
  std::vector<int> positions;
  if (hint.positions_size() > 0) {  // the main node's placement of a shared step
    for (uint32_t p : hint.positions()) positions.push_back(static_cast<int>(p));
  } else {
    positions = options_.placement.positions(static_cast<int>(hinted.size()));
  }
  std::vector<PlannedExpert> plan;
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
  policy_->OnHint(key, plan);
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
      for (const PlannedExpert& e : plan->second) {
        alive = alive || (e.position == it->second.position && e.expert == s.expert);
      }
    }
    if (alive) {
      ++it;
    } else if (keeps_experts_) {
      // A cache keeps it, planned for nothing now (its policy decides).
      slots_.ClearPrefetched(it->first);
      it = slot_hint_.erase(it);
    } else {
      slots_.Evict(it->first);
      it = slot_hint_.erase(it);
    }
  }
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

std::vector<SlotView> WorkerCore::ViewLocked() const {
  std::vector<SlotView> view(static_cast<size_t>(slots_.size()));
  for (int i = 0; i < slots_.size(); ++i) {
    const ExpertSlots::Slot& s = slots_.slot(i);
    SlotView& v = view[static_cast<size_t>(i)];
    v.loaded = s.loaded;
    v.pinned = s.pinned;
    v.prefetched = s.prefetched;
    v.layer = s.layer;
    v.expert = s.expert;
    v.last_used = s.last_used;
    if (auto h = slot_hint_.find(i); h != slot_hint_.end()) v.planned = h->second;
  }
  return view;
}

bool WorkerCore::IdleLoadLocked(std::unique_lock<std::mutex>& lock) {
  if (!policy_->Prefetches()) return false;
  PruneLocked();
  const std::vector<SlotView> view = ViewLocked();
  const std::optional<IdleLoad> next = policy_->NextLoad(SlotState{view, hints_});
  if (!next.has_value()) return false;
  const IdleLoad load = *next;
  if (load.evict) {
    slots_.Evict(load.slot);
    slot_hint_.erase(load.slot);
  }
  const bool prefetch = load.for_step.has_value();
  const Key key = prefetch ? load.for_step->key : Key{};
  lock.unlock();
  absl::Status loaded;
  {
    // On a device the load only starts here: its span is recorded when it
    // is waited for (TraceDeviceLoad).
    TraceSpan span(slots_.device() ? nullptr : options_.trace, "EL", "load", std::get<0>(key),
                   std::get<1>(key), load.layer, load.expert);
    loaded = slots_.Load(load.slot, load.layer, load.expert, /*prefetched=*/prefetch,
                         /*pinned=*/false, load.low);
  }
  lock.lock();
  if (!loaded.ok()) {
    ODMOE_LOG_ERROR("{} of layer {} expert {} failed: {}", prefetch ? "prefetch" : "admission",
                    load.layer, load.expert, loaded.message());
    if (prefetch) hints_.erase(key);
    return false;
  }
  if (prefetch) {
    slot_hint_[load.slot] = *load.for_step;
  } else {
    ++stats_.admissions;
  }
  SyncSlotStatsLocked();
  return true;
}

void WorkerCore::LoadAhead() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!policy_->Prefetches()) return;
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
  while (IdleLoadLocked(lock)) {
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
    if (IdleLoadLocked(lock)) continue;  // loaded one; look again
    cv_.wait(lock);
  }
}

absl::Status WorkerCore::LoadForTask(const Task& task, int slot, bool low_ok) {
  const v1::ExpertTask& msg = task.msg;
  const int layer = static_cast<int>(msg.key().layer());
  const int expert = static_cast<int>(msg.expert());
  TraceSpan span(slots_.device() ? nullptr : options_.trace, "EL", "load", msg.key().request(),
                 msg.key().token(), layer, expert);
  return options_.sub_expert
             ? slots_.LoadStreamed(slot, layer, expert, low_ok)
             : slots_.Load(slot, layer, expert, /*prefetched=*/false, /*pinned=*/false, low_ok);
}

void WorkerCore::CountLocked(const Task& task, const Serving& serve, bool ok, double stall,
                             double compute) {
  const v1::ExpertTask& msg = task.msg;
  const int layer = static_cast<int>(msg.key().layer());
  const int expert = static_cast<int>(msg.expert());
  const bool decode = msg.key().token() > 0;
  const Key key{msg.key().request(), msg.key().token(), msg.key().layer()};
  const int slot = serve.slot;
  // Evicted at once unless resident, a cache, or more mini-batches of the
  // same prefill expert follow.
  const bool more = msg.mini_batch() + 1 < msg.mini_batches();
  if (slot >= 0 && !slots_.slot(slot).pinned && !more && !keeps_experts_) slots_.Evict(slot);
  if (ok) policy_->OnTaskDone(layer, expert);
  last_done_ = std::max(last_done_, key);
  ++stats_.tasks;
  if (!ok) ++stats_.task_errors;
  if (decode && ok) {
    ++(serve.kind == Serving::Kind::kHost ? stats_.host_computes
       : serve.substitute >= 0            ? stats_.substitutions
       : serve.hit                        ? stats_.hits
                                          : stats_.misses);
    if (serve.reloaded) ++stats_.reloads;
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
    std::erase_if(plan->second, [&](const PlannedExpert& e) {
      return e.position == msg.position() || e.expert == expert;
    });
    if (plan->second.empty()) hints_.erase(plan);
  }
  PruneLocked();
}

WorkerCore::Serving WorkerCore::ServeLocked(const Task& task, bool low_ok) {
  const v1::ExpertTask& msg = task.msg;
  const int layer = static_cast<int>(msg.key().layer());
  const int expert = static_cast<int>(msg.expert());
  const bool decode = msg.key().token() > 0;
  const Key key{msg.key().request(), msg.key().token(), msg.key().layer()};
  Serving s;
  // Mixed precision: the low-precision copy serves a task marked for it; a
  // task that is not replaces a low copy it finds (one precision per expert).
  s.slot = slots_.FindLoaded(layer, expert);
  if (s.slot >= 0 && !low_ok && slots_.slot(s.slot).low) {
    slots_.Evict(s.slot);
    slot_hint_.erase(s.slot);
    s.slot = -1;
  }
  if (s.slot >= 0) {
    const ExpertSlots::Slot& held = slots_.slot(s.slot);
    // A hit: the prediction put it there before the task arrived.
    // In a cache, anything loaded before the task came is a hit.
    s.hit = ((held.prefetched || keeps_experts_) && held.issued_at <= task.received) ||
            held.pinned;
    s.kind = Serving::Kind::kHeld;
    return s;
  }
  if (decode && msg.degradable() && (s.slot = PrefetchFor(key, msg.position())) >= 0) {
    // DAOP's graceful degradation (lossy, asked for by the main node): the
    // expert prefetched for this position, the predictor's choice there,
    // computes in place of the one that is not loaded.
    s.substitute = slots_.slot(s.slot).expert;
    s.kind = Serving::Kind::kSubstitute;
    return s;
  }
  if (decode && HostComputeWins(layer)) {
    s.kind = Serving::Kind::kHost;  // DAOP: no load; any prefetch for this position stays
    return s;
  }
  // The prefetch made for this task's position holds another expert: the
  // prediction was wrong and that worker reloads in its place (the paper's
  // fallback). Else a free slot, else the policy's victim.
  s.slot = decode ? PrefetchFor(key, msg.position()) : -1;
  if (s.slot >= 0) {
    s.reloaded = true;
  } else if ((s.slot = slots_.FreeSlot()) < 0) {
    const std::vector<SlotView> view = ViewLocked();
    s.slot = policy_->Victim(SlotState{view, hints_});
    if (s.slot >= 0) s.reloaded = slots_.slot(s.slot).prefetched;
  }
  if (s.slot < 0) return s;  // kNoSlot
  if (slots_.slot(s.slot).loaded) slots_.Evict(s.slot);
  s.kind = Serving::Kind::kLoad;
  return s;
}

void WorkerCore::Process(Task& task) {
  const v1::ExpertTask& msg = task.msg;
  const int layer = static_cast<int>(msg.key().layer());
  const int expert = static_cast<int>(msg.expert());
  const bool decode = msg.key().token() > 0;
  v1::ExpertResult result;
  result.set_task_id(msg.task_id());
  *result.mutable_key() = msg.key();
  result.set_expert(msg.expert());

  const bool low_ok = msg.low_precision() && slots_.has_low();
  Serving serve;
  {
    std::lock_guard<std::mutex> lock(mu_);
    serve = ServeLocked(task, low_ok);
  }
  using Kind = Serving::Kind;
  const int slot = serve.slot;
  const bool on_host = serve.kind == Kind::kHost;
  double load_seconds = 0;
  std::optional<std::chrono::steady_clock::time_point> load_from;  // a streamed load's start
  absl::Status status;
  // The load stall of a task is the time it waited for its expert after it
  // arrived: the rest of a load still running then, or a load now.
  double stall = 0;
  if (serve.kind == Kind::kHeld || serve.kind == Kind::kSubstitute) {
    const bool was_ready = slots_.slot(slot).ready;
    absl::StatusOr<std::chrono::steady_clock::time_point> loaded_at = slots_.WaitLoaded(slot);
    if (loaded_at.ok()) {
      stall = std::max(0.0, std::chrono::duration<double>(*loaded_at - task.received).count());
      if (serve.kind == Kind::kHeld && !was_ready) TraceDeviceLoad(slot, msg.key());
    } else {
      status = loaded_at.status();
    }
    slots_.ClearPrefetched(slot);
  } else if (serve.kind == Kind::kNoSlot) {
    status = absl::ResourceExhaustedError(absl::StrFormat(
        "no slot for layer %d expert %d: every slot holds a resident expert", layer, expert));
  } else if (serve.kind == Kind::kLoad) {
    const auto t0 = std::chrono::steady_clock::now();
    status = LoadForTask(task, slot, low_ok);
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
  const int substitute = serve.substitute;

  if (!status.ok()) {
    result.clear_output();
    result.set_error_code(static_cast<int>(status.code()));
    result.set_error_message(std::string(status.message()));
  } else {
    result.set_prefetched(serve.hit);
    result.set_reloaded(serve.reloaded);
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
    CountLocked(task, serve, status.ok(), stall, compute);
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
  return policy_->utility(layer, expert);
}

WorkerStats WorkerCore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace odmoe
