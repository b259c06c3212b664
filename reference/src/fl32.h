#pragma once
// binary32 rounding (IEEE 754 round-to-nearest-even, subnormals, overflow to infinity) done on exact integers
// and rationals, independent of the host floating-point unit. Used by the f32_half_even requant variant.
#include <cstdint>

#include "exact.h"

namespace fusediff::reference::detail {

// A finite float as sign * m * 2^e exactly, m < 2^24 (m == 0 for zeros).
struct FloatParts {
  bool negative = false;
  uint32_t mantissa = 0;
  int exponent = 0;
};
FloatParts decompose(float value);  // value must be finite

// Nearest binary32 (ties to even) of a finite double (exactly: its bits as a dyadic, then fl32_dyadic).
float fl32_double(double value);
// Nearest binary32 (ties to even) of an exact rational.
float fl32_rational(const cpp_rational& value);
// Nearest binary32 (ties to even) of (-1)^negative * magnitude * 2^exp2; magnitude < 2^126.
float fl32_dyadic(bool negative, unsigned __int128 magnitude, int exp2);

}  // namespace fusediff::reference::detail
