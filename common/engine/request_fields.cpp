#include "engine/request_fields.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/scoring.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "nlohmann/json.hpp"
#include "util/cli_args.h"
#include "util/regular_file.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

constexpr unsigned kEverywhere = kRequestFieldHttp | kRequestFieldGrpc | kRequestFieldCli;

// The bounds the reference APIs give (OpenAI: temperature [0, 2], top_p
// (0, 1], logprobs 0-20); max_tokens' upper bound only catches nonsense
// early: the context bounds it further (PreparePrompt).
const RequestField kFields[] = {
    {.name = "max_tokens",
     .type = RequestFieldType::kInt,
     .min = 1,
     .max = static_cast<double>(kMaxMaxTokens),
     .help = "tokens to generate",
     .offered = kRequestFieldGrpc | kRequestFieldCli,  // HTTP: an alias and echo's 0
     .flag = "n",
     .metavar = "N",
     .http_default = 16,  // OpenAI's, for completions
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.max_tokens; }},
    {.name = "temperature",
     .type = RequestFieldType::kFloat,
     .min = 0,
     .max = 2,
     .help = "sampling temperature; 0 = greedy",
     .offered = kEverywhere,
     .metavar = "T",
     .http_default = 1,  // OpenAI's
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.temperature; }},
    {.name = "top_p",
     .type = RequestFieldType::kFloat,
     .min = 0,
     .max = 1,
     .min_exclusive = true,
     .help = "nucleus sampling threshold; 1 = off",
     .offered = kEverywhere,
     .metavar = "P",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.top_p; }},
    {.name = "top_k",
     .type = RequestFieldType::kInt,
     .min = -1,
     .max = static_cast<double>(INT32_MAX),
     .help = "sample among the K most likely tokens; 0 or -1 = all",
     .offered = kEverywhere,
     .metavar = "K",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.top_k; }},
    {.name = "min_p",
     .type = RequestFieldType::kFloat,
     .min = 0,
     .max = 1,
     .help = "keep the tokens at least P times as likely as the most likely; 0 = off",
     .offered = kEverywhere,
     .metavar = "P",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.min_p; }},
    {.name = "typical_p",
     .type = RequestFieldType::kFloat,
     .min = 0,
     .max = 1,
     .min_exclusive = true,
     .help = "locally typical sampling: the most typical tokens up to this mass; 1 = off",
     .offered = kEverywhere,
     .metavar = "P",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.typical_p; }},
    {.name = "presence_penalty",
     .type = RequestFieldType::kFloat,
     .min = -2,
     .max = 2,
     .help = "subtracted from the logit of each token in the penalty window; 0 = off",
     .offered = kEverywhere,
     .metavar = "X",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.presence_penalty; }},
    {.name = "frequency_penalty",
     .type = RequestFieldType::kFloat,
     .min = -2,
     .max = 2,
     .help = "subtracted per occurrence of a token in the penalty window; 0 = off",
     .offered = kEverywhere,
     .metavar = "X",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.frequency_penalty; }},
    {.name = "repetition_penalty",
     .type = RequestFieldType::kFloat,
     .min = 0,
     .max = 10,
     .min_exclusive = true,
     .help = "divides positive, multiplies negative logits of tokens in the penalty window; "
             "1 = off",
     .offered = kEverywhere,
     .metavar = "R",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.repetition_penalty; }},
    {.name = "repeat_last_n",
     .type = RequestFieldType::kInt,
     .min = -1,
     .max = static_cast<double>(kMaxMaxTokens),
     .help = "the penalty window: the last N tokens of prompt and output; -1 = all, 0 = none",
     .offered = kEverywhere,
     .metavar = "N",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.repeat_last_n; }},
    {.name = "min_tokens",
     .type = RequestFieldType::kInt,
     .min = 0,
     .max = static_cast<double>(kMaxMaxTokens),
     .help = "no end-of-sequence or stop token before this many tokens",
     .offered = kEverywhere,
     .metavar = "N",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.min_tokens; }},
    {.name = "seed",
     .type = RequestFieldType::kUInt64,
     .help = "random seed for sampling",
     .offered = kEverywhere,
     .metavar = "S",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.sampling.seed; }},
    {.name = "ignore_eos",
     .type = RequestFieldType::kBool,
     .help = "keep generating past the end-of-sequence token",
     .offered = kEverywhere,
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.ignore_eos; }},
    {.name = "logprobs",
     .type = RequestFieldType::kInt,
     .min = 0,
     .max = kMaxScoreTopN,
     .help = "each generated token's log-probability and this many alternatives",
     .offered = 0,  // HTTP: an integer (completions) or logprobs + top_logprobs (chat)
     .metavar = "N",
     .slot = [](GenerateRequest& r) -> RequestFieldSlot { return &r.logprobs; }},
};

