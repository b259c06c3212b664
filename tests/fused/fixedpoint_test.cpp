// Fixed-point primitives: known answers from hand arithmetic, and properties against exact __int128 models.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "fusediff/fused/fixedpoint.h"

namespace fusediff::fused {
namespace {

using i128 = __int128;
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kTwoPow30 = int32_t{1} << 30;

// floor(a / b) for b > 0 in exact arithmetic.
i128 FloorDiv(i128 a, i128 b) {
  i128 q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return q;
}

int32_t Clamp32(i128 v) {
  if (v > kMax) return kMax;
  if (v < kMin) return kMin;
  return static_cast<int32_t>(v);
}

// round(x / 2^e), ties away from zero, exact.
i128 RoundHalfAwayPow2(i128 x, int e) {
  const i128 d = i128{1} << e;
  const i128 mag = x < 0 ? -x : x;
  const i128 q = (2 * mag + d) / (2 * d);  // floor(mag/d + 1/2): ties up in magnitude
  return x < 0 ? -q : q;
}

// An int32 drawn from a mix that reaches the edges and the rounding ties often.
rc::Gen<int32_t> EdgyInt32() {
  return rc::gen::oneOf(rc::gen::arbitrary<int32_t>(), rc::gen::inRange<int32_t>(-300, 301),
                        rc::gen::elementOf(std::vector<int32_t>{kMin, kMin + 1, -1, 0, 1, kMax - 1, kMax, kTwoPow30, -kTwoPow30}),
                        rc::gen::map(rc::gen::inRange(0, 31), [](int e) { return int32_t{1} << e; }));
}

struct Quantized {
  int32_t m;
  int shift;
};
Quantized QM(double real) {
  Quantized q{};
  QuantizeMultiplier(real, &q.m, &q.shift);
  return q;
}
Quantized QMSingle(double real) {
  Quantized q{};
  QuantizeMultiplierSingleRounding(real, &q.m, &q.shift);
  return q;
}

// ---------------------------------------------------------------------------------------------- known answers

TEST(QuantizeMultiplier, QuarterIsTwoPow30WithShiftMinusOne) {
  const Quantized q = QM(0.25);
  EXPECT_EQ(q.m, kTwoPow30);
  EXPECT_EQ(q.shift, -1);
}

TEST(QuantizeMultiplier, ExactPowersOfTwo) {
  for (int e = -31; e <= 20; ++e) {  // 2^e = 0.5 * 2^(e+1)
    const Quantized q = QM(std::ldexp(1.0, e));
    EXPECT_EQ(q.m, kTwoPow30) << "e=" << e;
    EXPECT_EQ(q.shift, e + 1) << "e=" << e;
  }
  // 2^-32 = 0.5 * 2^-31: the last representable shift. 2^-33 would need shift -32: flushed.
  EXPECT_EQ(QM(std::ldexp(1.0, -32)).shift, -31);
  EXPECT_EQ(QM(std::ldexp(1.0, -32)).m, kTwoPow30);
  EXPECT_EQ(QM(std::ldexp(1.0, -33)).m, 0);
  EXPECT_EQ(QM(std::ldexp(1.0, -33)).shift, 0);
}

TEST(QuantizeMultiplier, RoundingThatHitsTwoPow31Renormalizes) {
  // q = 1 - 2^-32: q * 2^31 = 2^31 - 1/2 exactly, a tie, rounded away from zero to 2^31 -> (2^30, shift + 1).
  const Quantized tie = QM(1.0 - std::ldexp(1.0, -32));
  EXPECT_EQ(tie.m, kTwoPow30);
  EXPECT_EQ(tie.shift, 1);
  const Quantized scaled_tie = QM(std::ldexp(1.0 - std::ldexp(1.0, -32), -7));
  EXPECT_EQ(scaled_tie.m, kTwoPow30);
  EXPECT_EQ(scaled_tie.shift, -6);
  // Just below the tie: 2^31 - 1.
  const Quantized below = QM(1.0 - std::ldexp(1.0, -32) - std::ldexp(1.0, -45));
  EXPECT_EQ(below.m, kMax);
  EXPECT_EQ(below.shift, 0);
  // q * 2^31 = 2^30 + 1/2: tie away -> 2^30 + 1; 2^30 + 1/4 -> 2^30.
  EXPECT_EQ(QM(0.5 + std::ldexp(1.0, -32)).m, kTwoPow30 + 1);
  EXPECT_EQ(QM(0.5 + std::ldexp(1.0, -33)).m, kTwoPow30);
}

TEST(QuantizeMultiplier, TinyMultiplierFlushesToZero) {
  EXPECT_EQ(QM(1e-12).m, 0);
  EXPECT_EQ(QM(1e-12).shift, 0);
  EXPECT_EQ(QM(0.0).m, 0);
  EXPECT_EQ(QM(0.0).shift, 0);
}

TEST(QuantizeMultiplier, NonPowerOfTwo) {
  // 0.1 = 0.8 * 2^-3; round(0.8 * 2^31) = 1717986918 (0.8 * 2^31 = 1717986918.4).
  EXPECT_EQ(QM(0.1).m, 1717986918);
  EXPECT_EQ(QM(0.1).shift, -3);
}

TEST(QuantizeMultiplierSingleRounding, LargeMultiplierIsCapped) {
  // 2^29 = 0.5 * 2^30: shift 30 is allowed.
  EXPECT_EQ(QMSingle(std::ldexp(1.0, 29)).m, kTwoPow30);
  EXPECT_EQ(QMSingle(std::ldexp(1.0, 29)).shift, 30);
  // 2^30 and 2^31 need shift 31 and 32: capped to (2^31 - 1, 30). The double-rounding variant keeps them.
  for (int e : {30, 31, 40}) {
    const Quantized single = QMSingle(std::ldexp(1.0, e));
    EXPECT_EQ(single.m, kMax) << e;
    EXPECT_EQ(single.shift, 30) << e;
    const Quantized dbl = QM(std::ldexp(1.0, e));
    EXPECT_EQ(dbl.m, kTwoPow30) << e;
    EXPECT_EQ(dbl.shift, e + 1) << e;
  }
  // Below the cap both variants agree.
  EXPECT_EQ(QMSingle(0.1).m, QM(0.1).m);
  EXPECT_EQ(QMSingle(0.1).shift, QM(0.1).shift);
  EXPECT_EQ(QMSingle(1e-12).m, 0);
}

TEST(SaturatingRoundingDoublingHighMul, KnownAnswers) {
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(kMin, kMin), kMax);  // the one overflow
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(kMin, kMax), -kMax);
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(kMax, kMax), kMax - 1);
  // 5 * 2^30 / 2^31 = 2.5 -> 3 (tie toward +inf); -5 -> -2.5 -> -2.
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(5, kTwoPow30), 3);
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(-5, kTwoPow30), -2);
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(-6, kTwoPow30), -3);
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(0, kMin), 0);
}

