// y_ref for every intermediate code: v = (u - zu) su, f(v), t = f / sy (+ zy before rounding), y = sat(round(t)
// (+ zy after rounding)). Every kind goes through the double-first filter; what it leaves open, piecewise-rational
// kinds decide in exact rationals and transcendental kinds in MPFR intervals (docs/activations.md).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "activation_eval.h"
#include "exact.h"
#include "fl32.h"
#include "fl32_dyadic.h"
#include "fusediff/model/error_stats.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"
#include "interval.h"

namespace fusediff::reference {

using detail::Big;
using detail::cpp_int;
using detail::cpp_rational;
using detail::Interval;
using detail::IntervalMath;

namespace {

// The output rule y(t) = sat(round_mode(t + zb) + za), with (zb, za) = (zy, 0) when the zero point goes before
// rounding and (0, zy) after. Every rounding mode is a non-decreasing function of t, and so are the shifts and
// the saturation: if y(lo) == y(hi) then y(t) is that same code for every t in [lo, hi]. That single fact is the
// whole decision procedure of the table (ties and saturation need no special cases). The unsaturated value is
// compared too, so that the `saturated` flag is decided as well.
struct OutputRule {
  RoundingMode mode = RoundingMode::half_away_from_zero;
  int64_t zb = 0, za = 0, qmin = 0, qmax = 0;

  struct Result {
    int32_t y = 0;
    int64_t unsaturated = 0;
    bool saturated = false;
    bool operator==(const Result&) const = default;
  };

  // t = F + phi, F = floor(t), half_cmp = sign(phi - 1/2). Inlined: once per code of every table.
  [[gnu::always_inline]] Result from_split(int64_t floor_t, int half_cmp) const {
    constexpr int64_t kLimit = int64_t{1} << 40;  // far beyond every type; keeps the sums below exact
    floor_t = detail::clamp_i64(floor_t, -kLimit, kLimit);
    Result r;
    r.unsaturated = detail::round_split(mode, floor_t + zb, half_cmp) + za;
    r.y = static_cast<int32_t>(detail::clamp_i64(r.unsaturated, qmin, qmax));
    r.saturated = r.y != r.unsaturated;
    if (r.saturated) r.unsaturated = r.unsaturated > qmax ? qmax + 1 : qmin - 1;  // beyond: one representative
    return r;
  }

  // Exact for any finite double: floor is exact, and F + 1/2 is exact for |F| < 2^52, so the comparison of t
  // with F + 1/2 is exact.
  Result from_double(double t) const {
    if (t > 0x1p40) return from_split(int64_t{1} << 40, -1);
    if (t < -0x1p40) return from_split(-(int64_t{1} << 40), -1);
    const double f = std::floor(t);
    const double mid = f + 0.5;
    return from_split(static_cast<int64_t>(f), t < mid ? -1 : (t > mid ? 1 : 0));
  }

  // Exact for any MPFR number (NaN excluded by the caller).
  Result from_mpfr(mpfr_srcptr t) const {
    if (mpfr_inf_p(t) || mpfr_cmp_d(t, 0x1p40) > 0) {
      return mpfr_sgn(t) > 0 ? from_split(int64_t{1} << 40, -1) : from_split(-(int64_t{1} << 40), -1);
    }
    if (mpfr_cmp_d(t, -0x1p40) < 0) return from_split(-(int64_t{1} << 40), -1);
    const long f = mpfr_get_si(t, MPFR_RNDD);  // floor, exact (|t| <= 2^40)
    mpfr_t mid;
    mpfr_init2(mid, 64);
    mpfr_set_si(mid, f, MPFR_RNDN);      // exact
    mpfr_add_d(mid, mid, 0.5, MPFR_RNDN);  // exact: |f| < 2^41 fits 64 bits with the half
    const int cmp = mpfr_cmp(t, mid);
    mpfr_clear(mid);
    return from_split(f, cmp < 0 ? -1 : (cmp > 0 ? 1 : 0));
  }

