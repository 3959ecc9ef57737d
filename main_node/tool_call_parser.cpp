#include "main_node/tool_call_parser.h"

#include <algorithm>

#include "main_node/json_reply.h"
#include "main_node/tool_call_arguments.h"

namespace odmoe {
namespace {

using Kind = ToolCallEvent::Kind;

constexpr size_t kMaxNameBytes = 256;    // a name, a tagged key
constexpr size_t kMaxHeaderBytes = 256;  // text before args_begin (harmony, mistral_args)

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The length of an unfinished UTF-8 character at the end of `s` (0 if none).
size_t UnfinishedUtf8(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto b = static_cast<unsigned char>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string Alphanumeric(uint64_t seed, int index, size_t n) {
  static constexpr std::string_view kChars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t state = seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(index + 1));
  std::string out;
  for (size_t i = 0; i < n; ++i) out += kChars[SplitMix64(state) % kChars.size()];
  return out;
}

}  // namespace

std::string ToolCallId(ToolCallIdStyle style, uint64_t id_seed, int index, std::string_view name) {
  switch (style) {
    case ToolCallIdStyle::kMistral:
      return Alphanumeric(id_seed, index, 9);
    case ToolCallIdStyle::kKimi:
      return "functions." + std::string(name) + ":" + std::to_string(index);
    case ToolCallIdStyle::kOpenAi:
      break;
  }
  return "call_" + Alphanumeric(id_seed, index, 24);
}

ToolCallStreamParser::ToolCallStreamParser(ToolCallSyntax syntax,
                                           std::span<const ToolDefinition> tools, uint64_t id_seed)
    : spec_(ToolCallSyntaxSpecOf(syntax)), tools_(tools.begin(), tools.end()), id_seed_(id_seed) {}

void ToolCallStreamParser::Feed(std::string_view piece, std::vector<ToolCallEvent>* events) {
  Compact();
  buf_.append(piece);
  Run(/*final=*/false, events);
}

void ToolCallStreamParser::Finish(std::vector<ToolCallEvent>* events) {
  Run(/*final=*/true, events);
  if (InCall()) Fail(buf_.size(), events);
  Run(/*final=*/true, events);
  FlushContent(events);
}

bool ToolCallStreamParser::InCall() const {
  return phase_ != Phase::kContent && phase_ != Phase::kBetween && phase_ != Phase::kSection;
}

void ToolCallStreamParser::Compact() {
  size_t keep = InCall() ? call_start_ : pos_;
  if (in_section_ && section_calls_ == 0) keep = std::min(keep, section_start_);
  if (keep == 0) return;
  buf_.erase(0, keep);
  for (size_t* offset :
       {&pos_, &call_start_, &mark_, &scan_, &value_start_, &section_start_, &emit_from_}) {
    *offset = *offset >= keep ? *offset - keep : 0;
  }
}

void ToolCallStreamParser::Run(bool final, std::vector<ToolCallEvent>* out) {
  for (;;) {
    if (InCall() && buf_.size() - call_start_ > kMaxToolCallBytes) Fail(pos_, out);
    bool progressed = false;
    switch (phase_) {
      case Phase::kContent:
        progressed = StepContent(final, out);
        break;
      case Phase::kBetween:
        progressed = StepBetween(final, out);
        break;
      case Phase::kSection:
        progressed = StepSection(final, out);
        break;
      case Phase::kName:
        progressed = StepName(final, out);
        break;
      case Phase::kArgsBegin:
        progressed = StepArgsBegin(final, out);
        break;
      case Phase::kJsonArgs:
        progressed = StepJsonArgs(out);
        break;
      case Phase::kGemmaArgs:
        progressed = StepGemmaArgs(out);
        break;
      case Phase::kTagKey:
        progressed = StepTagKey(final, out);
        break;
      case Phase::kTagName:
        progressed = StepTagName(final, out);
        break;
      case Phase::kTagValueOpen:
        progressed = StepTagValueOpen(final, out);
        break;
      case Phase::kTagValue:
        progressed = StepTagValue(final, out);
        break;
      case Phase::kMember:
        progressed = StepMember(out);
        break;
      case Phase::kCallEnd:
        progressed = StepCallEnd(final, out);
        break;
    }
    if (!progressed) return;
  }
}

// --- matching -------------------------------------------------------------

ToolCallStreamParser::Match ToolCallStreamParser::MatchPattern(const ToolCallPattern& p, size_t at,
                                                               bool final, size_t* end) const {
  const Match more = final ? Match::kNone : Match::kPartial;
  size_t i = at;
  for (size_t k = 0; k < p.pieces.size(); ++k) {
    if (k > 0) {
      for (size_t n = 0; i < buf_.size() && IsSpace(buf_[i]) && n < kToolCallPatternMaxSpace; ++n)
        ++i;
    }
    for (char c : p.pieces[k]) {
      if (i == buf_.size()) return more;
      if (buf_[i] != c) return Match::kNone;
      ++i;
    }
  }
  if (end != nullptr) *end = i;
  return Match::kFull;
}

ToolCallStreamParser::Match ToolCallStreamParser::MatchLiteral(std::string_view lit, size_t at,
                                                               bool final) const {
  return MatchPattern(ToolCallPattern{{lit}}, at, final, nullptr);
}

ToolCallStreamParser::Match ToolCallStreamParser::MatchBegin(
    const std::vector<ToolCallPattern>& patterns, size_t at, bool final, size_t* end,
    bool* consume) const {
  Match best = Match::kNone;
  for (const ToolCallPattern& p : patterns) {
    const Match m = MatchPattern(p, at, final, end);
    if (m == Match::kFull) {
      *consume = p.consume;
      return m;
    }
    if (m == Match::kPartial) best = m;
  }
  return best;
}

size_t ToolCallStreamParser::SkipSpace(size_t at) const {
  while (at < buf_.size() && IsSpace(buf_[at])) ++at;
  return at;
}

// --- events ---------------------------------------------------------------

void ToolCallStreamParser::Content(std::string_view text, std::vector<ToolCallEvent>* out) {
  Emit(Kind::kContent, -1, text, /*flush=*/false, &content_tail_, out);
}

void ToolCallStreamParser::FlushContent(std::vector<ToolCallEvent>* out) {
  Emit(Kind::kContent, -1, "", /*flush=*/true, &content_tail_, out);
}

void ToolCallStreamParser::Arguments(std::string_view fragment, std::vector<ToolCallEvent>* out) {
  if (!committed_) {
    pending_args_.append(fragment);
    return;
  }
  Emit(Kind::kCallArguments, next_index_ - 1, fragment, /*flush=*/false, &args_tail_, out);
}

void ToolCallStreamParser::FlushArguments(std::vector<ToolCallEvent>* out) {
  Emit(Kind::kCallArguments, next_index_ - 1, "", /*flush=*/true, &args_tail_, out);
}

void ToolCallStreamParser::Emit(Kind kind, int index, std::string_view text, bool flush,
                                std::string* tail, std::vector<ToolCallEvent>* out) {
  tail->append(text);
  const size_t hold = flush ? 0 : UnfinishedUtf8(*tail);
  if (tail->size() == hold) return;
  std::string ready = tail->substr(0, tail->size() - hold);
  tail->erase(0, tail->size() - hold);
  if (!out->empty() && out->back().kind == kind && out->back().index == index) {
    out->back().text += ready;
  } else {
    out->push_back({.kind = kind, .text = std::move(ready), .index = index});
  }
}

// --- calls ----------------------------------------------------------------

void ToolCallStreamParser::StartCall(size_t start, size_t after_begin) {
  call_start_ = start;
  pos_ = after_begin;
  committed_ = false;
  tool_ = nullptr;
  name_.clear();
  tag_count_ = 0;
  have_args_ = false;
  pending_args_.clear();
  json_ = JsonPrefixScanner();
  member_ = Member::kOpen;
  mark_ = scan_ = pos_;
  phase_ = spec_.name_shape == ToolCallNameShape::kJsonMember ? Phase::kMember : Phase::kName;
}

bool ToolCallStreamParser::AcceptName(std::string_view raw, size_t fail_at,
                                      std::vector<ToolCallEvent>* out) {
  std::string_view name = Trim(raw);
  if (!spec_.name_prefix.empty() && name.substr(0, spec_.name_prefix.size()) == spec_.name_prefix) {
    name.remove_prefix(spec_.name_prefix.size());
  }
  if (spec_.name_index_suffix) {
    const size_t colon = name.rfind(':');
    if (colon != std::string_view::npos &&
        name.find_first_not_of("0123456789", colon + 1) == std::string_view::npos) {
      name = name.substr(0, colon);
    }
  }
  for (const ToolDefinition& t : tools_) {
    if (t.name == name) {
      tool_ = &t;
      name_ = std::string(name);
      return true;
    }
  }
  Fail(fail_at, out);
  return false;
}

void ToolCallStreamParser::Commit(std::vector<ToolCallEvent>* out) {
  FlushContent(out);
  committed_ = true;
  const int index = next_index_++;
  out->push_back({.kind = Kind::kCallBegin,
                  .index = index,
                  .id = ToolCallId(spec_.id_style, id_seed_, index, name_),
                  .name = name_});
  std::string pending = std::move(pending_args_);
  pending_args_.clear();
  Arguments(pending, out);
}

void ToolCallStreamParser::EndCall(size_t after, std::vector<ToolCallEvent>* out) {
  FlushArguments(out);
  out->push_back({.kind = Kind::kCallEnd, .index = next_index_ - 1});
  committed_ = false;
  pos_ = scan_ = after;
  ++section_calls_;
  ++calls_completed_;
  phase_ = in_section_ ? Phase::kSection : Phase::kBetween;
}

void ToolCallStreamParser::Fail(size_t at, std::vector<ToolCallEvent>* out) {
  at = std::min(std::max(at, call_start_ + 1), buf_.size());
  // A section whose first call fails is content from the section's marker on.
  const size_t start = in_section_ && section_calls_ == 0 ? section_start_ : call_start_;
  const std::string_view raw = std::string_view(buf_).substr(start, at - start);
  if (committed_) {
    FlushArguments(out);
    out->push_back({.kind = Kind::kCallAbort, .text = std::string(raw), .index = next_index_ - 1});
  } else {
    Content(raw, out);
  }
  committed_ = false;
  in_section_ = false;
  pos_ = at;
  phase_ = Phase::kContent;
}

// --- outside calls --------------------------------------------------------

bool ToolCallStreamParser::StepContent(bool final, std::vector<ToolCallEvent>* out) {
  const bool sections = !spec_.section_begin.empty();
  const auto& begins = sections ? spec_.section_begin : spec_.call_begin;
  for (size_t i = pos_; i < buf_.size(); ++i) {
    size_t end = 0;
    bool consume = true;
    const Match m = MatchBegin(begins, i, final, &end, &consume);
    if (m == Match::kNone) continue;
    Content(std::string_view(buf_).substr(pos_, i - pos_), out);
    pos_ = i;
    if (m == Match::kPartial) return false;
    if (sections) {
      in_section_ = true;
      section_start_ = i;
      section_calls_ = 0;
      pos_ = scan_ = end;
      phase_ = Phase::kSection;
    } else {
      StartCall(i, consume ? end : i);
    }
    return true;
  }
  Content(std::string_view(buf_).substr(pos_), out);
  pos_ = buf_.size();
  return false;
}

size_t ToolCallStreamParser::SkipSeparators() {
  size_t i = std::max(pos_, scan_);
  while (i < buf_.size() &&
         (IsSpace(buf_[i]) || spec_.call_separator.find(buf_[i]) != std::string_view::npos))
    ++i;
  scan_ = i;  // a long run of whitespace is looked at once
  return i;
}

bool ToolCallStreamParser::StepBetween(bool final, std::vector<ToolCallEvent>* out) {
  const size_t i = SkipSeparators();
  if (i == buf_.size()) {
    if (final) pos_ = i;  // whitespace after the last call is dropped
    return false;
  }
  const auto& begins = spec_.section_begin.empty() ? spec_.call_begin : spec_.section_begin;
  size_t end = 0;
  bool consume = true;
  const Match m = MatchBegin(begins, i, final, &end, &consume);
  if (m == Match::kPartial) return false;
  if (m == Match::kFull) pos_ = i;  // whitespace between calls is dropped
  phase_ = Phase::kContent;
  return true;
}

bool ToolCallStreamParser::StepSection(bool final, std::vector<ToolCallEvent>* out) {
  const size_t i = SkipSeparators();
  if (i == buf_.size() && !final) return false;
  size_t end = 0;
  bool consume = true;
  Match m =
      i == buf_.size() ? Match::kNone : MatchBegin(spec_.call_begin, i, final, &end, &consume);
  if (m == Match::kFull) {
    StartCall(i, consume ? end : i);
    return true;
  }
  const Match close = MatchLiteral(spec_.section_end, i, final);
  if (m == Match::kPartial || close == Match::kPartial) return false;
  in_section_ = false;
  if (close == Match::kFull) {
    pos_ = i + spec_.section_end.size();
    phase_ = Phase::kBetween;
    return true;
  }
  // Not a call: a section without calls is content; after calls the section
  // ends here (its end marker missing).
  if (section_calls_ == 0)
    Content(std::string_view(buf_).substr(section_start_, i - section_start_), out);
  pos_ = i;
  phase_ = Phase::kContent;
  return true;
}

// --- kText calls ----------------------------------------------------------

bool ToolCallStreamParser::StepName(bool final, std::vector<ToolCallEvent>* out) {
  if (scan_ == mark_) {
    mark_ = scan_ = SkipSpace(mark_);
    if (mark_ == buf_.size()) return false;
  }
  const size_t stop = buf_.find_first_of(spec_.name_stops, scan_);
  if (stop == std::string::npos) {
    scan_ = buf_.size();
    if (buf_.size() - mark_ > kMaxNameBytes) {
      Fail(mark_, out);
      return true;
    }
    (void) final;
    return false;
  }
  if (!AcceptName(std::string_view(buf_).substr(mark_, stop - mark_), stop, out)) return true;
  pos_ = stop;
  phase_ = Phase::kArgsBegin;
  return true;
}

bool ToolCallStreamParser::StepArgsBegin(bool final, std::vector<ToolCallEvent>* out) {
  const std::string_view begin = spec_.args_begin;
  const size_t at = SkipSpace(pos_);
  if (!begin.empty()) {
    if (spec_.args_begin_after_text) {
      const size_t k = buf_.find(begin, pos_);
      if (k == std::string::npos) {
        if (buf_.size() - pos_ > kMaxHeaderBytes) {
          Fail(pos_, out);
          return true;
        }
        return false;
      }
      pos_ = k + begin.size();
    } else {
      const Match m = MatchLiteral(begin, at, final);
      if (m == Match::kPartial || (at == buf_.size() && !final)) return false;
      if (m == Match::kNone) {
        Fail(at, out);
        return true;
      }
      pos_ = at + begin.size();
    }
  } else if (spec_.args_shape != ToolCallArgsShape::kTagged) {
    pos_ = at;
  }
  Commit(out);
  json_ = JsonPrefixScanner();
  gemma_ = GemmaArgsTranslator();
  switch (spec_.args_shape) {
    case ToolCallArgsShape::kJson:
      phase_ = Phase::kJsonArgs;
      break;
    case ToolCallArgsShape::kGemma:
      phase_ = Phase::kGemmaArgs;
      break;
    case ToolCallArgsShape::kTagged:
      phase_ = Phase::kTagKey;
      break;
  }
  return true;
}

bool ToolCallStreamParser::StepGemmaArgs(std::vector<ToolCallEvent>* out) {
  std::string json;
  while (pos_ < buf_.size()) {
    const GemmaArgsTranslator::Step step = gemma_.Feed(buf_[pos_], &json);
    if (step == GemmaArgsTranslator::Step::kError) {
      Arguments(json, out);
      Fail(pos_, out);
      return true;
    }
    ++pos_;
    if (step == GemmaArgsTranslator::Step::kDone) {
      Arguments(json, out);
      phase_ = Phase::kCallEnd;
      return true;
    }
  }
  Arguments(json, out);
  return false;
}

bool ToolCallStreamParser::StepJsonArgs(std::vector<ToolCallEvent>* out) {
  if (json_.first() == 0) pos_ = SkipSpace(pos_);
  const size_t start = pos_;
  while (pos_ < buf_.size()) {
    const char c = buf_[pos_];
    const JsonScanStep step =
        (json_.first() == 0 && c != '{') ? JsonScanStep::kError : json_.Feed(c);
    if (step == JsonScanStep::kError) {
      Arguments(std::string_view(buf_).substr(start, pos_ - start), out);
      Fail(pos_, out);
      return true;
    }
    ++pos_;
    if (step == JsonScanStep::kDone) {
      Arguments(std::string_view(buf_).substr(start, pos_ - start), out);
      phase_ = Phase::kCallEnd;
      return true;
    }
  }
  Arguments(std::string_view(buf_).substr(start, pos_ - start), out);
  return false;
}

bool ToolCallStreamParser::StepCallEnd(bool final, std::vector<ToolCallEvent>* out) {
  if (spec_.call_end.pieces.empty()) {
    EndCall(pos_, out);
    return true;
  }
  const size_t at = SkipSpace(pos_);
  if (at == buf_.size() && !final) return false;
  size_t end = 0;
  const Match m = MatchPattern(spec_.call_end, at, final, &end);
  if (m == Match::kPartial) return false;
  if (m == Match::kNone) {
    Fail(pos_, out);
    return true;
  }
  EndCall(end, out);
  return true;
}

// --- kTagged arguments ----------------------------------------------------

void ToolCallStreamParser::CloseTaggedArgs(std::vector<ToolCallEvent>* out) {
  Arguments(tag_count_ == 0 ? "{}" : "}", out);
  phase_ = Phase::kCallEnd;
}

bool ToolCallStreamParser::StepTagKey(bool final, std::vector<ToolCallEvent>* out) {
  const ToolCallTags& tags = spec_.tags;
  const size_t at = SkipSpace(pos_);
  if (at == buf_.size() && !final) return false;
  const Match key = MatchLiteral(tags.key_open, at, final);
  if (key == Match::kFull) {
    pos_ = mark_ = scan_ = at + tags.key_open.size();
    phase_ = Phase::kTagName;
    return true;
  }
  if (tags.args_close.empty()) {
    if (key == Match::kPartial) return false;
    pos_ = at;
    CloseTaggedArgs(out);
    return true;
  }
  const Match close = MatchLiteral(tags.args_close, at, final);
  if (key == Match::kPartial || close == Match::kPartial) return false;
  if (close == Match::kNone) {
    Fail(at, out);
    return true;
  }
  pos_ = at + tags.args_close.size();
  CloseTaggedArgs(out);
  return true;
}

bool ToolCallStreamParser::StepTagName(bool final, std::vector<ToolCallEvent>* out) {
  const std::string_view close = spec_.tags.key_close;
  const size_t k = buf_.find(close, scan_);
  if (k == std::string::npos || k - mark_ > kMaxNameBytes) {
    if (buf_.size() - mark_ > kMaxNameBytes + close.size()) {
      Fail(mark_, out);
      return true;
    }
    scan_ = std::max(mark_, buf_.size() - std::min(buf_.size(), close.size() - 1));
    (void) final;
    return false;
  }
  key_ = std::string(Trim(std::string_view(buf_).substr(mark_, k - mark_)));
  if (key_.empty()) {
    Fail(k, out);
    return true;
  }
  pos_ = mark_ = scan_ = k + close.size();
  phase_ = Phase::kTagValueOpen;
  return true;
}

bool ToolCallStreamParser::StepTagValueOpen(bool final, std::vector<ToolCallEvent>* out) {
  const std::string_view open = spec_.tags.value_open;
  if (!open.empty()) {
    const size_t at = SkipSpace(pos_);
    if (at == buf_.size() && !final) return false;
    const Match m = MatchLiteral(open, at, final);
    if (m == Match::kPartial) return false;
    if (m == Match::kNone) {
      Fail(at, out);
      return true;
    }
    pos_ = at + open.size();
  }
  mark_ = scan_ = emit_from_ = pos_;
  value_is_text_ = TaggedArgumentIsText(tool_->parameters, key_);
  value_opened_ = false;
  phase_ = Phase::kTagValue;
  return true;
}

// A text value leaves as it comes: `"key": "` first, then its escaped bytes
// up to what may be the close tag (and qwen3_coder's last newline), whole
// UTF-8 characters only, so that the pieces equal the value escaped at once.
bool ToolCallStreamParser::StreamTextValue(size_t close_at, std::vector<ToolCallEvent>* out) {
  const std::string_view close = spec_.tags.value_close;
  const bool strip = spec_.tags.strip_newlines;
  if (!value_opened_) {
    if (emit_from_ == buf_.size()) return false;  // the first byte decides the leading newline
    if (strip && emit_from_ != close_at && buf_[emit_from_] == '\n') ++emit_from_;
    Arguments((tag_count_++ == 0 ? "{" : ", ") + DumpJson(key_) + ": \"", out);
    value_opened_ = true;
  }
  size_t end = close_at;
  if (close_at == std::string::npos) {
    const size_t hold = close.size() - 1 + (strip ? 1 : 0);
    end = buf_.size() > hold ? buf_.size() - hold : 0;
    if (end > emit_from_)
      end -= UnfinishedUtf8(std::string_view(buf_).substr(emit_from_, end - emit_from_));
  } else if (strip && end > emit_from_ && buf_[end - 1] == '\n') {
    --end;
  }
  if (end > emit_from_) {
    const std::string escaped = DumpJson(nlohmann::json(buf_.substr(emit_from_, end - emit_from_)));
    Arguments(std::string_view(escaped).substr(1, escaped.size() - 2), out);
    emit_from_ = end;
  }
  if (close_at == std::string::npos) {
    scan_ = std::max(mark_, buf_.size() - std::min(buf_.size(), close.size() - 1));
    return false;
  }
  Arguments("\"", out);
  pos_ = mark_ = scan_ = close_at + close.size();
  phase_ = Phase::kTagKey;
  return true;
}

bool ToolCallStreamParser::StepTagValue(bool final, std::vector<ToolCallEvent>* out) {
  const std::string_view close = spec_.tags.value_close;
  const size_t k = buf_.find(close, scan_);
  if (value_is_text_) return StreamTextValue(k, out);
  if (k == std::string::npos) {
    scan_ = std::max(mark_, buf_.size() - std::min(buf_.size(), close.size() - 1));
    (void) final;
    return false;
  }
  std::string_view value = std::string_view(buf_).substr(mark_, k - mark_);
  if (spec_.tags.strip_newlines) {
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  }
  std::string member = tag_count_++ == 0 ? "{" : ", ";
  member += DumpJson(key_);
  member += ": ";
  member += TaggedArgumentJson(tool_->parameters, key_, value);
  Arguments(member, out);
  pos_ = mark_ = scan_ = k + close.size();
  phase_ = Phase::kTagKey;
  return true;
}

// --- kJsonMember calls ----------------------------------------------------

bool ToolCallStreamParser::MemberValueEnded(size_t end, std::vector<ToolCallEvent>* out) {
  const std::string_view raw = std::string_view(buf_).substr(value_start_, end - value_start_);
  member_ = Member::kAfterValue;
  if (member_is_name_) {
    nlohmann::json name = nlohmann::json::parse(raw.begin(), raw.end(), nullptr, false);
    if (!name.is_string() || !name_.empty() || committed_) {
      Fail(end, out);
      return false;
    }
    if (!AcceptName(name.get<std::string>(), end, out)) return false;
    Commit(out);
  } else if (member_is_args_ && json_.first() == '"') {
    // Arguments written as a JSON string holding the object.
    nlohmann::json text = nlohmann::json::parse(raw.begin(), raw.end(), nullptr, false);
    std::string inner = text.is_string() ? std::string(Trim(text.get<std::string>())) : "";
    nlohmann::json args = nlohmann::json::parse(inner, nullptr, false);
    if (!args.is_object()) {
      Fail(end, out);
      return false;
    }
    Arguments(inner, out);
  }
  return true;
}

bool ToolCallStreamParser::StepMember(std::vector<ToolCallEvent>* out) {
  while (pos_ < buf_.size()) {
    const char c = buf_[pos_];
    switch (member_) {
      case Member::kOpen:
        if (IsSpace(c)) break;
        if (c != '{') {
          Fail(pos_, out);
          return true;
        }
        member_ = Member::kKeyOrEnd;
        break;
      case Member::kKeyOrEnd:
        if (IsSpace(c)) break;
        if (c == '}') {
          ++pos_;
          if (!committed_) {
            Fail(pos_, out);
            return true;
          }
          if (!have_args_) Arguments("{}", out);
          phase_ = Phase::kCallEnd;
          return true;
        }
        if (c != '"') {
          Fail(pos_, out);
          return true;
        }
        key_scan_ = JsonPrefixScanner();
        key_scan_.Feed(c);
        mark_ = pos_;
        member_ = Member::kKey;
        break;
      case Member::kKey: {
        const JsonScanStep step = key_scan_.Feed(c);
        if (step == JsonScanStep::kError || pos_ + 1 - mark_ > kMaxNameBytes) {
          Fail(pos_, out);
          return true;
        }
        if (step == JsonScanStep::kDone) {
          const std::string_view raw = std::string_view(buf_).substr(mark_, pos_ + 1 - mark_);
          nlohmann::json key = nlohmann::json::parse(raw.begin(), raw.end(), nullptr, false);
          member_key_ = key.is_string() ? key.get<std::string>() : "";
          member_ = Member::kColon;
        }
        break;
      }
      case Member::kColon:
        if (IsSpace(c)) break;
        if (c != ':') {
          Fail(pos_, out);
          return true;
        }
        member_is_name_ = member_key_ == "name";
        member_is_args_ = member_key_ == "arguments" || member_key_ == "parameters";
        if (member_is_args_ && have_args_) {
          Fail(pos_, out);
          return true;
        }
        have_args_ = have_args_ || member_is_args_;
        json_ = JsonPrefixScanner();
        member_ = Member::kValue;
        break;
      case Member::kValue: {
        if (json_.first() == 0) {
          if (IsSpace(c)) break;
          value_start_ = pos_;
          if (member_is_args_ && c != '{' && c != '"') {
            Fail(pos_, out);
            return true;
          }
        }
        const JsonScanStep step = json_.Feed(c);
        if (step == JsonScanStep::kError) {
          Fail(pos_, out);
          return true;
        }
        if (step == JsonScanStep::kDoneBefore) {
          if (!MemberValueEnded(pos_, out)) return true;
          continue;  // `c` follows the value
        }
        if (member_is_args_ && json_.first() == '{')
          Arguments(std::string_view(&buf_[pos_], 1), out);
        if (step == JsonScanStep::kDone) {
          ++pos_;
          if (!MemberValueEnded(pos_, out)) return true;
          continue;
        }
        break;
      }
      case Member::kAfterValue:
        if (IsSpace(c)) break;
        if (c == ',') {
          member_ = Member::kKeyOrEnd;
          break;
        }
        if (c == '}') {
          member_ = Member::kKeyOrEnd;
          continue;  // closes the object above
        }
        Fail(pos_, out);
        return true;
      case Member::kDone:
        return true;
    }
    ++pos_;
  }
  return false;
}

// --- whole replies --------------------------------------------------------

void ApplyToolCallEvent(const ToolCallEvent& event, ParsedReply* reply) {
  switch (event.kind) {
    case Kind::kContent:
      reply->content += event.text;
      break;
    case Kind::kCallBegin:
      reply->tool_calls.push_back({event.id, event.name, ""});
      break;
    case Kind::kCallArguments:
      if (!reply->tool_calls.empty()) reply->tool_calls.back().arguments += event.text;
      break;
    case Kind::kCallEnd:
      break;
    case Kind::kCallAbort:
      if (!reply->tool_calls.empty()) reply->tool_calls.pop_back();
      reply->content += event.text;
      break;
  }
}

ParsedReply ParseToolCalls(ToolCallSyntax syntax, std::string_view text,
                           std::span<const ToolDefinition> tools, uint64_t id_seed) {
  ToolCallStreamParser parser(syntax, tools, id_seed);
  std::vector<ToolCallEvent> events;
  parser.Feed(text, &events);
  parser.Finish(&events);
  ParsedReply reply;
  for (const ToolCallEvent& e : events) ApplyToolCallEvent(e, &reply);
  return reply;
}

}  // namespace odmoe
