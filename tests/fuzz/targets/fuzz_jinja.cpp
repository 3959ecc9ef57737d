// Fuzz target: the Jinja engine (common/jinja/template.h). The input is a
// template, compiled and rendered with a chat-shaped context under small
// limits. Errors are fine; a crash, hang or sanitizer report is not.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u é"},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "c",
                  "type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5]}}}]},
                 {"role": "tool", "content": "r", "tool_call_id": "c"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "documents": null, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  auto t = odmoe::jinja::Template::Compile(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) return 0;
  odmoe::jinja::RenderOptions options;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_steps = 100000;
  options.strftime_now = [](const std::string&) { return std::string("2026-11-26"); };
  auto out = t->Render(context, options);
  if (out.ok()) odmoe::fuzz::Consume(out->size());
  return 0;
}
