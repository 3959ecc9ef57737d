// The generation request on the wire: v1::GenerateRequest <-> GenerateRequest,
// field by field from the request's field table (engine/request_fields.h):
// every field offered to gRPC (kRequestFieldGrpc) is the proto field of the
// same name, read and checked by its row, so a new sampling parameter needs
// its row and its proto field, nothing here. The map- and list-valued fields
// (logit_bias, stop_token_ids) are read here, entry by entry, through
// AddLogitBias / AddStopTokenId.
//
// A proto field declared `optional` is "not given" (the request's default)
// when unset; a plain proto3 scalar always carries its value (max_tokens 0 is
// refused, temperature 0 is greedy). New fields are declared `optional`.
//
//   ODMOE_ASSIGN_OR_RETURN(GenerateRequest req, GenerateRequestFromProto(in));   // main node
//   v1::GenerateRequest wire;  GenerateRequestToProto(req, &wire);               // a client
#pragma once

#include "absl/status/statusor.h"
#include "cluster/protocol.h"
#include "engine/generation.h"

namespace odmoe {

/// The prompt (text or ids) and every gRPC field, each checked by its row
/// (INVALID_ARGUMENT "<field>: ..."); the experiment is not part of it.
absl::StatusOr<GenerateRequest> GenerateRequestFromProto(const v1::GenerateRequest& in);

/// The prompt and every gRPC field of `request` into `out` (the experiment
/// untouched).
void GenerateRequestToProto(const GenerateRequest& request, v1::GenerateRequest* out);

}  // namespace odmoe
