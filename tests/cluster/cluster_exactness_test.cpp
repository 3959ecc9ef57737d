// The central property of the project: the cluster's greedy tokens equal the
// single-process reference engine's, for every prediction mode, with
// alignment on and off, with 2, 4, 6 and 8 workers, resident or on demand,
// with prefill mini-batches of several sizes, and with worker groups smaller
// than top-k (one worker computes several experts of a layer, with one slot
// or two) and larger (some workers idle in decoding).
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "absl/strings/str_format.h"
#include "backends/backend_registry.h"
#include "cluster/assignment.h"
#include "engine/reference_engine.h"
#include "model/expert_pack.h"
#include "model/model_quantizer.h"
#include "model/synth_model.h"
#include "retyped_model.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

const std::vector<std::string>& Prompts() {
  static const std::vector<std::string> prompts = {
      "It is a truth universally acknowledged, that a single man in possession of a good "
      "fortune, must be in want of a wife.",
      "The meaning of life is",
  };
  return prompts;
}
constexpr int kTokens = 20;

// Reference tokens of a model, computed once per process.
const std::vector<std::vector<int32_t>>& Reference(
    const std::string& model = SourcePath("models/tiny-mixtral-f16.gguf")) {
  static std::map<std::string, std::vector<std::vector<int32_t>>> refs;
  auto it = refs.find(model);
  if (it != refs.end()) return it->second;
  auto engine = ReferenceEngine::Create(model, {}).value();
  std::vector<std::vector<int32_t>> out;
  for (const std::string& p : Prompts()) {
    GenerateRequest req;
    req.prompt = p;
    req.max_tokens = kTokens;
    req.ignore_eos = true;
    out.push_back(engine->Generate(req).value().output_ids);
  }
  return refs[model] = out;
}

void ExpectIdentical(const ClusterConfig& cfg) {
  INFO(absl::StrFormat(
      "workers=%d group_size=%d budget=%d prediction=%s mode=%s align=%d/%d mini_batch=%d "
      "batch=%d model=%s",
      cfg.workers, cfg.group_size, cfg.memory_budget, PredictionModeName(cfg.prediction),
      WorkerModeName(cfg.worker_mode), cfg.token_period, cfg.kv_period, cfg.mini_batch, cfg.batch,
      cfg.model));
  auto cluster = TestCluster::Start(cfg);
  INFO((cluster.ok() ? std::string() : std::string(cluster.status().message())));
  REQUIRE(cluster.ok());
  const ModelConfig& model = (*cluster)->worker(0).core().model().config();
  for (size_t i = 0; i < Prompts().size(); ++i) {
    GenerateRequest req;
    req.prompt = Prompts()[i];
    req.max_tokens = kTokens;
    req.ignore_eos = true;
    absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(req, nullptr);
    INFO((r.ok() ? std::string() : std::string(r.status().message())));
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == Reference(cfg.model)[i]);
    CHECK(r->experts.hits + r->experts.misses ==
          static_cast<uint64_t>((kTokens - 1) * model.n_moe_layer() * model.n_expert_used));
  }
  const int k = model.n_expert_used;
  const int g = (*cluster)->topology().group_size;  // cfg.group_size 0 = top-k
  uint64_t decode_tasks = 0;
  for (int w = 0; w < (*cluster)->n_workers(); ++w) {
    const WorkerStats s = (*cluster)->worker(w).core().stats();
    INFO("worker " << w);
    // A slot holds any expert: the largest of any layer.
    CHECK(s.expert_bytes == LargestPackedExpert(model));
    CHECK(s.task_errors == 0);
    decode_tasks += s.hits + s.misses;
    // Worker i of its group computed positions i, i+G, ... of its layers:
    // ceil(k/G) or floor(k/G) experts of a step, none when i >= k (or when
    // its group has no layer with experts: fewer layers than groups, or only
    // dense ones).
    bool has_layers = false;
    const int n_groups = (*cluster)->n_workers() / g;
    for (int l = model.n_dense_leading; l < model.n_layer; ++l) {
      has_layers = has_layers || (model.has_experts(l) && l % n_groups == w / g);
    }
    const size_t mine = has_layers ? PositionsOfWorker(w % g, g, k).size() : 0;
    CHECK(s.step_experts_peak == mine);
    if (cfg.worker_mode == WorkerMode::kOnDemand) {
      // Auto: one slot, two when it computes several experts of a layer;
      // else what the budget holds.
      const int slots =
          cfg.memory_budget == 0
              ? (k > g ? 2 : 1)
              : static_cast<int>((cfg.memory_budget - s.workspace_bytes) / s.expert_bytes);
      CHECK(s.slots == slots);
      // Its own accounting: never more experts than slots (a one-expert
      // budget never held two).
      CHECK(s.peak_held >= 1);
      CHECK(s.peak_held <= slots);
      CHECK(s.peak_bytes ==
            static_cast<uint64_t>(s.peak_held) * s.expert_bytes + s.workspace_bytes);
      CHECK(s.peak_bytes <= s.memory_budget);
    }
    // Loads move each expert in its own layer's size.
    uint64_t smallest = s.expert_bytes;
    for (int l = model.n_dense_leading; l < model.n_layer; ++l) {
      smallest = std::min<uint64_t>(smallest, ExpertPackLayout::For(model, l).total_bytes);
    }
    CHECK(s.bytes_loaded >= s.loads * smallest);
    CHECK(s.bytes_loaded <= s.loads * s.expert_bytes);
    if (!model.expert_storage_uniform() && s.loads > 0 &&
        cfg.worker_mode == WorkerMode::kResident) {
      CHECK(s.bytes_loaded < s.loads * s.expert_bytes);  // both layers' experts were loaded
    }
  }
  // Every decode task was counted once, per (layer, expert), by the worker
  // that computed it.
  CHECK(decode_tasks ==
        Prompts().size() * static_cast<uint64_t>((kTokens - 1) * model.n_moe_layer() * k));
}

