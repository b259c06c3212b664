#pragma once
// The activation formulas of docs/activations.md, three ways: exact rationals (piecewise-rational kinds),
// rigorous MPFR intervals (every kind), and the double-first filter (public: ActivationFilter).
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

// f(x) for an exact rational x as decimal text with `digits` significant digits (exact rationals for
// piecewise-rational kinds; otherwise MPFR intervals, precision raised until the enclosure is narrower than
// 10^-(digits+2) relative). Throws UndecidableError if the cap is reached.
std::string activation_decimal(const Activation& a, const cpp_rational& x, int digits);

}  // namespace fusediff::reference::detail