TEST(RoundingDivideByPOT, TiesGoAwayFromZeroOnBothSides) {
  EXPECT_EQ(RoundingDivideByPOT(5, 1), 3);    // 2.5
  EXPECT_EQ(RoundingDivideByPOT(-5, 1), -3);  // -2.5
  EXPECT_EQ(RoundingDivideByPOT(3, 1), 2);    // 1.5
  EXPECT_EQ(RoundingDivideByPOT(-3, 1), -2);
  EXPECT_EQ(RoundingDivideByPOT(1, 1), 1);  // 0.5
  EXPECT_EQ(RoundingDivideByPOT(-1, 1), -1);
  EXPECT_EQ(RoundingDivideByPOT(6, 2), 2);  // 1.5
  EXPECT_EQ(RoundingDivideByPOT(-6, 2), -2);
  EXPECT_EQ(RoundingDivideByPOT(5, 2), 1);  // 1.25
  EXPECT_EQ(RoundingDivideByPOT(-5, 2), -1);
  EXPECT_EQ(RoundingDivideByPOT(7, 2), 2);  // 1.75
  EXPECT_EQ(RoundingDivideByPOT(-7, 2), -2);
  EXPECT_EQ(RoundingDivideByPOT(-123, 0), -123);
  EXPECT_EQ(RoundingDivideByPOT(kMin, 31), -1);
  EXPECT_EQ(RoundingDivideByPOT(kMax, 31), 1);
  EXPECT_EQ(RoundingDivideByPOT(kTwoPow30, 31), 1);    // 0.5
  EXPECT_EQ(RoundingDivideByPOT(-kTwoPow30, 31), -1);  // -0.5
  EXPECT_EQ(RoundingDivideByPOT(kTwoPow30 - 1, 31), 0);
}

