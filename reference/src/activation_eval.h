#pragma once
// The activation formulas of docs/activations.md, three ways: exact rationals (piecewise-rational kinds),
// rigorous MPFR intervals (every kind), and the double-first filter (public: ActivationFilter).
#include <optional>
#include <string>
#include <string_view>

#include "exact.h"
#include "fusediff/model/activation.h"
#include "interval.h"

namespace fusediff::reference::detail {

// Throws InputError unless alpha is finite and present exactly when the kind takes one.
void check_activation(const Activation& a, std::string_view field);

// f(0) for the kinds where it is rational (all but softplus, whose f(0) = ln 2).
bool rational_at_zero(ActivationKind k, cpp_rational* f0);

// f(x) exactly, for piecewise-rational kinds (is_piecewise_rational); alpha is the exact value of the float.
cpp_rational rational_activation(const Activation& a, const cpp_rational& x);

// An interval enclosing f(x) for every x in the given interval, at the precision of `m` (any kind).
Interval interval_activation(const IntervalMath& m, const Activation& a, const Interval& x);

// f(x) = A + D(x) for x != 0: A an exact rational (the asymptote on x's side: x, 0, 1, -1 or -alpha) and D an
// enclosure of the exponentially small remainder computed without cancellation (so with full relative
// accuracy). Lets the table decide t = A/sy + D/sy when A/sy is itself a rounding tie and D lies below any
// affordable precision (gelu_erf(106.75) = 106.75 - 10^-2476). nullopt when the kind has no such split.
struct AsymptoticSplit {
  cpp_rational a;
  Interval d;
};
std::optional<AsymptoticSplit> asymptotic_split(const IntervalMath& m, const Activation& a, double x);

// f(x) for an exact rational x as decimal text with `digits` significant digits (exact rationals for
// piecewise-rational kinds; otherwise MPFR intervals, precision raised until the enclosure is narrower than
// 10^-(digits+2) relative). Throws UndecidableError if the cap is reached.
std::string activation_decimal(const Activation& a, const cpp_rational& x, int digits);

}  // namespace fusediff::reference::detail
