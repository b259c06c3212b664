// acc -> u, the four requantization variants of model/convention.h, each from its definition with exact
// integers. Everything that depends only on (convention, sx, sw[k]) is derived once in the constructor; the
// per-call path uses fixed-width integers only (int64 / int128 / boost int512_t, no heap allocation) unless the
// caller asks for the decimal text.
#include <cmath>
#include <limits>
#include <string>

#include <boost/multiprecision/cpp_int.hpp>

#include "exact.h"
#include "fl32.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/quant.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

using boost::multiprecision::int512_t;
using detail::cpp_int;
using detail::cpp_rational;
using detail::round_split;

namespace {

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int64_t saturate_int32(__int128 v) {
  if (v < kInt32Min) return kInt32Min;
  if (v > kInt32Max) return kInt32Max;
  return static_cast<int64_t>(v);
}

// floor(v / 2^s) for 0 <= s <= 126. C++20 defines >> on negative signed values as an arithmetic shift, which is
// exactly floor division by 2^s.
__int128 floor_shift(__int128 v, int s) { return v >> s; }

// Distance of value / 2^s from the nearest k + 1/2, given rem = value - floor(value / 2^s) * 2^s in [0, 2^s):
// |rem / 2^s - 1/2| = |2 rem - 2^s| / 2^(s+1). Computed in double for display (exact for s <= 52).
double tie_distance_pow2(__int128 rem, int s) {
  const __int128 twice = 2 * rem - (static_cast<__int128>(1) << s);
  const double d = std::ldexp(static_cast<double>(twice < 0 ? -twice : twice), -(s + 1));
  return d;
}

cpp_rational dyadic_rational(__int128 value, int s) {  // value / 2^s
  cpp_int v = 0;
  const bool neg = value < 0;
  unsigned __int128 mag = neg ? static_cast<unsigned __int128>(-value) : static_cast<unsigned __int128>(value);
  v = static_cast<uint64_t>(mag >> 64);
  v <<= 64;
  v += static_cast<uint64_t>(mag);
  if (neg) v = -v;
  return cpp_rational(v) * detail::pow2(-s);
}

}  // namespace

QuantizedMultiplier QuantizeMultiplier(double real_multiplier, bool single_rounding) {
  if (!std::isfinite(real_multiplier) || real_multiplier <= 0) {
    throw InputError("requant: real multiplier " + format_double(real_multiplier) + " must be finite and > 0");
  }
  int e = 0;
  const double q = std::frexp(real_multiplier, &e);  // M = q * 2^e, q in [0.5, 1): exact
  const double scaled = std::ldexp(q, 31);           // q * 2^31 in [2^30, 2^31): exact (power-of-two scaling)
  int64_t m = static_cast<int64_t>(std::round(scaled));  // std::round: half away from zero, exact on a double
  if (m == (int64_t{1} << 31)) {  // q rounded up to 1: renormalize
    m = int64_t{1} << 30;
    e += 1;
  }
  if (e < -31) {  // every bit would be shifted out
    m = 0;
    e = 0;
  }
  if (single_rounding && e > 30) {
    e = 30;
    m = (int64_t{1} << 31) - 1;
  }
  return QuantizedMultiplier{static_cast<int32_t>(m), static_cast<int32_t>(e)};
}

struct Requantizer::Impl {
  RequantVariant variant = RequantVariant::exact;
  int64_t zu = 0, qmin = 0, qmax = 0;
  RoundingMode exact_rounding = RoundingMode::half_away_from_zero;
  // exact: sx*sw/su = num/den in lowest terms, den > 0. Bounds (float32 scales < 2^128, >= 2^-149):
  //   num <= 2^48 * 2^(104+104+149) = 2^405, den <= 2^24 * 2^(104+149+149) = 2^426,
  // so acc * num (|acc| <= 2^63) < 2^469 and 2 * remainder < 2^428 both fit int512_t.
  cpp_rational ratio;
  int512_t num = 0, den = 1;
  // double_rounding / single_rounding
  QuantizedMultiplier qm;
  // f32_half_even
  float m32 = 0.0f;
  detail::FloatParts m32_parts;

  RequantTrace finish(int64_t rounded, double tie, cpp_rational* value, bool with_decimal) const {
    (void)value;
    RequantTrace tr;
    tr.u_unsaturated = detail::clamp_i64(rounded, -detail::kClampMagnitude, detail::kClampMagnitude) + zu;
    tr.u = static_cast<int32_t>(detail::clamp_i64(tr.u_unsaturated, qmin, qmax));
    tr.saturated = tr.u != tr.u_unsaturated;
    tr.tie_distance = tie;
    if (with_decimal && value != nullptr) tr.exact_value = detail::decimal_string(*value, 30);
    return tr;
  }

