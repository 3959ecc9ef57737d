// Hints and tasks for driving a WorkerCore directly in tests (request 1).
//
//   REQUIRE(core->AddHint(TestHint(/*token=*/1, /*layer=*/0, {3, 5})).ok());
//   REQUIRE(core->SubmitTask(TestTask(/*id=*/7, 1, 0, /*expert=*/3, /*position=*/0, x)).ok());
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/wire.h"
#include "odmoe.pb.h"

namespace odmoe::test {

inline v1::Hint TestHint(uint32_t token, uint32_t layer, const std::vector<uint32_t>& experts) {
  v1::Hint h;
  h.mutable_key()->set_request(1);
  h.mutable_key()->set_token(token);
  h.mutable_key()->set_layer(layer);
  for (uint32_t e : experts) h.add_experts(e);
  return h;
}

/// A task of one row `x` (n_embd floats, sent as f32).
inline v1::ExpertTask TestTask(uint64_t id, uint32_t token, uint32_t layer, uint32_t expert,
                               uint32_t position, const std::vector<float>& x) {
  v1::ExpertTask t;
  t.set_task_id(id);
  t.mutable_key()->set_request(1);
  t.mutable_key()->set_token(token);
  t.mutable_key()->set_layer(layer);
  t.set_expert(expert);
  t.set_position(position);
  EncodeRows(x.data(), 1, static_cast<int64_t>(x.size()), v1::WIRE_DTYPE_F32, t.mutable_input());
  return t;
}

}  // namespace odmoe::test
