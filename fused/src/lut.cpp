// Activation tables as common toolchains build them. Matched sources (read, restated in own code):
//   tensorflow/tflite-micro  tensorflow/lite/kernels/internal/common.h (2024-2025 revision with
//       detail::LUTTransform / detail::LUTPopulateInt8 / detail::LUTPopulateInt16<FloatT> and LUTLookup):
//       LUTPopulateInt16<float> and the int16 LUTLookup are reproduced bit for bit; the int8 table follows
//       LUTPopulateInt8's structure but is computed in double with the declared rounding (Vela style).
//   tensorflow/tensorflow    tensorflow/lite/kernels/internal/reference/gelu.h: GeluTransform (erfc form) and
//       GeluTransformApproximate (tanh form), reproduced expression for expression in float.
// Pure functions, no I/O.
#include "fusediff/fused/lut.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fusediff::fused {
namespace {

// sqrt(2/pi) as TFLite spells it: M_2_SQRTPI * M_SQRT1_2 = (2/sqrt(pi)) * (1/sqrt(2)), product in double.
constexpr double kSqrtTwoOverPiDouble = M_2_SQRTPI * M_SQRT1_2;
constexpr double kGeluTanhCubicCoefficient = 0.044715;

// 1 / (1 + e^-x) without overflow or cancellation: for x < 0 the form e^x / (1 + e^x) keeps the tiny result's
// relative precision (and e^x underflows to 0 rather than e^-x overflowing to inf).
template <typename T>
T StableSigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x, full precision for very negative x.
template <typename T>
T StableSoftplus(T x) {
  if (x > T(0)) return x + std::log1p(std::exp(-x));
  return std::log1p(std::exp(x));
}

// min(max(v, 0), 6).
template <typename T>
T Relu6(T v) {
  return std::min(std::max(v, T(0)), T(6));
}

// The kinds whose formula is the same in both precisions. gelu_erf uses TFLite's erfc form
// 0.5 * x * erfc(-x / sqrt(2)): no cancellation for large negative x (erf(x) -> -1 there).
template <typename T>
T EvaluateCommon(const Activation& a, T x) {
  const T alpha = static_cast<T>(a.alpha);
  switch (a.kind) {
    case ActivationKind::relu:
      return std::max(x, T(0));
    case ActivationKind::relu6:
      return Relu6(x);
    case ActivationKind::leaky_relu:
      return x >= T(0) ? x : alpha * x;
    case ActivationKind::hard_sigmoid:
      return Relu6(x + T(3)) / T(6);
    case ActivationKind::hard_swish:
      return x * Relu6(x + T(3)) / T(6);
    case ActivationKind::gelu_erf:
      return T(0.5) * x * std::erfc(x * static_cast<T>(-M_SQRT1_2));
    case ActivationKind::sigmoid:
      return StableSigmoid(x);
    case ActivationKind::tanh:
      return std::tanh(x);
    case ActivationKind::silu:
      return x * StableSigmoid(x);
    case ActivationKind::elu:
      return x >= T(0) ? x : alpha * std::expm1(x);
    case ActivationKind::softplus:
      return StableSoftplus(x);
    case ActivationKind::mish:
      return x * std::tanh(StableSoftplus(x));
    case ActivationKind::gelu_tanh:
      break;  // precision-specific, handled by the callers
  }
  return std::numeric_limits<T>::quiet_NaN();
}

// Round an exact double to an integral double. r - floor(r) is exact for every finite r (Sterbenz for |r| < 2^52,
// zero above), so the tie test is exact; floor(r + 0.5) would misround r = 0.5 - 2^-54.
double RoundIntegral(double r, RoundingMode mode) {
  const double lower = std::floor(r);
  const double fraction = r - lower;  // in [0, 1), exact
  if (fraction > 0.5) return lower + 1.0;
  if (fraction < 0.5) return lower;
  switch (mode) {  // exact tie: lower + 1/2
    case RoundingMode::half_away_from_zero:
      return r > 0.0 ? lower + 1.0 : lower;
    case RoundingMode::half_to_even:
      return std::fmod(lower, 2.0) == 0.0 ? lower : lower + 1.0;
    case RoundingMode::half_up:
      return lower + 1.0;
  }
  return lower;
}

// An integral (or infinite/NaN) double clamped to [qmin, qmax]; NaN maps to qmin so the result is always
// defined.
int32_t SaturateToCode(double v, int32_t qmin, int32_t qmax) {
  if (!(v >= static_cast<double>(qmin))) return qmin;
  if (v > static_cast<double>(qmax)) return qmax;
  return static_cast<int32_t>(v);
}

}  // namespace