TEST(MultiplyByQuantizedMultiplier, QuarterDoubleVersusSingleRounding) {
  // conventions.md: M = 0.25 (m = 2^30, shift = -1). x = 5: SRDHM 2.5 -> 3, then 3/2 = 1.5 -> 2 (double);
  // (5 * 2^30 + 2^31) >> 32 = floor(1.75) = 1 (single). x = -6: -3 then -1.5 -> -2; floor(-1) = -1.
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(5, kTwoPow30, -1), 2);
  EXPECT_EQ(MultiplyByQuantizedMultiplierSingleRounding(5, kTwoPow30, -1), 1);
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(-6, kTwoPow30, -1), -2);
  EXPECT_EQ(MultiplyByQuantizedMultiplierSingleRounding(-6, kTwoPow30, -1), -1);
}

TEST(MultiplyByQuantizedMultiplier, LeftShiftSaturatesInDoubleRounding) {
  // M = 2 (m = 2^30, shift 2): x = 2^30 -> x * 4 saturates to INT32_MAX, then * 0.5 -> 2^30 (tie toward +inf).
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(kTwoPow30, kTwoPow30, 2), kTwoPow30);
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(-kTwoPow30, kTwoPow30, 2), -kTwoPow30);
  // Shifts of 32 and more saturate every non-zero x, and keep 0.
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(1, kTwoPow30, 40), kTwoPow30);
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(-1, kTwoPow30, 40), -kTwoPow30);
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(0, kTwoPow30, 40), 0);
  // In range: x = 3, M = 2 -> 6.
  EXPECT_EQ(MultiplyByQuantizedMultiplierDoubleRounding(3, kTwoPow30, 2), 6);
}

TEST(MultiplyByQuantizedMultiplier, SingleRoundingSaturatesToInt32) {
  // M just under 2^30 (m = 2^31 - 1, shift 30): any |x| >= 4 leaves int32.
  EXPECT_EQ(MultiplyByQuantizedMultiplierSingleRounding(1000, kMax, 30), kMax);
  EXPECT_EQ(MultiplyByQuantizedMultiplierSingleRounding(-1000, kMax, 30), kMin);
  EXPECT_EQ(MultiplyByQuantizedMultiplierSingleRounding(1, kMax, 30), 1073741824);  // (2^31-1)/2 -> tie up
}

// ------------------------------------------------------------------------------------------------- properties

RC_GTEST_PROP(SaturatingRoundingDoublingHighMulProp, EqualsFloorOfNudgedProduct, ()) {
  const int32_t a = *EdgyInt32();
  const int32_t b = *EdgyInt32();
  const i128 product = i128{a} * b;
  const bool overflow = a == kMin && b == kMin;
  const bool tie = (product % (i128{1} << 31)) == (i128{1} << 30) || (product % (i128{1} << 31)) == -(i128{1} << 30);
  RC_CLASSIFY(overflow, "overflow");
  RC_CLASSIFY(tie, "tie");
  RC_CLASSIFY(product < 0, "negative");
  const int32_t got = SaturatingRoundingDoublingHighMul(a, b);
  if (overflow) {
    RC_ASSERT(got == kMax);
  } else {
    RC_ASSERT(i128{got} == FloorDiv(product + (i128{1} << 30), i128{1} << 31));
  }
}

RC_GTEST_PROP(RoundingDivideByPOTProp, EqualsRoundHalfAwayOfExactQuotient, ()) {
  const int32_t x = *EdgyInt32();
  const int e = *rc::gen::inRange(0, 32);
  const i128 divisor = i128{1} << e;
  const i128 rem = (i128{x} < 0 ? -i128{x} : i128{x}) % divisor;
  RC_CLASSIFY(e > 0 && 2 * rem == divisor, "tie");
  RC_CLASSIFY(x < 0, "negative");
  RC_ASSERT(i128{RoundingDivideByPOT(x, e)} == RoundHalfAwayPow2(x, e));
}

