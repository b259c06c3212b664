#pragma once
// Internal helpers of the reference: exact rationals, exact rounding of a split value, decimal text.
// Nothing here touches the host floating-point unit except where a comment says the operation is exact.
#include <boost/multiprecision/cpp_int.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "fusediff/model/quant.h"

namespace fusediff::reference::detail {

using boost::multiprecision::cpp_int;
using boost::multiprecision::cpp_rational;

// Integers are clamped to this magnitude before they meet an output type: every quantized type fits in
// [-2^16, 2^16], zero points too, so clamping at 2^62 never changes a saturated result and keeps all later
// int64 arithmetic free of overflow.
inline constexpr int64_t kClampMagnitude = int64_t{1} << 62;

inline int64_t clamp_to_int64(const cpp_int& v) {
  if (v > kClampMagnitude) return kClampMagnitude;
  if (v < -kClampMagnitude) return -kClampMagnitude;
  return static_cast<int64_t>(v);
}

inline int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The integer rounding gives for t = F + phi with F = floor(t) and phi in [0, 1), where
// half_cmp = sign(phi - 1/2) (-1, 0 or +1). The three modes differ only on a tie (half_cmp == 0):
//   half_away_from_zero: t = F + 1/2 >= 0  <=>  F >= 0  -> F + 1, else F
//   half_to_even:        the even one of F, F + 1
//   half_up:             F + 1 (toward +infinity)
// F is assumed clamped to |F| <= 2^62 (see kClampMagnitude), so F + 1 cannot overflow.
inline int64_t round_split(RoundingMode mode, int64_t floor_value, int half_cmp) {
  if (half_cmp < 0) return floor_value;
  if (half_cmp > 0) return floor_value + 1;
  switch (mode) {
    case RoundingMode::half_away_from_zero: return floor_value >= 0 ? floor_value + 1 : floor_value;
    case RoundingMode::half_to_even: return (floor_value % 2 == 0) ? floor_value : floor_value + 1;
    case RoundingMode::half_up: return floor_value + 1;
  }
  return floor_value;
}

// Exact value of a finite float / double as a rational (decomposition of the bit pattern: m * 2^e).
cpp_rational exact_rational(float value);
cpp_rational exact_rational(double value);

// floor(r) as an integer.
cpp_int floor_rational(const cpp_rational& r);
// sign(frac(r) - 1/2), frac(r) = r - floor(r).
int half_compare(const cpp_rational& r, const cpp_int& floor_r);
// round_mode(r), clamped to |.| <= 2^62.
int64_t round_rational(const cpp_rational& r, RoundingMode mode);
// |r - nearest (k + 1/2)|, in [0, 1/2], rounded to double.
double tie_distance_rational(const cpp_rational& r);
// Nearest double (for display only; not necessarily correctly rounded in the last bit).
double to_double(const cpp_rational& r);

// Decimal text of r with at most `digits` significant digits, rounded half to even on the exact value; exact
// (trailing zeros removed) when r has a terminating expansion that short.
std::string decimal_string(const cpp_rational& r, int digits);
// Formats 0.D1D2...Dn x 10^exp10 (digits without sign, n >= 1, D1 != 0 unless the value is zero).
std::string format_decimal_digits(bool negative, std::string digits, long exp10);

// Parses "[-+]digits[.digits][e[-+]digits]" exactly. Throws InputError naming `field`.
cpp_rational parse_decimal(std::string_view text, std::string_view field);

// 2^k as an exact rational (k may be negative).
cpp_rational pow2(int k);

}  // namespace fusediff::reference::detail