double EvaluateActivationDouble(const Activation& a, double x) {
  if (a.kind == ActivationKind::gelu_tanh) {
    // 0.5 x (1 + tanh(z)) = x * sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3): the stable form (1 + tanh(z)
    // cancels to 0 for large negative x; x * sigmoid(2z) keeps the tiny tail).
    const double z = kSqrtTwoOverPiDouble * (x + kGeluTanhCubicCoefficient * x * x * x);
    return x * StableSigmoid(2.0 * z);
  }
  return EvaluateCommon<double>(a, x);
}

float EvaluateActivationFloat(const Activation& a, float x) {
  if (a.kind == ActivationKind::gelu_tanh) {
    // TFLite GeluTransformApproximate, same expression and evaluation order in float:
    // 0.5f * x * (1 + tanh(float(sqrt(2/pi)) * (x + 0.044715f * x * x * x))).
    constexpr float kSqrtTwoOverPi = static_cast<float>(kSqrtTwoOverPiDouble);
    return 0.5f * x * (1.f + std::tanh(kSqrtTwoOverPi * (x + 0.044715f * x * x * x)));
  }
  return EvaluateCommon<float>(a, x);
}

// For every code v of `in`: x = s_in * (v - z_in) is exact in double (24-bit significand times a <= 17-bit
// integer); y = f(x) in double; r = y / s_out (one correctly rounded division, where TFLite multiplies by a
// float inverse); then round(r) + z_out (after_rounding, TFLite) or round(z_out + r) (before_rounding, Vela's
// Sigmoid/Tanh tables) with the declared rounding; saturated to the output type.
std::vector<int32_t> LUTPopulateInt8(const Activation& a, const QuantParams& in, const OutputSpec& output) {
  const int32_t in_qmin = in.type.qmin();
  const int32_t in_qmax = in.type.qmax();
  const int32_t out_qmin = output.q.type.qmin();
  const int32_t out_qmax = output.q.type.qmax();
  const double input_scale = static_cast<double>(in.scale);
  const double output_scale = static_cast<double>(output.q.scale);
  const double output_zero_point = static_cast<double>(output.q.zero_point);

  std::vector<int32_t> table;
  table.reserve(static_cast<size_t>(in_qmax - in_qmin + 1));
  for (int32_t v = in_qmin; v <= in_qmax; ++v) {
    const double x = input_scale * static_cast<double>(v - in.zero_point);
    const double rescaled = EvaluateActivationDouble(a, x) / output_scale;
    double code = 0.0;
    if (output.zero_point_order == ZeroPointOrder::after_rounding) {
      code = RoundIntegral(rescaled, output.rounding) + output_zero_point;
    } else {
      code = RoundIntegral(output_zero_point + rescaled, output.rounding);
    }
    table.push_back(SaturateToCode(code, out_qmin, out_qmax));
  }
  return table;
}

int32_t LUTLookupInt8(const std::vector<int32_t>& table, int32_t qmin, int32_t u) {
  return table.at(static_cast<size_t>(u - qmin));
}

