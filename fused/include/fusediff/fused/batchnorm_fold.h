#pragma once
// The built-in fused path's BatchNorm fold (model/batchnorm.h), as a deployment toolchain computes it: native
// binary32 arithmetic (-ffp-contract=off), binary16 / bfloat16 steps as a binary32 operation followed by the
// kernel-style conversions of float16.h, `exact` precision in x87 extended precision (64-bit significand; it
// differs from exact arithmetic only where a decision lies within about 2^-60 of its value from a tie), the
// weight codes and the bias rounded from exact integer quotients. The folded conv then runs through the conv2d+act
// kernel. No I/O; never calls reference/.
#include <string>

#include "fusediff/model/batchnorm.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/conv_case.h"

namespace fusediff::fused {

// The steps of a fold, chosen once per kernel (FoldStepsOf): the declared ones, or one BatchNorm fold mutant's
// variant of one of them (the variants sit beside the declared steps in batchnorm_fold.cpp).
struct FoldSteps {
  // The fold as run: the declared one, or the declaration a mutant misreads (precision, rounding, weight scale).
  BatchNormFold (*as_run)(const BatchNormFold& declared);
  // The radicand of sqrt(var + eps): in extended precision, and in the fold's float precision (`store` stores it).
  long double (*radicand_extended)(long double var, long double eps);
  float (*radicand)(float var, float eps, const FloatBoundary& rules, float (*store)(float, const FloatBoundary&));
  // A binary32 step's result stored in the fold's precision and read back.
  float (*store)(float x, const FloatBoundary& rules);
};
// The declared fold's steps for Mutant::none (and every mutant that is not a fold's).
FoldSteps FoldStepsOf(Mutant m);

// The folded conv, or an empty conv with *refused set (the declared overflow rules).
ConvCase FoldConvBatchNorm(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold,
                           const FoldSteps& steps, std::string* refused);

}  // namespace fusediff::fused
