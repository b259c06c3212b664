#pragma once
// Requantization of the built-in fused path (internal to fusediff_fused): accumulator -> intermediate code per
// output channel by the declared variant (fixedpoint.h primitives, f32, or exact), with the requantization
// mutants (model/mutants.h). No I/O.
#include <cstdint>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"

namespace fusediff::fused {

// v clamped to the type's code range.
int32_t SaturateToType(int64_t v, const QuantType& type);

// Everything requantization needs for one output channel, computed once per channel.
struct ChannelRequant {
  // double_rounding / single_rounding
  int32_t multiplier_q31 = 0;
  int shift = 0;
  // f32_half_even: M32 = float(float(sx * sw) / su)
  float multiplier_f32 = 0.0f;
  // exact: sx * sw / su = scale_significand * 2^scale_exponent / divisor_significand, integers exact
  int64_t scale_significand = 0;    // mx * mw < 2^48
  int64_t divisor_significand = 1;  // mu < 2^24
  int scale_exponent = 0;           // ex + ew - eu
};

ChannelRequant PrepareChannel(RequantVariant variant, float sx, float sw, float su);
// PrepareChannel for every output channel of `conv` under `convention`'s variant and intermediate scale.
std::vector<ChannelRequant> PrepareChannels(const ConvCase& conv, const Convention& convention);

// acc -> u for one channel: the variant's scaling, then + zu, saturated to the intermediate type.
// Of the mutants, requant-truncate, requant-double-for-single and no-intermediate-saturation change it.
int32_t RequantizeChannel(int32_t acc, const ChannelRequant& c, const Convention& convention, Mutant mutant);

}  // namespace fusediff::fused
