#pragma once
// Float boundaries (binary32, binary16, bfloat16) and the BatchNorm stage's declared fold (issue 13). std only.
//
// A float boundary is where a value is stored in a narrower float format. Every conversion is from binary32 (the
// value as computed) to the format, by its declared rules (docs/conventions.md, "Float boundaries"):
//   rounding    nearest_even (IEEE default) or toward_zero (bf16 by truncation, where a fused path declares it);
//   overflow    infinity: a finite value beyond the format's range becomes +-inf (binary16: |x| >= 65520;
//               65504 < |x| < 65520 rounds down to 65504; under toward_zero everything beyond 65504 truncates to it);
//               saturate: +-the largest finite value (65504; bf16 0x7F7F) instead of infinity;
//   subnormals  keep (binary16 subnormals reach 2^-24; bf16 has binary32's) or flush_inputs: binary32 subnormal
//               inputs become +-0 first (oneDNN's scalar bf16/f16 conversions, src/common/bfloat16.cpp, float16.hpp);
//   nan         quiet_payload: sign kept, the payload's top bits kept (truncated), the quiet bit set: IEEE, F16C's
//               vcvtps2ph and oneDNN's bf16 (high half | 0x0040);
//               canonical: sign kept, the canonical quiet NaN (f16 0x7E00, bf16 0x7FC0): the FP16 library / c10::Half;
//               canonical_positive: 0x7E00 / 0x7FC0, sign dropped: PyTorch's c10::BFloat16 round_to_nearest_even.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/quant.h"

