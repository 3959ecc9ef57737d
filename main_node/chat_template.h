// Turning chat messages into a prompt. The format comes from the model's
// `tokenizer.chat_template` metadata when it names a known one (recognised
// by its markers), else odmoe's documented default:
//
//   mistral  (template contains "[INST]"):      <s>[INST] {user} [/INST]{assistant}</s>...
//            a system message is prepended to the first user message
//   chatml   (template contains "<|im_start|>"): <|im_start|>{role}\n{content}<|im_end|>\n ...
//            then "<|im_start|>assistant\n"
//   default:                                     {role}: {content}\n ... then "assistant:"
//
//   ChatFormat f = DetectChatFormat(model.gguf().GetString("tokenizer.chat_template"));
//   ODMOE_ASSIGN_OR_RETURN(std::string prompt, RenderChat(f, messages));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace odmoe {

enum class ChatFormat { kDefault, kMistral, kChatML };

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

ChatFormat DetectChatFormat(const std::optional<std::string>& chat_template);
const char* ChatFormatName(ChatFormat format);

/// INVALID_ARGUMENT for no messages, an unknown role, or (mistral) a
/// conversation that does not alternate user / assistant.
absl::StatusOr<std::string> RenderChat(ChatFormat format, const std::vector<ChatMessage>& messages);

}  // namespace odmoe
