// How each model family writes a tool call, one table row per syntax, and
// which syntax a model uses (recognised from its chat template, else from the
// special tokens of its vocabulary). The parser (tool_call_parser.h) and the
// grammar (tool_call_grammar.h) read only this table; a new family is a new
// row (docs/tool_calls.md lists them with an example each):
//
//   hermes         <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>   (Hermes, Qwen2.5,
//   Qwen3) qwen3_coder
//   <tool_call>\n<function=N>\n<parameter=P>\nV\n</parameter>\n</function>\n</tool_call> mistral
//   [TOOL_CALLS][{"name": N, "arguments": {...}}, ...] mistral_args   [TOOL_CALLS]N[ARGS]{...}
//   (tokenizer v11+; [CALL_ID]x before [ARGS] is skipped) llama3         {"name": N, "parameters":
//   {...}}, optionally after <|python_tag|>; ';' between calls harmony        <|channel|>commentary
//   to=functions.N <|constrain|>json<|message|>{...}<|call|> deepseek_v3
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   deepseek_v31
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   glm45          <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>
//   minimax_m2
//   <minimax:tool_call>\n<invoke name="N">\n<parameter name="K">V</parameter>\n</invoke>\n</minimax:tool_call>
//   gemma4         <|tool_call>call:N{key:<|"|>text<|"|>,n:3}<tool_call|>
//   kimi_k2
//   <|tool_calls_section_begin|><|tool_call_begin|>functions.N:0<|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
//
// A model whose template and vocabulary show none of these gets Hermes, the
// most widely trained syntax (ToolCallSyntaxFor): the generic fallback.
//
//   const std::optional<std::string> tmpl = gguf.GetString("tokenizer.chat_template");
//   ToolCallSyntax s = ToolCallSyntaxFor(tmpl.value_or(""), [&tok](std::string_view text) {
//     return tok.TokenId(text) >= 0;
//   });
//   const ToolCallSyntaxSpec& spec = ToolCallSyntaxSpecOf(s);   // markers, shapes
//   ODMOE_LOG_INFO("tool calls: {}", spec.name);
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace odmoe {

enum class ToolCallSyntax {
  kHermes,
  kQwen3Coder,
  kMistral,
  kMistralArgs,
  kLlama3,
  kHarmony,
  kDeepSeekV3,
  kDeepSeekV31,
  kGlm45,
  kKimiK2,
  kMiniMaxM2,
  kGemma4,
};

/// Literal pieces matched in order; any run of up to kToolCallPatternMaxSpace
/// whitespace bytes may stand between two pieces. `consume` false: the
/// matched text is also the start of what follows (llama3's `{"name"`).
struct ToolCallPattern {
  std::vector<std::string_view> pieces{};
  bool consume = true;
};
inline constexpr size_t kToolCallPatternMaxSpace = 16;

/// Where a call's name is.
enum class ToolCallNameShape {
  kJsonMember,  // a JSON object {"name": N, "arguments"|"parameters": {...}}
  kText,        // text after call_begin, up to one of `name_stops`
};

/// How the arguments of a kText call are written.
enum class ToolCallArgsShape {
  kJson,    // a JSON object
  kTagged,  // key/value tags (ToolCallTags), values typed by the tool's schema
  kGemma,   // Gemma 4's object notation: bare keys, <|"|> strings (gemma_call_args.h)
};

/// kTagged arguments: key_open K key_close [value_open] V value_close, repeated,
/// then args_close (or, when empty, whatever is not key_open).
struct ToolCallTags {
  std::string_view key_open{};
  std::string_view key_close{};
  std::string_view value_open{};
  std::string_view value_close{};
  std::string_view args_close{};
  bool strip_newlines = false;  // drop one '\n' at each end of V (qwen3_coder)
  // The grammar's canonical text: key_open K after_key V after_value.
  std::string_view grammar_after_key{};
  std::string_view grammar_after_value{};
};

/// The id a reply gives each call (tool_call_parser.h ToolCallId).
enum class ToolCallIdStyle {
  kOpenAi,   // "call_" + 24 letters and digits
  kMistral,  // 9 letters and digits (Mistral's templates refuse other ids)
  kKimi,     // "functions.NAME:INDEX" (what Kimi-K2's template writes back)
};

struct ToolCallSyntaxSpec {
  ToolCallSyntax syntax{};
  std::string_view name{};  // "hermes", as in the table above and in logs
  /// Recognition: any group whose markers all appear in the chat template;
  /// else any of `vocabulary_tokens` is a token of the vocabulary.
  std::vector<std::vector<std::string_view>> template_markers{};
  std::vector<std::string_view> vocabulary_tokens{};

  // Parsing. Outside calls the text is content. With a section, calls come
  // inside section_begin ... section_end (or the reply's end).
  std::vector<ToolCallPattern> section_begin{};
  std::string_view section_end{};
  std::string_view call_separator{};  // besides whitespace, between calls ("," ";")
  std::vector<ToolCallPattern> call_begin{};
  ToolCallNameShape name_shape = ToolCallNameShape::kText;
  std::string_view name_stops{};       // kText: bytes that end the name
  std::string_view name_prefix{};      // kText: dropped from the name ("functions.")
  bool name_index_suffix = false;      // kText: a ":N" after the name is dropped
  std::string_view args_begin{};       // kText: between the name and the arguments
  bool args_begin_after_text = false;  // other text may come before args_begin
  ToolCallArgsShape args_shape = ToolCallArgsShape::kJson;
  ToolCallTags tags{};         // kTagged
  ToolCallPattern call_end{};  // empty: the call ends with its arguments
  ToolCallIdStyle id_style = ToolCallIdStyle::kOpenAi;

  // The canonical text the grammar forces (tool_call_grammar.h), literal:
  // section_open calls... section_close, each call
  // call_open NAME name_close ARGS call_close, calls joined by separator.
  std::string_view grammar_section_open{};
  std::string_view grammar_section_close{};
  std::string_view grammar_separator{};
  std::string_view grammar_call_open{};
  std::string_view grammar_name_close{};
  std::string_view grammar_call_close{};
  bool grammar_name_index = false;  // kimi_k2: ":" DIGITS after the name
};

/// The row of `syntax`.
const ToolCallSyntaxSpec& ToolCallSyntaxSpecOf(ToolCallSyntax syntax);
/// Every row, in recognition order.
const std::vector<ToolCallSyntaxSpec>& ToolCallSyntaxSpecs();

/// True when `text` is a token of the model's vocabulary.
using HasTokenFn = std::function<bool(std::string_view text)>;

/// The syntax the template (first) or the vocabulary shows; nullopt when
/// neither shows one (a template without tool support, a plain vocabulary).
std::optional<ToolCallSyntax> DetectToolCallSyntax(std::string_view chat_template,
                                                   const HasTokenFn& has_token = {});

/// DetectToolCallSyntax, Hermes when it finds nothing (the generic fallback).
ToolCallSyntax ToolCallSyntaxFor(std::string_view chat_template, const HasTokenFn& has_token = {});

/// Every literal a syntax's calls are written with (section and call
/// markers, the vocabulary tokens it is recognised by): a control token whose
/// text is one of them belongs to a call (reply_stream.h, tool_call_grammar.h).
std::vector<std::string> ToolCallMarkerTexts(const ToolCallSyntaxSpec& spec);
/// The markers of `syntax` that are control tokens of the model's vocabulary
/// (`is_control`) and can be named in a grammar (`<...>` without spaces).
std::vector<std::string> ToolCallControlMarkers(ToolCallSyntax syntax, const HasTokenFn& is_control);

/// "hermes", ... (the table's names).
std::string_view ToolCallSyntaxName(ToolCallSyntax syntax);
/// The syntax named `name` (a config or flag value), nullopt if none.
std::optional<ToolCallSyntax> ToolCallSyntaxNamed(std::string_view name);

}  // namespace odmoe
