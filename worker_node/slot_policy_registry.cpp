// The slot policy of each worker mode: the built-in modes' factories (their
// rows: topology/worker_mode.cpp) and those registered at run time.
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_format.h"
#include "cluster/assignment.h"
#include "worker_node/lfu_policy.h"
#include "worker_node/lru_policy.h"
#include "worker_node/on_demand_policy.h"
#include "worker_node/resident_policy.h"
#include "worker_node/slot_policy.h"
#include "worker_node/utility_policy.h"

namespace odmoe {
namespace {

using Made = absl::StatusOr<std::unique_ptr<SlotPolicy>>;

// The cache modes' size.
absl::Status CheckCacheExperts(const SlotPolicyContext& c) {
  if (c.cache_experts >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError("an expert cache needs at least one expert");
}

std::map<std::string, SlotPolicyFactory, std::less<>> BuiltIn() {
  return {
      {"on_demand",
       [](const SlotPolicyContext& c) -> Made {
         const int k = c.config.n_expert_used;
         return std::make_unique<OnDemandPolicy>(
             PositionsOfWorker(0, c.placement.group_size, k).size() > 1);
       }},
      {"resident",
       [](const SlotPolicyContext& c) -> Made {
         return std::make_unique<ResidentPolicy>(UsualExperts(c.config, c.placement));
       }},
      {"lru_cache",
       [](const SlotPolicyContext& c) -> Made {
         if (absl::Status s = CheckCacheExperts(c); !s.ok()) return s;
         return std::make_unique<LruPolicy>(c.cache_experts);
       }},
      {"lfu_cache",
       [](const SlotPolicyContext& c) -> Made {
         if (absl::Status s = CheckCacheExperts(c); !s.ok()) return s;
         return std::make_unique<LfuPolicy>(c.cache_experts, c.config.n_layer, c.config.n_expert);
       }},
      {"utility_cache",
       [](const SlotPolicyContext& c) -> Made {
         if (absl::Status s = CheckCacheExperts(c); !s.ok()) return s;
         return std::make_unique<UtilityPolicy>(c.cache_experts, c.config.n_layer,
                                                c.config.n_expert, c.utility);
       }},
  };
}

struct Registry {
  std::mutex mu;
  std::map<std::string, SlotPolicyFactory, std::less<>> factories = BuiltIn();
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();  // never destroyed
  return *registry;
}

}  // namespace

absl::Status RegisterSlotPolicy(WorkerModeInfo mode, SlotPolicyFactory create) {
  if (!create) {
    return absl::InvalidArgumentError(
        absl::StrFormat("worker mode '%s' registered without a policy factory", mode.name));
  }
  const std::string name = mode.name;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (absl::Status s = RegisterWorkerMode(std::move(mode)); !s.ok()) return s;
  r.factories[name] = std::move(create);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SlotPolicy>> CreateSlotPolicy(WorkerMode mode,
                                                             const SlotPolicyContext& context) {
  SlotPolicyFactory create;
  {
    Registry& r = TheRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(mode.name());
    if (it == r.factories.end()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "workers.mode %s has no slot policy in this build (a row in topology/worker_mode.cpp "
          "without its factory in worker_node/slot_policy_registry.cpp)",
          mode.name()));
    }
    create = it->second;
  }
  return create(context);
}

}  // namespace odmoe
