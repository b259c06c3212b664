// Requantization of the built-in fused path: per-channel multipliers prepared once, then acc -> u by the
// declared variant. No I/O.
#include "requant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fusediff/fused/fixedpoint.h"

namespace fusediff::fused {
namespace {

// Magnitudes beyond this saturate every intermediate type long before; clamping to it first keeps the int64
// arithmetic (+ zu) exact and overflow-free.
constexpr int64_t kHugeMagnitude = int64_t{1} << 40;

// A positive finite float32 as significand * 2^exponent with an integer significand < 2^24 (exact: frexp gives
// q in [0.5, 1) and q * 2^24 is an integer for every float, subnormals included).
struct FloatDecomposition {
  int64_t significand = 0;
  int exponent = 0;
};

FloatDecomposition Decompose(float value) {
  int e = 0;
  const double q = std::frexp(static_cast<double>(value), &e);
  return {static_cast<int64_t>(std::ldexp(q, 24)), e - 24};
}

int BitLength(unsigned __int128 v) {
  int n = 0;
  while (v != 0) {
    v >>= 1;
    ++n;
  }
  return n;
}

// round(num / den) for num >= 0, den > 0 (both < 2^125), of a quotient whose sign is `negative`, with the
// rounding mode applied to the signed value. Returns the rounded magnitude. 2 * remainder < 2^126: no overflow.
unsigned __int128 RoundQuotientMagnitude(unsigned __int128 num, unsigned __int128 den, bool negative,
                                         RoundingMode mode) {
  const unsigned __int128 quotient = num / den;
  const unsigned __int128 twice_remainder = 2 * (num % den);
  if (twice_remainder < den) return quotient;
  if (twice_remainder > den) return quotient + 1;
  switch (mode) {  // exact tie
    case RoundingMode::half_away_from_zero: return quotient + 1;
    case RoundingMode::half_to_even: return quotient + (quotient & 1);
    case RoundingMode::half_up:  // toward +infinity: up in magnitude only for a positive value
      return negative ? quotient : quotient + 1;
  }
  return quotient;
}

}  // namespace

int32_t SaturateToType(int64_t v, const QuantType& type) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, type.qmin(), type.qmax()));
}

ChannelRequant PrepareChannel(RequantVariant variant, float sx, float sw, float su) {
  ChannelRequant c;
  switch (variant) {
    case RequantVariant::double_rounding: {
      const double real_multiplier = static_cast<double>(sx) * static_cast<double>(sw) / static_cast<double>(su);
      QuantizeMultiplier(real_multiplier, &c.multiplier_q31, &c.shift);
      break;
    }
    case RequantVariant::single_rounding: {
      const double real_multiplier = static_cast<double>(sx) * static_cast<double>(sw) / static_cast<double>(su);
      QuantizeMultiplierSingleRounding(real_multiplier, &c.multiplier_q31, &c.shift);
      break;
    }
    case RequantVariant::f32_half_even:
    case RequantVariant::f32_zero_point_first: {
      const float product = sx * sw;  // float32 product, rounded to nearest even
      c.multiplier_f32 = product / su;
      break;
    }
    case RequantVariant::exact: {
      const FloatDecomposition x = Decompose(sx);
      const FloatDecomposition w = Decompose(sw);
      const FloatDecomposition u = Decompose(su);
      c.scale_significand = x.significand * w.significand;
      c.divisor_significand = u.significand;
      c.scale_exponent = x.exponent + w.exponent - u.exponent;
      break;
    }
  }
  return c;
}

