// Fixed-point requantization primitives, restated from the public sources below (same arithmetic, own code):
//   google/gemmlowp            fixedpoint/fixedpoint.h        SaturatingRoundingDoublingHighMul, RoundingDivideByPOT
//   tensorflow/tflite-micro    tensorflow/lite/kernels/internal/quantization_util.cc   QuantizeMultiplier
//                              (2024 revision, both TFLITE_SINGLE_ROUNDING branches)
//   tensorflow/tflite-micro    tensorflow/lite/kernels/internal/common.cc              MultiplyByQuantizedMultiplier
//                              (int32 overload, both TFLITE_SINGLE_ROUNDING branches)
//   tensorflow/tensorflow @ ed031a6b8cc49c55745a38c8a8d0b9affe935a7b
//                              tensorflow/lite/kernels/internal/common.h  GetInvSqrtQuantizedMultiplierExp
// Deviations, both deliberate and documented in fixedpoint.h: the double-rounding left shift saturates instead
// of overflowing, and the single-rounding result saturates to int32 instead of being DCHECKed.
#include "fusediff/fused/fixedpoint.h"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fusediff::fused {
namespace {

constexpr int64_t kTwoPow31 = int64_t{1} << 31;
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();

int32_t SaturateToInt32(int64_t v) {
  if (v > kInt32Max) return kInt32Max;
  if (v < kInt32Min) return kInt32Min;
  return static_cast<int32_t>(v);
}

// The part both QuantizeMultiplier variants share. real_multiplier = q * 2^shift with q in [0.5, 1) (frexp,
// exact); multiplier_q31 = round_half_away(q * 2^31). q * 2^31 is exact in double (a power-of-two scaling), so
// std::round is the only rounding: ties away from zero, as TfLiteRound. The result lies in [2^30, 2^31]; the
// upper end is renormalized to 2^30 with shift + 1. Shifts below -31 flush to (0, 0).
void QuantizeMultiplierCommon(double real_multiplier, int64_t* multiplier_q31, int* shift) {
  if (real_multiplier == 0.0) {
    *multiplier_q31 = 0;
    *shift = 0;
    return;
  }
  const double significand = std::frexp(real_multiplier, shift);  // |significand| in [0.5, 1)
  int64_t m = static_cast<int64_t>(std::round(significand * static_cast<double>(kTwoPow31)));
  assert(m <= kTwoPow31);
  if (m == kTwoPow31) {  // significand rounded up to 1.0: renormalize
    m /= 2;
    ++*shift;
  }
  if (*shift < -31) {  // every bit would be shifted out: flush to zero as TFLite does
    *shift = 0;
    m = 0;
  }
  *multiplier_q31 = m;
}

}  // namespace

void QuantizeMultiplier(double real_multiplier, int32_t* quantized_multiplier, int* shift) {
  int64_t multiplier_q31 = 0;
  QuantizeMultiplierCommon(real_multiplier, &multiplier_q31, shift);
  *quantized_multiplier = static_cast<int32_t>(multiplier_q31);  // <= 2^31 - 1 after renormalization
}

void QuantizeMultiplierSingleRounding(double real_multiplier, int32_t* quantized_multiplier, int* shift) {
  int64_t multiplier_q31 = 0;
  QuantizeMultiplierCommon(real_multiplier, &multiplier_q31, shift);
  // The single-rounding multiply needs t = 31 - shift >= 1: cap the shift at 30 and saturate the multiplier
  // (M >= 2^30 is clamped to (2^31 - 1) * 2^-1, i.e. just under 2^30).
  if (*shift > 30) {
    *shift = 30;
    multiplier_q31 = kTwoPow31 - 1;
  }
  *quantized_multiplier = static_cast<int32_t>(multiplier_q31);
}

// a*b is exact in int64 (|a*b| <= 2^62). The nudge makes C's truncating division round to nearest with ties
// toward +infinity: for a*b >= 0, floor((a*b + 2^30) / 2^31); for a*b < 0, trunc((a*b + 1 - 2^30) / 2^31) which
// equals floor((a*b + 2^30) / 2^31) as well. |a*b + nudge| < 2^63, so the sum cannot overflow. The only result
// outside int32 is a == b == INT32_MIN (2^62 / 2^31 = 2^31), saturated to INT32_MAX.
int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b) {
  if (a == kInt32Min && b == kInt32Min) return kInt32Max;
  const int64_t product = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int64_t nudge = product >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((product + nudge) / kTwoPow31);
}

// x >> exponent is floor(x / 2^exponent) (arithmetic shift). The discarded low bits `remainder` are compared
// against a threshold of half the divisor, minus one ulp for negative x: a tie rounds up in magnitude on both
// sides, i.e. away from zero. The mask is built in int64 so exponent 31 is defined. No overflow: the result
// magnitude never exceeds |x|.
int32_t RoundingDivideByPOT(int32_t x, int exponent) {
  assert(exponent >= 0 && exponent <= 31);
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// As RoundingDivideByPOT, one width up. exponent <= 62 keeps the mask 2^exponent - 1 representable.
int64_t RoundingDivideByPOT64(int64_t x, int exponent) {
  assert(exponent >= 0 && exponent <= 62);
  const int64_t mask = (int64_t{1} << exponent) - 1;
  const int64_t remainder = x & mask;
  const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// x * 2^left_shift is formed in int64 (|x| * 2^31 < 2^62) and saturated to int32 where TFLite's int32 multiply
// would overflow. Two roundings follow: SRDHM (ties toward +infinity) then RoundingDivideByPOT (ties away from
// zero).
int32_t MultiplyByQuantizedMultiplierDoubleRounding(int32_t x, int32_t quantized_multiplier, int shift) {
  assert(shift >= -31);  // QuantizeMultiplier never yields less (it flushes to m = 0, shift = 0)
  const int left_shift = shift > 0 ? shift : 0;
  const int right_shift = shift > 0 ? 0 : -shift;
  // A left shift of 32 or more saturates every non-zero x (|x| * 2^32 > INT32_MAX); below that the int64
  // product is exact.
  const int32_t x_shifted = left_shift >= 32 ? (x > 0 ? kInt32Max : (x < 0 ? kInt32Min : 0))
                                             : SaturateToInt32(static_cast<int64_t>(x) * (int64_t{1} << left_shift));
  return RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x_shifted, quantized_multiplier), right_shift);
}

