// Add and average-pool kernels (stages.h), restated from the public sources below (same arithmetic, own code):
//   tensorflow/tensorflow  lite/kernels/add.cc Prepare; lite/kernels/internal/reference/integer_ops/add.h AddFunc
//                          (reference/add.h AddElementwise for uint8 and general-scale int16)
//                          lite/kernels/internal/reference/integer_ops/pooling.h AveragePool
//   microsoft/onnxruntime  onnxruntime/core/mlas/lib/qladd.cpp MlasQLinearAddKernelHelper (SSE2),
//                          MlasQLinearAddKernelRawHelper; mlas/lib/intrinsics/avx2/qladd_avx2.cpp
//                          MlasQLinearAddKernelAvx2Helper; contrib_ops/cpu/quantization/qlinear_pool.cc
//                          (dequantize_value, QLinearPool2DTask, quantize_value); mlas/lib/qlgavgpool.cpp
//                          MlasQLinearGlobalAveragePoolNchw + mlas/lib/quantize.cpp MlasRequantizeOutput (SSE2)
// The vector kernels are written one lane at a time; each lane computes what its SIMD lane computes.
#include "fusediff/fused/stages.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>

#include "fusediff/fused/fixedpoint.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {
namespace {

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr size_t kMaxWindowTaps = size_t{1} << 16;

int32_t Clamp(int64_t v, int64_t lo, int64_t hi) { return static_cast<int32_t>(std::min(std::max(v, lo), hi)); }

// cvtps2dq (and cvttss2si of an already rounded value) under the default MXCSR: round half to even; a result
// outside int32 is the "integer indefinite" 0x80000000.
int32_t ConvertToInt32(float v) {
  if (!(v >= -0x1p31f && v < 0x1p31f)) return kInt32Min;
  return static_cast<int32_t>(std::nearbyint(v));
}

void CheckCode(int32_t code, const QuantParams& q, const char* field) {
  if (!q.type.contains(code)) {
    throw InputError(std::string(field) + ": code " + std::to_string(code) + " is outside " + to_string(q.type));
  }
}

void CheckSameScalar(const char* what, ScalarType a, ScalarType b, ScalarType c) {
  if (a != b || a != c) {
    throw InputError(std::string(what) + ": the inputs and the output must share one scalar type (got " +
                     std::string(to_string(a)) + ", " + std::string(to_string(b)) + ", " + std::string(to_string(c)) +
                     ")");
  }
}

// The binary32 kernels stay finite and normal for scales in [2^-40, 2^40] (the domain they are defined on here).
void CheckF32Scale(const char* what, float scale) {
  if (scale < 0x1p-40f || scale > 0x1p40f) {
    throw InputError(std::string(what) + ": scale " + format_float32(scale) + " is outside [2^-40, 2^40]");
  }
}

// QuantizeMultiplierSmallerThanOneExp: TFLITE_CHECK 0 < M < 1, then QuantizeMultiplier with shift <= 0.
void QuantizeSmallerThanOne(double real, int32_t* multiplier, int* shift, const char* name) {
  if (!(real > 0.0 && real < 1.0)) {
    throw InputError(std::string("add tflite: ") + name + " multiplier " + std::to_string(real) +
                     " must be in (0, 1) (TFLite's Prepare refuses it)");
  }
  QuantizeMultiplier(real, multiplier, shift);
  if (*shift > 0) {
    throw InputError(std::string("add tflite: ") + name + " multiplier " + std::to_string(real) +
                     " rounds up to 1 (TFLite's Prepare refuses the left shift)");
  }
}

// MultiplyByQuantizedMultiplierSmallerThanOneExp (default build): RDBPOT(SRDHM(x, m), -shift).
int32_t MultiplySmallerThanOne(int32_t x, int32_t multiplier, int shift) {
  return RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, multiplier), -shift);
}

}  // namespace

