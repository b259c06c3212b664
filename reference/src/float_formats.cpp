// Float format conversions on exact integers (float_formats.h, float_formats_detail.h).
#include "fusediff/reference/float_formats.h"

#include <bit>
#include <stdexcept>

#include "float_formats_detail.h"
#include "fusediff/model/convention.h"

namespace fusediff::reference {

namespace detail {

namespace {
using u128 = unsigned __int128;

int BitWidth(const u128 v) {
  const uint64_t hi = static_cast<uint64_t>(v >> 64);
  return hi != 0 ? 64 + std::bit_width(hi) : std::bit_width(static_cast<uint64_t>(v));
}
}  // namespace

FormatLayout layout_of(FloatFormat f) {
  switch (f) {
    case FloatFormat::f32: return FormatLayout{24, 8, 127};
    case FloatFormat::f16: return FormatLayout{11, 5, 15};
    case FloatFormat::bf16: return FormatLayout{8, 8, 127};
  }
  throw std::logic_error("layout_of: unknown format");
}

// The encoding of the value (-1)^negative * 2^e * (1 + f) (normal) or subnormal, given Q = the magnitude rounded to
// the quantum 2^qexp, qexp = max(e, emin) - (p - 1):
//   normal (e >= emin): Q in [2^(p-1), 2^p]; bits = (e + bias) << (p - 1) | (Q - 2^(p-1)); Q == 2^p (a carry into
//   the next binade) lands on the next exponent by the same addition;
//   subnormal: Q in [0, 2^(p-1)]; bits = Q (Q == 2^(p-1) is exactly the smallest normal's encoding).
// A result at or beyond the infinity encoding overflowed: infinity, or the largest finite value when the rules
// saturate or round toward zero (IEEE 754: toward zero never rounds a finite value to infinity).
uint32_t assemble_bits(const FormatLayout& L, bool negative, int e, u128 q, const FloatBoundary& rules) {
  const uint32_t inf_bits = ((uint32_t{1} << L.exponent_bits) - 1) << (L.precision - 1);
  u128 bits;
  if (e > L.emax()) {
    bits = inf_bits;
  } else if (e < L.emin()) {
    bits = q;
  } else {
    bits = (u128(e + L.bias) << (L.precision - 1)) + (q - (u128{1} << (L.precision - 1)));
  }
  if (bits >= inf_bits) {
    bits = (rules.overflow == FloatOverflow::saturate || rules.rounding == FloatRounding::toward_zero) ? inf_bits - 1 : inf_bits;
  }
  const uint32_t sign = negative ? uint32_t{1} << (L.precision + L.exponent_bits - 1) : 0;
  return sign | static_cast<uint32_t>(bits);
}

uint32_t round_dyadic_bits(const FormatLayout& L, bool negative, u128 magnitude, int exp2, const FloatBoundary& rules) {
  const uint32_t sign = negative ? uint32_t{1} << (L.precision + L.exponent_bits - 1) : 0;
  if (magnitude == 0) return sign;
  const int e = BitWidth(magnitude) - 1 + exp2;  // 2^e <= value < 2^(e+1)
  if (e > L.emax() + 1) return assemble_bits(L, negative, L.emax() + 1, 0, rules);
  const int qexp = (e > L.emin() ? e : L.emin()) - (L.precision - 1);
  const int shift = qexp - exp2;  // Q = magnitude / 2^shift, rounded
  u128 q;
  if (shift <= 0) {
    q = magnitude << -shift;  // exact; the value has at most p significant bits here
  } else if (shift >= 127) {
    q = 0;  // magnitude < 2^126 <= half the quantum: below half of it under either rounding
  } else {
    q = magnitude >> shift;
    const u128 remainder = magnitude & ((u128{1} << shift) - 1);
    const u128 half = u128{1} << (shift - 1);
    if (rules.rounding == FloatRounding::nearest_even && (remainder > half || (remainder == half && (q & 1) != 0))) q += 1;
  }
  return assemble_bits(L, negative, e, q, rules);
}

uint32_t nan_bits(const FormatLayout& L, bool negative, uint32_t f32_fraction, const FloatBoundary& rules) {
  const uint32_t sign = negative ? uint32_t{1} << (L.precision + L.exponent_bits - 1) : 0;
  const uint32_t inf_bits = ((uint32_t{1} << L.exponent_bits) - 1) << (L.precision - 1);
  const uint32_t quiet = uint32_t{1} << (L.precision - 2);
  switch (rules.nan) {
    case NanRule::quiet_payload: return sign | inf_bits | quiet | (f32_fraction >> (24 - L.precision));
    case NanRule::canonical: return sign | inf_bits | quiet;
    case NanRule::canonical_positive: return inf_bits | quiet;
  }
  return sign | inf_bits | quiet;
}

}  // namespace detail

namespace {
uint32_t ConvertF32(float x, detail::FormatLayout L, const FloatBoundary& rules) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const bool negative = (bits >> 31) != 0;
  const uint32_t biased = (bits >> 23) & 0xFFu;
  const uint32_t fraction = bits & 0x7FFFFFu;
  const uint32_t sign = negative ? uint32_t{1} << (L.precision + L.exponent_bits - 1) : 0;
  const uint32_t inf_bits = ((uint32_t{1} << L.exponent_bits) - 1) << (L.precision - 1);
  if (biased == 0xFFu) return fraction == 0 ? (sign | inf_bits) : detail::nan_bits(L, negative, fraction, rules);
  if (biased == 0) {
    if (rules.subnormals == SubnormalInputs::flush_inputs || fraction == 0) return sign;
    return detail::round_dyadic_bits(L, negative, fraction, -149, rules);
  }
  return detail::round_dyadic_bits(L, negative, fraction | 0x800000u, static_cast<int>(biased) - 150, rules);
}
}  // namespace