std::string_view NameIn(const RequestField& f, std::string_view wire_name) {
  return wire_name.empty() ? f.name : wire_name;
}

// "1", "0.5", "16777216": bounds as people write them.
std::string Number(double x) { return absl::StrFormat("%.10g", x); }

absl::Status Refuse(const RequestField& f, std::string_view wire_name, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(NameIn(f, wire_name)), ": ", std::string(what)));
}

// This absl's string_view is not std's.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status NotATokenId(std::string_view field, int64_t token) {
  return absl::InvalidArgumentError(absl::StrCat(A(field), ": ", token, " is not a token id"));
}

absl::Status CheckLogitBias(int64_t token, double bias) {
  if (token < 0 || token > INT32_MAX) return NotATokenId("logit_bias", token);
  if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit_bias: the bias of token ", token, " must be from -100 to 100"));
  }
  return absl::OkStatus();
}

// A client's key in a message: at most 64 bytes of it.
std::string ClipKey(std::string_view key) {
  return key.size() <= 64 ? std::string(key)
                          : absl::StrCat(A(key.substr(0, 64)), "... (", key.size(), " bytes)");
}

double DefaultOf(const RequestField& f) {
  static const GenerateRequest defaults;
  return GetRequestField(f, defaults);
}

}  // namespace

std::string RequestField::FlagName() const {
  return flag.empty() ? absl::StrReplaceAll(std::string(name), {{"_", "-"}}) : std::string(flag);
}

std::span<const RequestField> RequestFields() { return kFields; }

