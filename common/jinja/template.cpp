#include "jinja/template.h"

#include <algorithm>
#include <ctime>
#include <vector>

#include "absl/strings/str_cat.h"

namespace odmoe::jinja {
namespace {

absl::Status Named(const absl::Status& st, const std::string& name) {
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat(name, " ", st.message()));
}

}  // namespace

std::string StrftimeNow(const std::string& format) {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &local);
  return std::string(buf, n);
}

absl::StatusOr<Template> Template::Compile(std::string_view source, std::string name) {
  auto tokens = Lex(source);
  if (!tokens.ok()) return Named(tokens.status(), name);
  auto root = Parse(*tokens);
  if (!root.ok()) return Named(root.status(), name);
  Template t;
  t.name_ = std::move(name);
  t.root_ = std::shared_ptr<const Node>(std::move(*root));
  return t;
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context,
                                             const RenderOptions& options) const {
  if (!context.is_object())
    return absl::InvalidArgumentError(absl::StrCat(name_, ": the context must be an object"));
  if (JsonDepth(context) > static_cast<size_t>(kMaxValueDepth)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": the context nests deeper than ", kMaxValueDepth));
  }
  Interpreter in(options.limits);
  AddGlobals(in.globals().get(), options.strftime_now ? options.strftime_now : StrftimeNow);
  for (auto it = context.begin(); it != context.end(); ++it) {
    in.globals()->Set(it.key(), Value::FromJson(it.value()));
  }
  std::string out;
  absl::Status st = in.Run(*root_, &out);
  if (!st.ok()) return Named(st, name_);
  return out;
}

}  // namespace odmoe::jinja