  // t = T + D with T exact and D enclosed in [dlo, dhi] (the asymptotic split, T = A/sy). Decided when D has a
  // known strict sign and |D| < gap, gap = |frac(T) - 1/2| (or 1/2 when T is itself a tie):
  //   T a tie F + 1/2: t lies strictly inside (F, F + 1/2) for D < 0, (F + 1/2, F + 1) for D > 0;
  //   otherwise:       t stays strictly on T's side of F + 1/2, inside (F - 1/2, F + 3/2): rounds as T does.
  std::optional<Result> from_exact_plus_small(const IntervalMath& m, const cpp_rational& exact_t,
                                              const Interval& d) const {
    mpfr_srcptr lo = IntervalMath::raw(d.lo);
    mpfr_srcptr hi = IntervalMath::raw(d.hi);
    if (IntervalMath::has_nan(d) || mpfr_inf_p(lo) || mpfr_inf_p(hi)) return std::nullopt;
    const int sign_lo = mpfr_sgn(lo), sign_hi = mpfr_sgn(hi);
    if (sign_lo * sign_hi <= 0) return std::nullopt;  // D might be 0: no strict side
    const cpp_int f = detail::floor_rational(exact_t);
    const cpp_rational phi = exact_t - cpp_rational(f);
    const cpp_rational half(1, 2);
    const bool tie = phi == half;
    const cpp_rational gap = tie ? half : (phi < half ? cpp_rational(half - phi) : cpp_rational(phi - half));
    const Interval gap_iv = m.from_rational(gap);
    mpfr_srcptr largest = mpfr_cmpabs(lo, hi) >= 0 ? lo : hi;
    if (mpfr_cmpabs(largest, IntervalMath::raw(gap_iv.lo)) >= 0) return std::nullopt;  // need |D| < gap
    const int cmp = tie ? (sign_lo > 0 ? 1 : -1) : (phi < half ? -1 : 1);
    return from_split(detail::clamp_to_int64(f), cmp);
  }