const RequestField* FindRequestField(std::string_view name) {
  for (const RequestField& f : kFields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const RequestField& RequestFieldNamed(std::string_view name) {
  const RequestField* f = FindRequestField(name);
  assert(f != nullptr && "no such request field");
  if (f == nullptr) std::abort();
  return *f;
}

absl::Status RequestFieldTypeError(const RequestField& f, std::string_view wire_name) {
  switch (f.type) {
    case RequestFieldType::kBool:
      return Refuse(f, wire_name, "expected true or false");
    case RequestFieldType::kUInt64:
      return Refuse(f, wire_name, "expected an integer");
    case RequestFieldType::kInt:
      return Refuse(
          f, wire_name,
          absl::StrCat("expected an integer from ", Number(f.min), " to ", Number(f.max)));
    case RequestFieldType::kFloat:
      break;
  }
  if (f.min_exclusive) {
    return Refuse(f, wire_name,
                  absl::StrCat("expected a number greater than ", Number(f.min), " and at most ",
                               Number(f.max)));
  }
  return Refuse(f, wire_name,
                absl::StrCat("expected a number from ", Number(f.min), " to ", Number(f.max)));
}

absl::Status CheckRequestField(const RequestField& f, double value, std::string_view wire_name) {
  if (f.type == RequestFieldType::kBool || f.type == RequestFieldType::kUInt64) {
    return absl::OkStatus();
  }
  if (std::isnan(value)) return RequestFieldTypeError(f, wire_name);
  if (f.type == RequestFieldType::kInt && value != std::floor(value)) {
    return RequestFieldTypeError(f, wire_name);
  }
  if (f.min_exclusive && value <= f.min) {
    return Refuse(f, wire_name, absl::StrCat("must be greater than ", Number(f.min)));
  }
  if (value < f.min) return Refuse(f, wire_name, absl::StrCat("must be at least ", Number(f.min)));
  if (value > f.max) return Refuse(f, wire_name, absl::StrCat("must be at most ", Number(f.max)));
  return absl::OkStatus();
}

absl::Status SetRequestField(const RequestField& f, double value, GenerateRequest* request,
                             std::string_view wire_name) {
  if (absl::Status s = CheckRequestField(f, value, wire_name); !s.ok()) return s;
  const RequestFieldSlot slot = f.slot(*request);
  if (bool* const* b = std::get_if<bool*>(&slot)) {
    **b = value != 0;
  } else if (int* const* i = std::get_if<int*>(&slot)) {
    **i = static_cast<int>(value);
  } else if (float* const* x = std::get_if<float*>(&slot)) {
    **x = static_cast<float>(value);
  } else {
    assert(false && "a kUInt64 field takes SetRequestFieldBits");
  }
  return absl::OkStatus();
}

void SetRequestFieldBits(const RequestField& f, uint64_t value, GenerateRequest* request) {
  const RequestFieldSlot slot = f.slot(*request);
  assert(std::holds_alternative<uint64_t*>(slot));
  if (uint64_t* const* u = std::get_if<uint64_t*>(&slot)) **u = value;
}

double GetRequestField(const RequestField& f, const GenerateRequest& request) {
  // The slot is only read here.
  const RequestFieldSlot slot = f.slot(const_cast<GenerateRequest&>(request));
  return std::visit([](auto* p) { return static_cast<double>(*p); }, slot);
}

uint64_t GetRequestFieldBits(const RequestField& f, const GenerateRequest& request) {
  const RequestFieldSlot slot = f.slot(const_cast<GenerateRequest&>(request));
  assert(std::holds_alternative<uint64_t*>(slot));
  uint64_t* const* u = std::get_if<uint64_t*>(&slot);
  return u ? **u : 0;
}

absl::Status ValidateRequestFields(const GenerateRequest& request) {
  for (const RequestField& f : kFields) {
    const double value = GetRequestField(f, request);
    // A default is a valid setting, also where it is outside the bounds a
    // client may send: logprobs -1 (none).
    if (value == DefaultOf(f)) continue;
    if (absl::Status s = CheckRequestField(f, value); !s.ok()) return s;
  }
  for (const auto& [token, bias] : request.sampling.logit_bias) {
    if (absl::Status s = CheckLogitBias(token, bias); !s.ok()) return s;
  }
  for (int32_t token : request.stop_token_ids) {
    if (token < 0) return NotATokenId("stop_token_ids", token);
  }
  return absl::OkStatus();
}

absl::Status AddLogitBias(int64_t token, double bias, GenerateRequest* request) {
  ODMOE_RETURN_IF_ERROR(CheckLogitBias(token, bias));
  request->sampling.logit_bias[static_cast<int32_t>(token)] = static_cast<float>(bias);
  return absl::OkStatus();
}

absl::Status AddStopTokenId(int64_t token, GenerateRequest* request) {
  if (token < 0 || token > INT32_MAX) return NotATokenId("stop_token_ids", token);
  request->stop_token_ids.push_back(static_cast<int32_t>(token));
  return absl::OkStatus();
}

absl::Status ParseLogitBiasJson(std::string_view json_text, GenerateRequest* request) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "logit_bias: expected a JSON object of token id -> bias ({\"15043\": -100})");
  }
  for (const auto& [key, value] : j.items()) {
    ODMOE_RETURN_IF_ERROR(
        AddLogitBias(key, value.is_number() ? value.get<double>() : NAN, request));
  }
  return absl::OkStatus();
}

absl::Status AddLogitBias(std::string_view key, double bias, GenerateRequest* request) {
  int64_t token = -1;
  // Digits only (SimpleAtoi also takes "+5" and " 5").
  if (key.empty() || key.size() > 10 || key.find_first_not_of("-0123456789") != key.npos ||
      !absl::SimpleAtoi(A(key), &token)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit_bias: key '", ClipKey(key), "' is not a token id"));
  }
  return AddLogitBias(token, bias, request);
}

