#include "model/quant_mix.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

using M = QuantMix;

const std::vector<QuantMixInfo> kMixes = {
    {M::kF32, "F32", 0, DType::kF32},
    {M::kF16, "F16", 1, DType::kF16},
    {M::kBF16, "BF16", 32, DType::kBF16},
    {M::kQ8_0, "Q8_0", 7, DType::kQ8_0},
    {M::kQ4_0, "Q4_0", 2, DType::kQ4_0},
    {M::kQ4_1, "Q4_1", 3, DType::kQ4_1},
    {M::kQ5_0, "Q5_0", 8, DType::kQ5_0},
    {M::kQ5_1, "Q5_1", 9, DType::kQ5_1},
    {M::kIQ4_NL, "IQ4_NL", 25, DType::kIQ4_NL},
    {M::kIQ4_XS, "IQ4_XS", 30, DType::kIQ4_XS},
    {M::kMXFP4_MOE, "MXFP4_MOE", 38, DType::kQ8_0},
    {M::kQ2_K, "Q2_K", 10, DType::kQ2_K},
    {M::kQ3_K_S, "Q3_K_S", 11, DType::kQ3_K},
    {M::kQ3_K_M, "Q3_K_M", 12, DType::kQ3_K},
    {M::kQ3_K_L, "Q3_K_L", 13, DType::kQ3_K},
    {M::kQ4_K_S, "Q4_K_S", 14, DType::kQ4_K},
    {M::kQ4_K_M, "Q4_K_M", 15, DType::kQ4_K},
    {M::kQ5_K_S, "Q5_K_S", 16, DType::kQ5_K},
    {M::kQ5_K_M, "Q5_K_M", 17, DType::kQ5_K},
    {M::kQ6_K, "Q6_K", 18, DType::kQ6_K},
};

// ---- The rule table -------------------------------------------------------

using MixSet = uint32_t;
constexpr MixSet Of(M m) { return MixSet{1} << static_cast<int>(m); }
template <typename... Ms>
constexpr MixSet Of(M first, Ms... rest) {
  return Of(first) | Of(rest...);
}
// Mixes whose base type is a float type: every converted tensor gets it, no
// rule applies (llama.cpp applies its rules to quantized targets only).
constexpr MixSet kFloatMixes = Of(M::kF32, M::kF16, M::kBF16);
constexpr MixSet kAllMixes = (MixSet{1} << (static_cast<int>(M::kQ6_K) + 1)) - 1;
constexpr MixSet kQuantized = kAllMixes & ~kFloatMixes;
constexpr MixSet kQuantizedButMxfp4 = kQuantized & ~Of(M::kMXFP4_MOE);

// Which layers a rule is for (layer i of n).
enum class Span {
  kAll,
  kMoreBits,        // i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2
  kFirstEighth,     // i < n/8
  kFirstSixteenth,  // i < n/16
  kFirstTwo,        // i < 2
  kFirstFour,       // i < 4
};
// Which models a rule is for.
enum class Trait {
  kAny,
  kEightExperts,  // n_expert == 8 (Mixtral)
  kNotEightExperts,
  kGqaAtLeast4,  // n_head / n_head_kv >= 4
};

struct MixRule {
  MixSet mixes;
  MixRole role;
  Span span;
  Trait trait;
  DType type;
};

using R = MixRole;
using D = DType;

