// A MoE layer computed from routing left on the backend
// (ExpertExecutor::RunRouted: products by ids, CombineExperts) gives the
// bits of the host plan's path, token by token, with the same routing
// records, for every architecture whose experts take it; the others keep the
// plan.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#include "backend_registry.h"
#include "cpu_backend.h"
#include "engine/local_expert_executor.h"
#include "engine/transformer.h"
#include "test_paths.h"

namespace odmoe {
namespace {

/// The same experts, reachable through the plan only (as the cluster's and
/// the shadow's executors are).
class PlanOnly final : public ExpertExecutor {
 public:
  explicit PlanOnly(ExpertExecutor& inner) : inner_(inner) {}
  absl::Status Run(int layer, ConstMat x, const RoutingPlan& plan, Mat out) override {
    return inner_.Run(layer, x, plan, out);
  }

 private:
  ExpertExecutor& inner_;
};

/// The CPU backend posing as a device (host_memory() false, as the CUDA
/// backend): every op forwarded, the by-id ops included (as a device backend
/// overrides them), and every wait for the "device" counted.
class WaitCountingBackend final : public Backend {
 public:
  std::string name() const override { return "waits"; }
  bool host_memory() const override { return false; }
  absl::StatusOr<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) override {
    return cpu_.Allocate(bytes);
  }
  absl::Status CopyToBackend(void* dst, const void* src, size_t bytes) override {
    return cpu_.CopyToBackend(dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    ++waits;
    return cpu_.CopyToHost(dst, src, bytes);
  }
  absl::StatusOr<BackendWeight> LoadWeight(const TensorView& host) override {
    return cpu_.LoadWeight(host);
  }
  absl::Status Synchronize() override {
    ++waits;
    return absl::OkStatus();
  }
  void MatMul(const WeightRef& w, ConstMat x, Mat y) override { cpu_.MatMul(w, x, y); }
  void MatMulPair(const WeightRef& a, const WeightRef& b, ConstMat x, Mat ya, Mat yb) override {
    cpu_.MatMulPair(a, b, x, ya, yb);
  }
  void GetRows(const WeightRef& t, const int32_t* ids, Mat out) override {
    cpu_.GetRows(t, ids, out);
  }
  void RmsNorm(ConstMat x, const float* w, float eps, Mat y) override { cpu_.RmsNorm(x, w, eps, y); }
  void Rope(Mat x, int hd, const int32_t* pos, const RopeParams& r) override {
    cpu_.Rope(x, hd, pos, r);
  }
  void Attention(ConstMat q, ConstMat k, ConstMat v, int nh, int nkv, int hd, int pos0, float sc,
                 const AttentionOptions& o, Mat out) override {
    cpu_.Attention(q, k, v, nh, nkv, hd, pos0, sc, o, out);
  }
  void Softmax(Mat x) override { cpu_.Softmax(x); }
  void RouterTopK(ConstMat l, int k, RouterGating g, int32_t* ids, float* w) override {
    cpu_.RouterTopK(l, k, g, ids, w);
  }
  void AddBias(Mat x, const float* b) override { cpu_.AddBias(x, b); }
  void Sigmoid(Mat x) override { cpu_.Sigmoid(x); }
  void Mul(ConstMat a, ConstMat b, Mat out) override { cpu_.Mul(a, b, out); }
  void CausalConvSilu(ConstMat x, const float* w, int kernel, const float* in, float* out_state,
                      Mat out) override {
    cpu_.CausalConvSilu(x, w, kernel, in, out_state, out);
  }
  void GatedDeltaNet(ConstMat qkv, ConstMat alpha, ConstMat beta, const float* a,
                     const float* dt_bias, const DeltaNetParams& p, const float* in,
                     float* out_state, Mat out) override {
    cpu_.GatedDeltaNet(qkv, alpha, beta, a, dt_bias, p, in, out_state, out);
  }
  void CausalConvBiasSilu(ConstMat x, const float* w, const float* bias, int kernel,
                          const float* in, float* out_state, Mat out) override {
    cpu_.CausalConvBiasSilu(x, w, bias, kernel, in, out_state, out);
  }
  void Mamba2Scan(ConstMat xbc, ConstMat dt, const float* a, const float* d, const float* dt_bias,
                  const Mamba2Params& p, const float* in, float* out_state, Mat out) override {
    cpu_.Mamba2Scan(xbc, dt, a, d, dt_bias, p, in, out_state, out);
  }
  void GroupRmsNormGated(ConstMat y, ConstMat z, const float* w, int group, float eps,
                         Mat out) override {
    cpu_.GroupRmsNormGated(y, z, w, group, eps, out);
  }
  void SwiGlu(ConstMat g, ConstMat u, Mat out) override { cpu_.SwiGlu(g, u, out); }
  void SwiGluOai(ConstMat g, ConstMat u, float a, float l, Mat out) override {
    cpu_.SwiGluOai(g, u, a, l, out);
  }
  void GeGlu(ConstMat g, ConstMat u, Mat out) override { cpu_.GeGlu(g, u, out); }
  void Scale(Mat x, const float* f) override { cpu_.Scale(x, f); }
  void SoftCap(Mat x, float cap) override { cpu_.SoftCap(x, cap); }
  void Add(ConstMat a, ConstMat b, Mat out) override { cpu_.Add(a, b, out); }
  void Copy(ConstMat src, Mat dst) override { cpu_.Copy(src, dst); }
  void CopyColumns(ConstMat src, int64_t sc, Mat dst, int64_t dc, int64_t cols) override {
    cpu_.CopyColumns(src, sc, dst, dc, cols);
  }
  void GatherRows(ConstMat src, const int32_t* idx, Mat dst) override {
    cpu_.GatherRows(src, idx, dst);
  }
  void ScatterAddScaled(ConstMat src, const int32_t* idx, const float* s, Mat dst) override {
    cpu_.ScatterAddScaled(src, idx, s, dst);
  }
  absl::StatusOr<WeightTable> MakeWeightTable(std::span<const WeightRef> entries) override {
    return cpu_.MakeWeightTable(entries);
  }
  void MatMulById(const WeightTable& t, const int32_t* ids, ConstMat x, Mat y) override {
    cpu_.MatMulById(t, ids, x, y);
  }
  void MatMulPairById(const WeightTable& a, const WeightTable& b, const int32_t* ids, ConstMat x,
                      Mat ya, Mat yb) override {
    cpu_.MatMulPairById(a, b, ids, x, ya, yb);
  }
  void SwiGluMatMulById(const WeightTable& w, const int32_t* ids, Mat g, ConstMat u,
                        Mat y) override {
    cpu_.SwiGluMatMulById(w, ids, g, u, y);
  }
  void CombineExperts(ConstMat ys, const int32_t* ids, const float* w, int k, Mat out) override {
    cpu_.CombineExperts(ys, ids, w, k, out);
  }

  int waits = 0;

 private:
  CpuBackend cpu_{1};
};

struct Steps {
  std::vector<std::vector<float>> logits;  // the prompt's last row, then each decode step
  std::vector<TokenRouting> routing;
};

/// A 9-token prompt, then 6 greedy decode steps of one row each.
Steps Decode(Transformer& tf, ExpertExecutor& experts, int n_vocab) {
  std::vector<int32_t> prompt = {1, 415, 1210, 302, 264, 1215, 349, 264, 1263};
  for (int32_t& t : prompt) t %= n_vocab;
  Steps s;
  std::vector<float> logits;
  const absl::Status st = tf.Forward(prompt, 0, experts, &logits, &s.routing);
  INFO(st.ToString());
  REQUIRE(st.ok());
  s.logits.push_back(logits);
  int pos = static_cast<int>(prompt.size());
  for (int step = 0; step < 6; ++step) {
    const int32_t next = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    const std::vector<int32_t> row = {next};
    const absl::Status step_st = tf.Forward(row, pos++, experts, &logits, &s.routing);
    INFO(step_st.ToString());
    REQUIRE(step_st.ok());
    s.logits.push_back(logits);
  }
  return s;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("engine: routing kept on the backend gives the plan's bits and records", "[engine]") {
  struct Model {
    const char* path;
    bool routed;  // whether its experts take RunRouted (plain SwiGLU, no biases)
  };
  const Model models[] = {{"models/tiny-mixtral-f16.gguf", true},
                          {"tests/data/arch/tiny-qwen3moe.gguf", true},
                          {"tests/data/arch/tiny-olmoe.gguf", true},
                          {"tests/data/arch/tiny-qwen2moe.gguf", true},  // a shared expert
                          {"tests/data/arch/tiny-deepseek2.gguf", true},  // a dense first layer
                          {"tests/data/arch/tiny-deepseek3.gguf", true},  // sigmoid, groups
                          {"tests/data/arch/tiny-gpt-oss-mxfp4.gguf", false}};
  std::vector<std::string> backends = {"cpu"};
  for (const std::string& n : AvailableBackends()) {
    if (n.rfind("cuda", 0) == 0) backends.push_back(n);
  }
  for (const std::string& be_name : backends) {
    for (const Model& m : models) {
      INFO(be_name << " " << m.path);
      auto model = ModelFile::Open(test::SourcePath(m.path));
      REQUIRE(model.ok());
      const ModelConfig& c = (*model)->config();
      auto be = CreateBackend(be_name);
      REQUIRE(be.ok());
      Transformer::Options opt;
      opt.n_batch = 16;
      auto routed_tf = Transformer::Create(**model, **be, opt);
      auto plan_tf = Transformer::Create(**model, **be, opt);
      REQUIRE(routed_tf.ok());
      REQUIRE(plan_tf.ok());
      auto experts = LocalExpertExecutor::Create(**model, **be, opt.n_batch);
      REQUIRE(experts.ok());
      const int last = c.n_layer - 1;
      CHECK((*experts)->CanRunRouted(**be, last, 1) == m.routed);
      CHECK(!(*experts)->CanRunRouted(**be, last, 2));  // many rows: the plan groups them
      if (c.n_dense_leading > 0) CHECK(!(*experts)->CanRunRouted(**be, 0, 1));
      PlanOnly plan_only(**experts);
      CHECK(!plan_only.CanRunRouted(**be, last, 1));
      const Steps routed = Decode(**routed_tf, **experts, c.n_vocab);
      const Steps plan = Decode(**plan_tf, plan_only, c.n_vocab);
      REQUIRE(routed.logits.size() == plan.logits.size());
      for (size_t i = 0; i < routed.logits.size(); ++i) {
        INFO("step " << i);
        CHECK(BitEqual(routed.logits[i], plan.logits[i]));
      }
      CHECK(routed.routing == plan.routing);
      REQUIRE(routed.routing.size() == 9 + 6);
      for (int l = c.n_dense_leading; l < c.n_layer; ++l) {  // every MoE layer recorded
        CHECK(routed.routing.back()[static_cast<size_t>(l * c.n_expert_used)] >= 0);
      }
      // A routed run of what the executor cannot take is refused, not computed.
      CHECK(!(*experts)->RunRouted(last, ConstMat(nullptr, 2, c.n_embd), nullptr, nullptr,
                                   c.n_expert_used, Mat{nullptr, 2, c.n_embd})
                 .ok());
      CHECK(!plan_only.RunRouted(last, ConstMat(nullptr, 1, c.n_embd), nullptr, nullptr,
                                 c.n_expert_used, Mat{nullptr, 1, c.n_embd})
                 .ok());
    }
  }
}

TEST_CASE("engine: a routed decode step waits for the device once, for its logits", "[engine]") {
  // The point of keeping the routing on the backend: on a device, a step's
  // kernels queue without a wait per MoE layer (the plan's path waits for each
  // layer's routing).
  auto model = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  WaitCountingBackend be;
  Transformer::Options opt;
  opt.n_batch = 8;
  auto tf = Transformer::Create(**model, be, opt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create(**model, be, opt.n_batch);
  REQUIRE(experts.ok());
  PlanOnly plan_only(**experts);
  std::vector<float> logits;
  const std::vector<int32_t> prompt = {1, 415, 1210}, one = {264}, two = {302};
  REQUIRE((*tf)->Forward(prompt, 0, **experts, &logits, nullptr).ok());
  int pos = 3;
  for (ExpertExecutor* ex : {static_cast<ExpertExecutor*>(experts->get()),
                             static_cast<ExpertExecutor*>(&plan_only)}) {
    const bool routed = ex == experts->get();
    INFO((routed ? "routed" : "plan"));
    be.waits = 0;
    REQUIRE((*tf)->Forward(one, pos++, *ex, &logits, nullptr).ok());
    CHECK(be.waits == (routed ? 1 : 1 + c.n_moe_layer()));
    // Routing records: one copy more, after the step.
    std::vector<TokenRouting> routing;
    be.waits = 0;
    REQUIRE((*tf)->Forward(two, pos++, *ex, &logits, &routing).ok());
    CHECK(be.waits == (routed ? 2 : 1 + c.n_moe_layer()));
    REQUIRE(routing.size() == 1);
    CHECK(routing[0][0] >= 0);
  }
}

TEST_CASE("engine: ODMOE_ROUTED_EXPERTS=0 keeps every layer on the plan", "[engine]") {
  auto model = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  auto be = CreateBackend("cpu");
  REQUIRE(be.ok());
  const int last = (*model)->config().n_layer - 1;
  REQUIRE(setenv("ODMOE_ROUTED_EXPERTS", "0", 1) == 0);
  auto off = LocalExpertExecutor::Create(**model, **be, 4);
  REQUIRE(unsetenv("ODMOE_ROUTED_EXPERTS") == 0);
  REQUIRE(off.ok());
  CHECK(!(*off)->CanRunRouted(**be, last, 1));
  auto on = LocalExpertExecutor::Create(**model, **be, 4);
  REQUIRE(on.ok());
  CHECK((*on)->CanRunRouted(**be, last, 1));
}

}  // namespace odmoe