// t = 31 - shift in [1, 62]. |x * m| < 2^62 and the rounding term 2^(t-1) <= 2^61, so the int64 sum cannot
// overflow. >> on a negative int64 is an arithmetic shift (C++20), i.e. floor: one rounding, ties toward
// +infinity. With shift up to 30 the quotient can exceed int32 (|x| * m * 2^-1): saturated.
int32_t MultiplyByQuantizedMultiplierSingleRounding(int32_t x, int32_t quantized_multiplier, int shift) {
  assert(quantized_multiplier >= 0);
  assert(shift >= -31 && shift <= 30);
  const int total_shift = 31 - shift;
  const int64_t round = int64_t{1} << (total_shift - 1);
  const int64_t scaled = static_cast<int64_t>(x) * static_cast<int64_t>(quantized_multiplier) + round;
  return SaturateToInt32(scaled >> total_shift);
}

// The saturation thresholds are gemmlowp's: x > 2^(31-e) - 1 gives INT32_MAX, x < -(2^(31-e) - 1) gives INT32_MIN
// (x = -2^(31-e) shifts to INT32_MIN exactly, so that case agrees either way). Below them x << e cannot overflow.
int32_t SaturatingRoundingMultiplyByPOT(int32_t x, int exponent) {
  assert(exponent >= -31 && exponent <= 31);
  if (exponent == 0) return x;
  if (exponent < 0) return RoundingDivideByPOT(x, -exponent);
  const int32_t threshold = static_cast<int32_t>((int64_t{1} << (31 - exponent)) - 1);
  if (x > threshold) return kInt32Max;
  if (x < -threshold) return kInt32Min;
  return static_cast<int32_t>(static_cast<uint32_t>(x) << exponent);
}

namespace {
// gemmlowp FixedPoint<int32, I> products: FixedPoint<I1> * FixedPoint<I2> is FixedPoint<I1 + I2> with raw
// SRDHM(a, b); Rescale<I_dst> of a FixedPoint<I_src> is SaturatingRoundingMultiplyByPOT<I_src - I_dst>.
constexpr int32_t kF3One = int32_t{1} << 28;
constexpr int32_t kF3ThreeHalves = (int32_t{1} << 28) + (int32_t{1} << 27);
constexpr int32_t kF0HalfSqrt2 = 1518500250;  // sqrt(2) / 2 in Q0.31
}  // namespace

// Every product below is of positive F3 values (x rises from 1 toward 1/sqrt(v) <= 2 from below, so x^3 < 8), so
// the F6 difference 3/2 x - (v/2) x^3 stays inside int32, as gemmlowp's plain int32 subtraction needs.
void GetInvSqrtQuantizedMultiplierExp(int32_t input, int reverse_shift, int32_t* output_inv_sqrt, int* output_shift) {
  assert(input >= 0);
  if (input <= 1) {  // TFLite answers 1 (and 0, an invalid input) with the largest multiplier and no shift
    *output_inv_sqrt = kInt32Max;
    *output_shift = 0;
    return;
  }
  *output_shift = 11;
  while (input >= (int32_t{1} << 29)) {
    input /= 4;
    ++*output_shift;
  }
  const unsigned leading_zeros = static_cast<unsigned>(__builtin_clz(static_cast<uint32_t>(input)));
  const unsigned left_shift_bit_pairs = (leading_zeros - 1) / 2 - 1;
  *output_shift -= static_cast<int>(left_shift_bit_pairs);
  input <<= 2 * left_shift_bit_pairs;
  assert(input >= (int32_t{1} << 27) && input < (int32_t{1} << 29));
  const int32_t half_input = SaturatingRoundingMultiplyByPOT(input >> 1, -1);  // F3: v / 2
  int32_t x = kF3One;
  for (int i = 0; i < 5; ++i) {
    const int32_t x_squared = SaturatingRoundingDoublingHighMul(x, x);                                  // F6
    const int32_t x3 = SaturatingRoundingMultiplyByPOT(SaturatingRoundingDoublingHighMul(x_squared, x), 6);  // F9 -> F3
    const int32_t difference =
        SaturatingRoundingDoublingHighMul(kF3ThreeHalves, x) - SaturatingRoundingDoublingHighMul(half_input, x3);  // F6
    x = SaturatingRoundingMultiplyByPOT(difference, 3);  // F6 -> F3
  }
  x = SaturatingRoundingDoublingHighMul(x, kF0HalfSqrt2);
  if (*output_shift < 0) {
    x <<= -*output_shift;  // x < 2^29 and the shift is at most 2 here
    *output_shift = 0;
  }
  *output_inv_sqrt = x;
  *output_shift *= reverse_shift;
}

}  // namespace fusediff::fused
