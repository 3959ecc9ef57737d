#include "main_node/chat_template.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace odmoe {

ChatFormat DetectChatFormat(const std::optional<std::string>& chat_template) {
  if (!chat_template) return ChatFormat::kDefault;
  if (absl::StrContains(*chat_template, "<|im_start|>")) return ChatFormat::kChatML;
  if (absl::StrContains(*chat_template, "[INST]")) return ChatFormat::kMistral;
  return ChatFormat::kDefault;
}

const char* ChatFormatName(ChatFormat format) {
  switch (format) {
    case ChatFormat::kMistral:
      return "mistral";
    case ChatFormat::kChatML:
      return "chatml";
    case ChatFormat::kDefault:
      break;
  }
  return "default";
}

absl::StatusOr<std::string> RenderChat(ChatFormat format,
                                       const std::vector<ChatMessage>& messages) {
  if (messages.empty()) return absl::InvalidArgumentError("messages: at least one is needed");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "].role: '", r, "' is not one of system, user, assistant"));
    }
  }
  std::string out;
  switch (format) {
    case ChatFormat::kChatML:
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
      }
      absl::StrAppend(&out, "<|im_start|>assistant\n");
      return out;
    case ChatFormat::kMistral: {
      std::string system;
      bool expect_user = true;
      for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "system") {
          if (i != 0) {
            return absl::InvalidArgumentError("messages: a system message must come first");
          }
          system = m.content + "\n\n";
          continue;
        }
        if ((m.role == "user") != expect_user) {
          return absl::InvalidArgumentError(absl::StrCat(
              "messages[", i, "]: this model's chat format needs user and assistant turns to "
              "alternate, starting with user"));
        }
        if (m.role == "user") {
          absl::StrAppend(&out, "[INST] ", system, m.content, " [/INST]");
          system.clear();
        } else {
          absl::StrAppend(&out, m.content, "</s>");
        }
        expect_user = !expect_user;
      }
      return out;
    }
    case ChatFormat::kDefault:
      break;
  }
  for (const ChatMessage& m : messages) absl::StrAppend(&out, m.role, ": ", m.content, "\n");
  absl::StrAppend(&out, "assistant:");
  return out;
}

}  // namespace odmoe