// First match wins. Order matters only between rules of one role.
const MixRule kMixRules[] = {
    // The LM head (and token embeddings tied to it).
    {Of(M::kQ8_0, M::kMXFP4_MOE), R::kOutput, Span::kAll, Trait::kAny, D::kQ8_0},
    {kQuantized, R::kOutput, Span::kAll, Trait::kAny, D::kQ6_K},

    // MXFP4_MOE: the experts (the rest is its base type, Q8_0).
    {Of(M::kMXFP4_MOE), R::kFfnGate, Span::kAll, Trait::kAny, D::kMXFP4},
    {Of(M::kMXFP4_MOE), R::kFfnUp, Span::kAll, Trait::kAny, D::kMXFP4},
    {Of(M::kMXFP4_MOE), R::kFfnDown, Span::kAll, Trait::kAny, D::kMXFP4},

    // attn_v.
    {kQuantizedButMxfp4, R::kAttnV, Span::kAll, Trait::kEightExperts, D::kQ8_0},
    {Of(M::kQ2_K), R::kAttnV, Span::kAll, Trait::kGqaAtLeast4, D::kQ4_K},
    {Of(M::kQ2_K), R::kAttnV, Span::kAll, Trait::kAny, D::kQ3_K},
    {Of(M::kQ3_K_M), R::kAttnV, Span::kFirstTwo, Trait::kAny, D::kQ5_K},
    {Of(M::kQ3_K_M), R::kAttnV, Span::kAll, Trait::kAny, D::kQ4_K},
    {Of(M::kQ3_K_L), R::kAttnV, Span::kAll, Trait::kAny, D::kQ5_K},
    {Of(M::kIQ4_NL, M::kIQ4_XS), R::kAttnV, Span::kAll, Trait::kGqaAtLeast4, D::kQ5_K},
    {Of(M::kQ4_K_M, M::kQ5_K_M), R::kAttnV, Span::kMoreBits, Trait::kAny, D::kQ6_K},
    {Of(M::kQ4_K_S), R::kAttnV, Span::kFirstFour, Trait::kAny, D::kQ5_K},

    // attn_k.
    {kQuantizedButMxfp4, R::kAttnK, Span::kAll, Trait::kEightExperts, D::kQ8_0},

    // ffn_down (the experts' down projection).
    {Of(M::kQ2_K), R::kFfnDown, Span::kAll, Trait::kAny, D::kQ3_K},
    {Of(M::kQ3_K_M), R::kFfnDown, Span::kFirstSixteenth, Trait::kAny, D::kQ5_K},
    {Of(M::kQ3_K_M), R::kFfnDown, Span::kAll, Trait::kAny, D::kQ4_K},
    {Of(M::kQ3_K_L), R::kFfnDown, Span::kAll, Trait::kAny, D::kQ5_K},
    {Of(M::kQ4_K_M, M::kQ5_K_M), R::kFfnDown, Span::kMoreBits, Trait::kAny, D::kQ6_K},
    {Of(M::kIQ4_NL, M::kIQ4_XS), R::kFfnDown, Span::kFirstEighth, Trait::kAny, D::kQ5_K},
    {Of(M::kQ4_K_S), R::kFfnDown, Span::kFirstEighth, Trait::kAny, D::kQ5_K},

    // attn_output.
    {Of(M::kQ2_K, M::kQ3_K_S, M::kQ3_K_M, M::kIQ4_NL, M::kQ4_K_S, M::kQ4_K_M, M::kIQ4_XS),
     R::kAttnOutput, Span::kAll, Trait::kEightExperts, D::kQ5_K},
    {Of(M::kQ2_K), R::kAttnOutput, Span::kAll, Trait::kNotEightExperts, D::kQ3_K},
    {Of(M::kQ3_K_M), R::kAttnOutput, Span::kAll, Trait::kNotEightExperts, D::kQ4_K},
    {Of(M::kQ3_K_L), R::kAttnOutput, Span::kAll, Trait::kNotEightExperts, D::kQ5_K},
};

// ---- The fallback table ---------------------------------------------------

struct Fallback {
  DType from, to;
};
const Fallback kFallbacks[] = {
    {D::kQ2_K, D::kQ4_0}, {D::kQ3_K, D::kQ4_0}, {D::kQ4_K, D::kQ5_0},
    {D::kQ5_K, D::kQ5_1}, {D::kQ6_K, D::kQ8_0}, {D::kIQ4_XS, D::kIQ4_NL},
};

bool InSpan(Span span, int i, int n) {
  switch (span) {
    case Span::kAll:
      return true;
    case Span::kMoreBits:
      return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    case Span::kFirstEighth:
      return i < n / 8;
    case Span::kFirstSixteenth:
      return i < n / 16;
    case Span::kFirstTwo:
      return i < 2;
    case Span::kFirstFour:
      return i < 4;
  }
  return false;
}

bool HasTrait(Trait trait, const MixModel& m) {
  switch (trait) {
    case Trait::kAny:
      return true;
    case Trait::kEightExperts:
      return m.n_expert == 8;
    case Trait::kNotEightExperts:
      return m.n_expert != 8;
    case Trait::kGqaAtLeast4:
      return m.gqa() >= 4;
  }
  return false;
}

DType RuleType(QuantMix mix, const MixModel& model, const MixTensor& t) {
  const QuantMixInfo& info = MixInfo(mix);
  if (Of(mix) & kFloatMixes) return info.base;
  const MixRole role =
      t.role == MixRole::kTokenEmbd && model.output_tied ? MixRole::kOutput : t.role;
  for (const MixRule& r : kMixRules) {
    if ((r.mixes & Of(mix)) && r.role == role && InSpan(r.span, t.layer, model.n_layer) &&
        HasTrait(r.trait, model)) {
      return r.type;
    }
  }
  return info.base;
}

}  // namespace

const std::vector<QuantMixInfo>& QuantMixes() { return kMixes; }

const QuantMixInfo& MixInfo(QuantMix mix) { return kMixes[static_cast<size_t>(mix)]; }

MixModel MixModelOf(const ModelConfig& c) {
  return {c.n_layer, c.n_expert, c.n_head, c.n_head_kv, c.output_tied};
}

std::string QuantRecipe::Name() const {
  if (pure) return absl::StrCat("pure ", ToAbsl(Traits(type).name));
  return std::string(MixInfo(mix).name);
}

uint32_t QuantRecipe::FileType() const {
  if (!pure) return MixInfo(mix).file_type;
  switch (type) {  // the mix named after the type
    case DType::kQ2_K:
      return MixInfo(M::kQ2_K).file_type;
    case DType::kQ3_K:
      return MixInfo(M::kQ3_K_M).file_type;
    case DType::kQ4_K:
      return MixInfo(M::kQ4_K_M).file_type;
    case DType::kQ5_K:
      return MixInfo(M::kQ5_K_M).file_type;
    case DType::kMXFP4:
      return MixInfo(M::kMXFP4_MOE).file_type;
    default:
      break;
  }
  for (const QuantMixInfo& m : kMixes) {
    if (m.base == type && m.mix != M::kMXFP4_MOE) return m.file_type;
  }
  return 0;
}

