// A model's reply split into text and OpenAI tool calls, in the model's own
// syntax (tool_call_syntax.h), whole or as it is generated.
//
// The streaming parser takes the reply in pieces cut anywhere (inside a
// marker, inside a UTF-8 character) and emits events:
//   kContent        text outside calls. Only what may still become a marker
//                   ("<tool_c"), whitespace after a call, and the bytes of an
//                   unfinished UTF-8 character are held back.
//   kCallBegin      index (0, 1, ... in the reply), id, name: once the name is
//                   known to be one of the request's tools.
//   kCallArguments  a fragment of the arguments' JSON text; the fragments of a
//                   call concatenate to its whole `arguments` (an object).
//                   JSON arguments stream as the model writes them, each byte
//                   once it is known to keep the text a valid JSON prefix;
//                   tagged arguments (qwen3_coder, glm45) are converted:
//                   {"city": "Par  is"  , "days": 3  } -- text values stream
//                   as they come, other values leave whole at their end tag.
//   kCallEnd        the call is complete.
//   kCallAbort      the call turned out malformed after it began (arguments
//                   not JSON, no end marker, the reply ended inside it):
//                   `text` is the call's raw text, which the whole parse
//                   keeps as content in the call's place. A streaming reply
//                   cannot take back what it sent: send `text` as content.
// A call found malformed before kCallBegin (an unknown tool, a bad header) is
// content, as is everything in a reply that holds no call. Whitespace between
// calls and after the last one is dropped. Nothing throws or grows without
// bound: a call longer than kMaxToolCallBytes is malformed.
//
// ParseToolCalls runs the same machine over the whole text, so a streamed
// reply's events, applied with ApplyToolCallEvent, give exactly its whole
// parse, wherever the pieces were cut.
//
//   ToolCallStreamParser parser(ToolCallSyntax::kHermes, request.tools, /*id_seed=*/request_id);
//   std::vector<ToolCallEvent> events;
//   parser.Feed(piece, &events);          // per generated piece
//   parser.Finish(&events);               // at the end of the reply
//   for (const ToolCallEvent& e : events) ...   // ToolCallDeltaJson (tool_call_json.h)
//
//   ParsedReply reply = ParseToolCalls(ToolCallSyntax::kHermes, text, request.tools, request_id);
//   // reply.content, reply.tool_calls[i].{id, name, arguments}
//
// Ids: ToolCallId(style, id_seed, index, name): "call_" + 24 letters and
// digits that look random but are a hash of (id_seed, index), so a reply and
// its stream give the same ids and a request replayed gives the same ids.
// Give each request its own seed: a random value drawn once per process plus
// the request's number, so that ids do not repeat across restarts (a client
// keeps them in its history) yet a test can fix them. Mistral's syntaxes
// get 9 letters and digits, the only ids their templates accept; Kimi-K2
// gets "functions.NAME:INDEX", the form its template writes back.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "main_node/gemma_call_args.h"
#include "main_node/json_prefix_scanner.h"
#include "main_node/tool_call_syntax.h"
#include "main_node/tool_request.h"