namespace fusediff {

enum class FloatFormat { f32, f16, bf16 };
enum class FloatRounding { nearest_even, toward_zero };
enum class FloatOverflow { infinity, saturate };
enum class SubnormalInputs { keep, flush_inputs };
enum class NanRule { quiet_payload, canonical, canonical_positive };

struct FloatBoundary {
  FloatFormat format = FloatFormat::f32;
  FloatRounding rounding = FloatRounding::nearest_even;
  FloatOverflow overflow = FloatOverflow::infinity;
  SubnormalInputs subnormals = SubnormalInputs::keep;
  NanRule nan = NanRule::quiet_payload;
  friend bool operator==(const FloatBoundary&, const FloatBoundary&) = default;
};

// Round to nearest even, overflow to infinity, binary32 subnormal inputs flushed to +-0, NaN quiet with its payload
// (bf16: high half | 0x0040): oneDNN 2.x's declared conversions (src/common/bfloat16.cpp, float16.hpp).
FloatBoundary flush_subnormals_float_boundary(FloatFormat format);
// PyTorch's c10 conversions: nearest even, infinity, subnormals kept, NaN canonical (c10::Half keeps the sign,
// c10::BFloat16 drops it: 0x7FC0).
FloatBoundary pytorch_float_boundary(FloatFormat format);

std::string_view to_string(FloatFormat f);       // "f32", "f16", "bf16"
std::string_view to_string(FloatRounding r);     // "rne", "rtz"
std::string_view to_string(FloatOverflow o);     // "inf", "saturate"
std::string_view to_string(SubnormalInputs s);   // "keep_subnormals", "flush_subnormals"
std::string_view to_string(NanRule n);           // "nan_payload", "nan_canonical", "nan_canonical_positive"
FloatFormat parse_float_format(std::string_view text, std::string_view field);
// "FORMAT[:rne|rtz][:inf|saturate][:keep_subnormals|flush_subnormals][:nan_payload|nan_canonical|
// nan_canonical_positive]" in any order after the format; a preset's name after it ("pytorch", or one a backend
// registers) selects that convention.
FloatBoundary parse_float_boundary(std::string_view text, std::string_view field);
// A named convention for every format (parse_float_boundary); a name already taken is a programming error
// (std::logic_error).
using FloatBoundaryPreset = FloatBoundary (*)(FloatFormat);
void RegisterFloatBoundaryPreset(std::string name, FloatBoundaryPreset preset);
std::string format_float_boundary(const FloatBoundary& b);  // every field: "f16:rne:inf:keep_subnormals:nan_payload"

// ---- BatchNorm: y = gamma (x - mean) / sqrt(var + eps) + beta per output channel, and how it is folded.
//
// Fold precision: every fold step in exact real arithmetic, or in binary32 / binary16 / bfloat16 with one rounding
// per step (each step computed exactly, then rounded nearest even into the precision, overflow by `overflow`; a step
// in f16 or bf16 is what "computed in float, rounded back after every step" gives: binary32 carries at least 2p + 2
// bits of either, so that double rounding is innocuous). Under `rounding` toward_zero a step is what a truncating
// kernel computes: the binary32 result (nearest even), truncated to the format.
// The fold's inputs enter the precision first: w = P(q_w s_w) (the conv's dequantized weights, exact in binary32),
// b = P(fl32(fl32(b_int) fl32(s_x s_w))) (the conv's dequantized bias as a float graph forms it; exact precision:
// b_int s_x s_w), gamma, beta, mean, var, eps = P(binary32 value).
// Fold formula, op by op (sqrt and the divisions one rounding each; "rsqrt(x)" is 1 / sqrt(x), two roundings, as
// PyTorch's CPU kernel computes it):
//   pytorch (torch/nn/utils/fusion.py fuse_conv_bn_weights): r = 1 / sqrt(var + eps); w' = w (gamma r);
//            b' = ((b - mean) r) gamma + beta;
//   ort     (onnxruntime/core/optimizer/conv_bn_fusion.cc): k = gamma / sqrt(var + eps); w' = w k;
//            b' = (b - mean) k + beta;
//   tflite  (compiler/mlir/lite/transforms/prepare_tf.cc FusedBatchNormV3Pat, then the Mul folded into the conv):
//            m = gamma (1 / sqrt(var + eps)); w' = w m; b' = b m + (beta - mean m).
// In exact precision every formula is the same real number.
// Weight quantization of the folded weights: m = max |w'| over the output channel (per_channel) or the whole tensor
// (per_tensor); scale s = fl32(m / 127) (one binary32 rounding of the exact quotient; 1 when m = 0);
// codes clamp(round(w' / s), -127, 127) with the exact quotient and the declared `weight_rounding`.
// Bias: B = round(b' / (s_x s[c])) (exact quotient, `weight_rounding`), in int32: beyond it saturate (to
// +-(2^31 - 1 - max |sum (x - zx) w|), so that the int32 conv cannot overflow either), or reject (the fused path
// refuses the draw, naming the channel).
// A fold that meets a non-finite value (an f16 step overflowing under `infinity`) is refused the same way.
enum class FoldPrecision { exact, f32, f16, bf16 };
enum class FoldFormula { pytorch, ort, tflite };
enum class WeightQuant { per_tensor, per_channel };
enum class BiasOverflow { saturate, reject };

struct BatchNormFold {
  FoldPrecision precision = FoldPrecision::f32;
  FoldFormula formula = FoldFormula::pytorch;
  WeightQuant weight_quant = WeightQuant::per_channel;
  RoundingMode weight_rounding = RoundingMode::half_to_even;
  BiasOverflow bias_overflow = BiasOverflow::saturate;
  FloatRounding rounding = FloatRounding::nearest_even;  // of every step in f16 / bf16 (binary32 is always RNE)
  FloatOverflow overflow = FloatOverflow::infinity;      // of every step in f16 / bf16
  friend bool operator==(const BatchNormFold&, const BatchNormFold&) = default;
};

// What the generators aim the BatchNorm parameters at (docs/batchnorm.md):
//   benign:        gamma in [0.5, 2], var in [0.1, 1], |mean| within the conv's range;
//   tiny_variance: var = 10^U(-8, -2) (below eps = 1e-5 the denominator is eps-dominated), gamma in [0.5, 2];
//   large_gamma:   gamma = 10^U(1, 3), var = 10^U(-4, -2);
//   large_mean:    |mean| = 10^U(1, 3) times the conv's range, the conv's bias carrying it (its accumulators at their
//                  extremes), gamma and var benign.
enum class BnRegime { benign, tiny_variance, large_gamma, large_mean };

// What the reference runs for a folded BatchNorm case (the three comparisons of docs/batchnorm.md):
//   declared_fold: (a) the declared fold op by op, its quantization, the int conv: same convention, a verdict;
//   exact_fold:    (b) the fold in exact arithmetic, the same weight quantization: cross_convention;
//   graph:         (c) the unfolded graph, BatchNorm applied exactly to the conv's real output: cross_convention.
enum class BnReference { declared_fold, exact_fold, graph };

std::string_view to_string(FoldPrecision p);
std::string_view to_string(FoldFormula f);
std::string_view to_string(WeightQuant q);
std::string_view to_string(BiasOverflow o);
std::string_view to_string(BnRegime r);
std::string_view to_string(BnReference r);
FoldPrecision parse_fold_precision(std::string_view text, std::string_view field);
FoldFormula parse_fold_formula(std::string_view text, std::string_view field);
WeightQuant parse_weight_quant(std::string_view text, std::string_view field);
BiasOverflow parse_bias_overflow(std::string_view text, std::string_view field);
BnRegime parse_bn_regime(std::string_view text, std::string_view field);
BnReference parse_bn_reference(std::string_view text, std::string_view field);

// The FloatBoundary a fold step rounds by (format f32 for exact, whose steps never round).
FloatBoundary fold_step_boundary(const BatchNormFold& fold);

// "f16/ort/per_channel/half_to_even/saturate/rne/inf": every field, in this order; parse takes the same text.
std::string format_batchnorm_fold(const BatchNormFold& fold);
BatchNormFold parse_batchnorm_fold(std::string_view text, std::string_view field);

// One draw's BatchNorm parameters, one entry per output channel (binary32, as a graph stores them).
struct BatchNormParams {
  std::vector<float> gamma, beta, mean, var;
  friend bool operator==(const BatchNormParams&, const BatchNormParams&) = default;
};

// Throws InputError when the parameters do not have `channels` entries each, are not finite, or var + eps <= 0
// (eps > 0 and var >= 0 required).
void validate(const BatchNormParams& p, size_t channels, float eps, std::string_view field);

}  // namespace fusediff
