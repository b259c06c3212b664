#pragma once
// RapidCheck generators for property tests: free functions, dependent parameters through gen::mapcat, readable
// counterexamples through showValue. (The harness itself draws from the counter-based generator in
// conv_generator.h, so runs are reproducible sample by sample; these are for shrinking in property tests.)
#include <rapidcheck.h>

#include <ostream>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"

namespace fusediff {
void showValue(const ConvCase& conv, std::ostream& os);
}  // namespace fusediff

namespace fusediff::generators {

// A conv case with its input: shape (op, N 1-2, spatial 1-16, channels 1-16, kernel 1-5, stride, dilation,
// padding, output padding), then — dependent on the shape — input quantization over the whole type (zero point
// ends included), per-channel weights, weight scales and bias, and the input codes.
struct ConvSample {
  ConvCase conv;
  std::vector<int32_t> input;
};
void showValue(const ConvSample& sample, std::ostream& os);

rc::Gen<ConvCase> genConvShape();
rc::Gen<ConvSample> genConvSample();
// A valid convention: every requant variant with its rounding, intermediate/output types, scales log-uniform over
// realistic ranges, zero points across the type, rounding modes and zero-point orders.
rc::Gen<Convention> genConvention();

}  // namespace fusediff::generators
