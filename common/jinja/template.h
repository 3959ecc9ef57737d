// A compiled Jinja template (a model's `tokenizer.chat_template`), rendered
// byte for byte as Python's jinja2 renders it in the environment Hugging Face
// transformers' apply_chat_template configures: ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks and the loop controls (break/continue);
// the globals raise_exception(message) and strftime_now(format); transformers'
// own tojson filter (json.dumps with ensure_ascii=False, optional indent,
// separators and sort_keys, keys in insertion order); its {% generation %} tag.
//
// What the engine runs: text with {{ }}, {% %}, {# #}, whitespace control
// (-/+), {% raw %}; if/elif/else; for (tuple targets, `if` filters, else,
// recursive, the loop object: index, index0, revindex(0), first, last, length,
// depth(0), previtem, nextitem, cycle); set (also ns.attr, tuples, block set
// with filters); macro and call blocks (defaults, keywords, caller); filter
// and with blocks; the operators, tests, filters and str/dict/list methods
// listed in docs/models.md ("Chat templates"). Anything else (include,
// extends, import, *args in calls, an unknown filter or test) is
// INVALID_ARGUMENT naming the template line; a sandbox violation (list.append,
// dict.update) fails as jinja2's SecurityError does.
//
// Bounded: a render stops with INVALID_ARGUMENT past RenderLimits (output
// bytes, call depth, steps), so a template can neither hang nor exhaust memory.
//
//   ODMOE_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Compile(text));
//   nlohmann::ordered_json context = {{"messages", messages}, {"add_generation_prompt", true},
//                             {"bos_token", "<s>"}, {"eos_token", "</s>"}};
//   ODMOE_ASSIGN_OR_RETURN(std::string prompt, t.Render(context));
//   // errors: "chat template line 12: unknown filter 'foo'",
//   //         "chat template line 3: raise_exception: Conversation roles must alternate"
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "jinja/interpreter.h"
#include "nlohmann/json.hpp"

namespace odmoe::jinja {

struct RenderOptions {
  RenderLimits limits;
  /// strftime_now(format): the current local time by default (tests fix it).
  std::function<std::string(const std::string& format)> strftime_now;
};

class Template {
 public:
  /// Lexes and parses `source`; errors are INVALID_ARGUMENT "<name> line N: ...".
  static absl::StatusOr<Template> Compile(std::string_view source,
                                          std::string name = "chat template");

  /// Renders with `context` (a JSON object: its keys are the template's
  /// variables, besides the globals). Ordered JSON: objects keep the order
  /// the client sent, as Python's json.loads does (tojson prints that order).
  /// Errors name the template line.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                                     const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const Node> root_;
};

/// strftime of the current local time (what strftime_now returns by default).
std::string StrftimeNow(const std::string& format);

/// How deeply arrays and objects nest in `j` (a scalar: 0), without
/// recursion: callers check a client's JSON with it before walking it.
/// Render refuses a context deeper than kMaxValueDepth.
template <typename Json>
size_t JsonDepth(const Json& j) {
  size_t deepest = 0;
  std::vector<std::pair<const Json*, size_t>> stack = {{&j, 0}};
  while (!stack.empty()) {
    auto [v, d] = stack.back();
    stack.pop_back();
    deepest = std::max(deepest, d);
    if (v->is_array() || v->is_object()) {
      for (const auto& child : *v) stack.emplace_back(&child, d + 1);
    }
  }
  return deepest;
}

}  // namespace odmoe::jinja