  Result from_rational(const cpp_rational& t) const {
    const cpp_int f = detail::floor_rational(t);
    return from_split(detail::clamp_to_int64(f), detail::half_compare(t, f));
  }
};

// std::nextafter(x, -infinity) / (x, +infinity), without the libm call (an eighth of the table's time before).
double next_down(double x) {
  if (!std::isfinite(x)) return x;
  if (x == 0) return -std::numeric_limits<double>::denorm_min();
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  return std::bit_cast<double>(x > 0 ? bits - 1 : bits + 1);  // one ulp toward -infinity either side of 0
}
double next_up(double x) { return -next_down(-x); }

// Kinds for which f(v) at rational v != 0 is provably transcendental (Lindemann-Weierstrass: e^a is
// transcendental for algebraic a != 0, and f is a non-constant rational function of e^v, or for softplus
// e^f = 1 + e^v with distinct exponents f, v, 0), so t = f/sy + zy can never be exactly a tie.
bool never_a_tie(ActivationKind k) {
  switch (k) {
    case ActivationKind::sigmoid:
    case ActivationKind::tanh:
    case ActivationKind::silu:
    case ActivationKind::elu:
    case ActivationKind::softplus:
    case ActivationKind::mish: return true;
    default: return false;  // gelu_erf (erf at rationals: no such theorem), gelu_tanh (exp of a multiple of 1/sqrt(pi))
  }
}


// e = the activation in binary32 (Binary32Activation). `escalations` counts the inputs the double filter left to
// MPFR, `max_bits` the highest precision one needed.
float Binary32ActivationImpl(const Activation& a, float v, const ActivationTableOptions& options, uint64_t* escalations,
                             int* max_bits) {
  if (!std::isfinite(v)) throw InputError("binary32 activation: v must be finite");
  switch (a.kind) {
    // maxps / minps against the constants, a compare-and-blend for the negative slope: exact or one product.
    case ActivationKind::relu: return v > 0 ? v : 0.0f;
    case ActivationKind::leaky_relu: return v > 0 ? v : Fl32Multiply(a.alpha, v);
    case ActivationKind::relu6: return v > 0 ? (v < 6 ? v : 6.0f) : 0.0f;
    case ActivationKind::hard_swish: {  // jit_uni_eltwise_injector: add 3, clip to [0, 6], divide by 6, times v
      const float shifted = detail::fl32_sum(detail::exact_dyadic(v), detail::exact_dyadic(3.0f));
      const float clipped = shifted > 0 ? (shifted < 6 ? shifted : 6.0f) : 0.0f;
      return Fl32Multiply(v, detail::fl32_quotient(clipped, 6.0f));
    }
    default: break;
  }
  const double x = v;  // exact
  cpp_rational f0;
  if (is_piecewise_rational(a.kind) || (x == 0 && detail::rational_at_zero(a.kind, &f0))) {
    const cpp_rational xr = detail::exact_rational(x);
    return detail::fl32_rational(is_piecewise_rational(a.kind) ? detail::rational_activation(a, xr) : f0);
  }
  // Transcendental: f is monotone in no useful sense here, but the rounding to binary32 is: every value of an
  // enclosure [lo, hi] rounds to fl32(lo) when fl32(lo) == fl32(hi) (bit for bit, so +-0 straddles escalate).
  if (options.use_double_filter) {
    const FilterEvaluation fe = detail::filter_evaluation(a, x);
    if (fe.usable) {
      const double lo = next_down(fe.f - fe.bound), hi = next_up(fe.f + fe.bound);
      if (std::isfinite(lo) && std::isfinite(hi)) {
        const float rl = detail::fl32_double(lo), rh = detail::fl32_double(hi);
        if (std::bit_cast<uint32_t>(rl) == std::bit_cast<uint32_t>(rh)) return rl;
      }
    }
  }
  ++*escalations;
  const detail::ExponentRangeGuard range;
  for (long bits = options.mpfr_start_bits;; bits = std::min<long>(2 * bits, options.mpfr_cap_bits)) {
    const IntervalMath m(bits);
    const Interval f = detail::interval_activation(m, a, m.point_double(x));
    if (!IntervalMath::has_nan(f)) {
      const float rl = mpfr_get_flt(IntervalMath::raw(f.lo), MPFR_RNDN);
      const float rh = mpfr_get_flt(IntervalMath::raw(f.hi), MPFR_RNDN);
      if (std::bit_cast<uint32_t>(rl) == std::bit_cast<uint32_t>(rh)) {
        *max_bits = std::max(*max_bits, static_cast<int>(bits));
        return rl;
      }
    }
    if (bits >= options.mpfr_cap_bits) break;
  }
  throw UndecidableError("binary32 activation: " + std::string(to_string(a.kind)) + " at v=" + format_float32(v) +
                         ": fl32(f(v)) still undecided at the " + std::to_string(options.mpfr_cap_bits) + "-bit cap");
}

// e = F(x) of PostOpArithmetic::binary32_libm (model/convention.h): XNNPACK's table functions, each operation one
// binary32 rounding (this file is built with -ffp-contract=off) and the transcendental steps glibc's own binary32
// functions: they are not correctly rounded, and the rule is the function itself, so nothing else reproduces it.
// x is never -0 here (a product with an exact integer difference is +0 at the zero point), so x < 0 is signbit(x).
float LibmActivation(const Activation& a, float x) {
  switch (a.kind) {
    case ActivationKind::sigmoid:
      // Split at 0 so that expf never overflows into the reciprocal (lut-elementwise-nc.c:226-228).
      return x < 0.0f ? 1.0f / (1.0f + expf(-x)) : 1.0f - 1.0f / (1.0f + expf(x));
    case ActivationKind::tanh: return tanhf(x);
    case ActivationKind::elu: return x < 0.0f ? a.alpha * expm1f(x) : x;
    case ActivationKind::leaky_relu: return x < 0.0f ? x * a.alpha : x;
    case ActivationKind::relu: return std::max(x, 0.0f);
    case ActivationKind::relu6: return std::min(std::max(x, 0.0f), 6.0f);
    default: break;
  }
  throw InputError("post_ops: binary32_libm defines sigmoid, tanh, elu, leaky_relu, relu and relu6, not " +
                   std::string(to_string(a.kind)));
}

// The decision procedure for one point: y(f(x)) for an exact binary64 input x, under one convention's output rule.
// Shared by the per-code table and the per-value evaluator of an f32 intermediate.
class PointDecider {
 public:
  PointDecider(const Convention& convention, const ActivationTableOptions& options) : options_(options) {
    validate(convention.output.q, "output");
    detail::check_activation(convention.activation, "activation");
    if (options.mpfr_start_bits < 2 || options.mpfr_cap_bits < options.mpfr_start_bits || options.mpfr_cap_bits > (1 << 20)) {
      throw InputError("activation table: MPFR precisions must satisfy 2 <= start <= cap <= 2^20 (got " +
                       std::to_string(options.mpfr_start_bits) + ", " + std::to_string(options.mpfr_cap_bits) + ")");
    }
    act_ = convention.activation;
    const QuantParams& out = convention.output.q;
    before_ = convention.output.zero_point_order == ZeroPointOrder::before_rounding;
    rule_.mode = convention.output.rounding;
    rule_.zb = before_ ? out.zero_point : 0;
    rule_.za = before_ ? 0 : out.zero_point;
    rule_.qmin = out.type.qmin();
    rule_.qmax = out.type.qmax();
    sy_ = detail::exact_rational(out.scale);
    sy_d_ = out.scale;  // exact
    inverse_sy_d_ = 1.0 / sy_d_;
    binary32_ = convention.post_ops == PostOpArithmetic::binary32;
    libm_ = convention.post_ops == PostOpArithmetic::binary32_libm;
    if (libm_) {
      if (rule_.mode != RoundingMode::half_to_even || before_) {
        throw InputError("post_ops: binary32_libm rounds half to even and adds the zero point after rounding");
      }
      (void)LibmActivation(act_, 0.0f);  // an activation the rule does not define: InputError now
      output_scale_ = out.scale;
    }
    if (binary32_) {
      if (rule_.mode != RoundingMode::half_to_even || !before_) {
        throw InputError("post_ops: binary32 post-ops add the zero point in binary32 and round half to even");
      }
      rule_.zb = 0;  // t already holds zy (Binary32OutputValue)
      output_scale_ = out.scale;
      zero_point_ = out.zero_point;
    }
  }

