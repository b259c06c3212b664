#pragma once
// Activation tables built the way common toolchains build them. Small and pure.
#include <array>
#include <cstdint>
#include <vector>

#include "fusediff/model/activation.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/table.h"

namespace fusediff::fused {

// f in double precision (libm), the same formulas as docs/activations.md.
double EvaluateActivationDouble(const Activation& a, double x);
// f in float precision, as TFLite's int16 kernels evaluate their transforms.
float EvaluateActivationFloat(const Activation& a, float x);

// TFLite LUTPopulateInt8 semantics, computed in double: for every code v of the 8-bit type `in`,
// x = s_in*(v - z_in); y = round(f(x)/s_out) + z_out (or round(z_out + f(x)/s_out) per `output`'s zero point
// order), rounded with the declared output rounding mode, saturated to the output type.
// Returns table[v - in.type.qmin()] for every code.
std::vector<int32_t> LUTPopulateInt8(const Activation& a, const QuantParams& in, const OutputSpec& output);
int32_t LUTLookupInt8(const std::vector<int32_t>& table, int32_t qmin, int32_t u);

// TFLite LUTPopulateInt16 (bit-exact): 513 knots over [s_in*(-32768 - z_in), s_in*(32767 - z_in)],
// midpoint-error-corrected, output zero point 0.
std::array<int16_t, 513> LUTPopulateInt16(const Activation& a, float input_scale, int32_t input_zero_point,
                                          float output_scale, int32_t output_zero_point);
// TFLite LUTLookup for int16: i = 256 + (x >> 7), f = x & 127, y = lut[i] + (((lut[i+1] - lut[i]) * f + 64) >> 7).
int16_t LUTLookup(int16_t value, const std::array<int16_t, 513>& lut);
// Its interpolation between knots `base` and `next` at offset f in [0, 127].
int16_t LUTInterpolate(int16_t base, int16_t next, int offset);
// The mutant interp-truncate: LUTLookup without the +64 rounding term.
int16_t LUTLookupTruncating(int16_t value, const std::array<int16_t, 513>& lut);

// Piecewise-linear lookup: the segment with u_lo <= u <= u_hi (segments sorted and contiguous, as the table
// reader guarantees), y = sat(RoundingDivideByPOT64(slope * (u - u_lo), shift) + offset) to `output`.
// |slope * (u - u_lo)| < 2^31 * 2^16: exact in int64. Throws std::out_of_range when no segment holds u.
int32_t PwlLookup(const std::vector<PwlSegment>& segments, int32_t u, const QuantType& output);

// A piecewise-linear table with `segment_count` segments for the convention's activation, as a toolchain would
// fit one: segment boundaries placed greedily (each segment as long as a common error bound allows; the smallest
// bound that needs at most `segment_count` segments, found by bisection; then the longest segments are halved
// until there are exactly `segment_count`); per segment the slope through the clamped end points
// f(v)/sy + zy, quantized to int32 with the largest shift <= 31, and the integer offset that centres the
// segment's errors. Errors are measured against the double-precision direct table (LUTPopulateInt8 semantics
// over every code). segment_count in [1, code count].
struct PwlFit {
  std::vector<PwlSegment> segments;
  std::vector<int64_t> segment_max_abs_error;  // per segment, output LSBs against the double table
  int64_t max_abs_error = 0;
};
PwlFit FitPwl(const Convention& convention, int32_t segment_count);
}  // namespace fusediff::fused
