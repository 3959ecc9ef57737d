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
  for (const Case& c : {Case{"temperature", 7}, Case{"temperature", -1}, Case{"top_p", 1.5},
                        Case{"top_p", 0}, Case{"max_tokens", 16777217}, Case{"max_tokens", -2},
                        Case{"temperature", 2}, Case{"top_p", 0.5}, Case{"max_tokens", 8}}) {
    INFO(c.key << " = " << c.value);
    v1::GenerateRequest wire;
    wire.set_prompt("x");
    wire.set_max_tokens(4);
    const google::protobuf::Reflection* refl = wire.GetReflection();
    const FieldDescriptor* p = wire.GetDescriptor()->FindFieldByName(c.key);
    REQUIRE(p != nullptr);
    if (p->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
      refl->SetFloat(&wire, p, static_cast<float>(c.value));
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
}

}  // namespace
}  // namespace odmoe::test
