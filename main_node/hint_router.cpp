#include "main_node/hint_router.h"

#include <algorithm>
#include <random>

#include "cluster/assignment.h"
#include "main_node/lookahead_vote.h"
#include "util/status_macros.h"

namespace odmoe {

std::vector<std::vector<int32_t>> HintRouter::RandomPredictions(uint64_t request, int n) const {
  const ModelConfig& c = config_;
  std::mt19937_64 rng(request * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(n));
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(c.n_layer));
  std::vector<int32_t> pool(static_cast<size_t>(c.n_expert));
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    if (!c.has_experts(l)) continue;  // interleaved dense layers (Llama 4)
    for (int e = 0; e < c.n_expert; ++e) pool[static_cast<size_t>(e)] = e;
    for (int j = 0; j < c.n_expert_used; ++j) {
      std::uniform_int_distribution<int> pick(j, c.n_expert - 1);
      std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(pick(rng))]);
    }
    out[static_cast<size_t>(l)].assign(pool.begin(), pool.begin() + c.n_expert_used);
  }
  return out;
}

absl::Status HintRouter::SendRandomHints(uint64_t request, int n) {
  std::vector<std::vector<int32_t>> predicted = RandomPredictions(request, n);
  for (int l = config_.n_dense_leading; l < config_.n_layer; ++l) {
    if (!config_.has_experts(l)) continue;
    SendHint(request, n, l, std::move(predicted[static_cast<size_t>(l)]));
  }
  return absl::OkStatus();
}

void HintRouter::PutRandomPredictions(uint64_t request, int n) {
  std::vector<std::vector<int32_t>> predicted = RandomPredictions(request, n);
  for (int l = config_.n_dense_leading; l < config_.n_layer; ++l) {
    if (!config_.has_experts(l)) continue;
    links_.predictions().Put(request, static_cast<uint32_t>(n), static_cast<uint32_t>(l),
                             std::move(predicted[static_cast<size_t>(l)]));
  }
}

void HintRouter::SendHint(uint64_t request, int n, int layer, std::vector<int32_t> predicted) {
  const ModelConfig& c = config_;
  v1::WorkerRequest req;
  v1::Hint* hint = req.mutable_hint();
  hint->mutable_key()->set_request(request);
  hint->mutable_key()->set_token(static_cast<uint32_t>(n));
  hint->mutable_key()->set_layer(static_cast<uint32_t>(layer));
  for (int32_t e : predicted) hint->add_experts(static_cast<uint32_t>(e));
  hint->set_ranked(true);  // the look-ahead's likeliest first (random: any order)
  links_.predictions().Put(request, static_cast<uint32_t>(n), static_cast<uint32_t>(layer),
                           std::move(predicted));
  const std::vector<int> members = topology_.GroupMembers(schedule_->GroupOfLayer(layer));
  for (size_t i = 0; i < members.size(); ++i) {
    // Only workers with positions of this layer (cluster/assignment.h).
    if (PositionsOfWorker(static_cast<int>(i), topology_.group_size, c.n_expert_used).empty()) {
      continue;
    }
    // A failed send is the group's failure, which the layer's task finds.
    links_.SendToWorker(members[i], req).IgnoreError();
  }
}

absl::Status HintRouter::Lookahead(uint64_t request, int n, const LookaheadSpec& spec, int layer,
                                   ConstMat x) {
  const ModelConfig& c = config_;
  auto has_experts = [&c](int l) { return c.has_experts(l); };
  // Keep this layer's input for the next layers' votes (FIRM), keyed by
  // (request, iteration, layer) so a vote never reads another token's input.
  constexpr int kSlots = Transformer::kKeptInputs;
  static_assert(kSlots >= kMaxLookaheadLayers, "a slot per voting layer");
  if (spec.layers > 1) {
    ODMOE_ASSIGN_OR_RETURN(ConstMat kept, transformer_.KeepInput(layer % kSlots, x));
    kept_inputs_[static_cast<size_t>(layer % kSlots)] = {request, n, layer, kept};
  }
  const int target = LookaheadTarget(spec, layer, c.n_layer, has_experts);
  if (target < 0) return absl::OkStatus();
  const int candidates = CandidatesPerVoter(spec, c.n_expert_used, c.n_expert);
  std::vector<std::vector<int32_t>> sets;
  for (int m : VotingLayers(spec, layer, has_experts)) {
    ConstMat input = x;
    if (m != layer) {
      const KeptInput& k = kept_inputs_[static_cast<size_t>(m % kSlots)];
      if (k.request != request || k.n != n || k.layer != m) break;  // not this token's
      input = k.row;
    }
    sets.emplace_back();
    ODMOE_RETURN_IF_ERROR(transformer_.PredictExperts(target, input, &sets.back(), candidates));
  }
  // A worker holds one expert per position: at most k of them (the latest
  // voter's likeliest first) are hinted.
  std::vector<int32_t> predicted = IntersectCandidates(sets);
  if (predicted.size() > static_cast<size_t>(c.n_expert_used)) predicted.resize(c.n_expert_used);
  if (!predicted.empty()) SendHint(request, n, target, std::move(predicted));
  return absl::OkStatus();
}