  uint64_t escalations() const { return escalations_; }
  int max_mpfr_bits() const { return max_mpfr_bits_; }

  // x must be exactly the intended input (every caller passes an exact product or a float). `where` names the
  // point in an UndecidableError ("code u=5", "v=0.25").
  template <typename Where>
  void decide(double x, const Where& where, ActivationPoint& p) {
    if (binary32_) {
      decide_binary32(x, where, p);
      return;
    }
    if (libm_) {
      decide_libm(x, where, p);
      return;
    }
    const bool rational = is_piecewise_rational(act_.kind);
    cpp_rational f0;
    if (rational || (x == 0 && detail::rational_at_zero(act_.kind, &f0))) {
      // Piecewise-rational kinds: the double filter decides y, and the tie distance wherever the filter's error
      // cannot move it across the quant_boundary threshold, the one comparison it feeds; exact rationals decide
      // every other point (ties themselves included: the enclosure of a tie always straddles it).
      if (rational && options_.use_double_filter && filtered(x, /*tie_threshold=*/kQuantBoundaryTieDistance, p)) return;
      p = ActivationPoint{};
      p.v = x;
      if (rational) {
        const cpp_rational v = detail::exact_rational(x);
        fill_rational(p, v, detail::rational_activation(act_, v));
      } else {
        fill_rational(p, cpp_rational(0), f0);  // v == 0: decided exactly
      }
      return;
    }
    if (options_.use_double_filter && filtered(x, std::nullopt, p)) return;
    p = ActivationPoint{};
    p.v = x;

    // Escalation: MPFR intervals at doubling precision up to the cap.
    ++escalations_;
    const detail::ExponentRangeGuard range;
    std::string last_interval;
    for (long bits = options_.mpfr_start_bits;; bits = std::min<long>(2 * bits, options_.mpfr_cap_bits)) {
      const IntervalMath m(bits);
      const Interval f = detail::interval_activation(m, act_, m.point_double(x));
      const Interval t = m.div(f, m.point_double(sy_d_));
      if (!IntervalMath::has_nan(t)) {
        const OutputRule::Result rl = rule_.from_mpfr(IntervalMath::raw(t.lo));
        const OutputRule::Result rh = rule_.from_mpfr(IntervalMath::raw(t.hi));
        if (rl == rh) {
          max_mpfr_bits_ = std::max(max_mpfr_bits_, static_cast<int>(bits));
          const Big fm = m.midpoint(f);
          const Big tm = m.midpoint(t);
          p.y = rl.y;
          p.saturated = rl.saturated;
          p.f = mpfr_get_d(IntervalMath::raw(fm), MPFR_RNDN);
          const double t_mid = mpfr_get_d(IntervalMath::raw(tm), MPFR_RNDN);
          p.t = t_mid + static_cast<double>(rule_.zb);
          // |frac(t) - 1/2| from the midpoint, in MPFR (the double t_mid may have lost the distinction).
          if (mpfr_number_p(IntervalMath::raw(tm)) && mpfr_cmpabs_ui(IntervalMath::raw(tm), 1ul << 30) < 0) {
            Big d = m.make();
            mpfr_floor(IntervalMath::raw(d), IntervalMath::raw(tm));
            mpfr_sub(IntervalMath::raw(d), IntervalMath::raw(tm), IntervalMath::raw(d), MPFR_RNDN);
            mpfr_sub_d(IntervalMath::raw(d), IntervalMath::raw(d), 0.5, MPFR_RNDN);
            p.tie_distance = std::fabs(mpfr_get_d(IntervalMath::raw(d), MPFR_RNDN));
          } else {
            p.tie_distance = 0.5;
          }
          return;
        }
        last_interval = "[" + detail::mpfr_decimal(t.lo, 25) + ", " + detail::mpfr_decimal(t.hi, 25) + "]";
      }
      // The enclosure of t straddles a tie it cannot resolve: try t = A/sy + D/sy with A exact (the asymptote)
      // and D the exponentially small rest, which keeps its relative accuracy.
      if (const auto split = detail::asymptotic_split(m, act_, x)) {
        const cpp_rational exact_t = split->a / sy_;
        const Interval d = m.div(split->d, m.point_double(sy_d_));
        if (const auto r = rule_.from_exact_plus_small(m, exact_t, d)) {
          max_mpfr_bits_ = std::max(max_mpfr_bits_, static_cast<int>(bits));
          p.y = r->y;
          p.saturated = r->saturated;
          const Big dm = m.midpoint(d);
          const double d_mid = mpfr_get_d(IntervalMath::raw(dm), MPFR_RNDN);
          p.f = detail::to_double(split->a) + d_mid * sy_d_;
          p.t = detail::to_double(exact_t) + d_mid + static_cast<double>(rule_.zb);
          const double base = detail::tie_distance_rational(exact_t);
          p.tie_distance = base == 0 ? std::fabs(d_mid) : base;
          return;
        }
      }
      if (bits >= options_.mpfr_cap_bits) break;
    }
    const std::string why = never_a_tie(act_.kind)
                                ? "f(v) is transcendental (Lindemann-Weierstrass), so t is not a tie, but no enclosure "
                                  "excluded the rounding boundary"
                                : "t may be exactly a rounding tie; no theorem excludes it";
    throw UndecidableError("activation table: " + std::string(to_string(act_.kind)) + " at " + where() +
                           " (v=" + detail::decimal_string(detail::exact_rational(x), 40) + "): t = f(v)/sy" +
                           (before_ ? " + zy" : "") + " in " + last_interval + " at the " +
                           std::to_string(options_.mpfr_cap_bits) + "-bit cap; " + why);
  }