uint16_t F32ToF16Bits(float x, const FloatBoundary& rules) {
  return static_cast<uint16_t>(ConvertF32(x, detail::layout_of(FloatFormat::f16), rules));
}

uint16_t F32ToBf16Bits(float x, const FloatBoundary& rules) {
  return static_cast<uint16_t>(ConvertF32(x, detail::layout_of(FloatFormat::bf16), rules));
}

float F16BitsToF32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t biased = (h >> 10) & 0x1Fu;
  uint32_t fraction = h & 0x3FFu;
  if (biased == 0x1F) {  // infinity; a NaN keeps its payload and is quieted (IEEE 754, vcvtph2ps)
    return std::bit_cast<float>(sign | 0x7F800000u | (fraction << 13) | (fraction != 0 ? 0x00400000u : 0u));
  }
  if (biased != 0) return std::bit_cast<float>(sign | ((biased - 15 + 127) << 23) | (fraction << 13));
  if (fraction == 0) return std::bit_cast<float>(sign);
  // Subnormal: fraction * 2^-24; normalize into binary32 (exponent -24 + width - 1).
  const int width = std::bit_width(fraction);
  const uint32_t exponent = static_cast<uint32_t>(-24 + width - 1 + 127);
  fraction = (fraction << (24 - width)) & 0x7FFFFFu;
  return std::bit_cast<float>(sign | (exponent << 23) | fraction);
}

float Bf16BitsToF32(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

float RoundToFormat(float x, const FloatBoundary& rules) {
  switch (rules.format) {
    case FloatFormat::f32: {
      const uint32_t bits = std::bit_cast<uint32_t>(x);
      if (rules.subnormals == SubnormalInputs::flush_inputs && ((bits >> 23) & 0xFFu) == 0) {
        return std::bit_cast<float>(bits & 0x80000000u);
      }
      return x;
    }
    case FloatFormat::f16: return F16BitsToF32(F32ToF16Bits(x, rules));
    case FloatFormat::bf16: return Bf16BitsToF32(F32ToBf16Bits(x, rules));
  }
  return x;
}

int32_t FloatOutputCode(float x, const FloatBoundary& rules) {
  switch (rules.format) {
    case FloatFormat::f32: return float_order_code(std::bit_cast<uint32_t>(RoundToFormat(x, rules)), FloatFormat::f32);
    case FloatFormat::f16: return float_order_code(F32ToF16Bits(x, rules), FloatFormat::f16);
    case FloatFormat::bf16: return float_order_code(F32ToBf16Bits(x, rules), FloatFormat::bf16);
  }
  return 0;
}

}  // namespace fusediff::reference
