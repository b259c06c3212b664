#pragma once
// The integer rounding behind float_formats.h, for any binary format of precision p (significand bits, hidden bit
// included) and e exponent bits; shared with the exact fold (batchnorm.cpp), which rounds exact values into a
// format step by step.
#include <cstdint>

#include "fusediff/model/batchnorm.h"

namespace fusediff::reference::detail {

struct FormatLayout {
  int precision;      // p: 24 (binary32), 11 (binary16), 8 (bfloat16)
  int exponent_bits;  // 8, 5, 8
  int bias;           // 127, 15, 127
  int emin() const { return 1 - bias; }
  int emax() const { return bias; }
};
FormatLayout layout_of(FloatFormat f);

// The encoding (sign, exponent, fraction in the format's own bit layout) of (-1)^negative * magnitude * 2^exp2
// rounded by `rules` (rounding and overflow; subnormals and NaN are the caller's). magnitude < 2^126.
uint32_t round_dyadic_bits(const FormatLayout& L, bool negative, unsigned __int128 magnitude, int exp2,
                           const FloatBoundary& rules);
// The encoding of a value whose quantum-rounded magnitude Q is known (see float_formats.cpp).
uint32_t assemble_bits(const FormatLayout& L, bool negative, int e, unsigned __int128 q, const FloatBoundary& rules);
// A NaN of the format from a binary32 NaN's sign and fraction, by rules.nan.
uint32_t nan_bits(const FormatLayout& L, bool negative, uint32_t f32_fraction, const FloatBoundary& rules);

}  // namespace fusediff::reference::detail