namespace odmoe {

/// The longest call (marker to marker) the parser holds; longer is malformed.
inline constexpr size_t kMaxToolCallBytes = size_t{1} << 20;

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ParsedReply {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

struct ToolCallEvent {
  enum class Kind { kContent, kCallBegin, kCallArguments, kCallEnd, kCallAbort };
  Kind kind = Kind::kContent;
  std::string text{};  // kContent: text; kCallArguments: fragment; kCallAbort: raw call text
  int index = -1;      // the call's (all but kContent)
  std::string id{};    // kCallBegin
  std::string name{};  // kCallBegin
};

/// The id of call `index` of a reply (see above).
std::string ToolCallId(ToolCallIdStyle style, uint64_t id_seed, int index, std::string_view name);

class ToolCallStreamParser {
 public:
  ToolCallStreamParser(ToolCallSyntax syntax, std::span<const ToolDefinition> tools,
                       uint64_t id_seed);

  /// Appends the events that `piece` decides to `events`.
  void Feed(std::string_view piece, std::vector<ToolCallEvent>* events);
  /// The reply ended: everything held back is decided (an open call aborts).
  void Finish(std::vector<ToolCallEvent>* events);

  /// Calls begun so far (kCallBegin events).
  int calls_begun() const { return next_index_; }
  /// Calls complete so far (kCallEnd events): a streamed reply with any has
  /// finish_reason "tool_calls" when the model stopped on its own.
  int calls_completed() const { return calls_completed_; }

 private:
  enum class Phase {
    kContent,    // looking for a call (or section) begin
    kBetween,    // after a call outside a section: whitespace, separators
    kSection,    // inside a section, between calls
    kName,       // kText: reading the name
    kArgsBegin,  // kText: up to args_begin
    kJsonArgs,   // kText + kJson: the arguments object
    kGemmaArgs,  // kText + kGemma: the arguments in Gemma's notation
    kTagKey,     // kTagged: the next key_open, or the end of the arguments
    kTagName,    // kTagged: a key up to key_close
    kTagValueOpen,
    kTagValue,  // kTagged: a value up to value_close
    kMember,    // kJsonMember: the object {"name", "arguments"}
    kCallEnd,   // the call_end pattern
  };
  enum class Match { kNone, kPartial, kFull };

  void Run(bool final, std::vector<ToolCallEvent>* out);
  // Each step handles the buffer at pos_; false: it needs more bytes.
  bool StepContent(bool final, std::vector<ToolCallEvent>* out);
  bool StepBetween(bool final, std::vector<ToolCallEvent>* out);
  bool StepSection(bool final, std::vector<ToolCallEvent>* out);
  bool StepName(bool final, std::vector<ToolCallEvent>* out);
  bool StepArgsBegin(bool final, std::vector<ToolCallEvent>* out);
  bool StepJsonArgs(std::vector<ToolCallEvent>* out);
  bool StepGemmaArgs(std::vector<ToolCallEvent>* out);
  bool StepTagKey(bool final, std::vector<ToolCallEvent>* out);
  bool StepTagName(bool final, std::vector<ToolCallEvent>* out);
  bool StepTagValueOpen(bool final, std::vector<ToolCallEvent>* out);
  bool StepTagValue(bool final, std::vector<ToolCallEvent>* out);
  bool StreamTextValue(size_t close_at, std::vector<ToolCallEvent>* out);
  bool StepMember(std::vector<ToolCallEvent>* out);
  bool MemberValueEnded(size_t end, std::vector<ToolCallEvent>* out);
  void CloseTaggedArgs(std::vector<ToolCallEvent>* out);
  bool InCall() const;
  bool StepCallEnd(bool final, std::vector<ToolCallEvent>* out);

  Match MatchPattern(const ToolCallPattern& p, size_t at, bool final, size_t* end) const;
  Match MatchLiteral(std::string_view lit, size_t at, bool final) const;
  // The first begin pattern (section or call) at `at`.
  Match MatchBegin(const std::vector<ToolCallPattern>& patterns, size_t at, bool final, size_t* end,
                   bool* consume) const;
  size_t SkipSpace(size_t at) const;
  // Past whitespace and call separators from pos_ (resuming at scan_).
  size_t SkipSeparators();

  void StartCall(size_t start, size_t after_begin);
  bool AcceptName(std::string_view raw, size_t fail_at, std::vector<ToolCallEvent>* out);
  void Commit(std::vector<ToolCallEvent>* out);
  void Arguments(std::string_view fragment, std::vector<ToolCallEvent>* out);
  void EndCall(size_t after, std::vector<ToolCallEvent>* out);
  void Fail(size_t at, std::vector<ToolCallEvent>* out);
  void Content(std::string_view text, std::vector<ToolCallEvent>* out);
  void FlushContent(std::vector<ToolCallEvent>* out);
  void FlushArguments(std::vector<ToolCallEvent>* out);
  // `text` after `tail` as a `kind` event (appended to the last one of the
  // same kind and call), less an unfinished UTF-8 character kept in `tail`
  // unless `flush`.
  void Emit(ToolCallEvent::Kind kind, int index, std::string_view text, bool flush,
            std::string* tail, std::vector<ToolCallEvent>* out);
  void Compact();

  const ToolCallSyntaxSpec& spec_;
  std::vector<ToolDefinition> tools_;
  uint64_t id_seed_;

  std::string buf_;  // unconsumed text; from call_start_ while in a call
  size_t pos_ = 0;   // next byte to look at
  Phase phase_ = Phase::kContent;
  bool in_section_ = false;
  size_t section_start_ = 0;  // the section begin's offset (kept while it has no call)
  int section_calls_ = 0;
  size_t call_start_ = 0;
  size_t mark_ = 0;  // start of the name / key / value being read
  size_t scan_ = 0;  // where a search for a stop resumes
  bool committed_ = false;
  int next_index_ = 0;
  int calls_completed_ = 0;
  const ToolDefinition* tool_ = nullptr;
  std::string name_;
  std::string key_;
  int tag_count_ = 0;
  bool value_is_text_ = false;  // kTagValue: streamed as it comes
  bool value_opened_ = false;   // its `"key": "` has left
  size_t emit_from_ = 0;        // its first byte not yet sent
  JsonPrefixScanner json_;
  GemmaArgsTranslator gemma_;
  JsonPrefixScanner key_scan_;
  // kMember: the object's state.
  enum class Member { kOpen, kKeyOrEnd, kKey, kColon, kValue, kAfterValue, kDone };
  Member member_ = Member::kOpen;
  std::string member_key_;
  size_t value_start_ = 0;
  bool member_is_args_ = false;
  bool member_is_name_ = false;
  bool have_args_ = false;
  std::string pending_args_;  // arguments read before the name
  std::string content_tail_;  // an unfinished UTF-8 character of content
  std::string args_tail_;     // ... of an arguments fragment
};

/// The whole reply parsed (the stream parser fed `text` in one piece).
ParsedReply ParseToolCalls(ToolCallSyntax syntax, std::string_view text,
                           std::span<const ToolDefinition> tools, uint64_t id_seed);

/// Applies one event to a reply being built (an abort takes its call back
/// out and keeps its text as content).
void ApplyToolCallEvent(const ToolCallEvent& event, ParsedReply* reply);

}  // namespace odmoe
