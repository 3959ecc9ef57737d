// A rule on which tokens may come next, applied by Sequence (sequence.h)
// before every sampled token: a grammar (structured output, a tool call a
// request requires) is one. Prediction and speculation never change what is
// computed, and neither does a constraint: the masked row is the distribution
// Sampler::Sample and Sampler::SampleDraft draw from, so a draft the rule
// forbids is rejected with the rejection rule's own probability (zero) and
// the output distribution stays exact.
//
//   std::unique_ptr<TokenConstraint> rule = ...;   // e.g. a compiled grammar
//   std::vector<float> row(logits.begin(), logits.end());
//   rule->MaskLogits(row);                          // forbidden tokens -> -infinity
//   int32_t next = sampler.Sample(row);
//   ODMOE_RETURN_IF_ERROR(rule->Accept(next));      // the rule moves past `next`
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace odmoe {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  /// Sets the logit of every token that may not come next to -infinity
  /// (leaves the others alone). When the rule is complete and nothing may
  /// follow, only the end-of-sequence token stays; a row is never left with
  /// no token at all.
  virtual void MaskLogits(std::span<float> logits) = 0;
  /// `token` was emitted (one MaskLogits allowed); the rule moves past it.
  /// FAILED_PRECONDITION when the rule does not allow it.
  virtual absl::Status Accept(int32_t token) = 0;
  /// Whether the tokens accepted so far are a complete match (end of
  /// sequence allowed now).
  virtual bool Complete() const = 0;
};

}  // namespace odmoe
