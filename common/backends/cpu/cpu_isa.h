// SIMD instruction-set levels of the CPU backend and how one is chosen.
//
// The CPU backend compiles its dot-product kernels four times in one binary
// (portable scalar C++, AVX2+FMA+F16C, AVX-512F/BW/VL, the same plus
// AVX512-VNNI for the integer dot products of quantized MatMul) and picks one
// at run time. Every level computes bitwise identical results (see the canonical
// summation order in cpu_backend.h), so the choice only affects speed; tests
// and benchmarks force a lower level to check exactly that:
//
//   ODMOE_CPU_ISA=avx2 odmoe-bench-ops          # never use AVX-512
//   for (CpuIsa isa : SupportedCpuIsas()) CpuBackend be(2, isa); ...
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace odmoe {

/// Ordered from least to most capable.
enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3 };

/// "scalar", "avx2", "avx512", "avx512vnni".
std::string_view CpuIsaName(CpuIsa isa);

/// Parses a name as printed by CpuIsaName (case-sensitive).
std::optional<CpuIsa> ParseCpuIsa(std::string_view name);

/// The most capable level this CPU (and this build) supports; detected once.
CpuIsa DetectedCpuIsa();

/// Every level usable here, from kScalar up to DetectedCpuIsa().
std::vector<CpuIsa> SupportedCpuIsas();

/// True on CPUs that run 512-bit vector instructions as two 256-bit halves
/// (AMD family 19h: Zen 4). The CPU backend's choices that depend on how
/// wide the vector unit really is read this (cpu_kquant.h,
/// InterleavedDecodePays). Detected once.
bool CpuSplitsAvx512();

/// True on CPUs whose hardware prefetchers serve a long weight row read as
/// one sequential stream per core faster than as four interleaved streams
/// (AMD family 19h, measured on Zen 4: block32 decode with rows of 10-15 KB
/// at 1.1-1.4x; cpu_qdot_impl.h). Elsewhere rows from kQInterleaveRowBytes
/// on are read as four streams. Detected once.
bool CpuReadsOneStreamBest();

/// DetectedCpuIsa(), lowered to the level named by the environment variable
/// ODMOE_CPU_ISA when it is set. A name that is unknown or above the detected
/// level is ignored with a warning. Read once per process.
CpuIsa DefaultCpuIsa();

}  // namespace odmoe
