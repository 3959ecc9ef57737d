// The recurrent (Gated DeltaNet, Mamba-2) layers' per-sequence state on the
// tiny Qwen3-Next, Qwen3.5 and Nemotron-H (its token mixers) fixtures: a
// sequence's logits do not depend on how its rows are batched (prefill
// chunks, one row at a time, other sequences' segments in the same batch); a
// rollback to the checkpoint (rejected drafts) and a recompute from it
// (accepted drafts) give the logits of the straight run; rows that cannot
// continue the state are refused.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "backend_registry.h"
#include "engine/local_expert_executor.h"
#include "engine/transformer.h"
#include "model/model_file.h"
#include "test_paths.h"

namespace odmoe {
namespace {

struct Rig {
  std::unique_ptr<ModelFile> model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> tf;
  std::unique_ptr<LocalExpertExecutor> experts;
};

Rig MakeRig(const std::string& arch, int n_batch, int n_seq = 1) {
  Rig r;
  auto m = ModelFile::Open(test::SourcePath("tests/data/arch/tiny-" + arch + ".gguf"));
  REQUIRE(m.ok());
  r.model = std::move(m).value();
  auto be = CreateBackend("cpu");
  REQUIRE(be.ok());
  r.backend = std::move(be).value();
  Transformer::Options o;
  o.n_ctx = 64;
  o.n_batch = n_batch;
  o.n_seq = n_seq;
  auto tf = Transformer::Create(*r.model, *r.backend, o);
  REQUIRE(tf.ok());
  r.tf = std::move(tf).value();
  auto ex = LocalExpertExecutor::Create(*r.model, *r.backend, r.tf->n_batch());
  REQUIRE(ex.ok());
  r.experts = std::move(ex).value();
  return r;
}

std::vector<float> Run(Rig& r, std::span<const int32_t> tokens, int pos0) {
  std::vector<float> logits;
  const absl::Status s = r.tf->Forward(tokens, pos0, *r.experts, &logits, nullptr);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return logits;
}

const std::vector<int32_t> kTokens = {17, 301, 5, 77, 640, 12, 999, 3, 250};

TEST_CASE("recurrent state: batching, chunks and rollbacks give the straight run's logits",
          "[engine][delta_net]") {
  for (const char* arch : {"qwen3next", "qwen35moe", "nemotron_h_moe-mixers"}) {
    INFO(arch);
    const std::span<const int32_t> all(kTokens);
    Rig straight = MakeRig(arch, 64);
    REQUIRE(straight.model->config().n_recurrent() == 3);
    const std::vector<float> want = Run(straight, all, 0);
    CHECK(straight.tf->recurrent_state().position(0) == 9);

    // Prefill in chunks of 2 rows (Forward splits by n_batch).
    Rig chunked = MakeRig(arch, 2);
    CHECK(Run(chunked, all, 0) == want);

    // Decode one row at a time after a prefill of 4.
    Rig decode = MakeRig(arch, 64);
    Run(decode, all.first(4), 0);
    std::vector<float> got;
    for (int p = 4; p < 9; ++p) got = Run(decode, all.subspan(p, 1), p);
    CHECK(got == want);

    // Rejected drafts: rows at 4.. with other tokens, then the real ones from
    // the checkpoint (4).
    Rig draft = MakeRig(arch, 64);
    Run(draft, all.first(4), 0);
    const std::vector<int32_t> wrong = {8, 9, 10};
    Run(draft, wrong, 4);
    CHECK(draft.tf->recurrent_state().checkpoint(0) == 4);
    CHECK(Run(draft, all.subspan(4), 4) == want);

    // Forward 5 rows, roll back to 2 (recompute [0, 2) from the checkpoint
    // at 0), forward the others again.
    Rig back = MakeRig(arch, 64);
    Run(back, all.first(5), 0);
    std::vector<float> logits;
    const absl::Status refused =
        back.tf->Forward(all.subspan(2), 2, *back.experts, &logits, nullptr);
    CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
    Run(back, all.first(2), 0);
    CHECK(Run(back, all.subspan(2), 2) == want);

    // A cancelled sequence: cleared, it must start again at 0.
    back.tf->ClearSequence(0);
    CHECK(back.tf->Forward(all.subspan(2, 1), 9, *back.experts, &logits, nullptr).code() ==
          absl::StatusCode::kFailedPrecondition);
    CHECK(Run(back, all, 0) == want);
  }
}

TEST_CASE("recurrent state: two sequences in one batch keep their states apart",
          "[engine][delta_net]") {
  for (const char* arch : {"qwen3next", "qwen35moe", "nemotron_h_moe-mixers"}) {
    INFO(arch);
    const std::vector<int32_t> a = {17, 301, 5, 77, 640}, b = {999, 3, 250};
    Rig alone = MakeRig(arch, 64);
    const std::vector<float> want_a = Run(alone, a, 0);
    const std::vector<float> want_b = Run(alone, b, 0);  // slot 0 again: a new sequence

    Rig both = MakeRig(arch, 64, 2);
    // Prefill a's first 3 rows and b's 2 in one batch, then one decode row each.
    const std::vector<int32_t> first = {a[0], a[1], a[2], b[0], b[1]};
    const Transformer::Segment segs[] = {{0, 0, 3}, {1, 0, 2}};
    REQUIRE(both.tf->ForwardSegments(first, segs, *both.experts).ok());
    const std::vector<int32_t> second = {a[3], b[2]};
    const Transformer::Segment step[] = {{0, 3, 1}, {1, 2, 1}};
    REQUIRE(both.tf->ForwardSegments(second, step, *both.experts).ok());
    const std::vector<int32_t> last = {a[4]};
    const Transformer::Segment tail[] = {{0, 4, 1}};
    std::vector<float> got_b;
    REQUIRE(both.tf->SegmentLogits(&got_b).ok());  // still the step's rows: b's last is row 1
    const size_t v = want_b.size();
    CHECK(std::vector<float>(got_b.begin() + static_cast<std::ptrdiff_t>(v), got_b.end()) ==
          want_b);
    REQUIRE(both.tf->ForwardSegments(last, tail, *both.experts).ok());
    std::vector<float> got_a;
    REQUIRE(both.tf->SegmentLogits(&got_a).ok());
    CHECK(got_a == want_a);
  }
}

}  // namespace
}  // namespace odmoe
