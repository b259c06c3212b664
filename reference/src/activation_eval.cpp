#include "activation_eval.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference::detail {

void check_activation(const Activation& a, std::string_view field) {
  if (!takes_alpha(a.kind) && a.alpha != 0.0f) {
    throw InputError(std::string(field) + ".alpha: " + std::string(to_string(a.kind)) + " takes no alpha");
  }
  if (!std::isfinite(a.alpha)) throw InputError(std::string(field) + ".alpha: must be finite");
}

bool rational_at_zero(ActivationKind k, cpp_rational* f0) {
  switch (k) {
    case ActivationKind::sigmoid: *f0 = cpp_rational(1, 2); return true;  // 1 / (1 + e^0)
    case ActivationKind::softplus: return false;                          // ln 2, irrational
    default: *f0 = 0; return true;  // every other kind has f(0) = 0 (a factor x, tanh 0, e^0 - 1, max(0, 0), ...)
  }
}

// ---------------------------------------------------------------------------------------------------------
// Exact rationals.
cpp_rational rational_activation(const Activation& a, const cpp_rational& x) {
  const cpp_rational zero = 0, three = 3, six = 6;
  auto relu6 = [&](const cpp_rational& t) { return std::min(std::max(t, zero), six); };
  switch (a.kind) {
    case ActivationKind::relu: return std::max(x, zero);
    case ActivationKind::relu6: return relu6(x);
    case ActivationKind::leaky_relu: return x >= 0 ? x : cpp_rational(exact_rational(a.alpha) * x);
    case ActivationKind::hard_sigmoid: return relu6(x + three) / six;
    case ActivationKind::hard_swish: return x * relu6(x + three) / six;
    default: break;
  }
  throw InputError("reference: " + std::string(to_string(a.kind)) + " is not piecewise rational");
}

// ---------------------------------------------------------------------------------------------------------
// MPFR intervals. Each line is the formula of docs/activations.md with interval operations; x may be a point.
namespace {
Interval sigmoid_iv(const IntervalMath& m, const Interval& w) {  // 1 / (1 + e^-w)
  return m.div(m.from_int(1), m.add(m.from_int(1), m.exp(m.neg(w))));
}
Interval softplus_iv(const IntervalMath& m, const Interval& x) {  // max(x, 0) + log1p(e^-|x|)
  return m.add(m.relu(x), m.log1p(m.exp(m.neg(m.abs(x)))));
}
}  // namespace

Interval interval_activation(const IntervalMath& m, const Activation& a, const Interval& x) {
  switch (a.kind) {
    case ActivationKind::relu:
    case ActivationKind::relu6:
    case ActivationKind::leaky_relu:
    case ActivationKind::hard_sigmoid:
    case ActivationKind::hard_swish: {
      // Evaluated exactly (rational_activation); no interval form is needed.
      throw InputError("reference: " + std::string(to_string(a.kind)) + " is evaluated in exact rationals");
    }
    case ActivationKind::gelu_erf: {  // x/2 * erfc(-x / sqrt 2)
      const Interval z = m.div(m.neg(x), m.sqrt(m.from_int(2)));
      return m.mul_2si(m.mul(x, m.erfc(z)), -1);
    }
    case ActivationKind::gelu_tanh: {  // x * sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3)
      const Interval c = m.sqrt(m.div(m.from_int(2), m.pi()));
      const Interval k = m.from_rational(cpp_rational(44715, 1000000));
      const Interval cube = m.mul(m.mul(x, x), x);
      const Interval z = m.mul(c, m.add(x, m.mul(k, cube)));
      return m.mul(x, sigmoid_iv(m, m.mul_2si(z, 1)));
    }
    case ActivationKind::sigmoid: return sigmoid_iv(m, x);
    case ActivationKind::tanh: return m.tanh(x);
    case ActivationKind::silu: return m.mul(x, sigmoid_iv(m, x));
    case ActivationKind::elu: {  // x >= 0 ? x : alpha (e^x - 1)
      const Interval negative_branch = m.mul(m.from_rational(exact_rational(a.alpha)), m.expm1(x));
      if (mpfr_sgn(IntervalMath::raw(x.lo)) >= 0) return m.add(x, m.from_int(0));
      if (mpfr_sgn(IntervalMath::raw(x.hi)) < 0) return negative_branch;
      return m.hull(negative_branch, x);  // straddles 0: both branches enclose their part
    }
    case ActivationKind::softplus: return softplus_iv(m, x);
    case ActivationKind::mish: return m.mul(x, m.tanh(softplus_iv(m, x)));
  }
  throw InputError("reference: unknown activation kind");
}

