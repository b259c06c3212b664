// BatchNorm: the exact graph and the declared fold (batchnorm.h).
#include "fusediff/reference/batchnorm.h"

#include <boost/multiprecision/cpp_int.hpp>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <functional>

#include "exact.h"
#include "fl32.h"
#include "float_formats_detail.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

namespace {
using detail::cpp_int;
using detail::cpp_rational;
using detail::exact_rational;

// floor(a / b) for integers, b > 0.
int FloorDiv2(int a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

int FloorLog2(const cpp_rational& a) {  // a > 0
  int e = static_cast<int>(msb(numerator(a))) - static_cast<int>(msb(denominator(a)));
  if (a < detail::pow2(e)) --e;
  return e;
}

float BitsToFloat(uint32_t bits, FloatFormat f) {
  switch (f) {
    case FloatFormat::f32: return std::bit_cast<float>(bits);
    case FloatFormat::f16: return F16BitsToF32(static_cast<uint16_t>(bits));
    case FloatFormat::bf16: return Bf16BitsToF32(static_cast<uint16_t>(bits));
  }
  return 0.0f;
}

// An exact rational rounded into the rules' format, nearest even (toward zero is applied by the caller).
float RoundRationalNearest(const cpp_rational& v, const FloatBoundary& rules) {
  if (v == 0) return 0.0f;
  const detail::FormatLayout L = detail::layout_of(rules.format);
  const bool negative = v < 0;
  const cpp_rational a = negative ? cpp_rational(-v) : v;
  const int e = FloorLog2(a);
  if (e > L.emax() + 1) return BitsToFloat(detail::assemble_bits(L, negative, L.emax() + 1, 0, rules), rules.format);
  const int qexp = std::max(e, L.emin()) - (L.precision - 1);
  const cpp_rational scaled = a * detail::pow2(-qexp);
  cpp_int q = detail::floor_rational(scaled);
  const int cmp = detail::half_compare(scaled, q);
  if (cmp > 0 || (cmp == 0 && (q % 2) != 0)) q += 1;
  return BitsToFloat(detail::assemble_bits(L, negative, e, static_cast<uint64_t>(q), rules), rules.format);
}

// One fold step's rounding: nearest even in the format; toward zero as a kernel truncates, the binary32 result
// (nearest even) cut to the format (model/batchnorm.h).
float StepRound(const cpp_rational& v, const FloatBoundary& rules) {
  if (rules.rounding == FloatRounding::toward_zero && rules.format != FloatFormat::f32) {
    FloatBoundary f32 = rules;
    f32.format = FloatFormat::f32;
    f32.rounding = FloatRounding::nearest_even;
    return RoundToFormat(RoundRationalNearest(v, f32), rules);
  }
  return RoundRationalNearest(v, rules);
}

// sqrt(v) for v > 0 rounded nearest even into the format: Q = floor(sqrt(X)), X = v 2^(-2 qexp), is the integer
// square root of floor(X); sqrt(X) against Q + 1/2 is 4X against (2Q + 1)^2.
float SqrtNearest(const cpp_rational& v, const FloatBoundary& rules) {
  const detail::FormatLayout L = detail::layout_of(rules.format);
  const int es = FloorDiv2(FloorLog2(v));  // 2^es <= sqrt(v) < 2^(es+1)
  const int qexp = std::max(es, L.emin()) - (L.precision - 1);
  const cpp_rational x = v * detail::pow2(-2 * qexp);
  cpp_int q = boost::multiprecision::sqrt(detail::floor_rational(x));
  const cpp_rational odd = cpp_rational(2 * q + 1);
  const cpp_rational lhs = 4 * x, rhs = odd * odd;
  if (lhs > rhs || (lhs == rhs && (q % 2) != 0)) q += 1;
  return BitsToFloat(detail::assemble_bits(L, false, es, static_cast<uint64_t>(q), rules), rules.format);
}

float StepSqrt(const cpp_rational& v, const FloatBoundary& rules) {
  if (v == 0) return 0.0f;
  if (rules.rounding == FloatRounding::toward_zero && rules.format != FloatFormat::f32) {
    FloatBoundary f32 = rules;
    f32.format = FloatFormat::f32;
    f32.rounding = FloatRounding::nearest_even;
    return RoundToFormat(SqrtNearest(v, f32), rules);
  }
  return SqrtNearest(v, rules);
}

// x = p / sqrt(d) + q, d > 0: a quadratic irrational with exact comparisons.
struct Surd {
  cpp_rational p, q, d;
};

// sign(x - r).
int Compare(const Surd& x, const cpp_rational& r) {
  const cpp_rational c = r - x.q;  // sign(p / sqrt(d) - c)
  const int sp = x.p.sign(), sc = c.sign();
  if (sp >= 0 && sc <= 0) return (sp == 0 && sc == 0) ? 0 : 1;
  if (sp <= 0 && sc >= 0) return -1;
  const cpp_rational lhs = x.p * x.p, rhs = c * c * x.d;  // both > 0 or both < 0 here
  const int cmp = lhs > rhs ? 1 : (lhs < rhs ? -1 : 0);
  return sp > 0 ? cmp : -cmp;
}

double Approx(const Surd& x) {
  return detail::to_double(x.p) / std::sqrt(detail::to_double(x.d)) + detail::to_double(x.q);
}

// round_mode(x) exactly, clamped to +-2^62.
int64_t RoundSurd(const Surd& x, RoundingMode mode) {
  const double estimate = Approx(x);
  if (!(std::abs(estimate) < 0x1p61)) {
    return estimate > 0 ? detail::kClampMagnitude : -detail::kClampMagnitude;
  }
  int64_t f = static_cast<int64_t>(std::floor(estimate));
  while (Compare(x, cpp_rational(f)) < 0) --f;
  while (Compare(x, cpp_rational(f + 1)) >= 0) ++f;
  const int half = Compare(x, cpp_rational(2 * cpp_int(f) + 1, 2));
  return detail::round_split(mode, f, half);
}

// fl32(x) for x > 0: the binary32 whose rounding interval holds x, found from the estimate by exact comparisons with
// the midpoints to its neighbours (ties to the even significand).
float Fl32Surd(const Surd& x) {
  float f = static_cast<float>(Approx(x));
  if (!(f > 0.0f)) f = std::numeric_limits<float>::denorm_min();
  if (std::isinf(f)) f = std::numeric_limits<float>::max();
  for (int guard = 0; guard < 64; ++guard) {
    const float below = std::nextafter(f, 0.0f);
    const float above = std::nextafter(f, std::numeric_limits<float>::infinity());
    const cpp_rational ef = exact_rational(f);
    const int lo = Compare(x, (exact_rational(below) + ef) / 2);
    const int hi = std::isinf(above) ? -1 : Compare(x, (ef + exact_rational(above)) / 2);
    const bool even = (std::bit_cast<uint32_t>(f) & 1u) == 0;
    if (lo < 0 || (lo == 0 && !even)) { f = below; continue; }
    if (hi > 0 || (hi == 0 && !even)) { f = above; continue; }
    return f;
  }
  throw std::logic_error("Fl32Surd: no convergence");
}

// round(v) for an exact rational, clamped to +-2^62.
int64_t RoundExact(const cpp_rational& v, RoundingMode mode) { return detail::round_rational(v, mode); }

int32_t ToBias(int64_t rounded, BiasOverflow rule, int32_t k, std::string& refused) {
  if (rounded > INT32_MAX || rounded < INT32_MIN) {
    if (rule == BiasOverflow::reject) {
      if (refused.empty()) refused = "folded bias of channel " + std::to_string(k) + " is outside int32 (declared: reject)";
      return 0;
    }
    return rounded > 0 ? INT32_MAX : INT32_MIN;
  }
  return static_cast<int32_t>(rounded);
}

int32_t ToCode(int64_t rounded) { return static_cast<int32_t>(std::clamp<int64_t>(rounded, -127, 127)); }

// Saturation keeps the int32 conv valid: a bias is clamped to +-(2^31 - 1 - the largest |sum (x - zx) w|).
void KeepAccumulatorInInt32(ConvCase& folded, std::vector<int32_t>& bias, BiasOverflow rule) {
  if (rule != BiasOverflow::saturate) return;
  for (int32_t k = 0; k < folded.output_channels(); ++k) {
    std::vector<int32_t> zero = bias;
    zero[k] = 0;
    folded.bias(zero);
    const int64_t room = int64_t{INT32_MAX} - folded.accumulator_bound(k);
    if (room >= 0) bias[k] = static_cast<int32_t>(std::clamp<int64_t>(bias[k], -room, room));
  }
  folded.bias(bias);
}

void Finish(FoldedConv& out, const ConvCase& conv, std::vector<int8_t> codes, std::vector<float> scales,
            std::vector<int32_t> bias, BiasOverflow rule) {
  out.conv = conv;
  out.conv.weight_range(WeightRange::symmetric).weights(codes).weight_scales(scales);
  KeepAccumulatorInInt32(out.conv, bias, rule);
  out.conv.weight_range(WeightRange::symmetric).weights(std::move(codes)).weight_scales(std::move(scales)).bias(std::move(bias));
  if (!out.refused.empty()) return;
  try {
    out.conv.validate();
  } catch (const InputError& e) {
    out.refused = std::string("the folded conv is not a valid int32 conv: ") + e.what();
  }
}

FoldedConv FoldExact(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold) {
  const int32_t channels = conv.output_channels();
  const size_t per_channel = conv.weight_elements() / static_cast<size_t>(channels);
  const cpp_rational sx = exact_rational(conv.input_quant().scale);
  FoldedConv out;
  std::vector<cpp_rational> d(channels), gamma(channels), wmax(channels);
  std::vector<Surd> bias(channels);
  for (int32_t k = 0; k < channels; ++k) {
    const cpp_rational sw = exact_rational(conv.weight_scales()[k]);
    d[k] = exact_rational(bn.var[k]) + exact_rational(eps);
    gamma[k] = exact_rational(bn.gamma[k]);
    int32_t m = 0;
    for (size_t i = 0; i < per_channel; ++i) m = std::max<int32_t>(m, std::abs(int32_t{conv.weights()[k * per_channel + i]}));
    wmax[k] = cpp_rational(m) * sw * (gamma[k] < 0 ? cpp_rational(-gamma[k]) : gamma[k]);  // max |w'| = wmax / sqrt(d)
    const cpp_rational b = cpp_rational(conv.bias()[k]) * sx * sw;
    bias[k] = Surd{(b - exact_rational(bn.mean[k])) * gamma[k], exact_rational(bn.beta[k]), d[k]};
    out.bias_real.push_back(Approx(bias[k]));
  }
  // The scale per channel, or of the channel whose max |w'| is largest (wmax_k / sqrt(d_k) compared exactly).
  std::vector<float> scales(channels);
  int32_t top = 0;
  for (int32_t k = 1; k < channels; ++k) {
    if (wmax[k] * wmax[k] * d[top] > wmax[top] * wmax[top] * d[k]) top = k;
  }
  for (int32_t k = 0; k < channels; ++k) {
    const int32_t j = fold.weight_quant == WeightQuant::per_tensor ? top : k;
    scales[k] = wmax[j] == 0 ? 1.0f : Fl32Surd(Surd{wmax[j] / 127, 0, d[j]});
  }
  std::vector<int8_t> codes(conv.weight_elements());
  std::vector<int32_t> int_bias(channels);
  for (int32_t k = 0; k < channels; ++k) {
    const cpp_rational sw = exact_rational(conv.weight_scales()[k]);
    const cpp_rational s = exact_rational(scales[k]);
    for (size_t i = 0; i < per_channel; ++i) {
      const size_t at = k * per_channel + i;
      const cpp_rational w = cpp_rational(int32_t{conv.weights()[at]}) * sw;
      codes[at] = static_cast<int8_t>(ToCode(RoundSurd(Surd{w * gamma[k] / s, 0, d[k]}, fold.weight_rounding)));
    }
    const cpp_rational denominator = sx * s;
    const Surd q{bias[k].p / denominator, bias[k].q / denominator, d[k]};
    int_bias[k] = ToBias(RoundSurd(q, fold.weight_rounding), fold.bias_overflow, k, out.refused);
  }
  Finish(out, conv, std::move(codes), std::move(scales), std::move(int_bias), fold.bias_overflow);
  return out;
}

}  // namespace

FoldedConv FoldBatchNorm(const ConvCase& conv, const BatchNormParams& bn, float eps, const BatchNormFold& fold) {
  validate(bn, static_cast<size_t>(conv.output_channels()), eps, "batchnorm");
  if (fold.precision == FoldPrecision::exact) return FoldExact(conv, bn, eps, fold);
  const FloatBoundary rules = fold_step_boundary(fold);
  const int32_t channels = conv.output_channels();
  const size_t per_channel = conv.weight_elements() / static_cast<size_t>(channels);
  FoldedConv out;
  // Every step: the exact result of the step on the previous steps' (exactly representable) values, rounded once.
  const auto E = [](float v) { return exact_rational(v); };
  const auto R = [&](const cpp_rational& v) { return StepRound(v, rules); };
  std::string overflow;
  const auto check = [&](float v, int32_t k, const char* step) {
    if (!std::isfinite(v) && overflow.empty()) {
      overflow = "the fold overflowed " + std::string(to_string(rules.format)) + " at channel " + std::to_string(k) +
                 " (" + step + "; declared overflow: infinity)";
    }
    return v;
  };
  std::vector<float> folded(conv.weight_elements()), bias(channels);
  const cpp_rational sx = E(conv.input_quant().scale);
  for (int32_t k = 0; k < channels; ++k) {
    const cpp_rational sw = E(conv.weight_scales()[k]);
    const float gamma = R(E(bn.gamma[k])), beta = R(E(bn.beta[k])), mean = R(E(bn.mean[k]));
    const float var = R(E(bn.var[k])), e = R(E(eps));
    // The conv's dequantized bias as a float graph holds it: fl32(fl32(b_int) fl32(sx sw)) (F32IntermediateValue).
    const float b = check(R(E(F32IntermediateValue(conv.bias()[k], conv.input_quant().scale, conv.weight_scales()[k]))), k,
                          "conv bias");
    const float denom = check(R(E(var) + E(e)), k, "var + eps");
    const float root = StepSqrt(E(denom), rules);
    float scale = 0;  // what multiplies w
    switch (fold.formula) {
      case FoldFormula::pytorch: {
        const float r = check(R(cpp_rational(1) / E(root)), k, "rsqrt");
        scale = check(R(E(gamma) * E(r)), k, "gamma r");
        const float centred = check(R(E(b) - E(mean)), k, "b - mean");
        const float times_r = check(R(E(centred) * E(r)), k, "(b - mean) r");
        const float times_gamma = check(R(E(times_r) * E(gamma)), k, "(b - mean) r gamma");
        bias[k] = check(R(E(times_gamma) + E(beta)), k, "+ beta");
        break;
      }
      case FoldFormula::ort: {
        scale = check(R(E(gamma) / E(root)), k, "gamma / sqrt");
        const float centred = check(R(E(b) - E(mean)), k, "b - mean");
        const float times_k = check(R(E(centred) * E(scale)), k, "(b - mean) k");
        bias[k] = check(R(E(times_k) + E(beta)), k, "+ beta");
        break;
      }
      case FoldFormula::tflite: {
        const float r = check(R(cpp_rational(1) / E(root)), k, "rsqrt");
        scale = check(R(E(gamma) * E(r)), k, "gamma rsqrt");
        const float mean_m = check(R(E(mean) * E(scale)), k, "mean m");
        const float shift = check(R(E(beta) - E(mean_m)), k, "beta - mean m");
        const float b_m = check(R(E(b) * E(scale)), k, "b m");
        bias[k] = check(R(E(b_m) + E(shift)), k, "b m + (beta - mean m)");
        break;
      }
    }
    for (size_t i = 0; i < per_channel; ++i) {
      const size_t at = k * per_channel + i;
      const float w = R(cpp_rational(int32_t{conv.weights()[at]}) * sw);
      folded[at] = check(R(E(w) * E(scale)), k, "w scale");
    }
    out.bias_real.push_back(double(bias[k]));
  }
  out.refused = overflow;
  std::vector<float> scales(channels, 1.0f);
  std::vector<int8_t> codes(conv.weight_elements());
  std::vector<int32_t> int_bias(channels);
  if (overflow.empty()) {
    std::vector<float> wmax(channels, 0.0f);
    for (int32_t k = 0; k < channels; ++k) {
      for (size_t i = 0; i < per_channel; ++i) wmax[k] = std::max(wmax[k], std::abs(folded[k * per_channel + i]));
    }
    const float top = *std::max_element(wmax.begin(), wmax.end());
    for (int32_t k = 0; k < channels; ++k) {
      const float m = fold.weight_quant == WeightQuant::per_tensor ? top : wmax[k];
      scales[k] = m == 0.0f ? 1.0f : Fl32Divide(m, 127.0f);
    }
    for (int32_t k = 0; k < channels; ++k) {
      const cpp_rational s = E(scales[k]);
      for (size_t i = 0; i < per_channel; ++i) {
        const size_t at = k * per_channel + i;
        codes[at] = static_cast<int8_t>(ToCode(RoundExact(E(folded[at]) / s, fold.weight_rounding)));
      }
      int_bias[k] = ToBias(RoundExact(E(bias[k]) / (sx * s), fold.weight_rounding), fold.bias_overflow, k, out.refused);
    }
  }
  Finish(out, conv, std::move(codes), std::move(scales), std::move(int_bias), fold.bias_overflow);
  return out;
}

BatchNormCode BatchNormToCode(int64_t acc, float sx, float sw, float gamma, float beta, float mean, float var, float eps,
                              const IntermediateSpec& u) {
  const QuantParams& q = u.q;
  // t / su = (gamma (c - mean) / su) / sqrt(d) + beta / su.
  const double su = q.scale;
  const double c_d = double(acc) * double(sx) * double(sw);
  const double d_d = double(var) + double(eps);
  const double root = std::sqrt(d_d);
  const double term = double(gamma) * (c_d - double(mean)) / root;
  const double estimate = (term + double(beta)) / su;
  const double magnitude = (std::abs(double(gamma)) * (std::abs(c_d) + std::abs(double(mean))) / root + std::abs(double(beta))) / su;
  const double margin = 0x1p-40 * magnitude + 0x1p-1000;
  BatchNormCode out;
  out.t = estimate * su;
  int64_t rounded = 0;
  const double floor_e = std::floor(estimate);
  const double frac = estimate - floor_e;
  if (std::abs(estimate) < 0x1p60 && frac > margin && frac < 1 - margin && std::abs(frac - 0.5) > margin) {
    rounded = detail::round_split(u.rounding, static_cast<int64_t>(floor_e), frac > 0.5 ? 1 : -1);
  } else {
    const cpp_rational s = exact_rational(q.scale);
    const cpp_rational c = cpp_rational(acc) * exact_rational(sx) * exact_rational(sw);
    const Surd x{exact_rational(gamma) * (c - exact_rational(mean)) / s, exact_rational(beta) / s,
                 exact_rational(var) + exact_rational(eps)};
    rounded = RoundSurd(x, u.rounding);
  }
  out.tie_distance = std::abs(frac - 0.5);
  const int64_t code = detail::clamp_i64(rounded, -detail::kClampMagnitude, detail::kClampMagnitude) + q.zero_point;
  out.u = static_cast<int32_t>(detail::clamp_i64(code, q.type.qmin(), q.type.qmax()));
  out.saturated = out.u != code;
  return out;
}

}  // namespace fusediff::reference