  // exact: u = round_mode(acc * sx*sw/su).
  RequantTrace exact(int64_t acc, bool with_decimal) const {
    const int512_t n = int512_t(acc) * num;
    int512_t q = n / den;  // truncates toward zero
    int512_t r = n - q * den;
    if (r < 0) {  // floor
      q -= 1;
      r += den;
    }
    const int512_t twice_r = 2 * r;  // compare frac = r/den with 1/2
    const int cmp = twice_r < den ? -1 : (twice_r > den ? 1 : 0);
    int64_t f;
    if (q > int512_t(detail::kClampMagnitude)) f = detail::kClampMagnitude;
    else if (q < -int512_t(detail::kClampMagnitude)) f = -detail::kClampMagnitude;
    else f = static_cast<int64_t>(q);
    const int512_t dist = twice_r > den ? int512_t(twice_r - den) : int512_t(den - twice_r);
    const double tie = dist.convert_to<double>() / (2 * den).convert_to<double>();
    cpp_rational value;
    if (with_decimal) value = cpp_rational(cpp_int(acc)) * ratio;
    return finish(round_split(exact_rounding, f, cmp), tie, &value, with_decimal);
  }

  // gemmlowp / TFLite default: SaturatingRoundingDoublingHighMul then RoundingDivideByPOT.
  RequantTrace double_rounding(int64_t acc, bool with_decimal) const {
    const int left = qm.shift > 0 ? qm.shift : 0;
    const int right = qm.shift > 0 ? 0 : -qm.shift;  // <= 31 (QuantizeMultiplier zeroes e < -31)
    // a = saturate_int32(acc * 2^left).
    int64_t a;
    if (acc == 0) a = 0;
    else if (left >= 32) a = acc > 0 ? kInt32Max : kInt32Min;
    else a = saturate_int32(static_cast<__int128>(acc) * (static_cast<__int128>(1) << left));
    const int64_t b = qm.multiplier;  // in [0, 2^31 - 1]
    // SaturatingRoundingDoublingHighMul(a, b), by definition:
    //   overflow = (a == b == INT32_MIN) -> INT32_MAX; else P = a*b, nudge = P >= 0 ? 2^30 : 1 - 2^30,
    //   h = trunc((P + nudge) / 2^31) (C division truncates toward zero).
    // Claim: h = floor((P + 2^30) / 2^31), i.e. P / 2^31 rounded to nearest with ties toward +infinity.
    //   P >= 0: P + 2^30 > 0, and truncation of a non-negative quotient is floor.
    //   P <  0: Q = P + 1 - 2^30 <= -2^30 < 0, so trunc(Q / 2^31) = ceil(Q / 2^31) = floor((Q + 2^31 - 1) / 2^31)
    //           (ceil(Q/D) = floor((Q + D - 1)/D) for integers, D > 0), and Q + 2^31 - 1 = P + 2^30.
    // So a tie P/2^31 = k + 1/2 (P + 2^30 = (k+1) 2^31) gives k + 1 for either sign: half_up.
    const int64_t p = a * b;  // |a| <= 2^31, b < 2^31: |P| < 2^62, exact in int64
    int64_t h;
    if (a == kInt32Min && b == kInt32Min) {
      h = kInt32Max;  // unreachable here (b >= 0) but part of the definition
    } else {
      h = static_cast<int64_t>(floor_shift(static_cast<__int128>(p) + (int64_t{1} << 30), 31));
    }
    if (right == 0) {  // the high-mul is the last rounding step: it rounds P / 2^31 (half up)
      const __int128 rem = static_cast<__int128>(p) - floor_shift(p, 31) * (static_cast<__int128>(1) << 31);
      cpp_rational value;
      if (with_decimal) value = dyadic_rational(p, 31);
      return finish(h, tie_distance_pow2(rem, 31), &value, with_decimal);
    }
    // RoundingDivideByPOT(h, right) = round_half_away_from_zero(h / 2^right).
    const int64_t fl = static_cast<int64_t>(floor_shift(h, right));
    const __int128 rem = static_cast<__int128>(h) - static_cast<__int128>(fl) * (static_cast<__int128>(1) << right);
    const __int128 twice = 2 * rem;
    const __int128 unit = static_cast<__int128>(1) << right;
    const int cmp = twice < unit ? -1 : (twice > unit ? 1 : 0);
    cpp_rational value;
    if (with_decimal) value = dyadic_rational(h, right);
    return finish(round_split(RoundingMode::half_away_from_zero, fl, cmp), tie_distance_pow2(rem, right), &value,
                  with_decimal);
  }