// One run of ExpectIdentical with the workers in groups of `group_size`.
struct GroupCase {
  int workers, group_size, slots;  // slots 0 = auto
  PredictionMode prediction;
  WorkerMode mode;
  int align = 1;  // token and KV period
  int mini_batch = 16;
};

void ExpectIdenticalOnGroups(const GroupCase& c, const std::string& model = "") {
  ClusterConfig cfg;
  if (!model.empty()) cfg.model = model;
  cfg.workers = c.workers;
  cfg.group_size = c.group_size;
  cfg.prediction = c.prediction;
  cfg.worker_mode = c.mode;
  cfg.token_period = cfg.kv_period = c.align;
  cfg.mini_batch = c.mini_batch;
  if (c.slots > 0) cfg.memory_budget = WorkerBudgetForSlots(cfg, c.slots);
  ExpectIdentical(cfg);
}

}  // namespace

TEST_CASE("cluster: identical tokens in every prediction mode and worker count",
          "[cluster][tsan]") {
  const int mini_batches[] = {1, 3, 16, 64};
  int i = 0;
  for (int workers : {2, 4, 6, 8}) {
    for (int variant = 0; variant < 5; ++variant) {
      ClusterConfig cfg;
      cfg.workers = workers;
      cfg.mini_batch = mini_batches[i++ % 4];
      switch (variant) {
        case 0:  // shadow, token + KV alignment every iteration
          break;
        case 1:  // shadow, no alignment
          cfg.token_period = cfg.kv_period = 0;
          break;
        case 2:
          cfg.prediction = PredictionMode::kRandom;
          break;
        case 3:
          cfg.prediction = PredictionMode::kNone;
          break;
        case 4:
          cfg.prediction = PredictionMode::kLookahead;
          break;
      }
      ExpectIdentical(cfg);
    }
  }
}

TEST_CASE("cluster: identical tokens with resident workers and other settings", "[cluster]") {
  ClusterConfig resident;
  resident.worker_mode = WorkerMode::kResident;
  ExpectIdentical(resident);

  ClusterConfig periods;  // alignment every few iterations, token and KV apart
  periods.token_period = 2;
  periods.kv_period = 3;
  periods.mini_batch = 5;
  ExpectIdentical(periods);

  ClusterConfig small_batch;  // prefill split into chunks of 7 rows
  small_batch.batch = 7;
  small_batch.mini_batch = 2;
  small_batch.quantization = DType::kQ4_0;
  ExpectIdentical(small_batch);

  ClusterConfig f16_shadow;
  f16_shadow.quantization = DType::kF16;
  f16_shadow.workers = 4;
  ExpectIdentical(f16_shadow);
}

