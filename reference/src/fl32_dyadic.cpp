// binary32 sums and quotients on exact dyadic integers (fl32_dyadic.h). The final rounding is fl32_dyadic
// (fl32.cpp); what is added here is the exact operand alignment, with two arguments why it stays exact in 128 bits.
#include "fl32_dyadic.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "fl32.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference::detail {

namespace {
using u128 = unsigned __int128;

// |d| < 2^top(d) <= 2 |d| for d != 0.
int top(const Dyadic& d) { return d.exponent + std::bit_width(d.magnitude); }
}  // namespace

Dyadic exact_dyadic(float value) {
  const FloatParts p = decompose(value);
  return Dyadic{p.negative, p.mantissa, p.exponent};
}

Dyadic exact_product(float a, float b) {
  const FloatParts pa = decompose(a);
  const FloatParts pb = decompose(b);
  return Dyadic{pa.negative != pb.negative, uint64_t{pa.mantissa} * pb.mantissa, pa.exponent + pb.exponent};
}

Dyadic negated(Dyadic d) {
  d.negative = !d.negative;
  return d;
}

// x = X 2^ex (X a non-zero integer) is the addend with the higher top bit. If |y| < 2^(ex - 26), y is replaced
// by sign(y) 2^(ex - 27): this never changes fl32(x + y). The result has magnitude >= |x| - |y| > 2^(ex - 1), so
// its binary32 quantum is >= 2^(ex - 24) and the rounding boundaries (multiples of half a quantum, h) are
// multiples of h >= 2^(ex - 25). If h >= 2^ex, x itself is a multiple of h and every other boundary lies
// >= 2^ex > |y| away: x + y and x + y' lie strictly on the same side of each boundary, on none. If h < 2^ex, x is
// a boundary and both x + y and x + y' lie strictly between it and the next one on y's side (|y|, |y'| < h).
// Bounds after alignment (magnitudes < 2^48): without the replacement the lower exponent is >= ex - 26 - 48, so
// X is shifted by <= 74 (< 2^122), and y is shifted by <= 47 when its exponent is the higher one (its top is
// not above x's); with it, X is shifted by 27. The sum stays below 2^123 < 2^126, fl32_dyadic's limit.
float fl32_sum(const Dyadic& x_in, const Dyadic& y_in) {
  if (x_in.magnitude == 0 && y_in.magnitude == 0) return (x_in.negative && y_in.negative) ? -0.0f : 0.0f;
  if (y_in.magnitude == 0) return fl32_dyadic(x_in.negative, x_in.magnitude, x_in.exponent);
  if (x_in.magnitude == 0) return fl32_dyadic(y_in.negative, y_in.magnitude, y_in.exponent);
  Dyadic x = x_in, y = y_in;
  if (top(y) > top(x)) std::swap(x, y);
  if (top(y) < x.exponent - 26) {
    y.magnitude = 1;
    y.exponent = x.exponent - 27;
  }
  const int e = std::min(x.exponent, y.exponent);
  const u128 big = u128{x.magnitude} << (x.exponent - e);
  const u128 small = u128{y.magnitude} << (y.exponent - e);
  if (x.negative == y.negative) return fl32_dyadic(x.negative, big + small, e);
  if (big == small) return 0.0f;  // an exact zero sum rounds to +0 (round to nearest)
  return big > small ? fl32_dyadic(x.negative, big - small, e) : fl32_dyadic(y.negative, small - big, e);
}

// a / b = (ma / mb) 2^(ea - eb). With k = 25 + width(mb) - width(ma) (in [2, 48]), Q = floor(ma 2^k / mb) >= 2^24
// and the quotient lies in [Q, Q + 1) u, u = 2^(ea - eb - k). (2Q + sticky) u/2, sticky = (remainder != 0), rounds
// like the quotient: the result's quantum is >= 2u, so no rounding boundary lies strictly inside [Q u, (Q+1) u),
// and Q u is hit exactly only when the remainder is 0.
float fl32_quotient(float a, float b) {
  if (b == 0.0f) throw InputError("reference: binary32 division by zero");
  const FloatParts pa = decompose(a);
  const FloatParts pb = decompose(b);
  const bool negative = pa.negative != pb.negative;
  if (pa.mantissa == 0) return negative ? -0.0f : 0.0f;
  const int k = 25 + std::bit_width(pb.mantissa) - std::bit_width(pa.mantissa);
  const u128 numerator = u128{pa.mantissa} << k;  // < 2^72
  const u128 q = numerator / pb.mantissa;
  const bool sticky = numerator % pb.mantissa != 0;
  return fl32_dyadic(negative, 2 * q + (sticky ? 1 : 0), pa.exponent - pb.exponent - k - 1);
}

}  // namespace fusediff::reference::detail

namespace fusediff::reference {

float Fl32FusedMultiplyAdd(float a, float b, float c) {
  return detail::fl32_sum(detail::exact_product(a, b), detail::exact_dyadic(c));
}

}  // namespace fusediff::reference
