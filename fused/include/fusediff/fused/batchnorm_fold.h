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

// Bugs of a fold, for the mutants (model/mutants.h): the fold as declared unless one is set.
struct FoldBugs {
  bool drop_eps = false;            // sqrt(var) instead of sqrt(var + eps)
  bool f16_for_f32 = false;         // every step in binary16 where binary32 is declared
  bool per_tensor = false;          // one weight scale for the tensor where per channel is declared
  bool bf16_truncate = false;       // bfloat16 steps truncated where nearest even is declared
  bool f16_overflow_wraps = false;  // binary16 conversion without its overflow check (the exponent wraps)
};
FoldBugs FoldBugsOf(Mutant m);

// The folded conv, or an empty conv with *refused set (the declared overflow rules).
ConvCase FoldConvBatchNorm(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold,
                           const FoldBugs& bugs, std::string* refused);

}  // namespace fusediff::fused