QuantizedAddKernel::QuantizedAddKernel(AddRule rule, const QuantParams& qa, const QuantParams& qb,
                                       const QuantParams& qo)
    : rule_(rule), qa_(qa), qb_(qb), qo_(qo) {
  validate(qa, "add.a");
  validate(qb, "add.b");
  validate(qo, "add.out");
  const QuantType full{qo.type.scalar, false};
  full_min_ = full.qmin();
  full_max_ = full.qmax();
  switch (rule) {
    case AddRule::tflite: {
      CheckSameScalar("add tflite", qa.type.scalar, qb.type.scalar, qo.type.scalar);
      left_shift_ = qo.type.scalar == ScalarType::int16 ? 15 : 20;
      // Prepare: 2 * max(float, float) and (1 << L) * float are binary32 products, then binary64 divisions.
      const float twice_max_float = 2 * std::max(qa.scale, qb.scale);
      const float shifted_output_float = static_cast<float>(1 << left_shift_) * qo.scale;
      const double twice_max = twice_max_float;
      QuantizeSmallerThanOne(qa.scale / twice_max, &input1_multiplier_, &input1_shift_, "input1");
      QuantizeSmallerThanOne(qb.scale / twice_max, &input2_multiplier_, &input2_shift_, "input2");
      QuantizeSmallerThanOne(twice_max / shifted_output_float, &output_multiplier_, &output_shift_, "output");
      break;
    }
    case AddRule::onnx_spec: {
      // s = M 2^E exactly (M < 2^24 an integer); with E0 the least exponent, A = Ma 2^(Ea-E0), B = Mb 2^(Eb-E0),
      // D = Mo 2^(Eo-E0) are integers and v = (A da + B db) / D. |d| < 2^17: a span of at most 80 bits keeps
      // A da + B db below 2^122.
      int ea = 0, eb = 0, eo = 0;
      const double ma = std::ldexp(std::frexp(static_cast<double>(qa.scale), &ea), 24);
      const double mb = std::ldexp(std::frexp(static_cast<double>(qb.scale), &eb), 24);
      const double mo = std::ldexp(std::frexp(static_cast<double>(qo.scale), &eo), 24);
      const int e0 = std::min({ea, eb, eo});
      if (std::max({ea, eb, eo}) - e0 > 80) {
        throw InputError("add onnx_spec: the scales span more than 2^80, beyond the integer kernel");
      }
      spec_a_ = static_cast<__int128>(static_cast<int64_t>(ma)) << (ea - e0);
      spec_b_ = static_cast<__int128>(static_cast<int64_t>(mb)) << (eb - e0);
      spec_d_ = static_cast<__int128>(static_cast<int64_t>(mo)) << (eo - e0);
      break;
    }
    case AddRule::ort_mlas:
    case AddRule::ort_mlas_fma:
    case AddRule::ort_raw: {
      const char* what = rule == AddRule::ort_raw ? "add ort_raw" : (rule == AddRule::ort_mlas ? "add ort_mlas" : "add ort_mlas_fma");
      CheckSameScalar(what, qa.type.scalar, qb.type.scalar, qo.type.scalar);
      for (const float s : {qa.scale, qb.scale, qo.scale}) CheckF32Scale(what, s);
      raw_ = rule == AddRule::ort_raw || qo.type.scalar == ScalarType::int16;
      // MlasQLinearAddKernelHelper / MlasQLinearAddKernelAvx2Helper setup.
      ratio_a_ = qa.scale / qo.scale;
      ratio_b_ = qb.scale / qo.scale;
      fixed_part_ = static_cast<float>(qo.zero_point) -
                    (ratio_a_ * static_cast<float>(qa.zero_point) + ratio_b_ * static_cast<float>(qb.zero_point));
      // MlasQLinearAddKernelRawHelper: the clamp bounds of v, before the zero point.
      raw_min_ = static_cast<float>(full_min_ - qo.zero_point);
      raw_max_ = static_cast<float>(full_max_ - qo.zero_point);
      break;
    }
    case AddRule::binary32_unfused:
      for (const QuantParams* q : {&qa, &qb, &qo}) {
        CheckF32Scale("add binary32_unfused", q->scale);
        if (q->type.bits() != 8) throw InputError("add binary32_unfused: the rule takes 8-bit codes (a library's int8 reorders)");
      }
      inverse_output_scale_ = 1.0f / qo.scale;  // the quantizing reorder's scale, fl32(1/so)
      break;
    case AddRule::f32_one_rounding:
    case AddRule::f32_two_roundings:
      throw InputError("add " + std::string(to_string(rule)) +
                       ": a rule for an f32 intermediate (a library's post-op), not for two codes");
    case AddRule::fixed_point_half_up:
      throw InputError("add " + std::string(to_string(rule)) + ": a library's rule (XNNPACK's add_nd), not a built-in kernel");
  }
}

