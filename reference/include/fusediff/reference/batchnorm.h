#pragma once
// BatchNorm in the reference (model/batchnorm.h), from its definition, never by calling fused/:
//   - the unfolded graph: t = gamma (c - mean) / sqrt(var + eps) + beta on the conv's exact real output
//     c = acc sx sw[k], quantized u = sat(round(t / su) + zu). t is a quadratic irrational: it is compared with
//     every rational exactly (P / sqrt(D) against R by the signs and P^2 against R^2 D), after a double filter whose
//     margin (2^-40 of the terms' magnitudes) dominates binary64's error, so every rounding, tie included, is decided
//     exactly;
//   - the declared fold, op by op: every step's exact result rounded into the fold precision by integer arithmetic
//     (the square root by an integer square root and an exact comparison with the midpoint), then the declared
//     weight quantization and bias rounding on exact quotients; `exact` precision keeps the folded values as exact
//     quadratic irrationals down to the scale's binary32 rounding and the codes' integer rounding.
// The folded conv is an ordinary int8 conv (codes, binary32 scales, int32 bias): the conv2d+act reference runs it.
#include <cstdint>
#include <string>
#include <vector>

#include "fusediff/model/batchnorm.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"

namespace fusediff::reference {

struct FoldedConv {
  ConvCase conv;             // the folded conv (valid unless refused)
  std::string refused;       // non-empty: the fold refuses the draw, and why (declared overflow rules)
  std::vector<double> bias_real;  // b'[k] (display; exact precision: rounded to double)
};

// The fold of `fold.precision` and `fold.formula`, then its weight quantization and bias rounding.
FoldedConv FoldBatchNorm(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold);

struct BatchNormCode {
  int32_t u = 0;            // zero point added, saturated
  bool saturated = false;
  double tie_distance = 0.5;  // |t/su - nearest (k + 1/2)| from the double estimate (regions only)
  double t = 0;             // the BatchNorm output, rounded to double (display)
};

// The unfolded graph's BatchNorm of one conv output and its quantization into u (intermediate q, rounding).
BatchNormCode BatchNormToCode(int64_t acc, float sx, float sw, float gamma, float beta, float mean, float var, float eps,
                              const IntermediateSpec& u);

}  // namespace fusediff::reference
