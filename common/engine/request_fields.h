// The generation request's fields, declared once: each field's name, type,
// bounds, help and where a client may send it. The HTTP API (OpenAI JSON), the
// gRPC service (v1::GenerateRequest, by field name), the command-line tools
// (odmoe-run, odmoe complete: one flag per field) and the engine's own check
// (PreparePrompt) all read this table, so a field has one set of bounds and
// one error message, whichever way it arrives:
//
//   INVALID_ARGUMENT "temperature: must be at most 2"
//   INVALID_ARGUMENT "top_p: must be greater than 0"
//   INVALID_ARGUMENT "max_tokens: expected an integer from 1 to 16777216"
//
// The defaults are GenerateRequest's (generation.h) and SamplingParams'
// (sampler.h) member initializers; a transport whose reference API has
// another default says so in `http_default` (OpenAI's temperature 1).
//
// Adding a sampling parameter (docs/contributing.md): a member of
// SamplingParams (sampler.h) and its use in Sampler (sampler.cpp); a row in
// RequestFields() (request_fields.cpp); an `optional` field of the same name
// in proto/odmoe.proto's GenerateRequest when gRPC offers it. The HTTP API,
// the gRPC service and the tools' flags follow from the row.
//
//   GenerateRequest req;
//   const RequestField& t = RequestFieldNamed("temperature");
//   ODMOE_RETURN_IF_ERROR(SetRequestField(t, 0.8, &req));    // checked, then stored
//   ODMOE_RETURN_IF_ERROR(ValidateRequestFields(req));        // every field of a built request
//   AddRequestFlags(args, &req, kRequestFieldCli);            // --temperature, --top-p, ...
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "engine/generation.h"

namespace odmoe {

class CliArgs;

/// The largest max_tokens a request may ask for (the context bounds it
/// further: PreparePrompt).
inline constexpr int64_t kMaxMaxTokens = int64_t{1} << 24;

enum class RequestFieldType {
  kBool,
  kInt,     // an int in [min, max]
  kUInt64,  // any 64-bit integer (a seed); no bounds
  kFloat,   // a finite float in [min, max] (or (min, max] with min_exclusive)
};

/// Where a client may send a field by its name (a bit set). A field without
/// a bit is read by that transport's own rule, if at all (max_tokens' HTTP
/// alias and echo rule, the two shapes of logprobs).
enum RequestFieldOffer : unsigned {
  kRequestFieldHttp = 1u << 0,  // a key of the OpenAI request bodies (both endpoints)
  kRequestFieldGrpc = 1u << 1,  // a field of v1::GenerateRequest of the same name
  kRequestFieldCli = 1u << 2,   // a flag of odmoe-run and odmoe complete
};

/// Where a field's value lives in a GenerateRequest.
using RequestFieldSlot = std::variant<bool*, int*, uint64_t*, float*>;

struct RequestField {
  std::string_view name;  // JSON key and proto field name
  RequestFieldType type;
  double min = 0;  // bounds (kInt, kFloat); inclusive unless min_exclusive
  double max = 0;
  bool min_exclusive = false;
  std::string_view help;  // one line, for --help (and the API reference)
  unsigned offered = 0;   // RequestFieldOffer bits
  std::string_view flag;  // the command-line flag ("n"); empty: the name with '-' for '_'
  std::string_view metavar;
  /// The HTTP API's default where it differs from GenerateRequest's.
  std::optional<double> http_default;
  RequestFieldSlot (*slot)(GenerateRequest& request);

  /// The command-line flag's name (`flag`, else "top-p" for top_p).
  std::string FlagName() const;
};

/// Every field, in the order of --help.
std::span<const RequestField> RequestFields();
/// The field named `name`, or null.
const RequestField* FindRequestField(std::string_view name);
/// The field named `name`, which must exist (a programmer's error otherwise).
const RequestField& RequestFieldNamed(std::string_view name);

/// OK when `value` is within the field's bounds; else INVALID_ARGUMENT
/// "<name>: must be at least 1" / "must be at most 2" / "must be greater
/// than 0", or the type error for a value no bound can describe (NaN).
/// `wire_name` replaces the field's name in the message (max_completion_tokens,
/// top_logprobs: a transport's other name for the field).
absl::Status CheckRequestField(const RequestField& field, double value,
                               std::string_view wire_name = {});

/// INVALID_ARGUMENT "<name>: expected an integer from 1 to 16777216" (and the
/// like for each type): the value had the wrong type for the field.
absl::Status RequestFieldTypeError(const RequestField& field, std::string_view wire_name = {});

/// CheckRequestField, then stores `value` (kBool: non-zero is true). kUInt64
/// fields take SetRequestFieldBits.
absl::Status SetRequestField(const RequestField& field, double value, GenerateRequest* request,
                             std::string_view wire_name = {});
/// Stores a kUInt64 field's value (every 64-bit value is one).
void SetRequestFieldBits(const RequestField& field, uint64_t value, GenerateRequest* request);

/// The field's value in `request`, as a double (kUInt64: rounded).
double GetRequestField(const RequestField& field, const GenerateRequest& request);
/// A kUInt64 field's value.
uint64_t GetRequestFieldBits(const RequestField& field, const GenerateRequest& request);

/// Every field of `request` against its bounds: the first one out of them,
/// then logit_bias and stop_token_ids (as AddLogitBias, AddStopTokenId).
/// A field at its default passes (the default may mean "none": logprobs -1).
/// min_tokens may exceed max_tokens (max_tokens ends the generation).
absl::Status ValidateRequestFields(const GenerateRequest& request);

/// The list- and map-valued fields are not rows (their value is not one
/// number); every transport offers them under these names, reads them with
/// its own shape (HTTP: OpenAI's {"ID": bias} and [ids]; gRPC: a map and a
/// repeated field; the tools: --logit-bias ID=BIAS (repeated, or a JSON
/// object) and --stop-token-ids ID,ID,...) and adds each entry here, where it
/// is checked. Their ids are checked against the vocabulary in PreparePrompt.
///   logit_bias      token id -> bias in [-100, 100] (-100 bans the token)
///   stop_token_ids  token ids that end the generation
inline constexpr double kMaxLogitBias = 100;
/// INVALID_ARGUMENT "logit_bias: the bias of token 5 must be from -100 to
/// 100" / "logit_bias: -3 is not a token id"; else stores it.
absl::Status AddLogitBias(int64_t token, double bias, GenerateRequest* request);
/// The same with the token id as a JSON key ("15043"): "logit_bias: key 'x'
/// is not a token id" when it is not a decimal integer.
absl::Status AddLogitBias(std::string_view key, double bias, GenerateRequest* request);
/// INVALID_ARGUMENT "stop_token_ids: -3 is not a token id"; else appends it.
absl::Status AddStopTokenId(int64_t token, GenerateRequest* request);
/// A JSON object {"ID": bias, ...} (OpenAI's logit_bias) into `request`;
/// INVALID_ARGUMENT "logit_bias: ..." naming the bad key or value.
absl::Status ParseLogitBiasJson(std::string_view json_text, GenerateRequest* request);

/// One flag per field offered in `offered` (kRequestFieldCli), bound to
/// `request`'s members: their defaults are the request's values; with
/// kRequestFieldCli also --logit-bias and --stop-token-ids.
void AddRequestFlags(CliArgs& args, GenerateRequest* request, unsigned offered = kRequestFieldCli);

}  // namespace odmoe
