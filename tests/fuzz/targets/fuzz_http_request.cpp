// Fuzz target: the HTTP API's request parsing and validation. The input is
// parsed as JSON as the server does (ParseRequestJson: strict) and run through
// both endpoints' body parsers, then the chat body is rendered with each
// tiny model's chat template (the Jinja engine), and the output's form (tools,
// response_format, json_schema, grammar) compiled to its grammar in two tool-call
// syntaxes; every outcome must be a status, never an exception or a crash
// (main_node/http_request.h, main_node/chat_template.h, main_node/output_grammar.h).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_models.h"
#include "grammar/grammar.h"
#include "main_node/chat_template.h"
#include "main_node/http_request.h"
#include "main_node/output_grammar.h"
#include "nlohmann/json.hpp"

namespace {

const odmoe::Tokenizer& Tok() {
  static const odmoe::fuzz::OpenedModel model = odmoe::fuzz::Open("models/tiny-mixtral-f16.gguf");
  return *model.tokenizer;
}

// The chat templates of the tiny models, each with its file's tokenizer, as
// the server compiles them (http_api.cpp).
const std::vector<odmoe::ChatFormat>& Formats() {
  static std::vector<std::unique_ptr<odmoe::Tokenizer>> toks;
  static const std::vector<odmoe::ChatFormat> formats = [] {
    std::vector<odmoe::ChatFormat> v;
    for (const char* file :
         {"models/tiny-mixtral-f16.gguf", "tests/data/arch/tiny-qwen3moe.gguf",
          "tests/data/arch/tiny-qwen2moe.gguf", "tests/data/arch/tiny-olmoe.gguf",
          "tests/data/arch/tiny-deepseek2.gguf", "tests/data/arch/tiny-gpt-oss.gguf"}) {
      odmoe::fuzz::OpenedModel m = odmoe::fuzz::Open(file);
      const odmoe::Tokenizer& tok = *m.tokenizer;
      auto text = [&tok](int32_t id) {
        return id < 0 || id >= tok.n_vocab() ? std::string() : tok.vocab().tokens[id];
      };
      const odmoe::ChatVocab vocab{text(tok.bos_id()), text(tok.eos_id()),
                                   [&tok](std::string_view s) { return tok.TokenId(s); }};
      v.push_back(
          odmoe::CompileChatFormat(m.gguf->GetString("tokenizer.chat_template"), vocab).value());
      toks.push_back(std::move(m.tokenizer));
    }
    return v;
  }();
  return formats;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using json = nlohmann::json;
  absl::StatusOr<json> parsed =
      odmoe::ParseRequestJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;
  const json& body = *parsed;
  odmoe::ParsedRequest completion;
  odmoe::fuzz::Consume(odmoe::ParseCompletionBody(body, "tiny-mixtral", Tok(), &completion).ok());
  odmoe::ParsedRequest chat;
  std::vector<odmoe::ChatMessage> messages;
  odmoe::ChatOptions options;
  if (odmoe::ParseChatBody(body, "tiny-mixtral", &chat, &messages, &options).ok()) {
    for (const odmoe::ChatFormat& format : Formats()) {
      auto prompt = odmoe::RenderChat(format, messages, options);
      if (prompt.ok()) odmoe::fuzz::Consume(prompt->size());
    }
  }
  // The output's form, from the body parsed in order as the server does.
  const nlohmann::ordered_json ordered =
      nlohmann::ordered_json::parse(reinterpret_cast<const char*>(data),
                                    reinterpret_cast<const char*>(data) + size, nullptr, false);
  absl::StatusOr<odmoe::ToolRequest> tools = odmoe::ParseToolRequest(ordered);
  if (tools.ok()) {
    for (odmoe::ToolCallSyntax syntax :
         {odmoe::ToolCallSyntax::kHermes, odmoe::ToolCallSyntax::kQwen3Coder}) {
      absl::StatusOr<std::string> g = odmoe::OutputGrammar(ordered, *tools, syntax);
      if (g.ok() && !g->empty()) odmoe::fuzz::Consume(odmoe::ParseGbnf(*g).ok());
    }
  }
  return 0;
}