TEST_CASE("cluster: identical tokens with groups smaller and larger than top-k", "[cluster]") {
  // The shipped model routes to k = 2 experts.
  using Case = GroupCase;
  const Case cases[] = {
      // G = 1: one worker computes both experts of each of its layers.
      {2, 1, 1, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 3},
      {2, 1, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 16},  // auto: 2 slots
      {1, 1, 1, PredictionMode::kShadow, WorkerMode::kOnDemand, 0, 5},
      {3, 1, 2, PredictionMode::kNone, WorkerMode::kOnDemand, 1, 1},
      {2, 1, 0, PredictionMode::kLookahead, WorkerMode::kOnDemand, 1, 4},
      {3, 3, 0, PredictionMode::kLookahead, WorkerMode::kOnDemand, 1, 2},
      {2, 1, 0, PredictionMode::kRandom, WorkerMode::kOnDemand, 1, 64},
      {2, 1, 0, PredictionMode::kNone, WorkerMode::kResident, 1, 16},
      // G > k: workers 2 (and 3) of a group idle in decoding, not in prefill.
      {3, 3, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 2},
      {8, 4, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 0, 7},
      {4, 4, 0, PredictionMode::kNone, WorkerMode::kOnDemand, 1, 1},
      {4, 4, 0, PredictionMode::kNone, WorkerMode::kResident, 1, 16},
  };
  for (const Case& c : cases) ExpectIdenticalOnGroups(c);
}

TEST_CASE("cluster: identical tokens for top-4 and top-8 models on any group size", "[cluster]") {
  // Synthetic Mixtral-architecture models (random weights: recall means
  // nothing here, exactness does): top-4 of 8 and, shaped like Qwen3-MoE's
  // routing, top-8 of 16.
  using Case = GroupCase;
  const std::vector<std::pair<int, std::vector<Case>>> models = {
      {4,
       {
           {4, 2, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 16},  // 2 experts each
           {2, 1, 1, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 3},   // 4 on one slot
           {3, 3, 0, PredictionMode::kNone, WorkerMode::kOnDemand, 1, 5},     // 2, 1, 1
           {8, 8, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 0, 16},  // 4 idle
           {4, 2, 0, PredictionMode::kNone, WorkerMode::kResident, 1, 16},
           {4, 4, 0, PredictionMode::kRandom, WorkerMode::kOnDemand, 1, 4},  // G = k
           {4, 2, 0, PredictionMode::kLookahead, WorkerMode::kOnDemand, 1, 16},
       }},
      {8,
       {
           {8, 8, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 16},  // 1 group of 8
           {8, 4, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 16},  // 2 groups of 4
           {4, 2, 4, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 7},   // 4 each, 4 slots
           {4, 2, 0, PredictionMode::kNone, WorkerMode::kOnDemand, 1, 2},     // 4 each, 2 slots
       }},
  };
  for (const auto& [k, cases] : models) {
    SynthSpec spec;
    spec.n_layer = 4;
    spec.n_embd = 128;
    spec.n_ff = 256;
    spec.n_expert = 2 * k;
    spec.n_expert_used = k;
    spec.seed = static_cast<uint64_t>(k);
    const std::string path =
        (std::filesystem::temp_directory_path() / absl::StrFormat("odmoe_cluster_top%d.gguf", k))
            .string();
    REQUIRE(WriteSynthModel(spec, path).ok());
    for (const Case& c : cases) ExpectIdenticalOnGroups(c, path);
    std::filesystem::remove(path);
  }
}