int32_t QuantizedAddKernel::operator()(int32_t a, int32_t b) const {
  CheckCode(a, qa_, "add.a");
  CheckCode(b, qb_, "add.b");
  switch (rule_) {
    case AddRule::tflite: return Tflite(a, b);
    case AddRule::onnx_spec: return OnnxSpec(a, b);
    case AddRule::ort_mlas: return raw_ ? MlasRaw(a, b) : MlasSse2(a, b);
    case AddRule::ort_mlas_fma: return raw_ ? MlasRaw(a, b) : MlasAvx2Fma(a, b);
    case AddRule::ort_raw: return MlasRaw(a, b);
    case AddRule::binary32_unfused: return Binary32Unfused(a, b);
    case AddRule::f32_one_rounding:
    case AddRule::f32_two_roundings:
    case AddRule::fixed_point_half_up: break;  // refused by the constructor
  }
  return 0;
}

// AddFunc. |(q - z) << L| < 2^31 (L = 20 for 8-bit, 15 for int16); each scaled input is at most half of it, so
// the int32 sum cannot overflow.
int32_t QuantizedAddKernel::Tflite(int32_t a, int32_t b) const {
  const int32_t shifted1 = (a - qa_.zero_point) * (1 << left_shift_);
  const int32_t shifted2 = (b - qb_.zero_point) * (1 << left_shift_);
  const int32_t scaled1 = MultiplySmallerThanOne(shifted1, input1_multiplier_, input1_shift_);
  const int32_t scaled2 = MultiplySmallerThanOne(shifted2, input2_multiplier_, input2_shift_);
  const int32_t raw_output = MultiplySmallerThanOne(scaled1 + scaled2, output_multiplier_, output_shift_) + qo_.zero_point;
  return Clamp(raw_output, qo_.type.qmin(), qo_.type.qmax());
}

// Exact: n = A da + B db (< 2^122), floor division by D > 0, remainder against D/2, ties to the even quotient.
int32_t QuantizedAddKernel::OnnxSpec(int32_t a, int32_t b) const {
  const __int128 n = spec_a_ * (a - qa_.zero_point) + spec_b_ * (b - qb_.zero_point);
  __int128 q = n / spec_d_;  // truncates toward zero
  __int128 r = n - q * spec_d_;
  if (r < 0) {
    q -= 1;
    r += spec_d_;
  }
  if (2 * r > spec_d_ || (2 * r == spec_d_ && (q & 1) != 0)) q += 1;
  constexpr __int128 kBound = __int128{1} << 40;  // far outside every type: saturates the same
  return Clamp(static_cast<int64_t>(std::clamp(q, -kBound, kBound)) + qo_.zero_point, qo_.type.qmin(), qo_.type.qmax());
}

// SSE2 lane: (k + a ra) + b rb, then cvtps2dq, _mm_packs_epi32, _mm_packs_epi16 / _mm_packus_epi16.
int32_t QuantizedAddKernel::MlasSse2(int32_t a, int32_t b) const {
  const float y = (fixed_part_ + static_cast<float>(a) * ratio_a_) + static_cast<float>(b) * ratio_b_;
  return Clamp(Clamp(ConvertToInt32(y), full_min_, full_max_), qo_.type.qmin(), qo_.type.qmax());
}

// AVX2 lane: _mm256_fmadd_ps(b, rb, k), then _mm256_fmadd_ps(a, ra, that); _mm256_cvtps_epi32 and the packs.
int32_t QuantizedAddKernel::MlasAvx2Fma(int32_t a, int32_t b) const {
  const float y = std::fma(static_cast<float>(a), ratio_a_, std::fma(static_cast<float>(b), ratio_b_, fixed_part_));
  return Clamp(Clamp(ConvertToInt32(y), full_min_, full_max_), qo_.type.qmin(), qo_.type.qmax());
}

int32_t QuantizedAddKernel::MlasRaw(int32_t a, int32_t b) const {
  const float value_a = qa_.scale * static_cast<float>(a - qa_.zero_point);
  const float value_b = qb_.scale * static_cast<float>(b - qb_.zero_point);
  float value_c = (value_a + value_b) / qo_.scale;
  value_c = std::min(std::max(value_c, raw_min_), raw_max_);
  const int32_t code = static_cast<int32_t>(std::nearbyint(value_c + static_cast<float>(qo_.zero_point)));
  return Clamp(code, qo_.type.qmin(), qo_.type.qmax());
}

// The dequantizing steps, the add and the quantizing step, each one binary32 operation (oneDNN's reorders and binary
// add); the quantizing reorder saturates in float before cvtps2dq (integer bounds: the same as clamping the code).
int32_t QuantizedAddKernel::Binary32Unfused(int32_t a, int32_t b) const {
  const float value_a = qa_.scale * static_cast<float>(a - qa_.zero_point);
  const float value_b = qb_.scale * static_cast<float>(b - qb_.zero_point);
  const float sum = value_a + value_b;
  float t = sum * inverse_output_scale_ + static_cast<float>(qo_.zero_point);
  t = std::min(std::max(t, static_cast<float>(qo_.type.qmin())), static_cast<float>(qo_.type.qmax()));
  return static_cast<int32_t>(std::nearbyint(t));
}

