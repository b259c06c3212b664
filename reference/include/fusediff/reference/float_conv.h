#pragma once
// The float convolution of a FloatConv (model/convention.h), from its definition on exact integers: the binary32
// operands formed from the codes, stored in the operand format by its rules, the exact sum of their products over
// the taps rounded once to binary32, then the binary32 bias added (one more rounding). Independent of the host FPU
// and of any summation order. No I/O; never calls fused/.
#include <cstdint>
#include <span>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"

namespace fusediff::reference {

struct FloatConvElement {
  float v = 0;          // fl32(fl32(S) + b)
  double abs_sum = 0;   // sum of |x w| over the taps plus |b| (rounded to double, for error bounds)
  int32_t terms = 0;    // products summed (in-bounds taps times input channels)
};

// One element per conv output (NHWK order). `operands` overrides float_conv.operands (the fpmath measurement
// evaluates both); f32 operands keep subnormals, bf16 ones follow oneDNN's rules (flush_subnormals_float_boundary).
std::vector<FloatConvElement> FloatConvValues(const ConvCase& conv, std::span<const int32_t> input,
                                              const FloatConv& float_conv, FloatFormat operands);

// The binary32 operand values (for the fused side's tests): x of input code `code`, w of weight code `code` on
// output channel k, and the bias of channel k, by FloatConv's rules.
float FloatConvInput(const ConvCase& conv, const FloatConv& float_conv, FloatFormat operands, int32_t code);
float FloatConvWeight(const ConvCase& conv, const FloatConv& float_conv, FloatFormat operands, int32_t k, int32_t code);
float FloatConvBias(const ConvCase& conv, const FloatConv& float_conv, int32_t k);

}  // namespace fusediff::reference