TEST_CASE("cluster: identical tokens when layers store their experts in different types",
          "[cluster]") {
  // The 2-layer model with layer 0's experts in Q8_0 and layer 1's in F16.
  const std::string mixed =
      (std::filesystem::temp_directory_path() / "odmoe_cluster_layer_types.gguf").string();
  REQUIRE(WriteRetypedModel(SourcePath("tests/data/tiny-mixtral-2layer.gguf"), mixed,
                            [](const TensorView& t) -> std::optional<DType> {
                              if (ExpertsOfLayer(t, 0)) return DType::kQ8_0;
                              return std::nullopt;
                            })
              .ok());
  for (WorkerMode mode : {WorkerMode::kOnDemand, WorkerMode::kResident, WorkerMode::kLruCache}) {
    ClusterConfig cfg;
    cfg.model = mixed;
    cfg.workers = mode == WorkerMode::kOnDemand ? 4 : 2;
    cfg.worker_mode = mode;
    cfg.prediction =
        mode == WorkerMode::kOnDemand ? PredictionMode::kShadow : PredictionMode::kNone;
    cfg.quantization = DType::kQ4_K;  // rows of 128: the shadow's copy falls back to q5_0
    cfg.cache_experts = 3;
    ExpectIdentical(cfg);
  }
  std::filesystem::remove(mixed);

  // K types: a synthetic model (rows of 256 and 512) in the Q4_K_M mix, whose
  // layer 1 keeps ffn_down at Q6_K and layer 0 at Q4_K; the shadow in q6_k.
  SynthSpec spec;
  const std::string synth =
      (std::filesystem::temp_directory_path() / "odmoe_cluster_synth_f16.gguf").string();
  const std::string q4km =
      (std::filesystem::temp_directory_path() / "odmoe_cluster_synth_q4_k_m.gguf").string();
  REQUIRE(WriteSynthModel(spec, synth).ok());
  QuantizeOptions q;
  q.recipe = QuantRecipe::Mix(QuantMix::kQ4_K_M);
  REQUIRE(QuantizeModelFile(synth, q4km, q).ok());
  {
    auto m = ModelFile::Open(q4km);
    REQUIRE(m.ok());
    CHECK((*m)->config().experts_of(0).down_type == DType::kQ4_K);
    CHECK((*m)->config().experts_of(1).down_type == DType::kQ6_K);
    CHECK((*m)->config().experts_of(1).gate_type == DType::kQ4_K);
  }
  ClusterConfig k;
  k.model = q4km;
  k.workers = 2;
  k.quantization = DType::kQ6_K;
  ExpectIdentical(k);
  k.worker_mode = WorkerMode::kResident;
  k.prediction = PredictionMode::kNone;
  ExpectIdentical(k);
  std::filesystem::remove(synth);
  std::filesystem::remove(q4km);
}

TEST_CASE("cluster: identical tokens with every node on the GPU", "[cluster][gpu]") {
  // Main, shadow and workers on cuda:0; workers load through the pinned
  // host copy and the asynchronous slot device. Where no GPU is usable the
  // case passes with a warning (CI), as the CUDA suite's GPU cases do.
  absl::StatusOr<std::unique_ptr<Backend>> gpu = CreateBackend("cuda:0");
  if (!gpu.ok()) {
    WARN("no usable GPU, GPU case skipped: " << gpu.status().message());
    return;
  }
  gpu->reset();
  for (const auto& [prediction, mode] : std::vector<std::pair<PredictionMode, WorkerMode>>{
           {PredictionMode::kShadow, WorkerMode::kOnDemand},
           {PredictionMode::kNone, WorkerMode::kOnDemand},
           {PredictionMode::kRandom, WorkerMode::kOnDemand},
           {PredictionMode::kLookahead, WorkerMode::kOnDemand},
           {PredictionMode::kNone, WorkerMode::kResident},
           {PredictionMode::kNone, WorkerMode::kLruCache}}) {
    ClusterConfig cfg;
    cfg.backend = "cuda:0";
    cfg.prediction = prediction;
    cfg.worker_mode = mode;
    if (mode == WorkerMode::kLruCache) cfg.workers = 2;
    ExpectIdentical(cfg);
  }
  // The architectures of the table: their main-node layer code (latent
  // attention, dense layers, shared experts, sinks, windows, YaRN) and their
  // experts on the GPU, against the single process on the CPU.
  for (const auto& [file, workers] :
       std::vector<std::pair<const char*, int>>{{"tests/data/arch/tiny-qwen3moe.gguf", 8},
                                                {"tests/data/arch/tiny-qwen2moe.gguf", 4},
                                                {"tests/data/arch/tiny-gpt-oss.gguf", 4},
                                                {"tests/data/arch/tiny-deepseek2.gguf", 6},
                                                {"tests/data/arch/tiny-deepseek2-qlora.gguf", 6},
                                                {"tests/data/arch/tiny-deepseek3.gguf", 4},
                                                {"tests/data/arch/tiny-glm4moe.gguf", 4},
                                                {"tests/data/arch/tiny-minimax-m2.gguf", 4},
                                                {"tests/data/arch/tiny-llama4.gguf", 2}}) {
    ClusterConfig cfg;
    cfg.backend = "cuda:0";
    cfg.model = SourcePath(file);
    cfg.workers = workers;
    cfg.mini_batch = 3;
    ExpectIdentical(cfg);
  }
  // One worker per group computing both experts of a layer: with two slots
  // it copies the next expert while it computes the current (LoadAhead).
  for (int slots : {0, 1}) {
    ClusterConfig cfg;
    cfg.backend = "cuda:0";
    cfg.workers = 2;
    cfg.group_size = 1;
    if (slots > 0) cfg.memory_budget = WorkerBudgetForSlots(cfg, slots);
    ExpectIdentical(cfg);
  }
}

