// Fuzz target: the wire. The input is read as each message a node receives
// from a peer (a worker's WorkerRequest, the shadow's ShadowRequest, the main
// node's ExpertResult and ShadowReply, and the client calls), and everything
// in it goes through the checks a receiver runs before using it: rows
// (dtype, shape, byte count), step keys, expert ids and lists.
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/wire.h"
#include "fuzz_support.h"

namespace {

odmoe::ModelConfig Config() {
  odmoe::ModelConfig c;  // a small MoE model with a dense first layer
  c.n_layer = 4;
  c.n_embd = 16;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 8;
  c.n_dense_leading = 1;
  return c;
}

void CheckRows(const odmoe::v1::Rows& rows, int64_t cols) {
  std::vector<float> out;
  auto r = odmoe::DecodeRows(rows, cols, 64, &out, "fuzz");
  if (r.ok() && out.size() != static_cast<size_t>(*r * cols)) {
    odmoe::fuzz::Die("DecodeRows returned a wrong size");
  }
}

void CheckKey(const odmoe::v1::StepKey& key, const odmoe::ModelConfig& c) {
  odmoe::fuzz::Consume(odmoe::ValidateStepKey(key, c).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const odmoe::ModelConfig c = Config();
  const auto* bytes = reinterpret_cast<const char*>(data);
  const int n = static_cast<int>(size);
  namespace v1 = odmoe::v1;
  if (v1::WorkerRequest w; w.ParseFromArray(bytes, n)) {
    if (w.has_task()) {
      CheckKey(w.task().key(), c);
      CheckRows(w.task().input(), c.n_embd);
      odmoe::fuzz::Consume(odmoe::ValidateExpert(w.task().expert(), c).ok());
    }
    if (w.has_hint()) {
      CheckKey(w.hint().key(), c);
      odmoe::fuzz::Consume(odmoe::ValidateExpertList(w.hint().experts(), c).ok());
      odmoe::fuzz::Consume(
          odmoe::ValidateExpertList(w.hint().experts(), c, /*allow_union=*/true).ok());
    }
  }
  if (v1::ShadowRequest s; s.ParseFromArray(bytes, n) && s.has_align() && s.align().has_kv()) {
    CheckRows(s.align().kv().k(), c.kv_width());
    CheckRows(s.align().kv().v(), c.kv_width());
  }
  if (v1::ExpertResult r; r.ParseFromArray(bytes, n)) {
    CheckKey(r.key(), c);
    CheckRows(r.output(), c.n_embd);
  }
  if (v1::ShadowReply r; r.ParseFromArray(bytes, n) && r.has_prediction()) {
    CheckKey(r.prediction().key(), c);
    odmoe::fuzz::Consume(odmoe::ValidateExpertList(r.prediction().experts(), c).ok());
  }
  if (v1::ShadowReply r; r.ParseFromArray(bytes, n) && r.has_predictions()) {
    for (const v1::Prediction& p : r.predictions().predictions()) {
      CheckKey(p.key(), c);
      odmoe::fuzz::Consume(odmoe::ValidateExpertList(p.experts(), c).ok());
    }
  }
  v1::GenerateRequest g;
  odmoe::fuzz::Consume(g.ParseFromArray(bytes, n));
  v1::ScoreRequest sc;
  odmoe::fuzz::Consume(sc.ParseFromArray(bytes, n));
  v1::Hello h;
  odmoe::fuzz::Consume(h.ParseFromArray(bytes, n));
  for (int i = 0; i + 1 < n; i += 2) {
    odmoe::v1::StepKey a, b;
    a.set_layer(data[i]);
    b.set_layer(data[i + 1]);
    if (odmoe::KeyLess(a, b) && odmoe::KeyLess(b, a)) {
      odmoe::fuzz::Die("KeyLess is not a strict order");
    }
  }
  return 0;
}
