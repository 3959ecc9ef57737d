#include "main_node/tool_call_syntax.h"

#include <algorithm>

namespace odmoe {
namespace {

using Shape = ToolCallNameShape;
using Args = ToolCallArgsShape;

// Recognition order: the most specific markers first (Qwen3-Coder's and
// GLM's templates also hold "<tool_call>"; DeepSeek-V3's holds V3.1's markers).
std::vector<ToolCallSyntaxSpec> MakeSpecs() {
  std::vector<ToolCallSyntaxSpec> specs;
  specs.push_back({
      .syntax = ToolCallSyntax::kHarmony,
      .name = "harmony",
      .template_markers = {{"<|channel|>", "<|call|>"}, {"<|channel|>", "<|constrain|>"}},
      .vocabulary_tokens = {"<|call|>"},
      .call_begin = {{{"<|start|>assistant", "<|channel|>commentary", "to=functions."}},
                     {{"<|channel|>commentary", "to=functions."}},
                     {{"<|start|>assistant", "to=functions."}}},
      .name_stops = " \t\n<",
      .args_begin = "<|message|>",
      .args_begin_after_text = true,
      .call_end = {{"<|call|>"}},
      .grammar_separator = "<|start|>assistant",
      .grammar_call_open = "<|channel|>commentary to=functions.",
      .grammar_name_close = " <|constrain|>json<|message|>",
      .grammar_call_close = "<|call|>",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kKimiK2,
      .name = "kimi_k2",
      .template_markers = {{"<|tool_calls_section_begin|>"}},
      .vocabulary_tokens = {"<|tool_calls_section_begin|>"},
      .section_begin = {{{"<|tool_calls_section_begin|>"}}},
      .section_end = "<|tool_calls_section_end|>",
      .call_begin = {{{"<|tool_call_begin|>"}}},
      .name_stops = "<",
      .name_prefix = "functions.",
      .name_index_suffix = true,
      .args_begin = "<|tool_call_argument_begin|>",
      .call_end = {{"<|tool_call_end|>"}},
      .id_style = ToolCallIdStyle::kKimi,
      .grammar_section_open = "<|tool_calls_section_begin|>",
      .grammar_section_close = "<|tool_calls_section_end|>",
      .grammar_call_open = "<|tool_call_begin|>functions.",
      .grammar_name_close = "<|tool_call_argument_begin|>",
      .grammar_call_close = "<|tool_call_end|>",
      .grammar_name_index = true,
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kDeepSeekV3,
      .name = "deepseek_v3",
      .template_markers = {{"<｜tool▁calls▁begin｜>", "```json"}},
      .section_begin = {{{"<｜tool▁calls▁begin｜>"}}},
      .section_end = "<｜tool▁calls▁end｜>",
      .call_begin = {{{"<｜tool▁call▁begin｜>", "function", "<｜tool▁sep｜>"}}},
      .name_stops = "\n`",
      .args_begin = "```json",
      .call_end = {{"```", "<｜tool▁call▁end｜>"}},
      .grammar_section_open = "<｜tool▁calls▁begin｜>",
      .grammar_section_close = "<｜tool▁calls▁end｜>",
      .grammar_separator = "\n",
      .grammar_call_open = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
      .grammar_name_close = "\n```json\n",
      .grammar_call_close = "\n```<｜tool▁call▁end｜>",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kDeepSeekV31,
      .name = "deepseek_v31",
      .template_markers = {{"<｜tool▁calls▁begin｜>"}},
      .vocabulary_tokens = {"<｜tool▁calls▁begin｜>"},
      .section_begin = {{{"<｜tool▁calls▁begin｜>"}}},
      .section_end = "<｜tool▁calls▁end｜>",
      .call_begin = {{{"<｜tool▁call▁begin｜>"}}},
      .name_stops = "<\n",
      .args_begin = "<｜tool▁sep｜>",
      .call_end = {{"<｜tool▁call▁end｜>"}},
      .grammar_section_open = "<｜tool▁calls▁begin｜>",
      .grammar_section_close = "<｜tool▁calls▁end｜>",
      .grammar_call_open = "<｜tool▁call▁begin｜>",
      .grammar_name_close = "<｜tool▁sep｜>",
      .grammar_call_close = "<｜tool▁call▁end｜>",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kQwen3Coder,
      .name = "qwen3_coder",
      .template_markers = {{"<function=", "<parameter="}},
      .call_begin = {{{"<tool_call>", "<function="}}},
      .name_stops = ">\n",
      .args_begin = ">",
      .args_shape = Args::kTagged,
      .tags = {.key_open = "<parameter=",
               .key_close = ">",
               .value_close = "</parameter>",
               .args_close = "</function>",
               .strip_newlines = true,
               .grammar_after_key = ">\n",
               .grammar_after_value = "\n</parameter>\n"},
      .call_end = {{"</tool_call>"}},
      .grammar_separator = "\n",
      .grammar_call_open = "<tool_call>\n<function=",
      .grammar_name_close = ">\n",
      .grammar_call_close = "</function>\n</tool_call>",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kGlm45,
      .name = "glm45",
      .template_markers = {{"<arg_key>"}},
      .vocabulary_tokens = {"<arg_key>"},
      .call_begin = {{{"<tool_call>"}}},
      .name_stops = "\n<",
      .args_shape = Args::kTagged,
      .tags = {.key_open = "<arg_key>",
               .key_close = "</arg_key>",
               .value_open = "<arg_value>",
               .value_close = "</arg_value>",
               .grammar_after_key = "</arg_key>\n<arg_value>",
               .grammar_after_value = "</arg_value>\n"},
      .call_end = {{"</tool_call>"}},
      .grammar_separator = "\n",
      .grammar_call_open = "<tool_call>",
      .grammar_name_close = "\n",
      .grammar_call_close = "</tool_call>",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kMiniMaxM2,
      .name = "minimax_m2",
      .template_markers = {{"<minimax:tool_call>", "<invoke name="}},
      .vocabulary_tokens = {"<minimax:tool_call>"},
      .section_begin = {{{"<minimax:tool_call>"}}},
      .section_end = "</minimax:tool_call>",
      .call_begin = {{{"<invoke name=\""}}},
      .name_stops = "\"\n<",
      .args_begin = "\">",
      .args_shape = Args::kTagged,
      .tags = {.key_open = "<parameter name=\"",
               .key_close = "\">",
               .value_close = "</parameter>",
               .args_close = "</invoke>",
               .grammar_after_key = "\">",
               .grammar_after_value = "</parameter>\n"},
      .grammar_section_open = "<minimax:tool_call>\n",
      .grammar_section_close = "</minimax:tool_call>",
      .grammar_separator = "",
      .grammar_call_open = "<invoke name=\"",
      .grammar_name_close = "\">\n",
      .grammar_call_close = "</invoke>\n",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kGemma4,
      .name = "gemma4",
      .template_markers = {{"<|tool_call>call:"}},
      .vocabulary_tokens = {"<tool_call|>"},
      .call_begin = {{{"<|tool_call>", "call:"}}},
      .name_stops = "{ \n<",
      .args_shape = Args::kGemma,
      .call_end = {{"<tool_call|>"}},
      .grammar_call_open = "<|tool_call>call:",
      .grammar_call_close = "<tool_call|>",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kMistralArgs,
      .name = "mistral_args",
      .template_markers = {{"[TOOL_CALLS]", "[ARGS]"}},
      .vocabulary_tokens = {"[ARGS]"},
      .call_begin = {{{"[TOOL_CALLS]"}}},
      .name_stops = "[ \n",
      .args_begin = "[ARGS]",
      .args_begin_after_text = true,
      .id_style = ToolCallIdStyle::kMistral,
      .grammar_call_open = "[TOOL_CALLS]",
      .grammar_name_close = "[ARGS]",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kMistral,
      .name = "mistral",
      .template_markers = {{"[TOOL_CALLS]"}},
      .vocabulary_tokens = {"[TOOL_CALLS]"},
      .section_begin = {{{"[TOOL_CALLS]", "["}}},
      .section_end = "]",
      .call_separator = ",",
      .call_begin = {{{"{"}, /*consume=*/false}},
      .name_shape = Shape::kJsonMember,
      .id_style = ToolCallIdStyle::kMistral,
      .grammar_section_open = "[TOOL_CALLS][",
      .grammar_section_close = "]",
      .grammar_separator = ", ",
      .grammar_call_open = "{\"name\": \"",
      .grammar_name_close = "\", \"arguments\": ",
      .grammar_call_close = "}",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kLlama3,
      .name = "llama3",
      .template_markers = {{"<|python_tag|>"}, {"<|start_header_id|>", "\"parameters\""}},
      .vocabulary_tokens = {"<|python_tag|>"},
      .call_separator = ";",
      .call_begin = {{{"<|python_tag|>"}},
                     {{"{", "\"name\""}, /*consume=*/false},
                     {{"{", "\"type\""}, /*consume=*/false}},
      .name_shape = Shape::kJsonMember,
      .grammar_separator = "; ",
      .grammar_call_open = "{\"name\": \"",
      .grammar_name_close = "\", \"parameters\": ",
      .grammar_call_close = "}",
  });
  specs.push_back({
      .syntax = ToolCallSyntax::kHermes,
      .name = "hermes",
      .template_markers = {{"<tool_call>"}},
      .vocabulary_tokens = {"<tool_call>"},
      .call_begin = {{{"<tool_call>"}}},
      .name_shape = Shape::kJsonMember,
      .call_end = {{"</tool_call>"}},
      .grammar_separator = "\n",
      .grammar_call_open = "<tool_call>\n{\"name\": \"",
      .grammar_name_close = "\", \"arguments\": ",
      .grammar_call_close = "}\n</tool_call>",
  });
  return specs;
}

}  // namespace

const std::vector<ToolCallSyntaxSpec>& ToolCallSyntaxSpecs() {
  static const std::vector<ToolCallSyntaxSpec> specs = MakeSpecs();
  return specs;
}

const ToolCallSyntaxSpec& ToolCallSyntaxSpecOf(ToolCallSyntax syntax) {
  for (const ToolCallSyntaxSpec& spec : ToolCallSyntaxSpecs()) {
    if (spec.syntax == syntax) return spec;
  }
  return ToolCallSyntaxSpecs().back();  // unreachable: every enumerator has a row
}

std::optional<ToolCallSyntax> DetectToolCallSyntax(std::string_view chat_template,
                                                   const HasTokenFn& has_token) {
  for (const ToolCallSyntaxSpec& spec : ToolCallSyntaxSpecs()) {
    for (const auto& group : spec.template_markers) {
      bool all = !group.empty();
      for (std::string_view marker : group)
        all = all && chat_template.find(marker) != std::string_view::npos;
      if (all) return spec.syntax;
    }
  }
  if (!has_token) return std::nullopt;
  for (const ToolCallSyntaxSpec& spec : ToolCallSyntaxSpecs()) {
    for (std::string_view token : spec.vocabulary_tokens) {
      if (has_token(token)) return spec.syntax;
    }
  }
  return std::nullopt;
}

ToolCallSyntax ToolCallSyntaxFor(std::string_view chat_template, const HasTokenFn& has_token) {
  return DetectToolCallSyntax(chat_template, has_token).value_or(ToolCallSyntax::kHermes);
}

std::string_view ToolCallSyntaxName(ToolCallSyntax syntax) {
  return ToolCallSyntaxSpecOf(syntax).name;
}

std::optional<ToolCallSyntax> ToolCallSyntaxNamed(std::string_view name) {
  for (const ToolCallSyntaxSpec& spec : ToolCallSyntaxSpecs()) {
    if (spec.name == name) return spec.syntax;
  }
  return std::nullopt;
}

std::vector<std::string> ToolCallMarkerTexts(const ToolCallSyntaxSpec& spec) {
  std::vector<std::string> out;
  auto add = [&out](std::string_view s) {
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.emplace_back(s);
  };
  auto add_patterns = [&](const std::vector<ToolCallPattern>& ps) {
    for (const ToolCallPattern& p : ps) {
      for (std::string_view piece : p.pieces) add(piece);
    }
  };
  add_patterns(spec.section_begin);
  add_patterns(spec.call_begin);
  add_patterns({spec.call_end});
  add(spec.section_end);
  add(spec.args_begin);
  add(spec.tags.key_open);
  add(spec.tags.key_close);
  add(spec.tags.value_open);
  add(spec.tags.value_close);
  for (std::string_view t : spec.vocabulary_tokens) add(t);
  // The special-token-shaped pieces ("<|channel|>", "<｜tool▁sep｜>") of the
  // canonical text a grammar writes, which the patterns may hold only as part
  // of a longer literal ("<|channel|>commentary").
  for (std::string_view text :
       {spec.grammar_section_open, spec.grammar_section_close, spec.grammar_separator,
        spec.grammar_call_open, spec.grammar_name_close, spec.grammar_call_close}) {
    for (size_t open = text.find('<'); open != std::string_view::npos;
         open = text.find('<', open + 1)) {
      const size_t close = text.find('>', open);
      if (close == std::string_view::npos) break;
      const std::string_view token = text.substr(open, close - open + 1);
      if (token.find_first_of(" \t\n<", 1) == std::string_view::npos) add(token);
    }
  }
  return out;
}

std::vector<std::string> ToolCallControlMarkers(ToolCallSyntax syntax,
                                                const HasTokenFn& is_control) {
  std::vector<std::string> out;
  if (!is_control) return out;
  for (std::string& m : ToolCallMarkerTexts(ToolCallSyntaxSpecOf(syntax))) {
    const bool nameable = m.size() >= 3 && m.front() == '<' && m.back() == '>' &&
                          m.find_first_of(" \t\n\"") == std::string::npos &&
                          m.find('>') == m.size() - 1;
    if (nameable && is_control(m)) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace odmoe