TEST_CASE("cluster: f16 hidden states on the wire still generate", "[cluster]") {
  // Lossy by design (not bit-identical); the run must work end to end.
  ClusterConfig cfg;
  cfg.wire = WireDType::kF16;
  cfg.workers = 4;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  GenerateRequest req;
  req.prompt = Prompts()[0];
  req.max_tokens = kTokens;
  req.ignore_eos = true;
  auto r = (*cluster)->main().Generate(req, nullptr);
  REQUIRE(r.ok());
  CHECK(r->result.output_ids.size() == static_cast<size_t>(kTokens));
  // The first token comes from the prefill; f16 rounding of the expert rows
  // does not change a greedy choice this clear.
  CHECK(r->result.output_ids[0] == Reference()[0][0]);
  for (int w = 0; w < 4; ++w) CHECK((*cluster)->worker(w).core().stats().task_errors == 0);
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("cluster: identical tokens for every architecture of the table", "[cluster][arch]") {
  // The tiny random models of tests/data/arch (made with transformers):
  // Qwen3-MoE (top-8 of 32, per-head q/k norm), OLMoE (top-8 of 16), Qwen2-MoE
  // (top-4 of 16, biases, shared expert on the main node), gpt-oss (top-4 of
  // 16; expert biases packed with each expert, the clamped SwiGLU on the
  // workers; sinks, sliding windows, YaRN and the router bias on the main node),
  // DeepSeek-V2 (top-6 of 16; latent attention, its latent KV cache sent to
  // the shadow as K rows only, the dense first layer and the shared experts on
  // the main node), and the sigmoid-routed ones, top-4 of 16 (the correction
  // bias and expert groups in the main node's router): DeepSeek-V3, GLM-4.5
  // (q/k/v biases, partial RoPE, a dense layer, a shared expert, a NextN layer
  // in the file) and MiniMax-M2 (full-row q/k norms, partial RoPE).
  struct Arch {
    const char* file;
    int workers;
  };
  for (const Arch& a :
       {Arch{"tests/data/arch/tiny-qwen3moe.gguf", 8}, Arch{"tests/data/arch/tiny-olmoe.gguf", 8},
        Arch{"tests/data/arch/tiny-qwen2moe.gguf", 8}, Arch{"tests/data/arch/tiny-gpt-oss.gguf", 4},
        Arch{"tests/data/arch/tiny-deepseek2.gguf", 6},
        Arch{"tests/data/arch/tiny-deepseek2-qlora.gguf", 6},
        Arch{"tests/data/arch/tiny-deepseek3.gguf", 4},
        Arch{"tests/data/arch/tiny-glm4moe.gguf", 4},
        Arch{"tests/data/arch/tiny-minimax-m2.gguf", 4},
        // Qwen3-Next / Qwen3.5 (top-4 of 16): Gated DeltaNet layers and their
        // per-sequence state, gated attention, shared expert on the main node.
        Arch{"tests/data/arch/tiny-qwen3next.gguf", 4},
        Arch{"tests/data/arch/tiny-qwen35moe.gguf", 4},
        Arch{"tests/data/arch/tiny-gemma4.gguf", 4},
        // Llama 4 (top-1 of 16; MoE and dense layers interleaved, chunks, a
        // NoPE layer with its temperature, the expert's input scaled on the
        // main node before the workers see it).
        Arch{"tests/data/arch/tiny-llama4.gguf", 4}}) {
    ClusterConfig shadow;  // aligned shadow, prefill in mini-batches of 3
    shadow.model = SourcePath(a.file);
    shadow.workers = a.workers;
    shadow.mini_batch = 3;
    ExpectIdentical(shadow);
    ClusterConfig none = shadow;
    none.prediction = PredictionMode::kNone;
    none.mini_batch = 16;
    ExpectIdentical(none);
    ClusterConfig resident = none;
    resident.worker_mode = WorkerMode::kResident;
    ExpectIdentical(resident);
  }
}

TEST_CASE("cluster: identical tokens for the architectures on any group size", "[cluster][arch]") {
  // The k = 8 and k = 4 models of tests/data/arch on groups smaller than
  // top-k (each worker computes several experts of a layer, one after
  // another) and larger (some workers idle in decoding).
  struct Case {
    const char* file;
    int workers, group_size, slots;  // slots 0 = auto
    PredictionMode prediction;
    WorkerMode mode;
  };
  const Case cases[] = {
      // Qwen3-MoE, top-8 of 32: 2 groups of 4 (2 experts each, auto = 2 slots),
      // 4 groups of 2 (4 each, on 4 slots), one worker per group with one slot.
      {"tests/data/arch/tiny-qwen3moe.gguf", 8, 4, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-qwen3moe.gguf", 8, 2, 4, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-qwen3moe.gguf", 2, 1, 1, PredictionMode::kNone, WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-qwen3moe.gguf", 8, 4, 0, PredictionMode::kNone, WorkerMode::kResident},
      // OLMoE, top-8 of 16.
      {"tests/data/arch/tiny-olmoe.gguf", 4, 2, 0, PredictionMode::kShadow, WorkerMode::kOnDemand},
      // Qwen2-MoE, top-4 of 16 with its shared expert on the main node: groups
      // of 2, and of 8 (workers 4..7 idle in decoding).
      {"tests/data/arch/tiny-qwen2moe.gguf", 4, 2, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-qwen2moe.gguf", 8, 8, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      // gpt-oss, top-4 of 16: groups of 2 (2 experts each, auto = 2 slots),
      // one worker per group with one slot, resident groups of 2.
      {"tests/data/arch/tiny-gpt-oss.gguf", 4, 2, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-gpt-oss.gguf", 2, 1, 1, PredictionMode::kNone, WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-gpt-oss.gguf", 4, 2, 0, PredictionMode::kNone, WorkerMode::kResident},
      // DeepSeek-V2, top-6 of 16, layer 0 dense: groups of 3 (2 experts each),
      // of 4 (6 experts over 4 workers: 2, 2, 1, 1), one worker per group with
      // one slot, resident groups of 2.
      {"tests/data/arch/tiny-deepseek2.gguf", 6, 3, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-deepseek2.gguf", 4, 4, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-deepseek2.gguf", 2, 1, 1, PredictionMode::kNone,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-deepseek2.gguf", 4, 2, 0, PredictionMode::kNone,
       WorkerMode::kResident},
      // The sigmoid-routed models, top-4 of 16: DeepSeek-V3's groups on one
      // worker with one slot, GLM-4.5 on groups of 2, MiniMax-M2 on a group of 8.
      {"tests/data/arch/tiny-deepseek3.gguf", 2, 1, 1, PredictionMode::kNone,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-glm4moe.gguf", 4, 2, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
      {"tests/data/arch/tiny-minimax-m2.gguf", 8, 8, 0, PredictionMode::kShadow,
       WorkerMode::kOnDemand},
  };
  for (const Case& c : cases) {
    ExpectIdenticalOnGroups({c.workers, c.group_size, c.slots, c.prediction, c.mode, 1, 5},
                            SourcePath(c.file));
  }
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("cluster: identical tokens for gemma4", "[cluster][arch]") {
  // Gemma 4's MoE layer on a synthesized file (odmoe's tokenizer does not
  // read the vocabulary of tests/data/arch/tiny-gemma4.gguf yet; odmoe-synth
  // writes a SentencePiece one): sliding and full layers of their own head
  // sizes and KV heads (V = K in the full ones, their KV rows padded to the
  // widest layer's on the way to the shadow), the dense GeGLU FFN beside the
  // experts and the per-expert weight scales on the main node, GeGLU experts
  // with gate and up fused in the file on the workers.
  SynthSpec s;
  s.arch = "gemma4";
  s.n_layer = 4;
  s.n_embd = 64;
  s.n_ff = 32;
  s.n_ff_beside = 48;
  s.n_expert = 16;
  s.n_expert_used = 4;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 16;
  s.n_head_kv_full = 1;
  s.head_dim_full = 64;  // full layers' KV rows (64) wider than the sliding ones' (32)
  s.window_period = 2;
  s.sliding_window = 4;
  s.final_logit_softcap = 30.0f;
  s.n_vocab = 300;
  s.n_ctx = 256;
  const std::string path =
      (std::filesystem::temp_directory_path() / "odmoe_cluster_gemma4.gguf").string();
  REQUIRE(WriteSynthModel(s, path).ok());
  // Aligned shadow (prefill in mini-batches of 3), no prediction, resident
  // workers, groups of 2 (two experts a worker).
  for (const GroupCase& c :
       {GroupCase{4, 4, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 3},
        GroupCase{4, 4, 0, PredictionMode::kNone, WorkerMode::kOnDemand},
        GroupCase{4, 4, 0, PredictionMode::kNone, WorkerMode::kResident},
        GroupCase{4, 2, 0, PredictionMode::kShadow, WorkerMode::kOnDemand, 1, 3}}) {
    ExpectIdenticalOnGroups(c, path);
  }
  // Three requests decoding together with the shadow's drafts verified.
  ClusterConfig spec;
  spec.model = path;
  spec.workers = 4;
  spec.mini_batch = 3;
  spec.draft_tokens = 3;
  spec.max_running = 3;
  auto cluster = TestCluster::Start(spec);
  REQUIRE(cluster.ok());
  std::vector<GenerateRequest> reqs(Prompts().size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt = Prompts()[i];
    reqs[i].max_tokens = kTokens;
    reqs[i].ignore_eos = true;
  }
  const auto got = GenerateConcurrently((*cluster)->main(), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    REQUIRE(got[i].ok());
    CHECK(got[i]->result.output_ids == Reference(path)[i]);
  }
  std::filesystem::remove(path);
}

TEST_CASE("cluster: a recurrent model's state follows speculative decoding and its shadow",
          "[cluster][arch]") {
  // Qwen3.5's Gated DeltaNet layers keep a state per sequence that cannot be
  // cut at a position: where the main node verified more drafts than it
  // accepted it runs the accepted rows again from the state before the
  // verification (MainEngine::Replay), and the shadow, whose guesses go
  // wrong, brings its own state back (ShadowCore::Resync). A Q4_0 shadow
  // (its drafts often wrong) drafts 3 tokens, waited for: the tokens are the
  // single process's, and rejected drafts were replayed. Then three requests
  // decode together on whatever drafts are ready.
  const std::string path = SourcePath("tests/data/arch/tiny-qwen35moe.gguf");
  ClusterConfig spec;
  spec.model = path;
  spec.workers = 4;
  spec.quantization = DType::kQ4_0;
  spec.draft_tokens = 3;
  spec.draft_wait_us = 2'000'000;
  auto cluster = TestCluster::Start(spec);
  REQUIRE(cluster.ok());
  std::vector<GenerateRequest> reqs(Prompts().size());
  uint64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt = Prompts()[i];
    reqs[i].max_tokens = kTokens;
    reqs[i].ignore_eos = true;
    absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(reqs[i], nullptr);
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == Reference(path)[i]);
    drafted += r->speculation.drafted;
    accepted += r->speculation.accepted;
  }
  INFO("drafted " << drafted << " accepted " << accepted);
  CHECK(drafted > accepted);  // some drafts were rejected ...
  CHECK((*cluster)->main().engine().replayed_rows() > 0);  // ... and the state replayed
  cluster->reset();

  spec.draft_wait_us = 0;
  spec.max_running = 3;
  cluster = TestCluster::Start(spec);
  REQUIRE(cluster.ok());
  const auto got = GenerateConcurrently((*cluster)->main(), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    REQUIRE(got[i].ok());
    CHECK(got[i]->result.output_ids == Reference(path)[i]);
  }
}

}  // namespace odmoe::test