AveragePoolKernel::AveragePoolKernel(AvgPoolRule rule, const QuantParams& qi, const QuantParams& qo)
    : rule_(rule), qi_(qi), qo_(qo) {
  validate(qi, "avg_pool.in");
  validate(qo, "avg_pool.out");
  const QuantType full{qo.type.scalar, false};
  full_min_ = full.qmin();
  full_max_ = full.qmax();
  if (rule == AvgPoolRule::tflite) {
    if (!(qi == qo)) {
      throw InputError("avg_pool tflite: input and output quantization must be equal (TFLite assumes it)");
    }
    return;
  }
  if (rule == AvgPoolRule::fixed_point_half_away) {
    throw InputError("avg_pool fixed_point_half_away: a library's rule (XNNPACK's average pooling), not a built-in kernel");
  }
  const char* what = rule == AvgPoolRule::ort_qlinear ? "avg_pool ort_qlinear" : "avg_pool ort_global";
  if (qi.type.scalar != qo.type.scalar || qi.type.bits() != 8) {
    throw InputError(std::string(what) + ": ORT's QLinearAveragePool takes int8 or uint8 input and output of one type");
  }
  CheckF32Scale(what, qi.scale);
  CheckF32Scale(what, qo.scale);
}

int32_t AveragePoolKernel::operator()(std::span<const int32_t> taps) const {
  if (taps.empty() || taps.size() > kMaxWindowTaps) {
    throw InputError("avg_pool: a window needs 1 to 65536 in-bounds taps, got " + std::to_string(taps.size()));
  }
  for (const int32_t q : taps) CheckCode(q, qi_, "avg_pool.tap");
  const int n = static_cast<int>(taps.size());
  switch (rule_) {
    case AvgPoolRule::tflite: {
      int32_t acc = 0;  // <= 2^16 taps of at most 2^15 in magnitude: no int32 overflow
      for (const int32_t q : taps) acc += q;
      acc = acc > 0 ? (acc + n / 2) / n : (acc - n / 2) / n;
      return Clamp(acc, qo_.type.qmin(), qo_.type.qmax());
    }
    case AvgPoolRule::ort_qlinear: {
      float y = 0.0f;  // AveragePool::Initialize, Process (+=), Finalize (/= size)
      for (const int32_t q : taps) y += qi_.scale * static_cast<float>(q - qi_.zero_point);
      y /= static_cast<float>(n);
      const int32_t code = ConvertToInt32(std::nearbyint(y / qo_.scale + static_cast<float>(qo_.zero_point)));
      return Clamp(Clamp(code, full_min_, full_max_), qo_.type.qmin(), qo_.type.qmax());
    }
    case AvgPoolRule::ort_global: {
      // CheckQLinearGlobalAveragePoolScaleAndSize; the multiplier depends on the window's tap count.
      const float scale = qi_.scale / (qo_.scale * static_cast<float>(n));
      if (scale < 0x1p-32f || scale >= 256.0f) {
        throw InputError("avg_pool ort_global: multiplier sx / (so n) = " + format_float32(scale) +
                         " is outside [2^-32, 256) (ORT refuses it)");
      }
      int32_t acc = -qi_.zero_point * n;  // |acc| <= 255 * 2^16
      for (const int32_t q : taps) acc += q;
      float f = static_cast<float>(acc) * scale;
      f = std::min(std::max(f, static_cast<float>(full_min_ - qo_.zero_point)),
                   static_cast<float>(full_max_ - qo_.zero_point));
      return Clamp(ConvertToInt32(f) + qo_.zero_point, qo_.type.qmin(), qo_.type.qmax());
    }
    case AvgPoolRule::fixed_point_half_away: break;  // refused by the constructor
  }
  return 0;
}

int32_t AveragePoolTruncating(std::span<const int32_t> taps) {
  if (taps.empty() || taps.size() > kMaxWindowTaps) {
    throw InputError("avg_pool: a window needs 1 to 65536 in-bounds taps, got " + std::to_string(taps.size()));
  }
  int32_t acc = 0;
  for (const int32_t q : taps) acc += q;
  return acc / static_cast<int32_t>(taps.size());
}

}  // namespace fusediff::fused