bool StepRow::Predicts(int layer, const ModelConfig& c) const {
  switch (mode) {
    case PredictionMode::kShadow:
    case PredictionMode::kRandom:
      return true;
    case PredictionMode::kLookahead:
      return layer > 0 && LookaheadTarget(lookahead, layer - 1, c.n_layer,
                                          [&c](int l) { return c.has_experts(l); }) == layer;
    case PredictionMode::kNone:
      break;
  }
  return false;
}

void HintRouter::HintStep(uint64_t key_request, uint32_t key_token, std::span<const StepRow> rows,
                          int from_layer) {
  const ModelConfig& c = config_;
  // A layer is hinted once, when every predicted row's prediction for it has
  // arrived (a union that grew later would move the sorted positions and the
  // workers' prefetches with them): the complete layers now, the rest as they
  // complete, looked at again before each layer goes out.
  std::map<int, v1::WorkerRequest> hints;  // worker -> its hints of the step
  for (int l = std::max(from_layer, c.n_dense_leading); l < c.n_layer; ++l) {
    if (!c.has_experts(l)) continue;           // interleaved dense layers (Llama 4)
    if (executor_.StepPredicted(l)) continue;  // hinted already
    std::vector<int32_t> u;
    bool complete = true;
    for (const StepRow& r : rows) {
      if (!r.Predicts(l, c)) continue;
      const std::vector<int32_t> p =
          links_.predictions().Get(r.request, static_cast<uint32_t>(r.n), static_cast<uint32_t>(l));
      complete = complete && !p.empty();
      for (int32_t e : p) {
        if (std::find(u.begin(), u.end(), e) == u.end()) u.push_back(e);
      }
    }
    if (!complete || static_cast<int>(u.size()) < c.n_expert_used) continue;
    AddStepHint(key_request, static_cast<int>(key_token), l, u, &hints);
    executor_.SetStepPrediction(l, std::move(u));
  }
  // One message per worker with its layers' hints.
  for (auto& [worker, batch] : hints) {
    // A failed send is the group's failure, which the layer's task finds.
    links_.SendToWorker(worker, batch).IgnoreError();
  }
}

absl::Status HintRouter::LookaheadRows(std::span<const StepRow> rows, int layer, ConstMat x) {
  const ModelConfig& c = config_;
  auto has_experts = [&c](int l) { return c.has_experts(l); };
  for (const StepRow& r : rows) {
    if (r.mode != PredictionMode::kLookahead) continue;
    const LookaheadSpec& spec = r.lookahead;
    const int target = LookaheadTarget(spec, layer, c.n_layer, has_experts);
    if (target < 0) continue;
    // One row's own vote (the earlier layers' inputs are kept for a request
    // alone: FIRM's votes need one kept row per voter).
    std::vector<int32_t> predicted;
    const ConstMat input{x.data + r.row * x.cols, 1, x.cols};
    ODMOE_RETURN_IF_ERROR(transformer_.PredictExperts(
        target, input, &predicted, CandidatesPerVoter(spec, c.n_expert_used, c.n_expert)));
    if (predicted.size() > static_cast<size_t>(c.n_expert_used)) {
      predicted.resize(static_cast<size_t>(c.n_expert_used));
    }
    links_.predictions().Put(r.request, static_cast<uint32_t>(r.n), static_cast<uint32_t>(target),
                             std::move(predicted));
  }
  return absl::OkStatus();
}

void HintRouter::AddStepHint(uint64_t request, int n, int layer,
                             const std::vector<int32_t>& experts,
                             std::map<int, v1::WorkerRequest>* hints) const {
  v1::Hint hint;
  hint.mutable_key()->set_request(request);
  hint.mutable_key()->set_token(static_cast<uint32_t>(n));
  hint.mutable_key()->set_layer(static_cast<uint32_t>(layer));
  for (int32_t e : experts) hint.add_experts(static_cast<uint32_t>(e));
  // The executor's placement (SpreadAssignment over SpreadMembers): the
  // sorted union's position p on member p mod N.
  const std::vector<int> members = executor_.SpreadMembers(layer);
  const int n_members = static_cast<int>(members.size());
  for (int i = 0; i < n_members; ++i) {
    const std::vector<int> mine = PositionsOfWorker(i, n_members, static_cast<int>(experts.size()));
    if (mine.empty()) continue;
    v1::Hint* h = (*hints)[members[static_cast<size_t>(i)]].mutable_hints()->add_hints();
    *h = hint;
    for (int p : mine) h->add_positions(static_cast<uint32_t>(p));
  }
}

}  // namespace odmoe