  // Binary32 post-ops: x is the binary32 input itself; e and t are binary32, and t's rounding is exact.
  template <typename Where>
  void decide_binary32(double x, const Where& where, ActivationPoint& p) {
    const float v = static_cast<float>(x);
    if (static_cast<double>(v) != x) {
      throw InputError("activation table: binary32 post-ops at " + where() + ": the input " +
                       detail::decimal_string(detail::exact_rational(x), 40) + " is not a binary32 value");
    }
    const float e = Binary32ActivationImpl(act_, v, options_, &escalations_, &max_mpfr_bits_);
    const float t = Binary32OutputValue(e, output_scale_, zero_point_);
    p = ActivationPoint{};
    p.v = x;
    p.f = e;
    p.t = t;
    const OutputRule::Result r = rule_.from_double(t);
    p.y = r.y;
    p.saturated = r.saturated;
    p.tie_distance = std::fabs(p.t) < 0x1p52 ? std::fabs(p.t - (std::floor(p.t) + 0.5)) : 0.5;  // exact
  }

  // binary32_libm: x is the binary32 input fl32(su (u - zu)); e, 1/sy and t are binary32 and t's rounding exact.
  template <typename Where>
  void decide_libm(double x, const Where& where, ActivationPoint& p) {
    const float v = static_cast<float>(x);
    if (static_cast<double>(v) != x) {
      throw InputError("activation table: binary32_libm at " + where() + ": the input " +
                       detail::decimal_string(detail::exact_rational(x), 40) + " is not a binary32 value");
    }
    const float e = LibmActivation(act_, v);
    const float t = Fl32Multiply(e, detail::fl32_quotient(1.0f, output_scale_));
    p = ActivationPoint{};
    p.v = x;
    p.f = e;
    p.t = t;  // the zero point comes after rounding
    const OutputRule::Result r = rule_.from_double(t);
    p.y = r.y;
    p.saturated = r.saturated;
    p.tie_distance = std::fabs(t) < 0x1p52 ? std::fabs(double(t) - (std::floor(double(t)) + 0.5)) : 0.5;  // exact
  }

