// The op test cases shared by the backend test files: each case builds seeded
// random inputs once, can run its op on any Backend (uploading the inputs to
// that backend's memory), and knows the double-precision reference result.
//
//   for (const OpCase& c : MakeOpCases()) {
//     std::vector<float> got = c.run(backend);
//     REQUIRE(ref::Nmse(got, c.reference()) <= c.max_nmse);
//   }
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace odmoe::test {

/// Inputs and outputs of one op run, in one backend's memory.
class DeviceData {
 public:
  explicit DeviceData(Backend& be) : be_(be) {}
  float* Floats(const std::vector<float>& host);
  float* Zeros(size_t n);
  int32_t* Ints(const std::vector<int32_t>& host);
  /// A weight of `rows` x `cols` elements of `type`; `bytes` must outlive it.
  WeightRef Weight(DType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols);
  std::vector<float> Read(const float* p, size_t n);
  std::vector<int32_t> ReadInts(const int32_t* p, size_t n);

 private:
  void* Alloc(size_t bytes);
  Backend& be_;
  std::vector<std::unique_ptr<BackendBuffer>> buffers_;
  std::vector<BackendWeight> weights_;
};

struct OpCase {
  std::string name;  // "MatMul q4_0 k=96 out=33 n=17"
  double max_nmse;   // tolerance against the reference: normalized MSE
  double max_rel;    // and max |got - want| / max |want|
  std::function<std::vector<float>(Backend&)> run;
  std::function<std::vector<double>()> reference;
  /// The weight type the case loads (MatMul, GetRows); F32 for the others.
  DType weight_type = DType::kF32;
};

/// Every case of every op (MatMul for each weight type and odd shapes,
/// GetRows, RmsNorm, Rope with and without YaRN and offsets, Attention with
/// and without sinks / windows / narrower V heads, Softmax, RouterTopK,
/// SwiGlu, SwiGluOai, Add, Copy, GatherRows, ScatterAddScaled).
/// The weight types the op tests cover: every type but Q8_K (an activation
/// type) that the CPU backend computes with (CpuSupportsWeightType).
std::vector<DType> WeightTypesUnderTest();

std::vector<OpCase> MakeOpCases();
/// The linear-attention ops' cases (op_cases_delta_net.cpp; in MakeOpCases).
void AddDeltaNetCases(std::vector<OpCase>& cases);

/// Gated DeltaNet's inputs for a test: `rows` rows of random q/k/v, decay
/// and gate inputs, and a random starting state.
struct DeltaInputs {
  DeltaNetParams p;
  int64_t rows = 0;
  std::vector<float> qkv, alpha, beta, a, dt_bias, state;
};
/// GatedDeltaNet on `be` over the rows in calls of `chunks` rows each (in
/// order), from the inputs' state (or zeros); the outputs, then the state.
std::vector<float> RunDeltaNet(Backend& be, const DeltaInputs& in, bool with_state,
                               std::span<const int64_t> chunks);
DeltaInputs MakeDeltaInputs(int nk, int nv, int hk, int64_t rows, bool tiled, uint32_t seed);

/// The Mamba-2 ops' cases (op_cases_mamba2.cpp; in MakeOpCases).
void AddMamba2Cases(std::vector<OpCase>& cases);

/// Mamba-2's scan inputs for a test: `rows` rows of random x / B / C, dt,
/// and per head a (negative), D, dt_bias, and a random start state.
struct Mamba2Inputs {
  Mamba2Params p;
  int64_t rows = 0;
  std::vector<float> xbc, dt, a, d, dt_bias, state;
};
/// Mamba2Scan on `be` over the rows in calls of `chunks` rows each (the
/// state carried between calls): the outputs, then the final state.
std::vector<float> RunMamba2Scan(Backend& be, const Mamba2Inputs& in, bool with_state,
                                 std::span<const int64_t> chunks);
Mamba2Inputs MakeMamba2Inputs(int heads, int head_dim, int groups, int state, int64_t rows,
                              uint32_t seed);

/// "cpu", "cpu:3" (another thread count of the reference) and every other
/// backend this machine offers (AvailableBackends()): the names the
/// every-backend cases run on.
std::vector<std::string> EveryBackendName();

/// A 2-D tensor view of `rows` rows of `cols` elements of `type` at `data`,
/// as LoadWeight takes it.
TensorView MatrixView(DType type, const void* data, int64_t rows, int64_t cols,
                      const char* name = "test.weight");

/// `rows` rows of `cols` seeded random values in [-scale, scale) stored as
/// `type`.
std::vector<uint8_t> RandomWeight(DType type, int64_t rows, int64_t cols, uint32_t seed,
                                  float scale = 1.0f);

}  // namespace odmoe::test
