// The add and average-pool stage rules of stages.h, each from its definition. Integer rules in exact int64 /
// int128 / cpp_int arithmetic; binary32 rules step by step on exact dyadics (fl32_dyadic.h), one rounding per
// operation of the source order. Every rule's source file and function is named in stages.h.
#include "fusediff/reference/stages.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include <boost/multiprecision/cpp_int.hpp>

#include "exact.h"
#include "fl32.h"
#include "fl32_dyadic.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

using detail::cpp_int;

namespace {

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kMaxWindowTaps = int64_t{1} << 16;

// ---- Exact rounding of v = num / den (den > 0) to an integer, with the tie distance of v.
struct Rounded {
  int64_t value = 0;          // clamped to +-2^62 (detail::kClampMagnitude)
  double tie_distance = 0.5;
};

Rounded round_quotient(const cpp_int& num, const cpp_int& den, RoundingMode mode) {
  cpp_int q = num / den;  // truncates toward zero
  cpp_int r = num - q * den;
  if (r < 0) {  // floor
    q -= 1;
    r += den;
  }
  const cpp_int twice = 2 * r;  // frac(v) = r / den, compared with 1/2
  const int cmp = twice < den ? -1 : (twice > den ? 1 : 0);
  const cpp_int distance = twice > den ? cpp_int(twice - den) : cpp_int(den - twice);
  Rounded out;
  out.value = detail::round_split(mode, detail::clamp_to_int64(q), cmp);
  out.tie_distance = distance.convert_to<double>() / (2 * den).convert_to<double>();
  return out;
}

// round(v / 2^s), 0 <= s <= 62, of an exact integer v (|v| < 2^64), by `mode`.
Rounded round_pow2(__int128 v, int s, RoundingMode mode) {
  if (s == 0) return Rounded{static_cast<int64_t>(v), 0.5};
  const __int128 unit = static_cast<__int128>(1) << s;
  const __int128 floor_value = v >> s;  // arithmetic shift: floor (C++20)
  const __int128 twice = 2 * (v - floor_value * unit);
  const int cmp = twice < unit ? -1 : (twice > unit ? 1 : 0);
  const __int128 distance = twice > unit ? twice - unit : unit - twice;
  return Rounded{detail::round_split(mode, static_cast<int64_t>(floor_value), cmp),
                 std::ldexp(static_cast<double>(distance), -(s + 1))};
}

// round_half_to_even of a finite binary32 (cvtps2dq, nearbyintf in the default mode), clamped to +-2^62.
Rounded round_float_half_even(float value) {
  const detail::FloatParts p = detail::decompose(value);  // value = +-m 2^e exactly
  const __int128 signed_mantissa = p.negative ? -static_cast<__int128>(p.mantissa) : p.mantissa;
  if (p.exponent >= 0) {  // an integer
    const int64_t magnitude_bound = detail::kClampMagnitude;
    if (p.mantissa != 0 && p.exponent + std::bit_width(p.mantissa) > 62) {
      return Rounded{p.negative ? -magnitude_bound : magnitude_bound, 0.5};
    }
    return Rounded{static_cast<int64_t>(signed_mantissa << p.exponent), 0.5};
  }
  if (p.exponent < -62) return Rounded{0, 0.5};  // |value| < 2^24 2^-63: rounds to 0, far from any tie
  return round_pow2(signed_mantissa, -p.exponent, RoundingMode::half_to_even);
}

// ---- The output boundary shared by every rule.
struct OutputRange {
  int64_t lo = 0, hi = 0;            // the output's own range (narrow types included)
  int64_t full_lo = 0, full_hi = 0;  // its scalar type's full range (what MLAS's packs saturate to)
};

OutputRange output_range(const QuantParams& q) {
  const QuantType full{q.type.scalar, false};
  return OutputRange{q.type.qmin(), q.type.qmax(), full.qmin(), full.qmax()};
}

StageRounding finish(int64_t unsaturated, int64_t code, double tie_distance) {
  StageRounding out;
  out.unsaturated = detail::clamp_i64(unsaturated, -detail::kClampMagnitude, detail::kClampMagnitude);
  out.code = static_cast<int32_t>(code);
  out.saturated = out.code != out.unsaturated;
  out.tie_distance = tie_distance;
  return out;
}

// A rounded value with its zero point already added, clamped to the output's range.
StageRounding saturate(const Rounded& r, int64_t zero_point, const OutputRange& range) {
  const int64_t v = detail::clamp_i64(r.value, -detail::kClampMagnitude, detail::kClampMagnitude) + zero_point;
  return finish(v, detail::clamp_i64(v, range.lo, range.hi), r.tie_distance);
}

// ---- Checks.
void check_code(int32_t code, const QuantParams& q, const char* field) {
  if (!q.type.contains(code)) {
    throw InputError(std::string(field) + ": code " + std::to_string(code) + " is outside " + to_string(q.type) + " [" +
                     std::to_string(q.type.qmin()) + ", " + std::to_string(q.type.qmax()) + "]");
  }
}

void check_one_scalar_type(const char* what, std::initializer_list<const QuantParams*> qs) {
  const ScalarType t = (*qs.begin())->type.scalar;
  for (const QuantParams* q : qs) {
    if (q->type.scalar != t) {
      std::string types;
      for (const QuantParams* r : qs) types += (types.empty() ? "" : ", ") + std::string(to_string(r->type.scalar));
      throw InputError(std::string(what) + ": the inputs and the output must share one scalar type (got " + types + ")");
    }
  }
}

// The binary32 rules keep every step finite and normal when each scale lies in [2^-40, 2^40].
void check_f32_scale_range(const char* what, std::initializer_list<const QuantParams*> qs) {
  for (const QuantParams* q : qs) {
    if (q->scale < 0x1p-40f || q->scale > 0x1p40f) {
      throw InputError(std::string(what) + ": scale " + format_float32(q->scale) +
                       " is outside [2^-40, 2^40], where this binary32 rule is defined here");
    }
  }
}

float exact_float(int64_t v) { return static_cast<float>(v); }  // only for |v| < 2^24: exact

float add_f32(float x, float y) { return detail::fl32_sum(detail::exact_dyadic(x), detail::exact_dyadic(y)); }
float subtract_f32(float x, float y) {
  return detail::fl32_sum(detail::exact_dyadic(x), detail::negated(detail::exact_dyadic(y)));
}

// cvtps2dq / cvttss2si of a value already rounded: outside [-2^31, 2^31) the result is INT32_MIN.
int64_t x86_int32(const Rounded& r, float value) {
  return (value >= 0x1p31f || value < -0x1p31f) ? kInt32Min : r.value;
}

// ---- Add rules.

// gemmlowp SaturatingRoundingDoublingHighMul(p, m), m >= 0: with P = p m and nudge = 2^30 (P >= 0) or 1 - 2^30
// (P < 0), trunc((P + nudge) / 2^31). For P >= 0 that is floor((P + 2^30) / 2^31); for P < 0, P + nudge < 0 and
// trunc(Q / 2^31) = ceil(Q / 2^31) = floor((Q + 2^31 - 1) / 2^31) = floor((P + 2^30) / 2^31) as well. So it is
// round(P / 2^31) with ties toward +infinity (half_up). INT32_MIN * INT32_MIN -> INT32_MAX cannot occur (m >= 0).
Rounded srdhm(int64_t p, int32_t m) { return round_pow2(static_cast<__int128>(p) * m, 31, RoundingMode::half_up); }

// MultiplyByQuantizedMultiplierSmallerThanOneExp(x, m, e), e <= 0: RoundingDivideByPOT(SRDHM(x, m), -e), the
// second rounding half away from zero. The tie distance is the last step's.
Rounded multiply_smaller_than_one(int64_t x, const QuantizedMultiplier& qm) {
  const Rounded high = srdhm(x, qm.multiplier);
  if (qm.shift == 0) return high;
  return round_pow2(high.value, -qm.shift, RoundingMode::half_away_from_zero);
}

QuantizedMultiplier tflite_multiplier(double real, const char* name) {
  const QuantizedMultiplier qm = QuantizeMultiplier(real, false);
  if (qm.shift > 0) {
    throw InputError(std::string("add tflite: ") + name + " multiplier " + std::to_string(real) +
                     " quantizes to a left shift; TFLite's QuantizeMultiplierSmallerThanOneExp refuses it");
  }
  return qm;
}

StageRounding add_tflite(int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb, const QuantParams& qo) {
  check_one_scalar_type("add tflite", {&qa, &qb, &qo});
  const int left_shift = qo.type.scalar == ScalarType::int16 ? 15 : 20;
  // Prepare, in binary64 as it is written: the float product 2 * max(sa, sb) is exact unless it overflows
  // binary32, and so is 2^L * so; each division below is one IEEE binary64 division (-ffp-contract=off keeps
  // it plain), the same operation Prepare performs.
  const double twice_max = 2.0 * static_cast<double>(std::max(qa.scale, qb.scale));
  const double shifted_output = std::ldexp(static_cast<double>(qo.scale), left_shift);
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  if (twice_max > kFloatMax || shifted_output > kFloatMax) {
    throw InputError("add tflite: 2 max(sa, sb) or 2^" + std::to_string(left_shift) +
                     " so overflows binary32 in TFLite's Prepare");
  }
  const double real_output = twice_max / shifted_output;
  if (!(real_output < 1.0)) {
    throw InputError("add tflite: output multiplier 2 max(sa, sb) / (2^" + std::to_string(left_shift) +
                     " so) = " + std::to_string(real_output) + " must be < 1 (TFLite's Prepare refuses it)");
  }
  const QuantizedMultiplier ma = tflite_multiplier(static_cast<double>(qa.scale) / twice_max, "input1");
  const QuantizedMultiplier mb = tflite_multiplier(static_cast<double>(qb.scale) / twice_max, "input2");
  const QuantizedMultiplier mo = tflite_multiplier(real_output, "output");
  // |(q - z) 2^L| <= 65535 * 2^15 or 255 * 2^20, < 2^31: int32 in TFLite, exact here.
  const int64_t xa = (int64_t{a} - qa.zero_point) * (int64_t{1} << left_shift);
  const int64_t xb = (int64_t{b} - qb.zero_point) * (int64_t{1} << left_shift);
  const int64_t sum = multiply_smaller_than_one(xa, ma).value + multiply_smaller_than_one(xb, mb).value;
  return saturate(multiply_smaller_than_one(sum, mo), qo.zero_point, output_range(qo));
}

// n 2^s / mo, rounded half to even: the ONNX rules' exact quotient (both scales' decompositions folded into n, s).
Rounded QuotientHalfEven(const cpp_int& n, int s, uint64_t mo) {
  const cpp_int num = s >= 0 ? cpp_int(n << s) : n;
  const cpp_int den = s >= 0 ? cpp_int(mo) : cpp_int(cpp_int(mo) << -s);
  return round_quotient(num, den, RoundingMode::half_to_even);
}

// (sa (a - za) + sb (b - zb)) / so exactly: with s = M 2^E (float decompositions), the numerator is
// N 2^e0, e0 = min(Ea, Eb), N = Ma da 2^(Ea - e0) + Mb db 2^(Eb - e0); v = N 2^(e0 - Eo) / Mo.
StageRounding add_onnx_spec(int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                            const QuantParams& qo) {
  const detail::FloatParts pa = detail::decompose(qa.scale);
  const detail::FloatParts pb = detail::decompose(qb.scale);
  const detail::FloatParts po = detail::decompose(qo.scale);
  const int e0 = std::min(pa.exponent, pb.exponent);
  const cpp_int n = (cpp_int(pa.mantissa) * (int64_t{a} - qa.zero_point) << (pa.exponent - e0)) +
                    (cpp_int(pb.mantissa) * (int64_t{b} - qb.zero_point) << (pb.exponent - e0));
  return saturate(QuotientHalfEven(n, e0 - po.exponent, po.mantissa), qo.zero_point, output_range(qo));
}

// MLAS's packs after cvtps2dq: the full type's range, then the output's own (narrow types).
StageRounding mlas_packed(float y, const OutputRange& range) {
  const Rounded r = round_float_half_even(y);
  const int64_t converted = x86_int32(r, y);
  const int64_t code = detail::clamp_i64(detail::clamp_i64(converted, range.full_lo, range.full_hi), range.lo, range.hi);
  return finish(r.value, code, r.tie_distance);
}

StageRounding add_ort_raw(int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb, const QuantParams& qo) {
  const OutputRange range = output_range(qo);
  const float value_a = Fl32Multiply(qa.scale, exact_float(int64_t{a} - qa.zero_point));
  const float value_b = Fl32Multiply(qb.scale, exact_float(int64_t{b} - qb.zero_point));
  const float v = detail::fl32_quotient(add_f32(value_a, value_b), qo.scale);
  // std::min(std::max(v, lo - zo), hi - zo): v is finite, so these are plain comparisons.
  const float clamped = std::clamp(v, exact_float(range.full_lo - qo.zero_point), exact_float(range.full_hi - qo.zero_point));
  const float zo = exact_float(qo.zero_point);
  const float t = add_f32(clamped, zo);
  const Rounded r = round_float_half_even(t);  // t in [lo, hi]: the int32 conversions are exact
  const Rounded unclamped = round_float_half_even(add_f32(v, zo));
  return finish(unclamped.value, detail::clamp_i64(r.value, range.lo, range.hi), r.tie_distance);
}

StageRounding add_ort_mlas(bool fma, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                           const QuantParams& qo) {
  const float ra = detail::fl32_quotient(qa.scale, qo.scale);
  const float rb = detail::fl32_quotient(qb.scale, qo.scale);
  const float fixed_part = subtract_f32(exact_float(qo.zero_point),
                                        add_f32(Fl32Multiply(ra, exact_float(qa.zero_point)),
                                                Fl32Multiply(rb, exact_float(qb.zero_point))));
  const float fa = exact_float(a), fb = exact_float(b);
  const float y = fma ? Fl32FusedMultiplyAdd(fa, ra, Fl32FusedMultiplyAdd(fb, rb, fixed_part))
                      : add_f32(add_f32(fixed_part, Fl32Multiply(fa, ra)), Fl32Multiply(fb, rb));
  return mlas_packed(y, output_range(qo));
}

StageRounding add_binary32_unfused(int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                                   const QuantParams& qo) {
  check_f32_scale_range("add binary32_unfused", {&qa, &qb, &qo});
  for (const QuantParams* q : {&qa, &qb, &qo}) {
    if (q->type.bits() != 8) throw InputError("add binary32_unfused: the rule takes 8-bit codes (a library's int8 reorders), not " + to_string(q->type));
  }
  const float value_a = Fl32Multiply(qa.scale, exact_float(int64_t{a} - qa.zero_point));
  const float value_b = Fl32Multiply(qb.scale, exact_float(int64_t{b} - qb.zero_point));
  const float sum = add_f32(value_a, value_b);
  const float t = add_f32(Fl32Multiply(sum, detail::fl32_quotient(1.0f, qo.scale)), exact_float(qo.zero_point));
  const Rounded r = round_float_half_even(t);  // |t| < 2^42: no clamp to +-2^62 applies
  const OutputRange range = output_range(qo);
  return finish(r.value, detail::clamp_i64(r.value, range.lo, range.hi), r.tie_distance);
}

// The ORT rules' common preconditions, then the kernel MLAS runs. MlasQLinearAdd<int16_t> always runs the
// portable helper; 8-bit types take the SSE2 / AVX2 kernels.
StageRounding add_ort(AddRule rule, const char* what, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                      const QuantParams& qo) {
  check_one_scalar_type(what, {&qa, &qb, &qo});
  check_f32_scale_range(what, {&qa, &qb, &qo});
  if (rule == AddRule::ort_raw || qo.type.scalar == ScalarType::int16) return add_ort_raw(a, qa, b, qb, qo);
  return add_ort_mlas(rule == AddRule::ort_mlas_fma, a, qa, b, qb, qo);
}

// fixed_point_half_up (model/pattern.h): XNNPACK's add_nd. The ratios are binary32 quotients; scaling one by 2^shift
// adds shift to its exponent (exact for these normal values), and rne gives the integer multiplier. The sum is then
// exact: |m| <= 2^21 and |code - zero point| <= 255, so |ma da + mb db + 2^29| < 2^31 (XNNPACK's int32 lanes).
StageRounding add_fixed_point_half_up(int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                                      const QuantParams& qo) {
  check_one_scalar_type("add fixed_point_half_up", {&qa, &qb, &qo});
  if (qo.type.bits() != 8) throw InputError("add fixed_point_half_up: the rule takes 8-bit codes (got " + to_string(qo.type) + ")");
  const float ra = detail::fl32_quotient(qa.scale, qo.scale);
  const float rb = detail::fl32_quotient(qb.scale, qo.scale);
  for (const float r : {ra, rb}) {
    if (r < 0x1p-10f || r >= 0x1p8f) {
      throw InputError("add fixed_point_half_up: the ratio " + format_float32(r) +
                       " of an input scale to the output scale is outside [2^-10, 2^8)");
    }
  }
  int exponent = 0;
  (void)std::frexp(std::max(ra, rb), &exponent);  // max = f 2^exponent, f in [1/2, 1): binary32 exponent + 1
  const int shift = 20 - (exponent - 1);
  const auto multiplier = [shift](float r) {
    return static_cast<int64_t>(std::nearbyint(std::ldexp(static_cast<double>(r), shift)));  // exact scaling, rne
  };
  const int64_t ma = multiplier(ra), mb = multiplier(rb);
  const int64_t sum = ma * (int64_t{a} - qa.zero_point) + mb * (int64_t{b} - qb.zero_point);  // |sum| < 2^30
  // floor((sum + 2^(shift - 1)) / 2^shift): sum / 2^shift rounded half toward +infinity.
  const Rounded r = round_pow2(static_cast<__int128>(sum), shift, RoundingMode::half_up);
  return saturate(r, qo.zero_point, output_range(qo));
}

// ---- Average-pool rules.

StageRounding pool_tflite(std::span<const int32_t> taps, const QuantParams& qi, const QuantParams& qo) {
  if (!(qi == qo)) {
    throw InputError("avg_pool tflite: input and output quantization must be equal (TFLite assumes it): input " +
                     to_string(qi.type) + " scale " + format_float32(qi.scale) + " zero point " +
                     std::to_string(qi.zero_point) + ", output " + to_string(qo.type) + " scale " +
                     format_float32(qo.scale) + " zero point " + std::to_string(qo.zero_point));
  }
  int64_t sum = 0;  // raw codes, zero point not subtracted: |sum| <= 2^16 * 2^15
  for (const int32_t q : taps) sum += q;
  const int64_t n = static_cast<int64_t>(taps.size());
  const Rounded r = round_quotient(cpp_int(sum), cpp_int(n), RoundingMode::half_away_from_zero);
  return saturate(r, 0, output_range(qo));
}

void check_ort_pool_types(const QuantParams& qi, const QuantParams& qo, const char* what) {
  check_one_scalar_type(what, {&qi, &qo});
  if (qi.type.bits() != 8) {
    throw InputError(std::string(what) + ": ORT's QLinearAveragePool takes int8 or uint8 only (got " +
                     to_string(qi.type) + ")");
  }
  check_f32_scale_range(what, {&qi, &qo});
}

StageRounding pool_ort_qlinear(std::span<const int32_t> taps, const QuantParams& qi, const QuantParams& qo) {
  check_ort_pool_types(qi, qo, "avg_pool ort_qlinear");
  float sum = 0.0f;
  for (const int32_t q : taps) sum = add_f32(sum, Fl32Multiply(qi.scale, exact_float(int64_t{q} - qi.zero_point)));
  const float mean = detail::fl32_quotient(sum, exact_float(static_cast<int64_t>(taps.size())));
  const float t = add_f32(detail::fl32_quotient(mean, qo.scale), exact_float(qo.zero_point));
  const Rounded r = round_float_half_even(t);
  const OutputRange range = output_range(qo);
  const int64_t code =
      detail::clamp_i64(detail::clamp_i64(x86_int32(r, t), range.full_lo, range.full_hi), range.lo, range.hi);
  return finish(r.value, code, r.tie_distance);
}

StageRounding pool_ort_global(std::span<const int32_t> taps, const QuantParams& qi, const QuantParams& qo) {
  check_ort_pool_types(qi, qo, "avg_pool ort_global");
  const int64_t n = static_cast<int64_t>(taps.size());
  const float multiplier = detail::fl32_quotient(qi.scale, Fl32Multiply(qo.scale, exact_float(n)));
  if (multiplier < 0x1p-32f || multiplier >= 256.0f) {
    throw InputError("avg_pool ort_global: multiplier sx / (so n) = " + format_float32(multiplier) +
                     " is outside [2^-32, 256), which ORT's CheckQLinearGlobalAveragePoolScaleAndSize refuses");
  }
  int64_t sum = -int64_t{qi.zero_point} * n;
  for (const int32_t q : taps) sum += q;
  const auto acc = static_cast<int32_t>(sum);  // MLAS's int32 lanes (no wrap for <= 2^16 8-bit taps)
  const OutputRange range = output_range(qo);
  const float f = Fl32Multiply(Fl32FromInt64(acc), multiplier);
  const float clamped = std::clamp(f, exact_float(range.full_lo - qo.zero_point), exact_float(range.full_hi - qo.zero_point));
  const Rounded r = round_float_half_even(clamped);
  const Rounded unclamped = round_float_half_even(f);
  return finish(unclamped.value + qo.zero_point, detail::clamp_i64(r.value + qo.zero_point, range.lo, range.hi),
                r.tie_distance);
}

// fixed_point_half_away (model/pattern.h): XNNPACK's average pooling on a window smaller than its padded input; `taps`
// holds the whole window, a padding tap as the code zx (the caller's: reference/src/stages/pool.cpp). s is a
// normal binary32 in [2^-12, 2^8) for these ratios and windows, so s = M 2^-sh with 0 < sh <= 62 and the product
// acc M (|acc| < 2^16 2^8, M < 2^24) is exact in int128.
StageRounding pool_fixed_point_half_away(std::span<const int32_t> taps, const QuantParams& qi, const QuantParams& qo) {
  check_one_scalar_type("avg_pool fixed_point_half_away", {&qi, &qo});
  if (qi.type.bits() != 8) throw InputError("avg_pool fixed_point_half_away: the rule takes 8-bit codes");
  const float ratio = detail::fl32_quotient(qi.scale, qo.scale);
  if (ratio < 0x1p-8f || ratio >= 0x1p8f) {
    throw InputError("avg_pool fixed_point_half_away: sx / so = " + format_float32(ratio) + " is outside [2^-8, 2^8)");
  }
  const int64_t n = static_cast<int64_t>(taps.size());
  const float s = detail::fl32_quotient(qi.scale, Fl32Multiply(qo.scale, exact_float(n)));
  const detail::FloatParts p = detail::decompose(s);  // s = M 2^exponent exactly
  int64_t acc = 0;  // <= 2^16 taps of |q - zx| <= 255
  for (const int32_t q : taps) acc += int64_t{q} - qi.zero_point;
  const __int128 product = static_cast<__int128>(acc) * p.mantissa;  // acc s = product 2^exponent
  const Rounded r = p.exponent >= 0 ? Rounded{static_cast<int64_t>(product << p.exponent), 0.5}
                                    : round_pow2(product, -p.exponent, RoundingMode::half_away_from_zero);
  return saturate(r, qo.zero_point, output_range(qo));
}

// ---- Mul rules.

// TFLite: M = fl32(fl32(sa sb) / so) (Prepare's float expression), QuantizeMultiplier'd to (m, shift);
// MultiplyByQuantizedMultiplier(P, m, shift) = RDBPOT(SRDHM(P 2^max(shift, 0), m), max(-shift, 0)).
StageRounding mul_tflite(int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb, const QuantParams& qo) {
  check_one_scalar_type("mul tflite", {&qa, &qb, &qo});
  if (qo.type.scalar == ScalarType::int16) throw InputError("mul tflite: 8-bit codes only (int16 Mul is symmetric)");
  const float real = Fl32Divide(Fl32Multiply(qa.scale, qb.scale), qo.scale);
  const QuantizedMultiplier qm = QuantizeMultiplier(static_cast<double>(real), false);
  const int64_t product = (int64_t{a} - qa.zero_point) * (int64_t{b} - qb.zero_point);  // |P| <= 2^16
  const int left = std::max(qm.shift, 0), right = std::max(-qm.shift, 0);
  const int64_t shifted = product * (int64_t{1} << left);
  if (shifted > std::numeric_limits<int32_t>::max() || shifted < kInt32Min) {
    throw InputError("mul tflite: (a - za)(b - zb) 2^" + std::to_string(left) +
                     " overflows the int32 TFLite computes it in (multiplier " + format_float32(real) + ")");
  }
  const Rounded high = srdhm(shifted, qm.multiplier);
  const Rounded y = right == 0 ? high : round_pow2(high.value, right, RoundingMode::half_away_from_zero);
  return saturate(y, qo.zero_point, output_range(qo));
}

// ONNX QLinearMul: sa (a - za) sb (b - zb) / so exactly, half to even: with s = M 2^E, the quotient is
// P Ma Mb 2^(Ea + Eb - Eo) / Mo.
StageRounding mul_onnx_spec(int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb, const QuantParams& qo) {
  const detail::FloatParts pa = detail::decompose(qa.scale);
  const detail::FloatParts pb = detail::decompose(qb.scale);
  const detail::FloatParts po = detail::decompose(qo.scale);
  const cpp_int n = cpp_int(pa.mantissa) * pb.mantissa * ((int64_t{a} - qa.zero_point) * (int64_t{b} - qb.zero_point));
  return saturate(QuotientHalfEven(n, pa.exponent + pb.exponent - po.exponent, po.mantissa), qo.zero_point,
                  output_range(qo));
}

}  // namespace

