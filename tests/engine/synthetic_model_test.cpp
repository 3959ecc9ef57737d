// The transformer against a plain double-precision forward pass written here
// from the model's definition, on a random model with other dimensions than
// the shipped one (top-3 of 6 experts, GQA 4:2, partial RoPE), F32 weights.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "backend_registry.h"
#include "engine/local_expert_executor.h"
#include "engine/transformer.h"
#include "gguf/gguf_fixture.h"

namespace odmoe {
namespace {

constexpr int kVocab = 50, kEmbd = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 16;
constexpr int kRopeDims = 12, kFf = 96, kExperts = 6, kTopK = 3;
constexpr double kTheta = 10000.0, kEps = 1e-5;

using Vec = std::vector<double>;

struct RandomModel {
  test::GgufSpec spec;
  std::map<std::string, std::vector<float>> w;

  void Add(const std::string& name, std::vector<int64_t> ne, float scale, uint32_t seed) {
    size_t n = 1;
    for (int64_t d : ne) n *= static_cast<size_t>(d);
    std::vector<float> v = test::RandomFloats(n, seed, scale);
    if (name.find("norm") != std::string::npos) {
      for (float& x : v) x = 1.0f + 0.1f * x;
    }
    w[name] = v;
    spec.tensors.push_back({name, DType::kF32, std::move(ne), std::move(v)});
  }

