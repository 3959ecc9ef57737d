// The request fields on the wire (cluster/request_proto.h): every field the
// table offers to gRPC is a proto field of the same name and a fitting type;
// a request survives the round trip; and a bad value gets the same verdict
// (code and message) from the gRPC mapping and from the HTTP parser.
#include "cluster/request_proto.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "engine/request_fields.h"
#include "gguf/gguf_reader.h"
#include "google/protobuf/descriptor.h"
#include "main_node/http_request.h"
#include "test_paths.h"

namespace odmoe::test {
namespace {

using google::protobuf::FieldDescriptor;
using json = nlohmann::json;

TEST_CASE("request proto: every gRPC field is a proto field of its type", "[request]") {
  const google::protobuf::Descriptor* d = v1::GenerateRequest::descriptor();
  for (const RequestField& f : RequestFields()) {
    INFO(f.name);
    const FieldDescriptor* p = d->FindFieldByName(std::string(f.name));
    if (!(f.offered & kRequestFieldGrpc)) continue;
    REQUIRE(p != nullptr);
    CHECK_FALSE(p->is_repeated());
    switch (f.type) {
      case RequestFieldType::kBool:
        CHECK(p->cpp_type() == FieldDescriptor::CPPTYPE_BOOL);
        break;
      case RequestFieldType::kUInt64:
        CHECK(p->cpp_type() == FieldDescriptor::CPPTYPE_UINT64);
        break;
      case RequestFieldType::kInt:
        CHECK((p->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
               p->cpp_type() == FieldDescriptor::CPPTYPE_UINT32));
        break;
      case RequestFieldType::kFloat:
        CHECK(p->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT);
        break;
    }
  }
}

TEST_CASE("request proto: a request survives the round trip", "[request]") {
  GenerateRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 9;
  r.sampling = {.temperature = 0.7f, .top_p = 0.9f, .top_k = 40, .seed = ~uint64_t{0} - 5};
  r.ignore_eos = true;
  v1::GenerateRequest wire;
  GenerateRequestToProto(r, &wire);
  const GenerateRequest back = GenerateRequestFromProto(wire).value();
  CHECK(back.prompt == r.prompt);
  CHECK(back.max_tokens == 9);
  CHECK(back.sampling.temperature == 0.7f);
  CHECK(back.sampling.top_p == 0.9f);
  CHECK(back.sampling.top_k == 40);
  CHECK(back.sampling.seed == r.sampling.seed);
  CHECK(back.ignore_eos);
  // Unset optional fields are the request's defaults; top_p 0 is no longer
  // "off" but an explicit value, refused like any other out of bounds.
  v1::GenerateRequest bare;
  bare.set_prompt("x");
  bare.set_max_tokens(4);
  CHECK(GenerateRequestFromProto(bare).value().sampling.top_p == 1.0f);
  bare.set_top_p(0);
  CHECK(GenerateRequestFromProto(bare).status().message() == "top_p: must be greater than 0");
}

TEST_CASE("request proto: the sampling chain survives the round trip", "[request]") {
  GenerateRequest r;
  r.prompt = "x";
  r.sampling = {.temperature = 0.7f,
                .top_k = -1,
                .min_p = 0.1f,
                .typical_p = 0.8f,
                .presence_penalty = -1.5f,
                .frequency_penalty = 0.25f,
                .repetition_penalty = 1.3f,
                .repeat_last_n = -1,
                .logit_bias = {{3, -100.0f}, {9, 4.5f}}};
  r.min_tokens = 5;
  r.stop_token_ids = {13, 2};
  v1::GenerateRequest wire;
  GenerateRequestToProto(r, &wire);
  const GenerateRequest back = GenerateRequestFromProto(wire).value();
  CHECK(back.sampling.top_k == -1);
  CHECK(back.sampling.min_p == 0.1f);
  CHECK(back.sampling.typical_p == 0.8f);
  CHECK(back.sampling.presence_penalty == -1.5f);
  CHECK(back.sampling.frequency_penalty == 0.25f);
  CHECK(back.sampling.repetition_penalty == 1.3f);
  CHECK(back.sampling.repeat_last_n == -1);
  CHECK(back.sampling.logit_bias == r.sampling.logit_bias);
  CHECK(back.min_tokens == 5);
  CHECK(back.stop_token_ids == r.stop_token_ids);
  // Unset: the defaults (the window is llama-server's 64).
  v1::GenerateRequest bare;
  bare.set_prompt("x");
  bare.set_max_tokens(4);
  const GenerateRequest d = GenerateRequestFromProto(bare).value();
  CHECK(d.sampling.repeat_last_n == 64);
  CHECK(d.sampling.repetition_penalty == 1.0f);
  CHECK(d.sampling.typical_p == 1.0f);
  CHECK(d.sampling.logit_bias.empty());
}

const Tokenizer& TinyTokenizer() {
  static const std::unique_ptr<GgufFile> file =
      std::move(*GgufFile::Open(SourcePath("models/tiny-mixtral-f16.gguf")));
  static const std::unique_ptr<Tokenizer> tok = std::move(*Tokenizer::FromGguf(*file));
  return *tok;
}

// The HTTP parser's verdict on {"prompt": "x", <key>: <value>}.
absl::Status Http(const std::string& key, const json& value) {
  ParsedRequest parsed;
  return ParseCompletionBody(json{{"prompt", "x"}, {key, value}}, "tiny-mixtral", TinyTokenizer(),
                             &parsed);
}

TEST_CASE("request proto: HTTP and gRPC give one verdict for one bad value", "[request]") {
  struct Case {
    const char* key;
    double value;
  };
  for (const Case& c :
       {Case{"presence_penalty", 2.5}, Case{"frequency_penalty", -3}, Case{"repetition_penalty", 0},
        Case{"min_p", 1.5}, Case{"typical_p", 0}, Case{"repeat_last_n", -2}, Case{"min_tokens", -1},
        Case{"top_k", -5}, Case{"repeat_last_n", 100}, Case{"min_p", 0.5}, Case{"temperature", 7},
        Case{"temperature", -1}, Case{"top_p", 1.5}, Case{"top_p", 0}, Case{"max_tokens", 16777217},
        Case{"max_tokens", -2}, Case{"temperature", 2}, Case{"top_p", 0.5},
        Case{"max_tokens", 8}}) {
    INFO(c.key << " = " << c.value);
    v1::GenerateRequest wire;
    wire.set_prompt("x");
    wire.set_max_tokens(4);
    const google::protobuf::Reflection* refl = wire.GetReflection();
    const FieldDescriptor* p = wire.GetDescriptor()->FindFieldByName(c.key);
    REQUIRE(p != nullptr);
    if (p->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
      refl->SetFloat(&wire, p, static_cast<float>(c.value));
    } else if (p->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
      refl->SetInt32(&wire, p, static_cast<int32_t>(c.value));
    } else if (c.value < 0) {
      continue;  // max_tokens is unsigned on the wire: no negative to send
    } else {
      refl->SetUInt32(&wire, p, static_cast<uint32_t>(c.value));
    }
    const absl::Status grpc = GenerateRequestFromProto(wire).status();
    const absl::Status http =
        Http(c.key,
             c.value == std::floor(c.value) ? json(static_cast<int64_t>(c.value)) : json(c.value));
    CHECK(grpc.code() == http.code());
    CHECK(grpc.message() == http.message());
  }
  // The map and the list: the same checks, the same messages.
  v1::GenerateRequest wire;
  wire.set_prompt("x");
  wire.set_max_tokens(4);
  (*wire.mutable_logit_bias())[5] = 150;
  CHECK(GenerateRequestFromProto(wire).status().message() ==
        Http("logit_bias", json{{"5", 150}}).message());
  wire.mutable_logit_bias()->clear();
  (*wire.mutable_logit_bias())[-5] = 1;
  CHECK(GenerateRequestFromProto(wire).status().message() ==
        Http("logit_bias", json{{"-5", 1}}).message());
  wire.mutable_logit_bias()->clear();
  wire.add_stop_token_ids(-2);
  CHECK(GenerateRequestFromProto(wire).status().message() ==
        Http("stop_token_ids", json::array({-2})).message());
  CHECK(GenerateRequestFromProto(wire).status().message() ==
        "stop_token_ids: -2 is not a token id");
}

}  // namespace
}  // namespace odmoe::test