namespace {
// A binary stage's operands and output boundary, each named ("add.a", "mul.out") when malformed.
void ValidateBinary(const std::string& op, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                    const QuantParams& qo) {
  validate(qa, op + ".a");
  validate(qb, op + ".b");
  validate(qo, op + ".out");
  check_code(a, qa, (op + ".a").c_str());
  check_code(b, qb, (op + ".b").c_str());
}
}  // namespace

StageRounding QuantizedMul(MulRule rule, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                           const QuantParams& qo) {
  ValidateBinary("mul", a, qa, b, qb, qo);
  switch (rule) {
    case MulRule::tflite: return mul_tflite(a, qa, b, qb, qo);
    case MulRule::onnx_spec: return mul_onnx_spec(a, qa, b, qb, qo);
  }
  throw InputError("mul: unknown rule");
}

StageRounding QuantizedAdd(AddRule rule, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                           const QuantParams& qo) {
  ValidateBinary("add", a, qa, b, qb, qo);
  switch (rule) {
    case AddRule::tflite: return add_tflite(a, qa, b, qb, qo);
    case AddRule::onnx_spec: return add_onnx_spec(a, qa, b, qb, qo);
    case AddRule::ort_mlas: return add_ort(rule, "add ort_mlas", a, qa, b, qb, qo);
    case AddRule::ort_mlas_fma: return add_ort(rule, "add ort_mlas_fma", a, qa, b, qb, qo);
    case AddRule::ort_raw: return add_ort(rule, "add ort_raw", a, qa, b, qb, qo);
    case AddRule::binary32_unfused: return add_binary32_unfused(a, qa, b, qb, qo);
    case AddRule::fixed_point_half_up: return add_fixed_point_half_up(a, qa, b, qb, qo);
    case AddRule::f32_one_rounding:
    case AddRule::f32_two_roundings:
      throw InputError("add " + std::string(to_string(rule)) + ": adds to an f32 intermediate (F32PostOpAdd), not to a code");
  }
  throw InputError("add: unknown rule");
}

