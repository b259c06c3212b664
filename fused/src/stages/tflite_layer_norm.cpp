// TFLite's integer layer norm as its kernel runs it (tflite_layer_norm.h). The operands as a converter derives
// them: s_g = max |gamma| / 32767 in binary32; gamma / s_g and beta / (s_g 2^-10) rounded half away from zero on
// the exact quotient (integer significands, below), so that no binary64 quotient near a half-integer can tip it.
#include "tflite_layer_norm.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fusediff/fused/fixedpoint.h"

namespace fusediff::fused {
namespace {

constexpr int32_t kInt16Min = std::numeric_limits<int16_t>::min();
constexpr int32_t kInt16Max = std::numeric_limits<int16_t>::max();

// round_half_away(a / (b 2^b_exp)) saturated to [lo, hi], exactly: a = A 2^ea, b = B 2^eb with 24-bit integer
// significands (frexp scaled by 2^24), so the quotient is A / B 2^d, d = ea - eb - b_exp; long division in
// __int128 (A 2^d < 2^88 for the d kept; beyond, the quotient saturates or rounds to 0). b > 0.
int64_t RoundQuotientHalfAway(float a, float b, int b_exp, int64_t lo, int64_t hi) {
  if (a == 0) return 0;
  int ea = 0, eb = 0;
  const __int128 A = static_cast<__int128>(std::ldexp(std::fabs(std::frexp(a, &ea)), 24));
  const __int128 B = static_cast<__int128>(std::ldexp(std::frexp(b, &eb), 24));
  const int d = ea - eb - b_exp;
  __int128 q = 0;
  if (d > 64) {
    q = static_cast<__int128>(1) << 64;  // beyond every int32
  } else if (d >= 0) {
    const __int128 numerator = A << d, quotient = numerator / B, remainder = numerator % B;
    q = quotient + (2 * remainder >= B ? 1 : 0);
  } else if (d > -64) {
    const __int128 denominator = B << -d, quotient = A / denominator, remainder = A % denominator;
    q = quotient + (2 * remainder >= denominator ? 1 : 0);
  }
  const int64_t magnitude = static_cast<int64_t>(std::min<__int128>(q, static_cast<__int128>(1) << 40));
  return std::clamp(a < 0 ? -magnitude : magnitude, lo, hi);
}

// MultiplyByQuantizedMultiplier with a right shift past 31: |SRDHM(x, m)| < 2^31, so any divide by 2^32 or more
// rounds to 0 (the primitive itself takes exponents up to 31).
int32_t MultiplyByQuantizedMultiplier(int32_t x, int32_t m, int shift) {
  if (shift < -31) return 0;
  return MultiplyByQuantizedMultiplierDoubleRounding(x, m, shift);
}

}  // namespace

TfliteLayerNormParams PrepareTfliteLayerNorm(std::span<const float> gamma, std::span<const float> beta) {
  TfliteLayerNormParams p;
  float max_abs = 0;
  for (float g : gamma) max_abs = std::max(max_abs, std::fabs(g));
  float scale = max_abs / 32767.0f;
  if (scale == 0) scale = 1.0f;  // every gamma 0 (or a subnormal max): TFLite's symmetric quantizer uses 1
  for (float g : gamma) p.weights.push_back(static_cast<int16_t>(RoundQuotientHalfAway(g, scale, 0, kInt16Min, kInt16Max)));
  for (float b : beta) {  // bias scale s_g 2^-10
    p.bias.push_back(static_cast<int32_t>(RoundQuotientHalfAway(b, scale, -10, std::numeric_limits<int32_t>::min(),
                                                                std::numeric_limits<int32_t>::max())));
  }
  QuantizeMultiplier(static_cast<double>(scale), &p.scale_a, &p.scale_b);
  const float guard = 10000 * scale;  // lstm.cc: static_cast<int32_t>(10000 * scale), here saturated
  const double truncated = std::min(std::trunc(static_cast<double>(guard)), double(std::numeric_limits<int32_t>::max()));
  p.variance_limit = std::max(1, static_cast<int32_t>(truncated));
  return p;
}

void ApplyTfliteLayerNorm(std::span<const int16_t> v, size_t features, const TfliteLayerNormParams& p,
                          const QuantParams& out, std::span<int32_t> y) {
  constexpr int32_t kTwoToPower20 = 1 << 20;
  int exponent = 0;
  std::frexp(out.scale, &exponent);
  const int k = 1 - exponent;  // out.scale = 2^-k
  const int32_t n = static_cast<int32_t>(features);
  for (size_t row = 0; row * features < v.size(); ++row) {
    const int16_t* in = v.data() + row * features;
    int64_t sum = 0, sum_sq = 0;  // int16 values: |sum| < 2^46, sum_sq < 2^61 for any row this size
    for (int32_t j = 0; j < n; ++j) {
      sum += in[j];
      sum_sq += int32_t{in[j]} * in[j];  // <= 2^30: int32
    }
    const int32_t mean = static_cast<int32_t>(sum * 1024 / n);
    const int32_t temp = kTwoToPower20 / n;  // TFLite's approximation of 2^20 / n (exact for powers of two)
    const int64_t variance = sum_sq * temp - int64_t{mean} * mean;
    int32_t variance2 = static_cast<int32_t>(variance / kTwoToPower20);
    if (variance2 < 1) variance2 = p.variance_limit;
    int32_t inv_a = 0;
    int inv_b = 0;
    GetInvSqrtQuantizedMultiplierExp(variance2, -1, &inv_a, &inv_b);
    for (int32_t j = 0; j < n; ++j) {
      const int32_t shifted = 1024 * int32_t{in[j]} - mean;
      const int32_t rescaled = MultiplyByQuantizedMultiplier(shifted, inv_a, inv_b);
      // TFLite's int32 multiply-add, wrapping (declared): done in uint32, where wrapping is defined.
      const uint32_t product = static_cast<uint32_t>(rescaled) * static_cast<uint32_t>(int32_t{p.weights[j]});
      const int64_t val3 = static_cast<int32_t>(product + static_cast<uint32_t>(p.bias[j]));
      const int32_t val4 = static_cast<int32_t>((val3 > 0 ? val3 + 512 : val3 - 512) / 1024);
      const int32_t val5 = MultiplyByQuantizedMultiplier(val4, p.scale_a, p.scale_b + k);
      y[row * features + static_cast<size_t>(j)] = std::clamp(val5, out.type.qmin(), out.type.qmax());
    }
  }
}

}  // namespace fusediff::fused
