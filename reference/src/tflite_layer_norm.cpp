// The tflite_int16 layernorm arithmetic from its definition (tflite_layer_norm.h names the sources). Every
// fixed-point primitive is restated here as the exact integer function it computes, never as a kernel would write
// it: SRDHM(a, b) = floor((a b + 2^30) / 2^31) (gemmlowp's nudge and truncation, derived in stages.cpp), a
// rounding divide by 2^s = round half away from zero of x / 2^s, a saturating multiply by 2^e = clamp(x 2^e).
#include "fusediff/reference/tflite_layer_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "exact.h"
#include "fusediff/model/errors.h"

namespace fusediff::reference {
namespace {

using detail::cpp_rational;
using detail::exact_rational;

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int64_t ClampInt32(__int128 v) {
  return static_cast<int64_t>(std::clamp<__int128>(v, kInt32Min, kInt32Max));
}

// floor((a b + 2^30) / 2^31): a b rounded to the nearest multiple of 2^31, ties toward +infinity, divided by 2^31.
// |a b| <= 2^62, so the sum is exact in __int128 and >> is floor (C++20). The one result outside int32,
// a = b = -2^31 (2^62 / 2^31 = 2^31), is 2^31 - 1 by definition.
int64_t Srdhm(int64_t a, int64_t b) {
  if (a == kInt32Min && b == kInt32Min) return kInt32Max;
  return static_cast<int64_t>((static_cast<__int128>(a) * b + (int64_t{1} << 30)) >> 31);
}

// round(x / 2^s), ties away from zero, for any s >= 0 (|x| < 2^63, so s >= 64 gives 0).
int64_t RoundHalfAwayPow2(int64_t x, int s) {
  if (s == 0) return x;
  if (s >= 64) return 0;
  const __int128 magnitude = x < 0 ? -static_cast<__int128>(x) : static_cast<__int128>(x);
  const int64_t q = static_cast<int64_t>((magnitude + (static_cast<__int128>(1) << (s - 1))) >> s);
  return x < 0 ? -q : q;
}

// clamp(x 2^e) to int32, e in [0, 40].
int64_t SaturatingMulPow2(int64_t x, int e) { return ClampInt32(static_cast<__int128>(x) << e); }

// MultiplyByQuantizedMultiplier (double rounding): round_half_away(SRDHM(clamp(x 2^max(shift, 0)), m) /
// 2^max(-shift, 0)). The left shift saturates (fused/fixedpoint.h declares the same; TFLite's int32 multiply
// would overflow there).
int64_t MultiplyByQuantizedMultiplier(int64_t x, const QuantizedMultiplier& q, int shift) {
  const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
  return RoundHalfAwayPow2(Srdhm(SaturatingMulPow2(x, left), q.multiplier), right);
}

void CheckInt32(int64_t v, const char* what) {
  if (v < kInt32Min || v > kInt32Max) throw std::logic_error(std::string("TfliteInvSqrtMultiplier: ") + what);
}

// round_half_away(r) saturated to [lo, hi].
int64_t RoundHalfAwaySaturated(const cpp_rational& r, int64_t lo, int64_t hi) {
  return std::clamp(detail::round_rational(r, RoundingMode::half_away_from_zero), lo, hi);
}

}  // namespace

// The definition, in F3 (raw / 2^28) and F0 (raw / 2^31) fixed point: input normalized by powers of 4 into
// [2^27, 2^29) (shift counting them from 11), v = (input >> 1) / 2^28 in [1/4, 1); five Newton steps for 1/sqrt(v)
// from x = 1: x3 = clamp((x x x)_F9 into F3), x = clamp((3/2 x - (v/2) x3)_F6 into F3); then x (sqrt 2 / 2). Each
// product is one SRDHM. Every product is of positive values, each below 2^31 (x < 2, x3 < 8 by the iteration's
// monotone approach from below), so the difference cannot leave int32 (checked).
QuantizedMultiplier TfliteInvSqrtMultiplier(int32_t input) {
  if (input < 0) throw InputError("TfliteInvSqrtMultiplier: input must be >= 0, got " + std::to_string(input));
  if (input <= 1) return QuantizedMultiplier{static_cast<int32_t>(kInt32Max), 0};
  int64_t v = input;
  int shift = 11;
  while (v >= (int64_t{1} << 29)) {
    v /= 4;
    ++shift;
  }
  const int floor_log2 = static_cast<int>(std::bit_width(static_cast<uint64_t>(v))) - 1;
  const int left_pairs = (30 - floor_log2) / 2 - 1;  // (leading zeros of the uint32 - 1) / 2 - 1
  shift -= left_pairs;
  v <<= 2 * left_pairs;
  if (v < (int64_t{1} << 27) || v >= (int64_t{1} << 29)) throw std::logic_error("TfliteInvSqrtMultiplier: range");
  const int64_t half_input = RoundHalfAwayPow2(v >> 1, 1);
  const int64_t half_three = (int64_t{1} << 28) + (int64_t{1} << 27);
  int64_t x = int64_t{1} << 28;
  for (int i = 0; i < 5; ++i) {
    const int64_t x3 = SaturatingMulPow2(Srdhm(Srdhm(x, x), x), 6);
    const int64_t difference = Srdhm(half_three, x) - Srdhm(half_input, x3);
    CheckInt32(difference, "Newton step left int32");
    x = SaturatingMulPow2(difference, 3);
  }
  x = Srdhm(x, 1518500250);  // sqrt(2) / 2 in F0
  if (shift < 0) {
    x <<= -shift;
    CheckInt32(x, "left-shifted multiplier left int32");
    shift = 0;
  }
  return QuantizedMultiplier{static_cast<int32_t>(x), -shift};
}

TfliteLayerNormOperands DeriveTfliteLayerNormOperands(std::span<const float> gamma, std::span<const float> beta) {
  TfliteLayerNormOperands o;
  float max_abs = 0;
  for (float g : gamma) max_abs = std::max(max_abs, std::abs(g));  // |g| and the max are exact
  o.gamma_scale = max_abs == 0 ? 1.0f : Fl32Divide(max_abs, 32767.0f);
  if (o.gamma_scale == 0) o.gamma_scale = 1.0f;  // a subnormal max's quotient underflowed
  const cpp_rational s_g = exact_rational(o.gamma_scale);
  const cpp_rational s_b = s_g / 1024;
  for (float g : gamma) o.weights.push_back(static_cast<int32_t>(RoundHalfAwaySaturated(exact_rational(g) / s_g, -32768, 32767)));
  for (float b : beta) o.bias.push_back(static_cast<int32_t>(RoundHalfAwaySaturated(exact_rational(b) / s_b, kInt32Min, kInt32Max)));
  o.scale = QuantizeMultiplier(static_cast<double>(o.gamma_scale), false);
  const float guard = Fl32Multiply(10000.0f, o.gamma_scale);  // TFLite: 10000 * scale in float
  const int64_t truncated = std::isinf(guard) ? kInt32Max
                                              : std::min<int64_t>(kInt32Max, static_cast<int64_t>(detail::clamp_to_int64(
                                                                                 detail::floor_rational(exact_rational(guard)))));
  o.variance_limit = static_cast<int32_t>(std::max<int64_t>(1, truncated));  // guard >= 0: trunc is floor
  return o;
}

std::vector<int32_t> TfliteLayerNormRow(std::span<const int32_t> v, const TfliteLayerNormOperands& ops,
                                        const QuantParams& out, std::vector<bool>* saturated) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (n == 0 || ops.weights.size() != v.size() || ops.bias.size() != v.size()) {
    throw InputError("TfliteLayerNormRow: a row of " + std::to_string(n) + " values needs as many weights and biases");
  }
  int exponent = 0;
  std::frexp(out.scale, &exponent);  // out.scale = 2^(exponent - 1) (validated a power of two)
  const int k = 1 - exponent;
  int64_t sum = 0, sum_sq = 0;  // |v| <= 2^15, n <= 2^31: |sum| < 2^46, sum_sq < 2^61
  for (int32_t x : v) {
    if (x < -32768 || x > 32767) throw InputError("TfliteLayerNormRow: " + std::to_string(x) + " is not an int16 value");
    sum += x;
    sum_sq += int64_t{x} * x;
  }
  const int64_t mean = sum * 1024 / n;          // truncated toward zero; |mean| <= 2^25
  const int64_t temp = (int64_t{1} << 20) / n;  // truncated: exact only for a power-of-two n
  const int64_t variance = sum_sq * temp - mean * mean;  // sum_sq temp <= 2^50
  int64_t variance2 = variance / (int64_t{1} << 20);     // truncated toward zero; |.| <= 2^30
  if (variance2 < 1) variance2 = ops.variance_limit;
  const QuantizedMultiplier inv = TfliteInvSqrtMultiplier(static_cast<int32_t>(variance2));
  std::vector<int32_t> y(v.size());
  if (saturated) saturated->assign(v.size(), false);
  for (size_t j = 0; j < v.size(); ++j) {
    const int64_t rescaled = MultiplyByQuantizedMultiplier(1024 * int64_t{v[j]} - mean, inv, inv.shift);
    // rescaled w + b in int32, wrapping modulo 2^32 (declared; TFLite's plain int32 multiply-add).
    const int64_t exact = rescaled * ops.weights[j] + ops.bias[j];
    const int64_t wrapped = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(exact)));
    const int64_t t4 = RoundHalfAwayPow2(wrapped, 10);
    const int64_t code = MultiplyByQuantizedMultiplier(t4, ops.scale, ops.scale.shift + k);
    y[j] = static_cast<int32_t>(std::clamp<int64_t>(code, out.type.qmin(), out.type.qmax()));
    if (saturated) (*saturated)[j] = y[j] != code;
  }
  return y;
}

}  // namespace fusediff::reference
