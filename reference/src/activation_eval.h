#pragma once
// The activation formulas of docs/activations.md, three ways: exact rationals (piecewise-rational kinds),
// rigorous MPFR intervals (every kind), and the double-first filter (public: ActivationFilter).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>

#include "exact.h"
#include "fusediff/model/activation.h"
#include "fusediff/reference/reference.h"
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

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi), rounded once to double
constexpr double kGeluTanhCubic = 0.044715;                // rounded once to double

inline double sigmoid_d(double w) {
  if (w >= 0) return 1.0 / (1.0 + std::exp(-w));
  const double e = std::exp(w);
  return e / (1.0 + e);
}
inline double softplus_d(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

// ActivationFilter's evaluation, inline so that the per-code tables can inline it (the error analysis of every
// formula sits above ActivationFilter in activation_eval.cpp).
inline FilterEvaluation filter_evaluation(const Activation& a, double x) {
  FilterEvaluation r;
  if (!std::isfinite(x)) return r;
  double f = 0;
  switch (a.kind) {
    case ActivationKind::relu: f = std::max(x, 0.0); break;
    case ActivationKind::relu6: f = std::min(std::max(x, 0.0), 6.0); break;
    case ActivationKind::leaky_relu: f = x >= 0 ? x : static_cast<double>(a.alpha) * x; break;
    case ActivationKind::hard_sigmoid: f = std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0; break;
    case ActivationKind::hard_swish: f = x * (std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0); break;
    case ActivationKind::gelu_erf: f = 0.5 * x * std::erfc(-x / std::numbers::sqrt2); break;
    case ActivationKind::gelu_tanh: {
      const double z = kSqrt2OverPi * (x + kGeluTanhCubic * (x * x * x));
      f = x * sigmoid_d(2.0 * z);
      break;
    }
    case ActivationKind::sigmoid: f = sigmoid_d(x); break;
    case ActivationKind::tanh: f = std::tanh(x); break;
    case ActivationKind::silu: f = x * sigmoid_d(x); break;
    case ActivationKind::elu: f = x >= 0 ? x : static_cast<double>(a.alpha) * std::expm1(x); break;
    case ActivationKind::softplus: f = softplus_d(x); break;
    case ActivationKind::mish: f = x * std::tanh(softplus_d(x)); break;
  }
  r.f = f;
  r.bound = kFilterRelativeMargin * std::fabs(f) + kFilterAbsoluteMargin * std::max(1.0, std::fabs(x));
  r.usable = std::isfinite(f) && std::isfinite(r.bound);
  return r;
}


}  // namespace fusediff::reference::detail
