#include "interval.h"

#include <gmp.h>

#include <algorithm>
#include <array>

namespace fusediff::reference::detail {

Big IntervalMath::make() const {
  Big b;
  mpfr_set_prec(raw(b), prec_);  // value becomes NaN; every caller assigns
  return b;
}

Interval IntervalMath::point_double(double x) const {
  Interval r{make(), make()};
  mpfr_set_d(raw(r.lo), x, MPFR_RNDD);
  mpfr_set_d(raw(r.hi), x, MPFR_RNDU);
  return r;
}

Interval IntervalMath::from_int(long v) const {
  Interval r{make(), make()};
  mpfr_set_si(raw(r.lo), v, MPFR_RNDD);
  mpfr_set_si(raw(r.hi), v, MPFR_RNDU);
  return r;
}

Interval IntervalMath::from_rational(const cpp_rational& q) const {
  // Through GMP's mpq (canonical "num/den" text of the already-reduced rational), then one directed rounding each.
  mpq_t g;
  mpq_init(g);
  const std::string text = numerator(q).str() + "/" + denominator(q).str();
  mpq_set_str(g, text.c_str(), 10);
  Interval r{make(), make()};
  mpfr_set_q(raw(r.lo), g, MPFR_RNDD);
  mpfr_set_q(raw(r.hi), g, MPFR_RNDU);
  mpq_clear(g);
  return r;
}

Interval IntervalMath::add(const Interval& a, const Interval& b) const {
  Interval r{make(), make()};
  mpfr_add(raw(r.lo), raw(a.lo), raw(b.lo), MPFR_RNDD);
  mpfr_add(raw(r.hi), raw(a.hi), raw(b.hi), MPFR_RNDU);
  return r;
}

Interval IntervalMath::sub(const Interval& a, const Interval& b) const {
  Interval r{make(), make()};
  mpfr_sub(raw(r.lo), raw(a.lo), raw(b.hi), MPFR_RNDD);
  mpfr_sub(raw(r.hi), raw(a.hi), raw(b.lo), MPFR_RNDU);
  return r;
}

Interval IntervalMath::neg(const Interval& a) const {
  Interval r{make(), make()};
  mpfr_neg(raw(r.lo), raw(a.hi), MPFR_RNDD);  // exact
  mpfr_neg(raw(r.hi), raw(a.lo), MPFR_RNDU);
  return r;
}

namespace {
// [min, max] over the four corner products/quotients, each rounded outward. A NaN corner (0 * inf, inf - inf)
// makes the result the whole line, which is always a valid enclosure.
using Op = int (*)(mpfr_ptr, mpfr_srcptr, mpfr_srcptr, mpfr_rnd_t);
Interval corners(const IntervalMath& m, Op op, const Interval& a, const Interval& b) {
  Interval r{m.make(), m.make()};
  Big t = m.make();
  bool first = true, nan = false;
  for (const Big* x : {&a.lo, &a.hi}) {
    for (const Big* y : {&b.lo, &b.hi}) {
      op(IntervalMath::raw(t), IntervalMath::raw(*x), IntervalMath::raw(*y), MPFR_RNDD);
      nan = nan || mpfr_nan_p(IntervalMath::raw(t));
      if (first || mpfr_less_p(IntervalMath::raw(t), IntervalMath::raw(r.lo))) mpfr_set(IntervalMath::raw(r.lo), IntervalMath::raw(t), MPFR_RNDD);
      op(IntervalMath::raw(t), IntervalMath::raw(*x), IntervalMath::raw(*y), MPFR_RNDU);
      nan = nan || mpfr_nan_p(IntervalMath::raw(t));
      if (first || mpfr_greater_p(IntervalMath::raw(t), IntervalMath::raw(r.hi))) mpfr_set(IntervalMath::raw(r.hi), IntervalMath::raw(t), MPFR_RNDU);
      first = false;
    }
  }
  if (nan) {
    mpfr_set_inf(IntervalMath::raw(r.lo), -1);
    mpfr_set_inf(IntervalMath::raw(r.hi), 1);
  }
  return r;
}
}  // namespace

Interval IntervalMath::mul(const Interval& a, const Interval& b) const { return corners(*this, &mpfr_mul, a, b); }

Interval IntervalMath::div(const Interval& a, const Interval& b) const {
  if (mpfr_sgn(raw(b.lo)) <= 0 && mpfr_sgn(raw(b.hi)) >= 0) {  // divisor may be 0: no finite enclosure
    Interval r{make(), make()};
    mpfr_set_inf(raw(r.lo), -1);
    mpfr_set_inf(raw(r.hi), 1);
    return r;
  }
  return corners(*this, &mpfr_div, a, b);
}

Interval IntervalMath::mul_2si(const Interval& a, long k) const {
  Interval r{make(), make()};
  mpfr_mul_2si(raw(r.lo), raw(a.lo), k, MPFR_RNDD);
  mpfr_mul_2si(raw(r.hi), raw(a.hi), k, MPFR_RNDU);
  return r;
}

Interval IntervalMath::abs(const Interval& a) const {
  Interval r{make(), make()};
  if (mpfr_sgn(raw(a.lo)) >= 0) {
    mpfr_set(raw(r.lo), raw(a.lo), MPFR_RNDD);
    mpfr_set(raw(r.hi), raw(a.hi), MPFR_RNDU);
  } else if (mpfr_sgn(raw(a.hi)) <= 0) {
    mpfr_neg(raw(r.lo), raw(a.hi), MPFR_RNDD);
    mpfr_neg(raw(r.hi), raw(a.lo), MPFR_RNDU);
  } else {
    mpfr_set_zero(raw(r.lo), 1);
    if (mpfr_cmpabs(raw(a.lo), raw(a.hi)) > 0) mpfr_neg(raw(r.hi), raw(a.lo), MPFR_RNDU);
    else mpfr_set(raw(r.hi), raw(a.hi), MPFR_RNDU);
  }
  return r;
}

Interval IntervalMath::relu(const Interval& a) const {
  Interval r{make(), make()};
  if (mpfr_sgn(raw(a.lo)) > 0) mpfr_set(raw(r.lo), raw(a.lo), MPFR_RNDD);
  else mpfr_set_zero(raw(r.lo), 1);
  if (mpfr_sgn(raw(a.hi)) > 0) mpfr_set(raw(r.hi), raw(a.hi), MPFR_RNDU);
  else mpfr_set_zero(raw(r.hi), 1);
  return r;
}

Interval IntervalMath::hull(const Interval& a, const Interval& b) const {
  Interval r{make(), make()};
  mpfr_min(raw(r.lo), raw(a.lo), raw(b.lo), MPFR_RNDD);
  mpfr_max(raw(r.hi), raw(a.hi), raw(b.hi), MPFR_RNDU);
  return r;
}

Interval IntervalMath::increasing(Fn f, const Interval& a) const {
  Interval r{make(), make()};
  f(raw(r.lo), raw(a.lo), MPFR_RNDD);
  f(raw(r.hi), raw(a.hi), MPFR_RNDU);
  return r;
}

Interval IntervalMath::decreasing(Fn f, const Interval& a) const {
  Interval r{make(), make()};
  f(raw(r.lo), raw(a.hi), MPFR_RNDD);
  f(raw(r.hi), raw(a.lo), MPFR_RNDU);
  return r;
}

Interval IntervalMath::exp(const Interval& a) const { return increasing(&mpfr_exp, a); }
Interval IntervalMath::expm1(const Interval& a) const { return increasing(&mpfr_expm1, a); }
Interval IntervalMath::log1p(const Interval& a) const { return increasing(&mpfr_log1p, a); }
Interval IntervalMath::tanh(const Interval& a) const { return increasing(&mpfr_tanh, a); }
Interval IntervalMath::sqrt(const Interval& a) const { return increasing(&mpfr_sqrt, a); }
Interval IntervalMath::erfc(const Interval& a) const { return decreasing(&mpfr_erfc, a); }

Interval IntervalMath::pi() const {
  Interval r{make(), make()};
  mpfr_const_pi(raw(r.lo), MPFR_RNDD);
  mpfr_const_pi(raw(r.hi), MPFR_RNDU);
  return r;
}

bool IntervalMath::has_nan(const Interval& a) { return mpfr_nan_p(raw(a.lo)) || mpfr_nan_p(raw(a.hi)); }

Big IntervalMath::midpoint(const Interval& a) const {
  Big m = make();
  if (mpfr_inf_p(raw(a.lo)) || mpfr_inf_p(raw(a.hi))) {
    mpfr_set(raw(m), mpfr_inf_p(raw(a.lo)) ? raw(a.hi) : raw(a.lo), MPFR_RNDN);
    return m;
  }
  mpfr_add(raw(m), raw(a.lo), raw(a.hi), MPFR_RNDN);
  mpfr_div_2ui(raw(m), raw(m), 1, MPFR_RNDN);
  return m;
}

std::string mpfr_decimal(const Big& value, int digits) {
  mpfr_srcptr v = IntervalMath::raw(value);
  if (mpfr_nan_p(v)) return "nan";
  if (mpfr_inf_p(v)) return mpfr_sgn(v) > 0 ? "inf" : "-inf";
  if (mpfr_zero_p(v)) return "0";
  mpfr_exp_t exp10 = 0;
  char* text = mpfr_get_str(nullptr, &exp10, 10, static_cast<size_t>(digits < 2 ? 2 : digits), v, MPFR_RNDN);
  std::string s(text);
  mpfr_free_str(text);
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) s.erase(0, 1);
  return format_decimal_digits(negative, s, static_cast<long>(exp10));
}

}  // namespace fusediff::reference::detail
