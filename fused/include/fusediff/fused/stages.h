#pragma once
// Quantized add and average-pool kernels as production code computes them, one class per stage, constants
// prepared once in the constructor (TFLite's Prepare, MLAS's setup): gemmlowp fixed point for TFLite
// (fixedpoint.h), native binary32 arithmetic for ONNX Runtime's MLAS (this target builds with
// -ffp-contract=off; the FMA rule calls std::fma), an integer kernel for the ONNX specification's exact rule.
// The rules, their sources and their preconditions are those of model/pattern.h and reference/stages.h; a
// quantization a rule refuses throws InputError from the constructor, a code outside its type from operator(),
// and so does an ort_global window whose tap count puts the multiplier sx / (so n) outside ORT's range. One
// precondition is the kernel's own: onnx_spec's integer kernel needs the three scales within a factor 2^80 of
// each other (the reference has no such limit).
#include <cstdint>
#include <span>

#include "fusediff/model/pattern.h"
#include "fusediff/model/quant.h"

namespace fusediff::fused {

// s = a + b, one element (b: the residual, same shape).
class QuantizedAddKernel {
 public:
  QuantizedAddKernel(AddRule rule, const QuantParams& qa, const QuantParams& qb, const QuantParams& qo);
  int32_t operator()(int32_t a, int32_t b) const;

 private:
  int32_t Tflite(int32_t a, int32_t b) const;
  int32_t OnnxSpec(int32_t a, int32_t b) const;
  int32_t MlasSse2(int32_t a, int32_t b) const;
  int32_t MlasAvx2Fma(int32_t a, int32_t b) const;
  int32_t MlasRaw(int32_t a, int32_t b) const;
  int32_t Binary32Unfused(int32_t a, int32_t b) const;

  AddRule rule_;
  bool raw_ = false;                   // ORT rules on int16: MlasQLinearAdd<int16_t> runs the raw helper
  QuantParams qa_, qb_, qo_;
  int32_t full_min_ = 0, full_max_ = 0;  // the output scalar type's full range (MLAS's packs)
  // tflite (TFLite OpData)
  int32_t left_shift_ = 20;
  int32_t input1_multiplier_ = 0, input2_multiplier_ = 0, output_multiplier_ = 0;
  int input1_shift_ = 0, input2_shift_ = 0, output_shift_ = 0;
  // onnx_spec: v = (A (a - za) + B (b - zb)) / D with integer A, B, D (common power-of-two scaling)
  __int128 spec_a_ = 0, spec_b_ = 0, spec_d_ = 1;
  // ort_mlas, ort_mlas_fma
  float ratio_a_ = 0, ratio_b_ = 0, fixed_part_ = 0;
  // ort_raw
  float raw_min_ = 0, raw_max_ = 0;
  float inverse_output_scale_ = 0;     // binary32_unfused: fl32(1 / so)
};

// One window's average; `taps` are its in-bounds codes in row-major window order (n = taps.size() >= 1).
class AveragePoolKernel {
 public:
  AveragePoolKernel(AvgPoolRule rule, const QuantParams& qi, const QuantParams& qo);
  int32_t operator()(std::span<const int32_t> taps) const;

 private:
  AvgPoolRule rule_;
  QuantParams qi_, qo_;
  int32_t full_min_ = 0, full_max_ = 0;
};

// The injected bug "average pool truncating instead of rounding": TFLite's raw-code average with C's truncating
// sum / n in place of (sum +- n/2) / n. No clamp is needed: the mean of in-range codes is in range.
int32_t AveragePoolTruncating(std::span<const int32_t> taps);

// QuantizeLinear: nearbyint(y / s_out) half to even, + z_out, saturated. The quotient in binary64 decides every
// half-way case right: an exact quotient of two binary32 values that is not a tie lies at least 2^-25 from one, far
// beyond binary64's error at |y / s_out| < 2^20 (larger quotients saturate anyway). A NaN (a one-pass variance below
// -eps, a mutant's 0 x inf) gives z_out, as the model declares.
int32_t QuantizeLinear(float y, const QuantParams& out);

}  // namespace fusediff::fused