std::optional<QuantRecipe> ParseQuantRecipe(std::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(absl::string_view(name.data(), name.size()));
  for (const QuantMixInfo& m : kMixes) {
    if (m.name == upper) return QuantRecipe::Mix(m.mix);
  }
  return std::nullopt;
}

std::string QuantMixNames() {
  std::string out;
  for (const QuantMixInfo& m : kMixes)
    absl::StrAppend(&out, out.empty() ? "" : ", ", ToAbsl(m.name));
  return out;
}

DType FallbackType(DType type) {
  for (const Fallback& f : kFallbacks) {
    if (f.from == type) return f.to;
  }
  return type == DType::kF32 || type == DType::kF16 ? type : DType::kF16;
}

TypeChoice ChooseType(const QuantRecipe& recipe, const MixModel& model, const MixTensor& t) {
  TypeChoice c;
  if (t.role == MixRole::kKept) return c;
  c.convert = true;
  c.wanted = recipe.pure ? recipe.type : RuleType(recipe.mix, model, t);
  c.type = c.wanted;
  while (!RowSizeValid(c.type, t.row_length)) c.type = FallbackType(c.type);
  return c;
}

std::vector<NamedMixTensor> MixTensorsOf(const ArchDesc& arch, const ModelConfig& c) {
  std::vector<NamedMixTensor> out;
  auto add = [&](TensorRole role, MixRole mix_role, int64_t row, int layer = -1, int e = -1) {
    out.push_back({TensorName(arch, role, layer, e), MixTensor{mix_role, layer, row}});
  };
  add(TensorRole::kTokenEmbd, MixRole::kTokenEmbd, c.n_embd);
  add(TensorRole::kOutputNorm, MixRole::kKept, c.n_embd);
  if (!c.output_tied) add(TensorRole::kOutput, MixRole::kOutput, c.n_embd);
  for (int l = 0; l < c.n_layer; ++l) {
    add(TensorRole::kAttnNorm, MixRole::kKept, c.n_embd, l);
    add(TensorRole::kAttnQ, MixRole::kAttnQ, c.n_embd, l);
    add(TensorRole::kAttnK, MixRole::kAttnK, c.n_embd, l);
    add(TensorRole::kAttnV, MixRole::kAttnV, c.n_embd, l);
    add(TensorRole::kAttnOutput, MixRole::kAttnOutput, c.q_width(), l);
    add(TensorRole::kFfnNorm, MixRole::kKept, c.n_embd, l);
    add(TensorRole::kFfnGateInp, MixRole::kKept, c.n_embd, l);
    // Gates and norms stay f32 whatever their shape (the shared expert's gate
    // may be stored as [n_embd, 1]); the shared expert's matrices are
    // quantized like other dense matrices.
    if (c.qk_norm != QkNorm::kNone) {
      add(TensorRole::kAttnQNorm, MixRole::kKept, 0, l);
      add(TensorRole::kAttnKNorm, MixRole::kKept, 0, l);
    }
    if (c.n_ff_shared > 0) add(TensorRole::kFfnGateInpShexp, MixRole::kKept, c.n_embd, l);
    // Gated DeltaNet's conv taps stay f32 (rows of conv_kernel floats, as
    // llama.cpp keeps them); its projections are dense matrices (kOther).
    if (c.is_recurrent(l)) add(TensorRole::kSsmConv1d, MixRole::kKept, 0, l);
    if (c.expert_bias) {  // 2-D [n_ff or n_embd, n_expert], f32 like every bias
      add(TensorRole::kFfnGateExpsBias, MixRole::kKept, c.n_ff, l);
      add(TensorRole::kFfnUpExpsBias, MixRole::kKept, c.n_ff, l);
      add(TensorRole::kFfnDownExpsBias, MixRole::kKept, c.n_embd, l);
    }
    if (c.expert_layout == ExpertLayout::kStacked) {
      add(TensorRole::kFfnGateExps, MixRole::kFfnGate, c.n_embd, l);
      add(TensorRole::kFfnUpExps, MixRole::kFfnUp, c.n_embd, l);
      add(TensorRole::kFfnDownExps, MixRole::kFfnDown, c.n_ff, l);
    } else if (c.expert_layout == ExpertLayout::kStackedGateUp) {
      add(TensorRole::kFfnGateUpExps, MixRole::kFfnUp, c.n_embd, l);
      add(TensorRole::kFfnDownExps, MixRole::kFfnDown, c.n_ff, l);
    } else {
      for (int e = 0; e < c.n_expert; ++e) {
        add(TensorRole::kFfnGateExpert, MixRole::kFfnGate, c.n_embd, l, e);
        add(TensorRole::kFfnUpExpert, MixRole::kFfnUp, c.n_embd, l, e);
        add(TensorRole::kFfnDownExpert, MixRole::kFfnDown, c.n_ff, l, e);
      }
    }
  }
  return out;
}

}  // namespace odmoe
