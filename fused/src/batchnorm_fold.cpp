// The built-in BatchNorm fold (batchnorm_fold.h).
#include "fusediff/fused/batchnorm_fold.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <vector>

#include "fusediff/fused/float16.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {

namespace {
using u128 = unsigned __int128;

// ---- The fold's steps: the declared ones, and each fold mutant's variant beside the step it breaks.

BatchNormFold FoldAsDeclared(const BatchNormFold& declared) { return declared; }

// Mutant bn-f16-for-f32: breaks the declared precision; every step in binary16 where binary32 is declared.
BatchNormFold FoldInF16ForF32(const BatchNormFold& declared) {
  BatchNormFold fold = declared;
  if (fold.precision == FoldPrecision::f32) fold.precision = FoldPrecision::f16;
  return fold;
}

// Mutant bn-bf16-truncate: breaks the declared rounding of each step; truncated where nearest even is declared.
BatchNormFold FoldTruncating(const BatchNormFold& declared) {
  BatchNormFold fold = declared;
  fold.rounding = FloatRounding::toward_zero;
  return fold;
}

// Mutant bn-per-tensor-for-per-channel: breaks the declared weight quantization; one weight scale for the tensor.
BatchNormFold FoldPerTensor(const BatchNormFold& declared) {
  BatchNormFold fold = declared;
  fold.weight_quant = WeightQuant::per_tensor;
  return fold;
}

long double RadicandExtended(long double var, long double eps) { return var + eps; }
float Radicand(float var, float eps, const FloatBoundary& rules, float (*store)(float, const FloatBoundary&)) {
  return store(var + eps, rules);
}

// Mutant bn-drop-eps: breaks BatchNorm's definition; sqrt(var) instead of sqrt(var + eps).
long double RadicandExtendedWithoutEps(long double var, long double) { return var; }
float RadicandWithoutEps(float var, float, const FloatBoundary&, float (*)(float, const FloatBoundary&)) { return var; }

// The store step is StoreAs (float16.h); mutant bn-f16-overflow-wraps: breaks binary16's overflow rule with
// StoreAsWrappingF16Overflow beside it (the conversion without its overflow check: the exponent wraps).

// x = (-1)^neg * m * 2^e exactly (finite x).
struct Parts {
  bool negative;
  uint64_t mantissa;
  int exponent;
};
Parts Split(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t biased = (bits >> 23) & 0xFFu;
  const uint32_t fraction = bits & 0x7FFFFFu;
  if (biased == 0) return Parts{(bits >> 31) != 0, fraction, -149};
  return Parts{(bits >> 31) != 0, fraction | 0x800000u, static_cast<int>(biased) - 150};
}

// round_mode(a / (b1 b2)) from the exact integer quotient, clamped to +-2^62 (b1, b2 > 0 finite).
int64_t RoundQuotient(float a, float b1, float b2, RoundingMode mode) {
  const Parts pa = Split(a), p1 = Split(b1), p2 = Split(b2);
  if (pa.mantissa == 0) return 0;
  const u128 den_m = u128{p1.mantissa} * p2.mantissa;  // < 2^48
  const int shift = pa.exponent - p1.exponent - p2.exponent;
  constexpr int64_t kHuge = int64_t{1} << 62;
  if (shift > 60) return pa.negative ? -kHuge : kHuge;
  if (shift < -80) return 0;  // |quotient| < 2^24 / 2^80: below 1/2 in every mode
  const u128 num = shift >= 0 ? u128{pa.mantissa} << shift : u128{pa.mantissa};
  const u128 den = shift >= 0 ? den_m : den_m << -shift;
  const u128 q = num / den, rem = num % den;
  if (q > u128(kHuge)) return pa.negative ? -kHuge : kHuge;
  int64_t magnitude = static_cast<int64_t>(q);
  const u128 twice = rem * 2;
  const bool above = twice > den, tie = twice == den;
  // On a tie: away from zero and to-even act on the magnitude; half_up moves toward +infinity.
  if (above)
    ++magnitude;
  else if (tie) {
    switch (mode) {
      case RoundingMode::half_away_from_zero: ++magnitude; break;
      case RoundingMode::half_to_even: magnitude += magnitude & 1; break;
      case RoundingMode::half_up: magnitude += pa.negative ? 0 : 1; break;
    }
  }
  return pa.negative ? -magnitude : magnitude;
}

// round_mode(x) of a long double (exact floor and fraction).
int64_t RoundLong(long double x, RoundingMode mode) {
  constexpr long double kHuge = 0x1p62L;
  if (!(std::fabs(x) < kHuge)) return x > 0 ? (int64_t{1} << 62) : -(int64_t{1} << 62);
  const long double f = std::floor(x);
  const long double frac = x - f;  // exact
  const int64_t fi = static_cast<int64_t>(f);
  if (frac > 0.5L) return fi + 1;
  if (frac < 0.5L) return fi;
  switch (mode) {
    case RoundingMode::half_away_from_zero: return fi >= 0 ? fi + 1 : fi;
    case RoundingMode::half_to_even: return (fi % 2 == 0) ? fi : fi + 1;
    case RoundingMode::half_up: return fi + 1;
  }
  return fi;
}

int8_t Code(int64_t v) { return static_cast<int8_t>(std::clamp<int64_t>(v, -127, 127)); }

int32_t Bias(int64_t v, BiasOverflow rule, int32_t k, std::string& refused) {
  if (v >= INT32_MIN && v <= INT32_MAX) return static_cast<int32_t>(v);
  if (rule == BiasOverflow::reject) {
    if (refused.empty())
      refused = "folded bias of channel " + std::to_string(k) + " is outside int32 (declared: reject)";
    return 0;
  }
  return v > 0 ? INT32_MAX : INT32_MIN;
}

ConvCase Finish(const ConvCase& conv, std::vector<int8_t> codes, std::vector<float> scales, std::vector<int32_t> bias,
                BiasOverflow rule, std::string& refused) {
  ConvCase folded = conv;
  folded.weight_range(WeightRange::symmetric).weights(std::move(codes)).weight_scales(std::move(scales));
  if (rule == BiasOverflow::saturate) {
    // Saturated so that the int32 accumulator cannot overflow: |bias| <= 2^31 - 1 - max |sum (x - zx) w|.
    for (int32_t k = 0; k < folded.output_channels(); ++k) {
      const int32_t own = bias[k];
      bias[k] = 0;
      folded.bias(bias);
      const int64_t room = int64_t{INT32_MAX} - folded.accumulator_bound(k);
      bias[k] = room >= 0 ? static_cast<int32_t>(std::clamp<int64_t>(own, -room, room)) : own;
    }
  }
  folded.bias(std::move(bias));
  if (refused.empty()) {
    try {
      folded.validate();
    } catch (const InputError& e) {
      refused = std::string("the folded conv is not a valid int32 conv: ") + e.what();
    }
  }
  return folded;
}

ConvCase FoldExtended(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold,
                      const FoldSteps& steps, std::string& refused) {
  using ld = long double;
  const int32_t channels = conv.output_channels();
  const size_t per_channel = conv.weight_elements() / static_cast<size_t>(channels);
  const ld sx = conv.input_quant().scale;
  std::vector<ld> folded(conv.weight_elements()), bias(channels), wmax(channels, 0);
  for (int32_t k = 0; k < channels; ++k) {
    const ld sw = conv.weight_scales()[k];
    const ld d = steps.radicand_extended(ld(bn.var[k]), ld(eps));
    const ld kk = ld(bn.gamma[k]) / std::sqrt(d);
    for (size_t i = 0; i < per_channel; ++i) {
      const size_t at = k * per_channel + i;
      folded[at] = ld(conv.weights()[at]) * sw * kk;
      wmax[k] = std::max(wmax[k], std::fabs(folded[at]));
    }
    bias[k] = (ld(conv.bias()[k]) * sx * sw - ld(bn.mean[k])) * kk + ld(bn.beta[k]);
  }
  const ld top = *std::max_element(wmax.begin(), wmax.end());
  std::vector<float> scales(channels);
  std::vector<int8_t> codes(conv.weight_elements());
  std::vector<int32_t> int_bias(channels);
  for (int32_t k = 0; k < channels; ++k) {
    const ld m = fold.weight_quant == WeightQuant::per_tensor ? top : wmax[k];
    scales[k] = m == 0 ? 1.0f : static_cast<float>(m / 127);
    for (size_t i = 0; i < per_channel; ++i) {
      const size_t at = k * per_channel + i;
      codes[at] = Code(RoundLong(folded[at] / ld(scales[k]), fold.weight_rounding));
    }
    int_bias[k] = Bias(RoundLong(bias[k] / (sx * ld(scales[k])), fold.weight_rounding), fold.bias_overflow, k, refused);
  }
  return Finish(conv, std::move(codes), std::move(scales), std::move(int_bias), fold.bias_overflow, refused);
}

// The real folded weights and biases, every step a binary32 operation stored in the fold precision; `refused`
// is set at the first channel that overflows.
struct FloatFold {
  std::vector<float> weights, bias;
};

FloatFold FoldFloatReals(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold,
                         const FoldSteps& steps, std::string& refused) {
  const FloatBoundary rules = fold_step_boundary(fold);
  // Each step: a binary32 operation, then stored in the fold precision.
  const auto P = [&](float v) { return steps.store(v, rules); };
  const int32_t channels = conv.output_channels();
  const size_t per_channel = conv.weight_elements() / static_cast<size_t>(channels);
  FloatFold f{std::vector<float>(conv.weight_elements()), std::vector<float>(channels)};
  std::vector<float>&folded = f.weights, &bias = f.bias;
  const float sx = conv.input_quant().scale;
  for (int32_t k = 0; k < channels && refused.empty(); ++k) {
    const float sw = conv.weight_scales()[k];
    const float gamma = P(bn.gamma[k]), beta = P(bn.beta[k]), mean = P(bn.mean[k]), var = P(bn.var[k]), e = P(eps);
    // The conv's dequantized bias as a float kernel forms it: fl32(b_int) * fl32(sx sw).
    const float b = P(static_cast<float>(conv.bias()[k]) * (sx * sw));
    const float root = P(std::sqrt(steps.radicand(var, e, rules, steps.store)));
    float scale = 0;
    switch (fold.formula) {
      case FoldFormula::pytorch: {
        const float r = P(1.0f / root);
        scale = P(gamma * r);
        bias[k] = P(P(P(P(b - mean) * r) * gamma) + beta);
        break;
      }
      case FoldFormula::ort:
        scale = P(gamma / root);
        bias[k] = P(P(P(b - mean) * scale) + beta);
        break;
      case FoldFormula::tflite: {
        const float r = P(1.0f / root);
        scale = P(gamma * r);
        bias[k] = P(P(b * scale) + P(beta - P(mean * scale)));
        break;
      }
    }
    for (size_t i = 0; i < per_channel; ++i) {
      const size_t at = k * per_channel + i;
      folded[at] = P(P(static_cast<float>(conv.weights()[at]) * sw) * scale);
      if (!std::isfinite(folded[at])) refused = "the fold overflowed at channel " + std::to_string(k);
    }
    if (!std::isfinite(bias[k]) || !std::isfinite(scale))
      refused = "the fold overflowed at channel " + std::to_string(k);
  }
  return f;
}

// The float fold: the real folded values, then weight codes and bias rounded from exact integer quotients.
ConvCase FoldFloat(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold,
                   const FoldSteps& steps, std::string& refused) {
  const FloatFold reals = FoldFloatReals(conv, bn, eps, fold, steps, refused);
  const int32_t channels = conv.output_channels();
  const size_t per_channel = conv.weight_elements() / static_cast<size_t>(channels);
  const float sx = conv.input_quant().scale;
  std::vector<float> scales(channels, 1.0f);
  std::vector<int8_t> codes(conv.weight_elements());
  std::vector<int32_t> int_bias(channels);
  if (refused.empty()) {
    std::vector<float> wmax(channels, 0.0f);
    for (int32_t k = 0; k < channels; ++k) {
      for (size_t i = 0; i < per_channel; ++i)
        wmax[k] = std::max(wmax[k], std::fabs(reals.weights[k * per_channel + i]));
    }
    const float top = *std::max_element(wmax.begin(), wmax.end());
    for (int32_t k = 0; k < channels; ++k) {
      const float m = fold.weight_quant == WeightQuant::per_tensor ? top : wmax[k];
      scales[k] = m == 0.0f ? 1.0f : m / 127.0f;
      for (size_t i = 0; i < per_channel; ++i) {
        const size_t at = k * per_channel + i;
        codes[at] = Code(RoundQuotient(reals.weights[at], scales[k], 1.0f, fold.weight_rounding));
      }
      int_bias[k] =
          Bias(RoundQuotient(reals.bias[k], sx, scales[k], fold.weight_rounding), fold.bias_overflow, k, refused);
    }
  }
  return Finish(conv, std::move(codes), std::move(scales), std::move(int_bias), fold.bias_overflow, refused);
}
}  // namespace