RC_GTEST_PROP(MultiplyByQuantizedMultiplierProp, SingleRoundingEqualsOneFloor, ()) {
  const int32_t x = *EdgyInt32();
  const int32_t m = *rc::gen::oneOf(rc::gen::inRange<int32_t>(kTwoPow30, kMax), rc::gen::just(kMax),
                                    rc::gen::just(kTwoPow30), rc::gen::inRange<int32_t>(0, 1000));
  const int shift = *rc::gen::inRange(-31, 31);
  const int t = 31 - shift;
  const i128 exact = FloorDiv(i128{x} * m + (i128{1} << (t - 1)), i128{1} << t);
  RC_CLASSIFY(exact > kMax || exact < kMin, "saturated");
  RC_CLASSIFY(((i128{x} * m) % (i128{1} << t)) == (i128{1} << (t - 1)), "tie");
  RC_ASSERT(i128{MultiplyByQuantizedMultiplierSingleRounding(x, m, shift)} == i128{Clamp32(exact)});
}

RC_GTEST_PROP(MultiplyByQuantizedMultiplierProp, SingleRoundingTiesGoTowardPlusInfinity, ()) {
  // m = 2^30, t = 31 - shift: x * m / 2^t = x / 2^e with e = t - 30. x = odd * 2^(e-1) makes an exact tie
  // odd / 2, which one floor((. + 1/2)) sends to (odd + 1) / 2 whatever the sign.
  const int e = *rc::gen::inRange(1, 32);
  // |odd| <= 2^(32-e) - 1 keeps |x| < 2^31: k in [-2^(31-e), 2^(31-e)).
  const int64_t half_range = int64_t{1} << (31 - e);
  const int64_t k = *rc::gen::inRange<int64_t>(-half_range, half_range);
  const int64_t odd = 2 * k + 1;
  const int32_t x = static_cast<int32_t>(int64_t{odd} << (e - 1));
  RC_CLASSIFY(x < 0, "negative tie");
  const int shift = 31 - (e + 30);
  RC_ASSERT(MultiplyByQuantizedMultiplierSingleRounding(x, kTwoPow30, shift) == static_cast<int32_t>(FloorDiv(odd + 1, 2)));
  // The double-rounding build sends the same ties away from zero when e >= 2 (SRDHM is exact there).
  if (e >= 2) {
    RC_ASSERT(MultiplyByQuantizedMultiplierDoubleRounding(x, kTwoPow30, shift) ==
              static_cast<int32_t>(RoundHalfAwayPow2(odd, 1)));
  }
}

RC_GTEST_PROP(MultiplyByQuantizedMultiplierProp, DoubleRoundingEqualsTwoExactRoundings, ()) {
  const int32_t x = *EdgyInt32();
  const int32_t m = *rc::gen::oneOf(rc::gen::inRange<int32_t>(kTwoPow30, kMax), rc::gen::just(kTwoPow30));
  const int shift = *rc::gen::oneOf(rc::gen::inRange(-31, 8), rc::gen::inRange(1, 8));
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  const int32_t x_shifted = Clamp32(i128{x} * (i128{1} << left));
  RC_CLASSIFY(x_shifted != i128{x} * (i128{1} << left), "left shift saturated");
  const i128 high = FloorDiv(i128{x_shifted} * m + (i128{1} << 30), i128{1} << 31);  // |x*m| < 2^62, no SRDHM overflow
  RC_ASSERT(i128{MultiplyByQuantizedMultiplierDoubleRounding(x, m, shift)} == RoundHalfAwayPow2(high, right));
}

RC_GTEST_PROP(QuantizeMultiplierProp, ReconstructsWithinHalfAnUlpOfQ31, ()) {
  // M = m * 2^(shift - 31) with |M - m 2^(shift-31)| <= 2^(shift - 32) and m in [2^30, 2^31).
  const double mantissa = *rc::gen::map(rc::gen::inRange<int64_t>(int64_t{1} << 52, int64_t{1} << 53),
                                        [](int64_t v) { return std::ldexp(static_cast<double>(v), -53); });
  const int exponent = *rc::gen::inRange(-30, 20);
  const double real = std::ldexp(mantissa, exponent);
  const Quantized q = QM(real);
  RC_ASSERT(q.m >= kTwoPow30);
  const double reconstructed = std::ldexp(static_cast<double>(q.m), q.shift - 31);
  RC_ASSERT(std::fabs(reconstructed - real) <= std::ldexp(1.0, q.shift - 32));
}

}  // namespace
}  // namespace fusediff::fused