 private:
  // The double filter (docs/activations.md): an enclosure [lo, hi] of t from ActivationFilter's rigorous bound.
  // Decided when both ends round alike. With `tie_threshold`, also only when the tie distance of t_d is farther
  // than the enclosure's half-width (+ 2^-50 for computing it) from the threshold: |frac(t) - 1/2| is 1-Lipschitz
  // in t, so the exact distance lies on the same side.
  // Writes p only when it decides (returns true).
  bool filtered(double x, std::optional<double> tie_threshold, ActivationPoint& p) const {
    const FilterEvaluation fe = detail::filter_evaluation(act_, x);
    if (!fe.usable) return false;
    // t_d = fl(f_d * fl(1/sy)): two roundings of at most 2^-53 each (1/sy is a normal double for every float32
    // sy), so |t_d - f/sy| <= |t_d - f_d/sy| + |f_d - f|/sy <= 2^-52 |t_d| (1 + 2^-50) + 2^-1070 + bound/sy; the
    // (1 + 2^-48) factor absorbs that slack and the roundings of this very sum, next_down/next_up make lo/hi
    // outward-rounded. (A multiplication: two divisions per code were a fifth of the table's time.)
    const double t_d = fe.f * inverse_sy_d_;
    const double e_t = (fe.bound * inverse_sy_d_ + std::fabs(t_d) * 0x1p-52 + 0x1p-1070) * (1 + 0x1p-48);
    const double lo = next_down(t_d - e_t);
    const double hi = next_up(t_d + e_t);
    if (!std::isfinite(t_d) || !std::isfinite(lo) || !std::isfinite(hi)) return false;
    // Usually [lo, hi] lies inside one rounding cell of t_d: [F, F + 1/2) or (F + 1/2, F + 1), one floor decides
    // it. Otherwise both ends are rounded and compared (from_double is exact for any double).
    OutputRule::Result rl;
    const double floor_t = std::floor(t_d);
    const double mid = floor_t + 0.5;  // exact for |t_d| < 2^52
    if (std::fabs(t_d) < 0x1p40 && lo >= floor_t && hi < floor_t + 1 && (hi < mid || lo > mid)) {
      rl = rule_.from_split(static_cast<int64_t>(floor_t), hi < mid ? -1 : 1);
    } else {
      rl = rule_.from_double(lo);
      if (!(rl == rule_.from_double(hi))) return false;
    }
    // |t_d - nearest tie|; from 2^52 up every double is an integer, farthest from any tie.
    const double distance = std::fabs(t_d) < 0x1p52 ? std::fabs(t_d - mid) : 0.5;
    if (tie_threshold && !(std::fabs(distance - *tie_threshold) > 2 * e_t + 0x1p-50)) return false;
    p.v = x;
    p.y = rl.y;
    p.saturated = rl.saturated;
    p.f = fe.f;
    p.t = t_d + static_cast<double>(rule_.zb);
    p.tie_distance = distance;
    return true;
  }

