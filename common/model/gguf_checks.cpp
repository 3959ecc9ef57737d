#include "model/gguf_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/status_macros.h"
#include "util/string_view.h"

namespace odmoe {

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::StatusOr<int> ReadInt(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi,
                            int64_t fallback) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) {
    if (fallback >= 0) return static_cast<int>(fallback);
    return Invalid(f.path(), absl::StrCat("missing required metadata key '", key, "'"));
  }
  std::optional<int64_t> n = v->AsInt();
  if (!n || *n < lo || *n > hi) {
    return Invalid(f.path(), absl::StrCat("metadata key '", key, "' must be an integer in [", lo,
                                          ", ", hi, "]"));
  }
  return static_cast<int>(*n);
}

absl::StatusOr<float> ReadFloat(const GgufFile& f, const std::string& key, double lo, double hi,
                                double fallback) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return static_cast<float>(fallback);
  std::optional<double> x = v->AsFloat();
  if (!x || !std::isfinite(*x) || *x < lo || *x > hi) {
    return Invalid(f.path(), absl::StrCat("metadata key '", key, "' must be a number in [", lo,
                                          ", ", hi, "]"));
  }
  return static_cast<float>(*x);
}

std::string ShapeString(const std::vector<int64_t>& ne) {
  return absl::StrCat("[", absl::StrJoin(ne, ", "), "]");
}

absl::StatusOr<TensorView> Expect(const GgufFile& f, const std::string& name,
                                  const std::vector<int64_t>& ne, bool must_be_f32) {
  ODMOE_ASSIGN_OR_RETURN(TensorView t, f.Tensor(name));
  bool match = t.n_dims == static_cast<int>(ne.size());
  for (size_t i = 0; match && i < ne.size(); ++i) match = t.ne[i] == ne[i];
  if (!match) {
    std::vector<int64_t> got(t.ne.begin(), t.ne.begin() + t.n_dims);
    return Invalid(f.path(), absl::StrCat("tensor '", name, "' has shape ", ShapeString(got),
                                          ", expected ", ShapeString(ne)));
  }
  if (must_be_f32 && t.type != DType::kF32) {
    return Invalid(f.path(), absl::StrCat("tensor '", name, "' must be f32, found ",
                                          ToAbsl(Traits(t.type).name)));
  }
  return t;
}

TensorView RowOf(const TensorView& t, int64_t i) {
  TensorView r;
  r.name = absl::StrCat(t.name, "[", i, "]");
  r.type = t.type;
  r.n_dims = 1;
  r.ne = {t.ne[0], 1, 1, 1};
  r.data = t.Row(i);
  return r;
}

}  // namespace odmoe