// The one place a fold mutant is chosen: the declared steps, with at most one replaced by the mutant's variant.
FoldSteps FoldStepsOf(Mutant m) {
  FoldSteps s{FoldAsDeclared, RadicandExtended, Radicand, StoreAs};
  switch (m) {
    case Mutant::bn_f16_for_f32: s.as_run = FoldInF16ForF32; break;
    case Mutant::bn_bf16_truncate: s.as_run = FoldTruncating; break;
    case Mutant::bn_per_tensor_for_per_channel: s.as_run = FoldPerTensor; break;
    case Mutant::bn_drop_eps:
      s.radicand_extended = RadicandExtendedWithoutEps;
      s.radicand = RadicandWithoutEps;
      break;
    case Mutant::bn_f16_overflow_wraps: s.store = StoreAsWrappingF16Overflow; break;
    default: break;
  }
  return s;
}

ConvCase FoldConvBatchNorm(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& declared,
                           const FoldSteps& steps, std::string* refused_out) {
  std::string refused;
  const BatchNormFold fold = steps.as_run(declared);
  ConvCase out = fold.precision == FoldPrecision::exact ? FoldExtended(conv, bn, eps, fold, steps, refused)
                                                        : FoldFloat(conv, bn, eps, fold, steps, refused);
  if (refused_out) *refused_out = refused;
  return out;
}

}  // namespace fusediff::fused