  // t = f/sy = n/d exactly; F = floor(t), r = n - F d in [0, d): the rounding compares 2r with d, and the tie
  // distance is |2r - d| / 2d. Display doubles are plain conversions.
  void fill_rational(ActivationPoint& p, const cpp_rational& v, const cpp_rational& f) const {
    const cpp_rational t = f / sy_;
    const cpp_int& n = numerator(t);
    const cpp_int& d = denominator(t);
    const cpp_int floor_t = detail::floor_rational(t);
    const cpp_int twice_r = 2 * (n - floor_t * d);
    const int cmp = twice_r < d ? -1 : (twice_r > d ? 1 : 0);
    const OutputRule::Result r = rule_.from_split(detail::clamp_to_int64(floor_t), cmp);
    p.y = r.y;
    p.saturated = r.saturated;
    p.v = detail::to_double(v);
    p.f = detail::to_double(f);
    p.t = detail::to_double(t) + static_cast<double>(rule_.zb);
    const cpp_int dist = twice_r > d ? cpp_int(twice_r - d) : cpp_int(d - twice_r);
    p.tie_distance = dist.convert_to<double>() / (2 * d).convert_to<double>();
  }

  ActivationTableOptions options_;
  Activation act_;
  bool before_ = false;
  OutputRule rule_;
  cpp_rational sy_;
  double sy_d_ = 1;
  double inverse_sy_d_ = 1;
  bool binary32_ = false;  // PostOpArithmetic::binary32
  bool libm_ = false;      // PostOpArithmetic::binary32_libm
  float output_scale_ = 1;
  int32_t zero_point_ = 0;
  uint64_t escalations_ = 0;
  int max_mpfr_bits_ = 0;
};

}  // namespace

ActivationTable::ActivationTable(const Convention& convention) : ActivationTable(convention, ActivationTableOptions{}) {}

ActivationTable::ActivationTable(const Convention& convention, const ActivationTableOptions& options) {
  if (convention.intermediate.kind == IntermediateKind::f32) {
    throw InputError("activation table: an f32 intermediate has no codes to tabulate (use ActivationEvaluator)");
  }
  validate(convention.intermediate.q, "intermediate");
  PointDecider decider(convention, options);
  const QuantParams& in = convention.intermediate.q;
  qmin_ = in.type.qmin();
  points_.assign(in.type.code_count(), ActivationPoint{});
  const double su_d = in.scale;  // exact
  for (int32_t u = in.type.qmin(); u <= in.type.qmax(); ++u) {
    const int64_t centered = int64_t{u} - in.zero_point;  // u, zu in the type: |centered| < 2^16
    // x = (u - zu) * su exactly: an integer below 2^16 times a 24-bit float32 significand has at most 40
    // significant bits, and 2^-149 .. 2^16 * 2^128 lies well inside binary64's normal range.
    // With binary32 post-ops the dequantization is itself a binary32 product: fl32(su (u - zu)).
    const double x = convention.post_ops != PostOpArithmetic::exact
                         ? static_cast<double>(Fl32Multiply(static_cast<float>(centered), in.scale))
                         : static_cast<double>(centered) * su_d;
    decider.decide(x, [u] { return "code u=" + std::to_string(u); }, points_[static_cast<size_t>(u - qmin_)]);
  }
  escalations_ = decider.escalations();
  max_mpfr_bits_ = decider.max_mpfr_bits();
}

struct ActivationEvaluator::Impl {
  PointDecider decider;
};

ActivationEvaluator::ActivationEvaluator(const Convention& convention, const ActivationTableOptions& options)
    : impl_(std::make_unique<Impl>(Impl{PointDecider(convention, options)})) {}
ActivationEvaluator::~ActivationEvaluator() = default;
ActivationEvaluator::ActivationEvaluator(ActivationEvaluator&&) noexcept = default;

ActivationPoint ActivationEvaluator::operator()(float v) {
  if (!std::isfinite(v)) throw InputError("activation evaluator: v must be finite");
  ActivationPoint p;
  impl_->decider.decide(static_cast<double>(v), [v] { return "v=" + format_float32(v); }, p);
  return p;
}
uint64_t ActivationEvaluator::escalations() const { return impl_->decider.escalations(); }
int ActivationEvaluator::max_mpfr_bits() const { return impl_->decider.max_mpfr_bits(); }

const ActivationPoint& ActivationTable::at(int32_t u) const {
  const int64_t i = int64_t{u} - qmin_;
  if (i < 0 || i >= static_cast<int64_t>(points_.size())) {
    throw InputError("activation table: code " + std::to_string(u) + " is outside [" + std::to_string(qmin_) + ", " +
                     std::to_string(qmin_ + static_cast<int64_t>(points_.size()) - 1) + "]");
  }
  return points_[static_cast<size_t>(i)];
}

float Binary32Activation(const Activation& activation, float v, const ActivationTableOptions& options) {
  detail::check_activation(activation, "activation");
  uint64_t escalations = 0;
  int max_bits = 0;
  return Binary32ActivationImpl(activation, v, options, &escalations, &max_bits);
}

float Binary32OutputValue(float e, float output_scale, int32_t zero_point) {
  const float inverse = detail::fl32_quotient(1.0f, output_scale);  // fl32(1/sy)
  const float scaled = Fl32Multiply(e, inverse);
  if (!std::isfinite(scaled)) return scaled;  // beyond binary32: +-infinity, and adding zy keeps it
  // zy converts exactly: |zy| < 2^24 for every 8- and 16-bit type.
  return detail::fl32_sum(detail::exact_dyadic(scaled), detail::exact_dyadic(static_cast<float>(zero_point)));
}

std::string ExactActivationDecimal(const Convention& convention, int32_t u, int digits) {
  const QuantParams& in = convention.intermediate.q;
  validate(in, "intermediate");
  detail::check_activation(convention.activation, "activation");
  if (!in.type.contains(u)) {
    throw InputError("intermediate code " + std::to_string(u) + " is outside " + to_string(in.type) + " [" +
                     std::to_string(in.type.qmin()) + ", " + std::to_string(in.type.qmax()) + "]");
  }
  const cpp_rational v = cpp_rational(int64_t{u} - in.zero_point) * detail::exact_rational(in.scale);
  return detail::activation_decimal(convention.activation, v, digits);
}

std::string ActivationDecimal(const Activation& activation, const std::string& x_decimal, int digits) {
  detail::check_activation(activation, "activation");
  return detail::activation_decimal(activation, detail::parse_decimal(x_decimal, "x"), digits);
}

}  // namespace fusediff::reference
