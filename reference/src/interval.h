#pragma once
// Rigorous interval arithmetic on MPFR (through Boost.Multiprecision's mpfr backend as the RAII holder).
// Every bound is computed with a directed rounding (lower bounds MPFR_RNDD, upper bounds MPFR_RNDU), and every
// MPFR function used is correctly rounded in the requested direction (MPFR's contract), so each operation
// returns an interval that contains the exact result for every point of its inputs. A composition of such
// operations therefore encloses the exact value of the composed formula: no error analysis is needed beyond
// "each step is monotone in each argument on the interval, or all corner cases are taken" (see mul/div).
//
// Boost 1.74's mpfr_float keeps its default precision in a process-wide static and its operators round to
// nearest, so the arithmetic below calls MPFR on the backend's mpfr_t with an explicit precision and direction.
#include <boost/multiprecision/mpfr.hpp>

#include <string>

#include "exact.h"

namespace fusediff::reference::detail {

using Big = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>, boost::multiprecision::et_off>;

struct Interval {
  Big lo, hi;
};

class IntervalMath {
 public:
  explicit IntervalMath(long precision_bits) : prec_(precision_bits) {}
  long precision() const { return prec_; }

  Big make() const;                                   // NaN at this precision
  static mpfr_ptr raw(Big& b) { return b.backend().data(); }
  static mpfr_srcptr raw(const Big& b) { return b.backend().data(); }

  Interval point_double(double x) const;              // exact (precision >= 53)
  Interval from_rational(const cpp_rational& q) const;  // [RNDD(q), RNDU(q)]
  Interval from_int(long v) const;                    // exact for |v| < 2^precision

  Interval add(const Interval& a, const Interval& b) const;
  Interval sub(const Interval& a, const Interval& b) const;
  Interval neg(const Interval& a) const;
  Interval mul(const Interval& a, const Interval& b) const;
  Interval div(const Interval& a, const Interval& b) const;
  Interval mul_2si(const Interval& a, long k) const;  // a * 2^k, exact barring over/underflow (then outward)
  Interval abs(const Interval& a) const;
  Interval relu(const Interval& a) const;             // max(a, 0)
  Interval hull(const Interval& a, const Interval& b) const;

  // Monotone functions: increasing f gives [f_D(lo), f_U(hi)], decreasing [f_D(hi), f_U(lo)].
  Interval exp(const Interval& a) const;
  Interval expm1(const Interval& a) const;
  Interval log1p(const Interval& a) const;            // a > -1
  Interval tanh(const Interval& a) const;
  Interval sqrt(const Interval& a) const;             // a >= 0
  Interval erfc(const Interval& a) const;             // decreasing
  Interval pi() const;

  static bool has_nan(const Interval& a);
  // Midpoint rounded to nearest (for display only).
  Big midpoint(const Interval& a) const;

 private:
  using Fn = int (*)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);
  Interval increasing(Fn f, const Interval& a) const;
  Interval decreasing(Fn f, const Interval& a) const;
  long prec_;
};

// Widens MPFR's (thread-local) exponent range to its maximum for the guard's lifetime, so that e.g.
// sigmoid(-10^6) ~ 10^-434295 is an ordinary number instead of an underflow. Construct it before any Big it
// protects; the previous range is restored on destruction.
class ExponentRangeGuard {
 public:
  ExponentRangeGuard() : emin_(mpfr_get_emin()), emax_(mpfr_get_emax()) {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
  }
  ~ExponentRangeGuard() {
    mpfr_set_emin(emin_);
    mpfr_set_emax(emax_);
  }
  ExponentRangeGuard(const ExponentRangeGuard&) = delete;
  ExponentRangeGuard& operator=(const ExponentRangeGuard&) = delete;

 private:
  mpfr_exp_t emin_, emax_;
};

// Decimal text of an MPFR value with max(digits, 2) significant digits (round to nearest; MPFR's minimum is 2).
std::string mpfr_decimal(const Big& value, int digits);

}  // namespace fusediff::reference::detail