// The identities behind each split (x exact, A exact, D without cancellation):
//   gelu_erf   x > 0: x Phi(x) = x - (x/2) erfc(x/sqrt 2)          (Phi(x) = 1 - erfc(x/sqrt 2)/2)
//   gelu_tanh  x > 0: x sigmoid(2z) = x - x sigmoid(-2z)
//   silu       x > 0: x sigmoid(x) = x - x sigmoid(-x)
//   mish       x > 0: x tanh(s) = x - x * 2 sigmoid(-2s), s = softplus(x)   (1 - tanh s = 2 sigmoid(-2s))
//   softplus   x > 0: x + log1p(e^-x);  x < 0: 0 + log1p(e^x)
//   sigmoid    x > 0: 1 - sigmoid(-x)
//   tanh       x > 0: 1 - 2 sigmoid(-2x);  x < 0: -1 + 2 sigmoid(2x)
//   elu        x < 0: -alpha + alpha e^x
//   and for the other sides A = 0, D = f(x) itself (already free of cancellation).
std::optional<AsymptoticSplit> asymptotic_split(const IntervalMath& m, const Activation& a, double x) {
  if (x == 0 || is_piecewise_rational(a.kind)) return std::nullopt;
  const Interval xi = m.point_double(x);
  const cpp_rational xr = exact_rational(x);
  const Interval two = m.from_int(2);
  switch (a.kind) {
    case ActivationKind::gelu_erf:
      if (x > 0) return AsymptoticSplit{xr, m.neg(m.mul_2si(m.mul(xi, m.erfc(m.div(xi, m.sqrt(two)))), -1))};
      break;
    case ActivationKind::gelu_tanh:
      if (x > 0) {
        const Interval c = m.sqrt(m.div(two, m.pi()));
        const Interval k = m.from_rational(cpp_rational(44715, 1000000));
        const Interval z = m.mul(c, m.add(xi, m.mul(k, m.mul(m.mul(xi, xi), xi))));
        return AsymptoticSplit{xr, m.neg(m.mul(xi, sigmoid_iv(m, m.neg(m.mul_2si(z, 1)))))};
      }
      break;
    case ActivationKind::silu:
      if (x > 0) return AsymptoticSplit{xr, m.neg(m.mul(xi, sigmoid_iv(m, m.neg(xi))))};
      break;
    case ActivationKind::mish:
      if (x > 0) {
        const Interval s = softplus_iv(m, xi);
        return AsymptoticSplit{xr, m.neg(m.mul_2si(m.mul(xi, sigmoid_iv(m, m.neg(m.mul_2si(s, 1)))), 1))};
      }
      break;
    case ActivationKind::softplus:
      if (x > 0) return AsymptoticSplit{xr, m.log1p(m.exp(m.neg(xi)))};
      return AsymptoticSplit{cpp_rational(0), m.log1p(m.exp(xi))};
    case ActivationKind::sigmoid:
      if (x > 0) return AsymptoticSplit{cpp_rational(1), m.neg(sigmoid_iv(m, m.neg(xi)))};
      break;
    case ActivationKind::tanh:
      if (x > 0) return AsymptoticSplit{cpp_rational(1), m.neg(m.mul_2si(sigmoid_iv(m, m.mul_2si(m.neg(xi), 1)), 1))};
      return AsymptoticSplit{cpp_rational(-1), m.mul_2si(sigmoid_iv(m, m.mul_2si(xi, 1)), 1)};
    case ActivationKind::elu:
      if (x < 0) {
        const cpp_rational alpha = exact_rational(a.alpha);
        return AsymptoticSplit{cpp_rational(-alpha), m.mul(m.from_rational(alpha), m.exp(xi))};
      }
      break;
    default: break;
  }
  return AsymptoticSplit{cpp_rational(0), interval_activation(m, a, xi)};  // A = 0, D = f
}

