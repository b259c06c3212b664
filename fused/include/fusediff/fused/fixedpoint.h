#pragma once
// Fixed-point requantization primitives as gemmlowp (fixedpoint.h) and TFLite (common.h,
// quantization_util.cc) define them. Each states its rounding, saturation and overflow behaviour.
#include <cstdint>

namespace fusediff::fused {

// M (> 0, finite) -> Q31 multiplier m in [2^30, 2^31) (or 0) and shift with M ~= m * 2^(shift - 31).
// frexp(M) = q * 2^shift, q in [0.5, 1); m = round_half_away(q * 2^31); m == 2^31 -> m = 2^30, ++shift;
// shift < -31 -> m = 0, shift = 0. (TFLite QuantizeMultiplier, default double-rounding build.)
void QuantizeMultiplier(double real_multiplier, int32_t* quantized_multiplier, int* shift);
// Same, then shift > 30 -> shift = 30, m = 2^31 - 1 (TFLite with TFLITE_SINGLE_ROUNDING).
void QuantizeMultiplierSingleRounding(double real_multiplier, int32_t* quantized_multiplier, int* shift);

// round(a*b / 2^31) with ties toward +infinity (nudge 2^30, or 1 - 2^30 for a negative product, then C
// truncation). Saturates the single overflowing case a == b == INT32_MIN to INT32_MAX.
int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b);

// round(x / 2^exponent), ties away from zero; exponent in [0, 31]. Never overflows.
int32_t RoundingDivideByPOT(int32_t x, int exponent);
// The same rounding on an int64 (the product of a pwl segment's int32 slope and a code distance);
// exponent in [0, 62]. Never overflows: the result magnitude never exceeds |x|.
int64_t RoundingDivideByPOT64(int64_t x, int exponent);

// TFLite default (double rounding): RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x * 2^left, m), right)
// with left = max(shift, 0), right = max(-shift, 0). x * 2^left saturates to int32 (TFLite's plain multiply
// would overflow there).
int32_t MultiplyByQuantizedMultiplierDoubleRounding(int32_t x, int32_t quantized_multiplier, int shift);

// TFLITE_SINGLE_ROUNDING: (x * m + 2^(t-1)) >> t in int64 with t = 31 - shift (shift in [-31, 30]): one
// rounding, ties toward +infinity. The result saturates to int32.
int32_t MultiplyByQuantizedMultiplierSingleRounding(int32_t x, int32_t quantized_multiplier, int shift);

// gemmlowp SaturatingRoundingMultiplyByPOT<exponent> with a run-time exponent in [-31, 31]: exponent > 0 shifts
// left, saturating to int32 where |x| exceeds 2^(31 - exponent) - 1; exponent < 0 is RoundingDivideByPOT(x,
// -exponent) (ties away from zero); 0 returns x.
int32_t SaturatingRoundingMultiplyByPOT(int32_t x, int exponent);

// TFLite GetInvSqrtQuantizedMultiplierExp (common.h): 1/sqrt(input) as a Q31 multiplier and a shift, by five
// Newton-Raphson steps in gemmlowp FixedPoint<int32, 3> from x = 1 on input normalized by powers of 4 into
// [2^27, 2^29). input <= 1 gives (2^31 - 1, 0). The shift is multiplied by reverse_shift (TFLite passes -1: a
// right shift comes back negative). input must be >= 0.
void GetInvSqrtQuantizedMultiplierExp(int32_t input, int reverse_shift, int32_t* output_inv_sqrt, int* output_shift);

}  // namespace fusediff::fused
