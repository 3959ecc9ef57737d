// Code point ranges as UTF-8 byte sequences, for character classes compiled
// to bytes (grammar.h).
//
//   std::vector<Utf8Sequence> seqs = Utf8SequencesOf({{0x80, 0x10FFFF}});
//   // {[C2-DF][80-BF]}, {[E0][A0-BF][80-BF]}, ... : each sequence is one byte
//   // range per position, and every code point's encoding matches exactly one.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace odmoe {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using CodePointRange = std::pair<uint32_t, uint32_t>;           // inclusive
using Utf8Sequence = std::vector<std::pair<uint8_t, uint8_t>>;  // a byte range per position

/// The code points of [0, kMaxCodePoint] (surrogates excluded) not in `ranges`.
std::vector<CodePointRange> ComplementCodePoints(std::vector<CodePointRange> ranges);

/// The UTF-8 encodings of the scalar values in `ranges` (surrogates skipped),
/// as disjoint sequences of byte ranges.
std::vector<Utf8Sequence> Utf8SequencesOf(const std::vector<CodePointRange>& ranges);

}  // namespace odmoe
