#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "cluster/wire.h"

namespace odmoe {

TEST_CASE("wire: f32 rows round-trip bit for bit", "[cluster]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> x(3 * 5);
  for (float& v : x) v = dist(rng);
  x[4] = -0.0f;
  v1::Rows msg;
  EncodeRows(x.data(), 3, 5, v1::WIRE_DTYPE_F32, &msg);
  std::vector<float> back;
  auto rows = DecodeRows(msg, 5, 3, &back);
  REQUIRE(rows.ok());
  CHECK(*rows == 3);
  CHECK(std::memcmp(back.data(), x.data(), x.size() * sizeof(float)) == 0);
}

TEST_CASE("wire: f16 rows halve the bytes and round", "[cluster]") {
  std::vector<float> x = {1.0f, 0.333333f, -2.5f, 1000.0f};
  v1::Rows msg;
  EncodeRows(x.data(), 1, 4, v1::WIRE_DTYPE_F16, &msg);
  CHECK(msg.data().size() == 8);
  std::vector<float> back;
  REQUIRE(DecodeRows(msg, 4, 1, &back).ok());
  for (size_t i = 0; i < x.size(); ++i) CHECK(back[i] == Approx(x[i]).epsilon(1e-3));
}

TEST_CASE("wire: malformed rows are rejected with a reason", "[cluster]") {
  std::vector<float> x(8, 1.0f);
  v1::Rows good;
  EncodeRows(x.data(), 2, 4, v1::WIRE_DTYPE_F32, &good);
  std::vector<float> out;
  v1::Rows m = good;
  m.set_cols(5);
  CHECK(DecodeRows(m, 4, 2, &out).status().message().find("columns") != std::string::npos);
  m = good;
  m.set_rows(0);
  CHECK(!DecodeRows(m, 4, 2, &out).ok());
  m = good;
  m.set_rows(3);  // claims more rows than the bytes hold
  CHECK(DecodeRows(m, 4, 8, &out).status().message().find("bytes") != std::string::npos);
  CHECK(!DecodeRows(good, 4, 1, &out).ok());  // more rows than allowed
  m = good;
  m.mutable_data()->pop_back();
  CHECK(!DecodeRows(m, 4, 2, &out).ok());
  m = good;
  m.set_dtype(static_cast<v1::WireDType>(9));
  CHECK(DecodeRows(m, 4, 2, &out).status().message().find("dtype") != std::string::npos);
  m = good;
  m.set_rows(0xFFFFFFFFu);
  CHECK(!DecodeRows(m, 4, 1 << 20, &out).ok());
}

TEST_CASE("wire: keys and expert lists are checked against the model", "[cluster]") {
  ModelConfig c;
  c.n_layer = 8;
  c.n_expert = 8;
  c.n_expert_used = 2;
  v1::StepKey key;
  key.set_layer(7);
  CHECK(ValidateStepKey(key, c).ok());
  key.set_layer(8);
  CHECK(!ValidateStepKey(key, c).ok());
  CHECK(ValidateExpert(7, c).ok());
  CHECK(!ValidateExpert(8, c).ok());
  google::protobuf::RepeatedField<uint32_t> list;
  list.Add(1);
  CHECK(!ValidateExpertList(list, c).ok());  // too few
  list.Add(1);
  CHECK(!ValidateExpertList(list, c).ok());  // repeated
  list.Set(1, 9);
  CHECK(!ValidateExpertList(list, c).ok());  // out of range
  list.Set(1, 3);
  CHECK(ValidateExpertList(list, c).ok());
  v1::StepKey a, b;
  a.set_request(1);
  a.set_token(2);
  b.set_request(1);
  b.set_token(2);
  b.set_layer(1);
  CHECK(KeyLess(a, b));
  CHECK(!KeyLess(b, a));
  CHECK(!KeyEqual(a, b));
}

}  // namespace odmoe