namespace {

// Exact: round(acc * S * 2^E / D) with S = scale_significand, D = divisor_significand. |acc * S| < 2^31 * 2^48 =
// 2^79 fits in (unsigned) __int128. Returns the rounded value before the zero point, clamped to +-kHugeMagnitude.
int64_t RequantizeExact(int32_t acc, const ChannelRequant& c, RoundingMode mode) {
  if (acc == 0) return 0;
  const bool negative = acc < 0;
  const unsigned __int128 magnitude =
      static_cast<unsigned __int128>(negative ? -static_cast<int64_t>(acc) : static_cast<int64_t>(acc)) *
      static_cast<unsigned __int128>(c.scale_significand);                                  // < 2^79
  const unsigned __int128 divisor = static_cast<unsigned __int128>(c.divisor_significand);  // < 2^24
  unsigned __int128 rounded = 0;
  if (c.scale_exponent >= 0) {
    // magnitude * 2^E / D >= 2^(bits - 1 + E - 24): beyond 2^60 everything saturates anyway.
    if (BitLength(magnitude) + c.scale_exponent > 100) {
      rounded = static_cast<unsigned __int128>(kHugeMagnitude);
    } else {
      rounded = RoundQuotientMagnitude(magnitude << c.scale_exponent, divisor, negative, mode);  // < 2^100
    }
  } else {
    const int right = -c.scale_exponent;
    // Denominator D * 2^right < 2^(24 + right). For right > 100 it exceeds 2^100 > 2 * magnitude: the value is
    // below 1/2 in magnitude (never a tie) and rounds to 0 in every mode.
    if (right > 100) return 0;
    rounded = RoundQuotientMagnitude(magnitude, divisor << right, negative, mode);
  }
  const int64_t clamped =
      rounded > static_cast<unsigned __int128>(kHugeMagnitude) ? kHugeMagnitude : static_cast<int64_t>(rounded);
  return negative ? -clamped : clamped;
}

// f32: u = nearbyint(float(acc) * M32) in the default environment (round to nearest, ties to even). float(acc)
// rounds acc to 24 bits as ORT does; the product is one float rounding; huge (or infinite) products are clamped
// before the integer conversion.
// nearbyint(float(acc) * M32 + offset), every step in binary32 (offset: 0, or zu for f32_zero_point_first).
int64_t RequantizeF32HalfEven(int32_t acc, const ChannelRequant& c, float offset) {
  if (acc == 0) return static_cast<int64_t>(offset);  // 0 * M32 is 0 even where M32 overflowed to inf, not NaN
  const float scaled = static_cast<float>(acc) * c.multiplier_f32 + offset;
  const float rounded = std::nearbyint(scaled);
  const float limit = static_cast<float>(kHugeMagnitude);
  if (!(rounded > -limit)) return -kHugeMagnitude;  // includes -inf
  if (rounded > limit) return kHugeMagnitude;
  return static_cast<int64_t>(rounded);
}

// The declared scaling of each variant: acc -> the code before narrowing (the scaled value + zu). |scaled| <= 2^40
// and |zu| < 2^16: every sum is exact in int64.
int64_t ScaleDoubleRounding(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) {
  return int64_t{MultiplyByQuantizedMultiplierDoubleRounding(acc, c.multiplier_q31, c.shift)} + u.q.zero_point;
}

int64_t ScaleSingleRounding(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) {
  return int64_t{MultiplyByQuantizedMultiplierSingleRounding(acc, c.multiplier_q31, c.shift)} + u.q.zero_point;
}

int64_t ScaleF32HalfEven(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) {
  return RequantizeF32HalfEven(acc, c, 0.0f) + u.q.zero_point;
}

// The zero point goes into the float before the one rounding; the result is already a code.
int64_t ScaleF32ZeroPointFirst(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) {
  return RequantizeF32HalfEven(acc, c, static_cast<float>(u.q.zero_point));
}

int64_t ScaleExact(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) {
  return RequantizeExact(acc, c, u.rounding) + u.q.zero_point;
}

// Mutant requant-truncate, double rounding: breaks RoundingDivideByPOT's rounding (half away from zero) of the
// second step; SaturatingRoundingDoublingHighMul, then an arithmetic shift right (floor).
int64_t ScaleDoubleRoundingTruncatingShift(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) {
  const int left_shift = c.shift > 0 ? c.shift : 0;
  const int right_shift = c.shift > 0 ? 0 : -c.shift;
  const int64_t widened = static_cast<int64_t>(acc) * (int64_t{1} << std::min(left_shift, 32));
  const int32_t x_shifted = static_cast<int32_t>(std::clamp<int64_t>(widened, INT32_MIN, INT32_MAX));
  return int64_t{SaturatingRoundingDoublingHighMul(x_shifted, c.multiplier_q31) >> right_shift} + u.q.zero_point;
}

// Mutant requant-truncate, single rounding: breaks the one rounding (half up) of (x * m) >> t: no + 2^(t-1) term
// (floor).
int64_t ScaleSingleTruncating(int32_t acc, const ChannelRequant& c, const IntermediateSpec& u) {
  const int total_shift = 31 - c.shift;
  const int64_t scaled = (static_cast<int64_t>(acc) * c.multiplier_q31) >> total_shift;
  return std::clamp<int64_t>(scaled, INT32_MIN, INT32_MAX) + u.q.zero_point;
}

// Mutant requant-double-for-single is ScaleDoubleRounding where single_rounding is declared: it breaks the one
// rounding of acc * M by rounding twice (selected in SelectRequantizer, no function of its own).

// Mutant no-intermediate-saturation: breaks u's saturation; the code wraps modulo 2^bits into the type's
// two's-complement (or unsigned) range, then the narrow range's missing code clamps.
int32_t WrapToType(int64_t v, const QuantType& type) {
  const int64_t modulus = int64_t{1} << type.bits();
  const int64_t low = type.scalar == ScalarType::uint8 ? 0 : -(modulus / 2);
  const int64_t wrapped = ((v - low) % modulus + modulus) % modulus + low;
  return SaturateToType(wrapped, type);
}

Requantizer::Scale DeclaredScale(RequantVariant variant) {
  switch (variant) {
    case RequantVariant::double_rounding: return ScaleDoubleRounding;
    case RequantVariant::single_rounding: return ScaleSingleRounding;
    case RequantVariant::f32_half_even: return ScaleF32HalfEven;
    case RequantVariant::f32_zero_point_first: return ScaleF32ZeroPointFirst;
    case RequantVariant::exact: return ScaleExact;
  }
  return ScaleExact;
}

}  // namespace

// The one place a requantization mutant is chosen: the declared variant's scaling saturated into u, or the mutant's
// variant of one step. A mutant that does not apply to the variant leaves it as declared.
Requantizer SelectRequantizer(RequantVariant variant, Mutant mutant) {
  Requantizer r{DeclaredScale(variant), SaturateToType};
  switch (mutant) {
    case Mutant::requant_truncate:
      if (variant == RequantVariant::double_rounding) r.scale = ScaleDoubleRoundingTruncatingShift;
      if (variant == RequantVariant::single_rounding) r.scale = ScaleSingleTruncating;
      break;
    case Mutant::requant_double_for_single:
      if (variant == RequantVariant::single_rounding) r.scale = ScaleDoubleRounding;
      break;
    case Mutant::no_intermediate_saturation: r.narrow = WrapToType; break;
    default: break;
  }
  return r;
}

std::vector<ChannelRequant> PrepareChannels(const ConvCase& conv, const Convention& convention) {
  const float sx = conv.input_quant().scale;
  const float su = convention.intermediate.q.scale;
  std::vector<ChannelRequant> channels;
  channels.reserve(static_cast<size_t>(conv.output_channels()));
  for (int32_t k = 0; k < conv.output_channels(); ++k) {
    channels.push_back(PrepareChannel(convention.requant, sx, conv.weight_scales().at(static_cast<size_t>(k)), su));
  }
  return channels;
}

}  // namespace fusediff::fused