// Bit-exact restatement of TFLite detail::LUTPopulateInt16<float> (tflite-micro common.h, 2024-2025). Every
// quantity is float and each expression is evaluated in the same order as there (x86-64 SSE float arithmetic,
// -ffp-contract=off so no FMA):
//   input_min/max  = s_in * float(-32768 - z_in), s_in * float(32767 - z_in)
//   output_min/max = s_out * float(-32768 - z_out), s_out * float(32767 - z_out)
//   step = (input_max - input_min) / 512, half_step = step / 2
//   output_scaling_inv = 65536 / (output_max - output_min)    (the quirk: 65536 codes over a 65535-step range)
//   knot i < 512: sample = round(f(x_i) * inv), x_i = input_min + i * step;
//       midpoint_interp = round((f(x_{i+1}) * inv + round(f(x_i) * inv)) / 2)
//       midpoint        = round(f(input_min + i * step + half_step) * inv)
//       knot = clamp(sample - round((midpoint_interp - midpoint) / 2), -32768, 32767)
//   knot 512 = clamp(round(f(input_max) * inv))
// round is TfLiteRound = std::round (ties away from zero) on float.
std::array<int16_t, 513> LUTPopulateInt16(const Activation& a, float input_scale, int32_t input_zero_point,
                                          float output_scale, int32_t output_zero_point) {
  constexpr int32_t kInt16Min = std::numeric_limits<int16_t>::min();
  constexpr int32_t kInt16Max = std::numeric_limits<int16_t>::max();
  constexpr int kSteps = 512;
  const auto f = [&a](float v) { return EvaluateActivationFloat(a, v); };

  const float input_min = input_scale * static_cast<float>(kInt16Min - input_zero_point);
  const float input_max = input_scale * static_cast<float>(kInt16Max - input_zero_point);
  const float output_min = output_scale * static_cast<float>(kInt16Min - output_zero_point);
  const float output_max = output_scale * static_cast<float>(kInt16Max - output_zero_point);

  const float step = (input_max - input_min) / static_cast<float>(kSteps);
  const float half_step = step / 2.0f;
  const float output_scaling_inv = static_cast<float>(kInt16Max - kInt16Min + 1) / (output_max - output_min);
  const float table_min = static_cast<float>(kInt16Min);
  const float table_max = static_cast<float>(kInt16Max);

  std::array<int16_t, 513> lut{};
  for (int i = 0; i < kSteps; ++i) {
    const float at_start = input_min + static_cast<float>(i) * step;
    const float val = f(at_start);
    const float val_midpoint = f(at_start + half_step);
    const float val_next = f(input_min + static_cast<float>(i + 1) * step);

    const float sample_val = std::round(val * output_scaling_inv);
    const float midpoint_interp_val =
        std::round((val_next * output_scaling_inv + std::round(val * output_scaling_inv)) / 2.0f);
    const float midpoint_val = std::round(val_midpoint * output_scaling_inv);
    const float midpoint_err = midpoint_interp_val - midpoint_val;
    const float bias = std::round(midpoint_err / 2.0f);

    lut[static_cast<size_t>(i)] =
        static_cast<int16_t>(std::min(std::max(sample_val - bias, table_min), table_max));
  }
  lut[kSteps] = static_cast<int16_t>(
      std::min(std::max(std::round(f(input_max) * output_scaling_inv), table_min), table_max));
  return lut;
}

// TFLite int16 LUTLookup, bit for bit: index = 256 + (value >> 7) (arithmetic shift: floor), offset = low 7 bits;
// the slope is held in int16 as there (it wraps only for adjacent knots more than 32767 apart); delta =
// (slope * offset + 64) >> 7 in int: round to nearest, ties toward +infinity, floor for negative products;
// |slope * offset| <= 65535 * 127, no overflow. The sum is narrowed to int16 as there (modular in C++20).
int16_t LUTLookup(int16_t value, const std::array<int16_t, 513>& lut) {
  const size_t index = static_cast<size_t>(256 + (static_cast<int>(value) >> 7));  // in [0, 511]
  return LUTInterpolate(lut[index], lut[index + 1], static_cast<int>(value) & 0x7f);
}

int16_t LUTInterpolate(int16_t base, int16_t next, int offset) {
  const int16_t slope = static_cast<int16_t>(next - base);
  const int delta = (static_cast<int>(slope) * offset + 64) >> 7;
  return static_cast<int16_t>(base + delta);
}

// Mutant interp-truncate: the same lookup without the +64 rounding term, (slope * f) >> 7 (floor).
int16_t LUTLookupTruncating(int16_t value, const std::array<int16_t, 513>& lut) {
  const int index = 256 + (static_cast<int>(value) >> 7);
  const int offset = static_cast<int>(value) & 0x7f;
  const int16_t base = lut[static_cast<size_t>(index)];
  const int16_t slope = static_cast<int16_t>(lut[static_cast<size_t>(index) + 1] - base);
  return static_cast<int16_t>(base + ((static_cast<int>(slope) * offset) >> 7));
}

}  // namespace fusediff::fused