  // TFLITE_SINGLE_ROUNDING: R = floor((acc*m + 2^(t-1)) / 2^t), t = 31 - shift, saturated to int32.
  RequantTrace single_rounding(int64_t acc, bool with_decimal) const {
    const int t = 31 - qm.shift;  // shift in [-31, 30] -> t in [1, 62]
    const __int128 p = static_cast<__int128>(acc) * qm.multiplier;  // |P| < 2^63 * 2^31 = 2^94
    const __int128 r = floor_shift(p + (static_cast<__int128>(1) << (t - 1)), t);
    const __int128 rem = p - floor_shift(p, t) * (static_cast<__int128>(1) << t);
    cpp_rational value;
    if (with_decimal) value = dyadic_rational(p, t);
    return finish(saturate_int32(r), tie_distance_pow2(rem, t), &value, with_decimal);
  }

  // P = fl32(fl32(acc) * M32), binary32 emulated exactly (+-inf on overflow).
  float f32_product(int64_t acc) const {
    const detail::FloatParts a = detail::decompose(Fl32FromInt64(acc));
    const unsigned __int128 product = static_cast<unsigned __int128>(a.mantissa) * m32_parts.mantissa;  // < 2^48
    return detail::fl32_dyadic(a.negative != m32_parts.negative, product, a.exponent + m32_parts.exponent);
  }

  // round_half_to_even(P) for a binary32 P, with the tie distance; `offset` is added after rounding (+ zu, or 0
  // when the zero point is already inside P).
  RequantTrace round_f32_half_even(float pf, int64_t offset, bool with_decimal) const {
    if (std::isinf(pf)) {  // overflowed binary32: saturates
      RequantTrace tr = finish_with(pf > 0 ? detail::kClampMagnitude : -detail::kClampMagnitude, 0.5, offset);
      if (with_decimal) tr.exact_value = pf > 0 ? "inf" : "-inf";
      return tr;
    }
    const detail::FloatParts p = detail::decompose(pf);  // P = +-m * 2^e exactly
    const int64_t sm = p.negative ? -int64_t{p.mantissa} : int64_t{p.mantissa};
    int64_t fl;
    int cmp;
    double tie;
    if (p.exponent >= 0) {  // an integer
      fl = p.exponent >= 38 ? (sm > 0 ? detail::kClampMagnitude : -detail::kClampMagnitude) : sm * (int64_t{1} << p.exponent);
      cmp = -1;
      tie = 0.5;
    } else if (p.exponent >= -62) {
      const int s = -p.exponent;
      fl = static_cast<int64_t>(floor_shift(sm, s));
      const __int128 rem = static_cast<__int128>(sm) - static_cast<__int128>(fl) * (static_cast<__int128>(1) << s);
      const __int128 twice = 2 * rem;
      const __int128 unit = static_cast<__int128>(1) << s;
      cmp = twice < unit ? -1 : (twice > unit ? 1 : 0);
      tie = tie_distance_pow2(rem, s);
    } else {  // |P| < 2^24 * 2^-63: floor is 0 (P >= 0) or -1 (P < 0), far from any tie; rounds to 0
      fl = sm < 0 ? -1 : 0;
      cmp = sm < 0 ? 1 : -1;
      tie = 0.5;
    }
    RequantTrace tr = finish_with(round_split(RoundingMode::half_to_even, fl, cmp), tie, offset);
    if (with_decimal) tr.exact_value = detail::decimal_string(detail::exact_rational(pf), 30);
    return tr;
  }

  RequantTrace finish_with(int64_t rounded, double tie, int64_t offset) const {
    RequantTrace tr;
    tr.u_unsaturated = detail::clamp_i64(rounded, -detail::kClampMagnitude, detail::kClampMagnitude) + offset;
    tr.u = static_cast<int32_t>(detail::clamp_i64(tr.u_unsaturated, qmin, qmax));
    tr.saturated = tr.u != tr.u_unsaturated;
    tr.tie_distance = tie;
    return tr;
  }