void AddRequestFlags(CliArgs& args, GenerateRequest* request, unsigned offered) {
  for (const RequestField& f : kFields) {
    if ((f.offered & offered) == 0) continue;
    const RequestFieldSlot slot = f.slot(*request);
    const std::string name = f.FlagName();
    const std::string metavar(f.metavar);
    std::string help(f.help);
    if (f.type == RequestFieldType::kFloat) {
      absl::StrAppend(&help, " (", f.min_exclusive ? "(" : "[", Number(f.min), ", ", Number(f.max),
                      "], default ", Number(GetRequestField(f, *request)), ")");
    } else if (f.type != RequestFieldType::kBool) {
      absl::StrAppend(&help, " (default ", Number(GetRequestField(f, *request)), ")");
    }
    if (bool* const* b = std::get_if<bool*>(&slot)) {
      args.AddFlag(name, *b, help);
    } else if (int* const* i = std::get_if<int*>(&slot)) {
      args.AddInt(name, *i, metavar, help);
    } else if (uint64_t* const* u = std::get_if<uint64_t*>(&slot)) {
      args.AddUInt64(name, *u, metavar, help);
    } else if (float* const* x = std::get_if<float*>(&slot)) {
      args.AddFloat(name, *x, metavar, help);
    }
  }
  if (!(offered & kRequestFieldCli)) return;
  // The list- and map-valued fields: each occurrence adds to the list. A
  // value's bounds are checked with the request (ValidateRequestFields).
  args.AddCustom(
      "logit-bias", "ID=BIAS|JSON",
      "add BIAS (-100 to 100; -100 bans) to token ID's logit; repeatable, or a JSON "
      "object {\"ID\": BIAS, ...}",
      [request](std::string_view v) {
        if (!v.empty() && v.front() == '{') return ParseLogitBiasJson(v, request).ok();
        const std::vector<absl::string_view> kv = absl::StrSplit(A(v), '=');
        int64_t token = 0;
        double bias = 0;
        if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &token) || !absl::SimpleAtod(kv[1], &bias)) {
          return false;
        }
        request->sampling
            .logit_bias[static_cast<int32_t>(std::clamp<int64_t>(token, INT32_MIN, INT32_MAX))] =
            static_cast<float>(bias);
        return true;
      });
  args.AddCustom(
      "stop-token-ids", "ID,ID,...",
      "token ids that end the generation as end-of-sequence does; repeatable",
      [request](std::string_view v) {
        for (absl::string_view part : absl::StrSplit(A(v), ',')) {
          int64_t token = 0;
          if (!absl::SimpleAtoi(part, &token) || token < INT32_MIN || token > INT32_MAX) {
            return false;
          }
          request->stop_token_ids.push_back(static_cast<int32_t>(token));
        }
        return true;
      });
  // Structured output: the grammar the output must match (GenerateRequest::
  // grammar), as GBNF or as the JSON Schema it is compiled from.
  args.AddCustom("grammar", "FILE", "GBNF grammar file the output must match (structured output)",
                 [request](std::string_view path) {
                   absl::StatusOr<std::string> text = ReadRegularFile(std::string(path), kMaxGbnfBytes);
                   if (!text.ok()) {
                     ODMOE_LOG_ERROR("--grammar: {}", text.status().message());
                     return false;
                   }
                   request->grammar = std::move(*text);
                   return true;
                 });
  args.AddCustom("json-schema", "FILE",
                 "JSON Schema file the output must validate against (compiled to a grammar)",
                 [request](std::string_view path) {
                   absl::StatusOr<std::string> text = ReadRegularFile(std::string(path), kMaxGbnfBytes);
                   absl::StatusOr<std::string> gbnf =
                       text.ok() ? JsonSchemaToGbnf(std::string_view(*text)) : text.status();
                   if (!gbnf.ok()) {
                     ODMOE_LOG_ERROR("--json-schema {}: {}", path, gbnf.status().message());
                     return false;
                   }
                   request->grammar = std::move(*gbnf);
                   return true;
                 });
}

}  // namespace odmoe
