#pragma once
// Requantization of the built-in fused path (internal to fusediff_fused): accumulator -> intermediate code per
// output channel by the declared variant (fixedpoint.h primitives, f32, or exact); the requantization mutants
// (model/mutants.h) are variants of its steps, beside them in requant.cpp. No I/O.
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

// acc -> u for one channel, in two steps chosen once per kernel: `scale`, the variant's scaling plus zu (the code
// before narrowing), then `narrow` into the intermediate type (saturation).
struct Requantizer {
  using Scale = int64_t (*)(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u);
  using Narrow = int32_t (*)(int64_t code, const QuantType& type);
  Scale scale;
  Narrow narrow;
  int32_t operator()(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) const {
    return narrow(scale(acc, c, u), u.q.type);
  }
};
// The declared variant's steps, or a requantization mutant's variant of one (requant-truncate,
// requant-double-for-single, no-intermediate-saturation); every other mutant leaves them as declared.
Requantizer SelectRequantizer(RequantVariant variant, Mutant mutant);

}  // namespace fusediff::fused