  // ONNX / ORT: R = round_half_to_even(fl32(fl32(acc) * M32)), then + zu.
  RequantTrace f32(int64_t acc, bool with_decimal) const { return round_f32_half_even(f32_product(acc), zu, with_decimal); }

  // oneDNN 2.x: R = round_half_to_even(fl32(fl32(fl32(acc) * M32) + zu)): the zero point is inside the rounding.
  RequantTrace f32_zero_point_first(int64_t acc, bool with_decimal) const {
    const float pf = f32_product(acc);
    const float shifted =
        std::isinf(pf) ? pf : Fl32Add(pf, static_cast<float>(zu));  // |zu| < 2^16: exact as a float
    return round_f32_half_even(shifted, 0, with_decimal);
  }
};

Requantizer::Requantizer(const Convention& convention, float input_scale, float weight_scale)
    : impl_(std::make_unique<Impl>()) {
  validate(convention);
  if (convention.intermediate.kind == IntermediateKind::f32) {
    throw InputError("requant: an f32 intermediate has no code to requantize to (use F32IntermediateValue)");
  }
  validate(QuantParams{QuantType{ScalarType::int8, false}, input_scale, 0}, "requant.input_scale");
  validate(QuantParams{QuantType{ScalarType::int8, false}, weight_scale, 0}, "requant.weight_scale");
  Impl& m = *impl_;
  m.variant = convention.requant;
  m.zu = convention.intermediate.q.zero_point;
  m.qmin = convention.intermediate.q.type.qmin();
  m.qmax = convention.intermediate.q.type.qmax();
  m.exact_rounding = convention.intermediate.rounding;
  const float su = convention.intermediate.q.scale;
  switch (m.variant) {
    case RequantVariant::exact: {
      m.ratio = detail::exact_rational(input_scale) * detail::exact_rational(weight_scale) / detail::exact_rational(su);
      m.num = int512_t(numerator(m.ratio));
      m.den = int512_t(denominator(m.ratio));
      break;
    }
    case RequantVariant::double_rounding:
    case RequantVariant::single_rounding: {
      // Host IEEE binary64 arithmetic is the definition of this step: the product of two floats is exact in
      // double, the division rounds once (round to nearest even; -ffp-contract=off keeps it a plain division).
      const double real = static_cast<double>(input_scale) * static_cast<double>(weight_scale) / static_cast<double>(su);
      m.qm = QuantizeMultiplier(real, m.variant == RequantVariant::single_rounding);
      break;
    }
    case RequantVariant::f32_half_even:
    case RequantVariant::f32_zero_point_first: {
      const float product = Fl32Multiply(input_scale, weight_scale);  // fl32(sx*sw), emulated
      if (!std::isinf(product)) m.m32 = Fl32Divide(product, su);      // fl32(fl32(sx*sw) / su), emulated
      if (std::isinf(product) || std::isinf(m.m32)) {
        throw InputError("requant: " + std::string(to_string(m.variant)) +
                         " multiplier fl32(fl32(sx*sw)/su) overflows float32 (sx=" +
                         format_float32(input_scale) + ", sw=" + format_float32(weight_scale) +
                         ", su=" + format_float32(su) + ")");
      }
      m.m32_parts = detail::decompose(m.m32);
      break;
    }
  }
}

Requantizer::~Requantizer() = default;
Requantizer::Requantizer(Requantizer&&) noexcept = default;
Requantizer& Requantizer::operator=(Requantizer&&) noexcept = default;

RequantTrace Requantizer::operator()(int64_t acc, bool with_decimal) const {
  switch (impl_->variant) {
    case RequantVariant::exact: return impl_->exact(acc, with_decimal);
    case RequantVariant::double_rounding: return impl_->double_rounding(acc, with_decimal);
    case RequantVariant::single_rounding: return impl_->single_rounding(acc, with_decimal);
    case RequantVariant::f32_half_even: return impl_->f32(acc, with_decimal);
    case RequantVariant::f32_zero_point_first: return impl_->f32_zero_point_first(acc, with_decimal);
  }
  throw InputError("requant: unknown variant");
}

QuantizedMultiplier Requantizer::quantized_multiplier() const { return impl_->qm; }
float Requantizer::f32_multiplier() const { return impl_->m32; }
std::string Requantizer::exact_multiplier() const {
  if (impl_->variant != RequantVariant::exact) return {};
  return numerator(impl_->ratio).str() + "/" + denominator(impl_->ratio).str();
}

}  // namespace fusediff::reference