float F32PostOpAdd(AddRule rule, float v, int32_t r, const QuantParams& qr) {
  validate(qr, "add.residual");
  check_code(r, qr, "add.residual");
  check_f32_scale_range("add (f32 post-op)", {&qr});
  const float centred = exact_float(int64_t{r} - qr.zero_point);  // |r - zr| < 2^17: exact
  switch (rule) {
    case AddRule::f32_one_rounding: return Fl32FusedMultiplyAdd(centred, qr.scale, v);
    case AddRule::f32_two_roundings: return add_f32(v, Fl32Multiply(qr.scale, centred));
    default: break;
  }
  throw InputError("add " + std::string(to_string(rule)) + ": not an f32 post-op rule (f32_one_rounding, f32_two_roundings)");
}

StageRounding AveragePool(AvgPoolRule rule, std::span<const int32_t> taps, const QuantParams& qi,
                          const QuantParams& qo) {
  validate(qi, "avg_pool.in");
  validate(qo, "avg_pool.out");
  if (taps.empty()) throw InputError("avg_pool: a window without in-bounds taps has no average");
  if (static_cast<int64_t>(taps.size()) > kMaxWindowTaps) {
    throw InputError("avg_pool: " + std::to_string(taps.size()) + " taps in one window; at most 65536 are supported");
  }
  for (const int32_t q : taps) check_code(q, qi, "avg_pool.tap");
  switch (rule) {
    case AvgPoolRule::tflite: return pool_tflite(taps, qi, qo);
    case AvgPoolRule::ort_qlinear: return pool_ort_qlinear(taps, qi, qo);
    case AvgPoolRule::ort_global: return pool_ort_global(taps, qi, qo);
    case AvgPoolRule::fixed_point_half_away: return pool_fixed_point_half_away(taps, qi, qo);
  }
  throw InputError("avg_pool: unknown rule");
}

}  // namespace fusediff::reference
