// Constrained decoding: a rule, per sequence, for which tokens may come next (JSON mode is one).
// The scheduler masks each step's logits with it before sampling and advances it by the chosen
// token, so the sampler needs to know nothing about it: a refused token has logit -inf, which
// neither greedy nor any truncation can pick while an allowed token has a finite logit.
//
// TokenConstraintFactory  shared and immutable (one per kind of constraint and model); starts a
//                         fresh state for each sequence.
// TokenConstraint         one sequence's state; used by the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace hymoe {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // Sets logits[id] to -inf for every id that may not come next (end-of-sequence included while
  // the constrained text may not end). `logits` is one row of the model's vocabulary.
  virtual void mask(std::span<float> logits) = 0;
  // Advances by the sampled token. False (state unchanged) when the token was not allowed: only
  // possible when no allowed token had a finite logit.
  virtual bool accept(int32_t token) = 0;
};

class TokenConstraintFactory {
 public:
  virtual ~TokenConstraintFactory() = default;
  virtual std::unique_ptr<TokenConstraint> start() const = 0;
};

}  // namespace hymoe