  RandomModel() {
    auto u32 = [](int v) { return GgufValue::U32(static_cast<uint32_t>(v)); };
    spec.metadata = {{"general.architecture", GgufValue::String("llama")},
                     {"llama.context_length", u32(64)},
                     {"llama.embedding_length", u32(kEmbd)},
                     {"llama.block_count", u32(kLayers)},
                     {"llama.feed_forward_length", u32(kFf)},
                     {"llama.attention.head_count", u32(kHeads)},
                     {"llama.attention.head_count_kv", u32(kKvHeads)},
                     {"llama.rope.dimension_count", u32(kRopeDims)},
                     {"llama.rope.freq_base", GgufValue::F32(static_cast<float>(kTheta))},
                     {"llama.attention.layer_norm_rms_epsilon", GgufValue::F32(1e-5f)},
                     {"llama.expert_count", u32(kExperts)},
                     {"llama.expert_used_count", u32(kTopK)}};
    uint32_t seed = 1;
    Add("token_embd.weight", {kEmbd, kVocab}, 1.0f, seed++);
    Add("output_norm.weight", {kEmbd}, 1.0f, seed++);
    Add("output.weight", {kEmbd, kVocab}, 0.2f, seed++);
    for (int l = 0; l < kLayers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      Add(p + "attn_norm.weight", {kEmbd}, 1.0f, seed++);
      Add(p + "attn_q.weight", {kEmbd, kHeads * kHeadDim}, 0.2f, seed++);
      Add(p + "attn_k.weight", {kEmbd, kKvHeads * kHeadDim}, 0.2f, seed++);
      Add(p + "attn_v.weight", {kEmbd, kKvHeads * kHeadDim}, 0.2f, seed++);
      Add(p + "attn_output.weight", {kHeads * kHeadDim, kEmbd}, 0.2f, seed++);
      Add(p + "ffn_norm.weight", {kEmbd}, 1.0f, seed++);
      Add(p + "ffn_gate_inp.weight", {kEmbd, kExperts}, 0.5f, seed++);
      Add(p + "ffn_gate_exps.weight", {kEmbd, kFf, kExperts}, 0.15f, seed++);
      Add(p + "ffn_up_exps.weight", {kEmbd, kFf, kExperts}, 0.15f, seed++);
      Add(p + "ffn_down_exps.weight", {kFf, kEmbd, kExperts}, 0.15f, seed++);
    }
  }
};

// y = W x for a weight with `in` columns, starting at `offset` floats.
Vec MatVec(const std::vector<float>& w, const Vec& x, int out, size_t offset = 0) {
  Vec y(static_cast<size_t>(out), 0.0);
  for (int o = 0; o < out; ++o) {
    for (size_t i = 0; i < x.size(); ++i) y[o] += w[offset + o * x.size() + i] * x[i];
  }
  return y;
}

Vec RmsNorm(const Vec& x, const std::vector<float>& w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / x.size() + kEps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

void Rope(Vec& x, int heads, int pos) {
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < kRopeDims / 2; ++i) {
      const double a = pos * std::pow(kTheta, -2.0 * i / kRopeDims);
      double& x0 = x[h * kHeadDim + 2 * i];
      double& x1 = x[h * kHeadDim + 2 * i + 1];
      const double r0 = x0 * std::cos(a) - x1 * std::sin(a);
      const double r1 = x0 * std::sin(a) + x1 * std::cos(a);
      x0 = r0;
      x1 = r1;
    }
  }
}

// The reference forward over a whole sequence: logits of the last token and
// the experts chosen per position per layer.
Vec ReferenceForward(const RandomModel& m, const std::vector<int32_t>& tokens,
                     std::vector<TokenRouting>* routing) {
  const auto& w = m.w;
  std::vector<Vec> x;
  for (int32_t t : tokens) {
    x.emplace_back(w.at("token_embd.weight").begin() + t * kEmbd,
                   w.at("token_embd.weight").begin() + (t + 1) * kEmbd);
  }
  routing->assign(tokens.size(), TokenRouting(kLayers * kTopK));
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<Vec> keys, values;
    for (size_t pos = 0; pos < x.size(); ++pos) {
      const Vec h = RmsNorm(x[pos], w.at(p + "attn_norm.weight"));
      Vec q = MatVec(w.at(p + "attn_q.weight"), h, kHeads * kHeadDim);
      Vec k = MatVec(w.at(p + "attn_k.weight"), h, kKvHeads * kHeadDim);
      Rope(q, kHeads, static_cast<int>(pos));
      Rope(k, kKvHeads, static_cast<int>(pos));
      keys.push_back(k);
      values.push_back(MatVec(w.at(p + "attn_v.weight"), h, kKvHeads * kHeadDim));
      Vec attn(kHeads * kHeadDim, 0.0);
      for (int hd = 0; hd < kHeads; ++hd) {
        const int kv = hd / (kHeads / kKvHeads);
        Vec s(pos + 1);
        for (size_t j = 0; j <= pos; ++j) {
          for (int i = 0; i < kHeadDim; ++i)
            s[j] += q[hd * kHeadDim + i] * keys[j][kv * kHeadDim + i];
          s[j] /= std::sqrt(static_cast<double>(kHeadDim));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        for (size_t j = 0; j <= pos; ++j) {
          for (int i = 0; i < kHeadDim; ++i) {
            attn[hd * kHeadDim + i] += s[j] / z * values[j][kv * kHeadDim + i];
          }
        }
      }
      const Vec o = MatVec(w.at(p + "attn_output.weight"), attn, kEmbd);
      for (int i = 0; i < kEmbd; ++i) x[pos][i] += o[i];

      const Vec f = RmsNorm(x[pos], w.at(p + "ffn_norm.weight"));
      const Vec r = MatVec(w.at(p + "ffn_gate_inp.weight"), f, kExperts);
      std::vector<int> order(kExperts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r[a] > r[b]; });
      double z = 0;
      for (int j = 0; j < kTopK; ++j) z += std::exp(r[order[j]] - r[order[0]]);
      for (int j = 0; j < kTopK; ++j) {
        const int e = order[j];
        (*routing)[pos][l * kTopK + j] = e;
        const double gw = std::exp(r[e] - r[order[0]]) / z;
        const size_t in_off = static_cast<size_t>(e) * kFf * kEmbd;
        Vec g = MatVec(w.at(p + "ffn_gate_exps.weight"), f, kFf, in_off);
        const Vec u = MatVec(w.at(p + "ffn_up_exps.weight"), f, kFf, in_off);
        for (int i = 0; i < kFf; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const Vec d = MatVec(w.at(p + "ffn_down_exps.weight"), g, kEmbd, in_off);
        for (int i = 0; i < kEmbd; ++i) x[pos][i] += gw * d[i];
      }
    }
  }
  return MatVec(w.at("output.weight"), RmsNorm(x.back(), w.at("output_norm.weight")), kVocab);
}

}  // namespace

TEST_CASE("engine: a top-3 model matches a double-precision forward pass", "[engine]") {
  RandomModel m;
  test::TempFile file("synthetic_moe");
  REQUIRE(test::WriteGguf(m.spec, file.path()).ok());
  auto model = ModelFile::Open(file.path());
  REQUIRE(model.ok());
  auto backend = CreateBackend("cpu");
  REQUIRE(backend.ok());
  Transformer::Options opt;
  opt.n_batch = 4;  // the 9 tokens go through in three batches
  auto tf = Transformer::Create(**model, **backend, opt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create(**model, **backend, opt.n_batch);
  REQUIRE(experts.ok());

  const std::vector<int32_t> tokens = {3, 17, 42, 8, 8, 29, 0, 49, 11};
  std::vector<float> logits;
  std::vector<TokenRouting> routing;
  REQUIRE((*tf)->Forward(tokens, 0, **experts, &logits, &routing).ok());
  std::vector<TokenRouting> want_routing;
  const Vec want = ReferenceForward(m, tokens, &want_routing);
  CHECK(routing == want_routing);
  REQUIRE(logits.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("logit " << i);
    CHECK(logits[i] == Approx(want[i]).margin(2e-4).epsilon(2e-4));
  }
}

}  // namespace odmoe
