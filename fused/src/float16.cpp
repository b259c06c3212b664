#include "fusediff/fused/float16.h"

#include <bit>
#include <optional>

namespace fusediff::fused {

namespace {
uint16_t F16Nan(uint32_t sign, uint32_t magnitude, NanRule rule) {
  switch (rule) {
    case NanRule::quiet_payload: return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude & 0x7FFFFFu) >> 13));
    case NanRule::canonical: return static_cast<uint16_t>(sign | 0x7E00u);
    case NanRule::canonical_positive: return 0x7E00u;
  }
  return 0x7E00u;
}
}  // namespace

namespace {

// NaN, infinity and flushed subnormal inputs: their binary16 encoding, or nothing for a finite value to convert.
std::optional<uint16_t> F16Special(uint32_t sign, uint32_t u, const FloatBoundary& rules) {
  if (u > 0x7F800000u) return F16Nan(sign, u, rules.nan);
  if (u == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (u < 0x00800000u && rules.subnormals == SubnormalInputs::flush_inputs) return static_cast<uint16_t>(sign);
  return std::nullopt;
}

// A finite magnitude u (binary32 bits) rounded into binary16 bits, without an overflow check: beyond 65504 the
// rebiased exponent wraps within its mask.
uint16_t F16Rounded(uint32_t sign, uint32_t u, bool nearest) {
  if (u < 0x38800000u) {  // below 2^-14: a binary16 subnormal (quantum 2^-24) or zero
    if (u <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: rounds to 0 (2^-25 is a tie to even 0)
    const uint32_t e = u >> 23;
    const uint32_t m = (u & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 .. 24
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (nearest && (rem > half || (rem == half && (h & 1u)))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((u - 0x38000000u) >> 13) & 0x7FFFu;  // rebias 127 -> 15; the mask is where an unchecked value wraps
  const uint32_t rem = u & 0x1FFFu;
  if (nearest && (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))) ++h;
  h &= 0x7FFFu;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace

uint16_t ToF16Bits(float x, const FloatBoundary& rules) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t u = bits & 0x7FFFFFFFu;
  const bool nearest = rules.rounding == FloatRounding::nearest_even;
  if (const std::optional<uint16_t> special = F16Special(sign, u, rules)) return *special;
  // 65520 (0x477FF000) is the midpoint between 65504 and 2^16: nearest even rounds it and above to infinity;
  // toward zero keeps everything below 2^16 (0x47800000) at 65504 and beyond as well.
  if (u >= (nearest ? 0x477FF000u : 0x47800000u)) {
    const bool saturate = rules.overflow == FloatOverflow::saturate || !nearest;
    return static_cast<uint16_t>(sign | (saturate ? 0x7BFFu : 0x7C00u));
  }
  if (!nearest && u >= 0x477FE000u) return static_cast<uint16_t>(sign | 0x7BFFu);
  return F16Rounded(sign, u, nearest);
}

uint16_t ToF16BitsWrappingOverflow(float x, const FloatBoundary& rules) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t u = bits & 0x7FFFFFFFu;
  if (const std::optional<uint16_t> special = F16Special(sign, u, rules)) return *special;
  uint16_t h = F16Rounded(sign, u, rules.rounding == FloatRounding::nearest_even);
  // Unchecked, a wrapped exponent of all ones would read as inf/NaN; the bug's value wraps past it instead.
  if ((h & 0x7C00u) == 0x7C00u) h = static_cast<uint16_t>(h & ~0x4000u);
  return h;
}

uint16_t ToBf16Bits(float x, const FloatBoundary& rules) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = bits & 0x80000000u;
  const uint32_t u = bits & 0x7FFFFFFFu;
  if (u > 0x7F800000u) {
    switch (rules.nan) {
      case NanRule::quiet_payload: return static_cast<uint16_t>((bits >> 16) | 0x0040u);
      case NanRule::canonical: return static_cast<uint16_t>((sign >> 16) | 0x7FC0u);
      case NanRule::canonical_positive: return 0x7FC0u;
    }
  }
  if (u < 0x00800000u && rules.subnormals == SubnormalInputs::flush_inputs) return static_cast<uint16_t>(sign >> 16);
  if (u == 0x7F800000u) return static_cast<uint16_t>(bits >> 16);
  if (rules.rounding == FloatRounding::toward_zero) return static_cast<uint16_t>(bits >> 16);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round half to even into the upper half; may carry into infinity
  uint16_t h = static_cast<uint16_t>(bits >> 16);
  if ((h & 0x7FFFu) == 0x7F80u && rules.overflow == FloatOverflow::saturate)
    h = static_cast<uint16_t>((h & 0x8000u) | 0x7F7Fu);
  return h;
}

float FromF16Bits(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t fraction = h & 0x3FFu;
  if (exponent == 0x1Fu) {  // a NaN is quieted, as vcvtph2ps does
    return std::bit_cast<float>(sign | 0x7F800000u | (fraction << 13) | (fraction != 0 ? 0x00400000u : 0u));
  }
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (fraction << 13));
  // Subnormal: fraction * 2^-24, an exact binary32 product (a power of two times a small integer).
  const float magnitude = static_cast<float>(fraction) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

float FromBf16Bits(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

float StoreAs(float x, const FloatBoundary& rules) {
  switch (rules.format) {
    case FloatFormat::f32: {
      const uint32_t bits = std::bit_cast<uint32_t>(x);
      if (rules.subnormals == SubnormalInputs::flush_inputs && ((bits >> 23) & 0xFFu) == 0) {
        return std::bit_cast<float>(bits & 0x80000000u);
      }
      return x;
    }
    case FloatFormat::f16: return FromF16Bits(ToF16Bits(x, rules));
    case FloatFormat::bf16: return FromBf16Bits(ToBf16Bits(x, rules));
  }
  return x;
}

float StoreAsWrappingF16Overflow(float x, const FloatBoundary& rules) {
  if (rules.format == FloatFormat::f16) return FromF16Bits(ToF16BitsWrappingOverflow(x, rules));
  return StoreAs(x, rules);
}

}  // namespace fusediff::fused