// ---------------------------------------------------------------------------------------------------------
// Decimal text.
std::string activation_decimal(const Activation& a, const cpp_rational& x, int digits) {
  digits = std::clamp(digits, 1, 100000);
  if (is_piecewise_rational(a.kind)) return decimal_string(rational_activation(a, x), digits);
  cpp_rational f0;
  if (x == 0 && rational_at_zero(a.kind, &f0)) return decimal_string(f0, digits);
  // Relative enclosure width below 10^-(digits+2) makes the rounded midpoint correct to the last digit shown
  // but one. The start precision covers that with 64 guard bits; the cap stops pathological inputs.
  const ExponentRangeGuard range;
  const long start = static_cast<long>(digits * 3.33) + 64;
  const long cap = std::max(8 * start, 65536L);
  for (long p = start; p <= cap; p *= 2) {
    const IntervalMath m(p);
    const Interval f = interval_activation(m, a, m.from_rational(x));
    if (IntervalMath::has_nan(f)) continue;
    mpfr_srcptr lo = IntervalMath::raw(f.lo);
    mpfr_srcptr hi = IntervalMath::raw(f.hi);
    if (mpfr_equal_p(lo, hi)) return mpfr_decimal(f.lo, digits);  // exact
    if (mpfr_inf_p(lo) || mpfr_inf_p(hi) || mpfr_sgn(lo) * mpfr_sgn(hi) <= 0) continue;  // no relative bound yet
    // width / min(|lo|, |hi|) <= 10^-(digits+2)  <=>  width * 10^(digits+2) <= min(|lo|, |hi|)
    Big width = m.make(), scaled = m.make(), smallest = m.make();
    mpfr_sub(IntervalMath::raw(width), hi, lo, MPFR_RNDU);
    mpfr_ui_pow_ui(IntervalMath::raw(scaled), 10, static_cast<unsigned long>(digits + 2), MPFR_RNDU);
    mpfr_mul(IntervalMath::raw(scaled), IntervalMath::raw(scaled), IntervalMath::raw(width), MPFR_RNDU);
    if (mpfr_cmpabs(lo, hi) < 0) mpfr_abs(IntervalMath::raw(smallest), lo, MPFR_RNDD);
    else mpfr_abs(IntervalMath::raw(smallest), hi, MPFR_RNDD);
    if (mpfr_lessequal_p(IntervalMath::raw(scaled), IntervalMath::raw(smallest))) {
      return mpfr_decimal(m.midpoint(f), digits);
    }
  }
  throw UndecidableError("reference: " + std::string(to_string(a.kind)) + "(" + decimal_string(x, 40) +
                         ") could not be enclosed to " + std::to_string(digits) + " digits within " +
                         std::to_string(cap) + " bits (a value beyond MPFR's exponent range, about 2^(+-4.6e18), "
                         "cannot be)");
}

}  // namespace fusediff::reference::detail

// ---------------------------------------------------------------------------------------------------------
// The double-first filter.
//
// Claim: for every double x (exact input) where the result is finite,
//     |f_d - f(x)| <= 2^-36 |f_d| + 2^-1000 max(1, |x|).
// Model: each binary64 operation has relative error <= u = 2^-53 (normal range); each glibc libm call
// (exp, expm1, log1p, tanh, erfc) has relative error <= L = 16 ulp = 2^-48. glibc's manual lists the known
// maximum errors of these functions on x86_64 as at most a few ulp (its test suite flags anything above
// 9 ulp), so L dominates the documented errors with room to spare. An argument carrying a relative error
// r is amplified by the condition number kappa(z) = |z g'(z) / g(z)| of the function g it enters.
// Per kind (x itself is exact; worst cases):
//   sigmoid, split by sign (e/(1+e) with e = exp(x) for x < 0): L + 3u.      tanh: L.
//   silu = x * sigmoid(x): L + 4u.        elu = alpha * expm1(x) (alpha exact): L + u.
//   softplus = max(x,0) + log1p(exp(-|x|)): kappa(log1p, y > 0) <= 1, sum of non-negatives: 2L + 3u.
//   mish = x * tanh(softplus): kappa(tanh, s > 0) = 2s/sinh(2s) <= 1: 3L + 5u.
//   gelu_erf = 0.5 x erfc(-x / s), s = fl(sqrt 2): the argument carries 2u; kappa(erfc, z) <= 2z^2 + 1 for
//     z >= 0 and < 1 for z < 0; erfc(z) is a normal double only for z < 26.55, so kappa < 1411:
//     1411 * 2u + L + 2u < 2^-41.
//   gelu_tanh = x * sigmoid(2z), z = c (x + k x^3) with rounded constants c ~ sqrt(2/pi), k ~ 0.044715: z
//     carries <= 8u; kappa(sigmoid, w) = |w| (1 - sigmoid(w)) <= |w|, and sigmoid(w) is a normal double only
//     for w > -708.4, so the amplified term is < 709 * 8u < 2^-40.5; total < 2^-40.3.
// Where a result (or the exp inside) leaves the normal range, |f| itself is below |x| 2^-1021 and so is the
// error: the absolute term 2^-1000 max(1, |x|) covers it (and any subnormal rounding, <= 2^-1074 per op).
// The largest relative term, 2^-40.3, is 20x below the claimed 2^-36, which also absorbs |f| vs |f_d|.
namespace fusediff::reference {

FilterEvaluation ActivationFilter(const Activation& a, double x) { return detail::filter_evaluation(a, x); }

}  // namespace fusediff::reference
