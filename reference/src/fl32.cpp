#include "fl32.h"
#include "fl32_dyadic.h"

#include <bit>
#include <cmath>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference::detail {

namespace {
constexpr uint32_t kInfinityBits = 0x7F800000u;

// Assembles the binary32 of a positive value a with 2^e <= a < 2^(e+1), given Q = the value rounded to the
// quantum 2^-s, s = 23 - max(e, -126):
//   normal (e >= -126): Q in [2^23, 2^24]; bits = (e + 127) << 23 | (Q - 2^23). Q == 2^24 (the rounding
//     carried into the next binade) lands on ((e + 128) << 23) by the same addition.
//   subnormal (e < -126): Q in [0, 2^23]; bits = Q (Q == 2^23 is exactly the smallest normal's encoding).
// Exponents beyond binary32's range (e > 127, or a carry out of e == 127) give infinity.
float assemble(bool negative, int e, uint64_t q) {
  uint64_t bits;
  if (e > 127) {
    bits = kInfinityBits;
  } else if (e < -126) {
    bits = q;
  } else {
    bits = (uint64_t(e + 127) << 23) + (q - (uint64_t{1} << 23));
  }
  if (bits >= kInfinityBits) bits = kInfinityBits;
  if (negative) bits |= 0x80000000u;
  return std::bit_cast<float>(static_cast<uint32_t>(bits));
}

int bit_width128(unsigned __int128 v) {
  const uint64_t hi = static_cast<uint64_t>(v >> 64);
  if (hi != 0) return 64 + std::bit_width(hi);
  return std::bit_width(static_cast<uint64_t>(v));
}
}  // namespace

FloatParts decompose(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  FloatParts p;
  p.negative = (bits >> 31) != 0;
  const uint32_t biased = (bits >> 23) & 0xFFu;
  const uint32_t fraction = bits & 0x7FFFFFu;
  if (biased == 0xFFu) throw InputError("reference: float32 infinity/NaN where a finite value is required");
  if (biased == 0) {
    p.mantissa = fraction;
    p.exponent = -149;
  } else {
    p.mantissa = fraction | 0x800000u;
    p.exponent = static_cast<int>(biased) - 150;
  }
  return p;
}

float fl32_rational(const cpp_rational& value) {
  if (value == 0) return 0.0f;
  const bool negative = value < 0;
  const cpp_rational a = negative ? cpp_rational(-value) : value;
  // e = floor(log2 a): start from the bit lengths, then correct so that 2^e <= a < 2^(e+1).
  int e = static_cast<int>(msb(numerator(a))) - static_cast<int>(msb(denominator(a)));
  if (a < pow2(e)) --e;
  if (e > 127) return assemble(negative, e, 0);
  const int s = 23 - (e > -126 ? e : -126);  // quantum 2^-s
  const cpp_rational scaled = a * pow2(s);
  cpp_int q = floor_rational(scaled);
  const int cmp = half_compare(scaled, q);
  if (cmp > 0 || (cmp == 0 && (q % 2) != 0)) q += 1;  // round half to even
  return assemble(negative, e, static_cast<uint64_t>(q));
}

float fl32_double(double value) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const bool negative = (bits >> 63) != 0;
  const uint64_t biased = (bits >> 52) & 0x7FFu;
  const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
  if (biased == 0x7FFu) throw InputError("reference: double infinity/NaN where a finite value is required");
  if (biased == 0) return fl32_dyadic(negative, fraction, -1074);  // subnormal double (or zero)
  return fl32_dyadic(negative, fraction | (uint64_t{1} << 52), static_cast<int>(biased) - 1075);
}

float fl32_dyadic(bool negative, unsigned __int128 magnitude, int exp2) {
  if (magnitude == 0) return negative ? -0.0f : 0.0f;
  const int e = bit_width128(magnitude) - 1 + exp2;  // 2^e <= value < 2^(e+1)
  if (e > 127) return assemble(negative, e, 0);
  const int s = 23 - (e > -126 ? e : -126);
  const int shift = exp2 + s;  // scaled = magnitude * 2^shift
  uint64_t q;
  if (shift >= 0) {
    q = static_cast<uint64_t>(magnitude << shift);  // exact: scaled < 2^24
  } else {
    const int rs = -shift;
    if (rs >= 127) {
      q = 0;  // magnitude < 2^126, so scaled < 1/2: rounds to zero
    } else {
      const unsigned __int128 one = 1;
      q = static_cast<uint64_t>(magnitude >> rs);
      const unsigned __int128 remainder = magnitude & ((one << rs) - 1);
      const unsigned __int128 half = one << (rs - 1);
      if (remainder > half || (remainder == half && (q & 1u) != 0)) q += 1;  // round half to even
    }
  }
  return assemble(negative, e, q);
}

}  // namespace fusediff::reference::detail

namespace fusediff::reference {

float Fl32FromInt64(int64_t value) {
  const bool negative = value < 0;
  // |INT64_MIN| = 2^63 is representable in the unsigned 128-bit magnitude.
  const unsigned __int128 magnitude =
      negative ? static_cast<unsigned __int128>(-static_cast<__int128>(value)) : static_cast<unsigned __int128>(value);
  return detail::fl32_dyadic(negative, magnitude, 0);
}

float Fl32Multiply(float a, float b) {
  const detail::FloatParts pa = detail::decompose(a);
  const detail::FloatParts pb = detail::decompose(b);
  const unsigned __int128 product = static_cast<unsigned __int128>(pa.mantissa) * pb.mantissa;  // < 2^48, exact
  return detail::fl32_dyadic(pa.negative != pb.negative, product, pa.exponent + pb.exponent);
}

float Fl32Divide(float a, float b) {
  if (b == 0.0f) throw InputError("reference: Fl32Divide by zero");
  const detail::FloatParts pa = detail::decompose(a);
  const detail::FloatParts pb = detail::decompose(b);
  if (pa.mantissa == 0) return (pa.negative != pb.negative) ? -0.0f : 0.0f;
  return detail::fl32_rational(detail::exact_rational(a) / detail::exact_rational(b));
}

float Fl32Add(float a, float b) {
  // On exact dyadic integers (fl32_dyadic.h), not rationals: the requantizer's per-sample zero-point addition.
  return detail::fl32_sum(detail::exact_dyadic(a), detail::exact_dyadic(b));
}

float F32IntermediateValue(int64_t acc, float input_scale, float weight_scale) {
  return Fl32Multiply(Fl32FromInt64(acc), Fl32Multiply(input_scale, weight_scale));
}

}  // namespace fusediff::reference
