#include "cluster/request_proto.h"

#include <cassert>

#include "engine/request_fields.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace odmoe {
namespace {

using google::protobuf::FieldDescriptor;

// The proto field of a gRPC row (a test checks every row has one of its
// type): bool, int32 or uint32, uint64, float.
const FieldDescriptor* ProtoField(const RequestField& f) {
  return v1::GenerateRequest::descriptor()->FindFieldByName(std::string(f.name));
}

}  // namespace

absl::StatusOr<GenerateRequest> GenerateRequestFromProto(const v1::GenerateRequest& in) {
  GenerateRequest r;
  r.prompt = in.prompt();
  r.prompt_ids.assign(in.prompt_ids().begin(), in.prompt_ids().end());
  const google::protobuf::Reflection* refl = in.GetReflection();
  for (const RequestField& f : RequestFields()) {
    if (!(f.offered & kRequestFieldGrpc)) continue;
    const FieldDescriptor* p = ProtoField(f);
    if (p == nullptr || (p->has_presence() && !refl->HasField(in, p))) continue;
    double value = 0;
    switch (p->cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL:
        value = refl->GetBool(in, p) ? 1 : 0;
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        value = refl->GetInt32(in, p);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        value = refl->GetUInt32(in, p);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        value = refl->GetFloat(in, p);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        SetRequestFieldBits(f, refl->GetUInt64(in, p), &r);
        continue;
      default:
        assert(false && "a request field's proto type has no mapping");
        continue;
    }
    if (absl::Status s = SetRequestField(f, value, &r); !s.ok()) return s;
  }
  // The map- and list-valued fields (request_fields.h), checked entry by entry.
  for (const auto& [token, bias] : in.logit_bias()) {
    if (absl::Status s = AddLogitBias(token, bias, &r); !s.ok()) return s;
  }
  for (int32_t token : in.stop_token_ids()) {
    if (absl::Status s = AddStopTokenId(token, &r); !s.ok()) return s;
  }
  r.grammar = in.grammar();  // checked with the prompt (PreparePrompt)
  return r;
}

void GenerateRequestToProto(const GenerateRequest& request, v1::GenerateRequest* out) {
  out->set_prompt(request.prompt);
  out->mutable_prompt_ids()->Assign(request.prompt_ids.begin(), request.prompt_ids.end());
  const google::protobuf::Reflection* refl = out->GetReflection();
  for (const RequestField& f : RequestFields()) {
    if (!(f.offered & kRequestFieldGrpc)) continue;
    const FieldDescriptor* p = ProtoField(f);
    if (p == nullptr) continue;
    const double value = GetRequestField(f, request);
    switch (p->cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL:
        refl->SetBool(out, p, value != 0);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        refl->SetInt32(out, p, static_cast<int32_t>(value));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        refl->SetUInt32(out, p, value < 0 ? 0 : static_cast<uint32_t>(value));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        refl->SetFloat(out, p, static_cast<float>(value));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        refl->SetUInt64(out, p, GetRequestFieldBits(f, request));
        break;
      default:
        assert(false && "a request field's proto type has no mapping");
    }
  }
  for (const auto& [token, bias] : request.sampling.logit_bias) {
    (*out->mutable_logit_bias())[token] = bias;
  }
  out->mutable_stop_token_ids()->Assign(request.stop_token_ids.begin(),
                                        request.stop_token_ids.end());
  out->set_grammar(request.grammar);
}

}  // namespace odmoe
