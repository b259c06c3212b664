// Requantizer: hand-worked ties for every variant, and properties against independent re-derivations.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"
#include "test_util.h"

namespace fusediff::reference {
namespace {

using testing::cpp_int;
using testing::cpp_rational;

Convention make_convention(RequantVariant v, QuantType type, float su, int32_t zu,
                           RoundingMode exact_mode = RoundingMode::half_away_from_zero) {
  Convention c;
  c.requant = v;
  c.intermediate.q = QuantParams{type, su, zu};
  c.intermediate.rounding = v == RequantVariant::exact ? exact_mode : *fixed_rounding(v);
  c.output.q = QuantParams{QuantType{ScalarType::int8, false}, 1.0f / 256, -128};
  c.activation = make_activation(ActivationKind::relu);
  return c;
}

const QuantType kInt8{ScalarType::int8, false};
const QuantType kInt8Narrow{ScalarType::int8, true};
const QuantType kUint8{ScalarType::uint8, false};
const QuantType kInt16{ScalarType::int16, false};

int32_t requant(RequantVariant v, float sx, float sw, float su, int64_t acc, QuantType type = kInt8, int32_t zu = 0,
                RoundingMode mode = RoundingMode::half_away_from_zero) {
  return Requantizer(make_convention(v, type, su, zu, mode), sx, sw)(acc).u;
}

// ---- Hand-worked ties. M = sx*sw/su = 0.5*0.5/1 = 0.25: QuantizeMultiplier gives q = 0.5, e = -1, m = 2^30.
//   acc = 5: exact 1.25 -> 1.
//     double: h = floor((5*2^30 + 2^30)/2^31) = 3 (2.5 rounds up), then RoundingDivideByPOT(3, 1) = 1.5 -> 2.
//     single: floor((5*2^30 + 2^31)/2^32) = floor(7/4) = 1.
//   acc = -6: exact -1.5 -> -2 (half away).
//     double: h = floor((-6*2^30 + 2^30)/2^31) = floor(-2.5) = -3, then -1.5 -> -2 (half away).
//     single: floor((-6*2^30 + 2^31)/2^32) = floor(-1) = -1.
// oneDNN's int8 conv writing an 8-bit tensor adds zu in float before its one rounding (f32_zero_point_first):
// with an odd zu an exact tie goes to the even code of (value + zu), not to (even code of value) + zu.
TEST(Requant, F32ZeroPointFirstRoundsAfterTheZeroPoint) {
  // M32 = 0.25, acc = 10: P = 2.5 exactly.
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, 0.5f, 1.0f, 10, kInt8, 1), 3);         // rne(2.5) + 1
  EXPECT_EQ(requant(RequantVariant::f32_zero_point_first, 0.5f, 0.5f, 1.0f, 10, kInt8, 1), 4);  // rne(3.5)
  EXPECT_EQ(requant(RequantVariant::f32_zero_point_first, 0.5f, 0.5f, 1.0f, 10, kInt8, 0), 2);  // rne(2.5)
  EXPECT_EQ(requant(RequantVariant::f32_zero_point_first, 0.5f, 0.5f, 1.0f, -10, kInt8, -1), -4);
  // The float32 sum loses low bits: P = 0.5 + 2^-24 is above the tie, P + 16 rounds back onto the tie 16.5.
  const float sw = 1.0f + 0x1p-23f;  // M32 = fl32(0.5 * sw) = 0.5 + 2^-24 exactly; acc = 1
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, sw, 1.0f, 1, QuantType{ScalarType::int16, false}, 0), 1);
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, sw, 1.0f, 1, QuantType{ScalarType::int16, false}, 16), 17);
  // fl32(16 + 0.5 + 2^-24) = 16.5 (the ulp at 16 is 2^-19): now a tie, to even.
  EXPECT_EQ(requant(RequantVariant::f32_zero_point_first, 0.5f, sw, 1.0f, 1, QuantType{ScalarType::int16, false}, 16),
            16);
}

TEST(Requant, F32IntermediateValueRoundsTwiceInBinary32) {
  // fl32(sx*sw) = fl32(0.1f * 0.3f); acc = 16777217 is not a float: fl32(acc) = 16777216.
  const float s = 0.1f * 0.3f;
  EXPECT_EQ(reference::F32IntermediateValue(16777217, 0.1f, 0.3f), 16777216.0f * s);
  EXPECT_EQ(reference::F32IntermediateValue(3, 0.5f, 0.25f), 0.375f);
  EXPECT_EQ(reference::Fl32Add(16777216.0f, 1.0f), 16777216.0f);  // the tie goes to even
  EXPECT_EQ(reference::Fl32Add(16777216.0f, 3.0f), 16777220.0f);
}

TEST(Requant, HandWorkedQuarterTies) {
  EXPECT_EQ(requant(RequantVariant::exact, 0.5f, 0.5f, 1.0f, 5), 1);
  EXPECT_EQ(requant(RequantVariant::double_rounding, 0.5f, 0.5f, 1.0f, 5), 2);
  EXPECT_EQ(requant(RequantVariant::single_rounding, 0.5f, 0.5f, 1.0f, 5), 1);
  EXPECT_EQ(requant(RequantVariant::exact, 0.5f, 0.5f, 1.0f, -6), -2);
  EXPECT_EQ(requant(RequantVariant::double_rounding, 0.5f, 0.5f, 1.0f, -6), -2);
  EXPECT_EQ(requant(RequantVariant::single_rounding, 0.5f, 0.5f, 1.0f, -6), -1);
  // f32_half_even: P = 1.25 -> 1; -1.5 -> -2 (even); 6 -> 1.5 -> 2; 10 -> 2.5 -> 2; -10 -> -2.5 -> -2.
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, 0.5f, 1.0f, 5), 1);
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, 0.5f, 1.0f, -6), -2);
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, 0.5f, 1.0f, 6), 2);
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, 0.5f, 1.0f, 10), 2);
  EXPECT_EQ(requant(RequantVariant::f32_half_even, 0.5f, 0.5f, 1.0f, -10), -2);
  const Requantizer r(make_convention(RequantVariant::double_rounding, kInt8, 1.0f, 0), 0.5f, 0.5f);
  EXPECT_EQ(r.quantized_multiplier(), (QuantizedMultiplier{1 << 30, -1}));
}

// exact under each declared rounding mode, M = 0.25 (ties at acc = 2 mod 4):
//   acc 2 -> 0.5: away 1, even 0, up 1;  acc -2 -> -0.5: away -1, even 0, up 0
//   acc 6 -> 1.5: away 2, even 2, up 2;  acc -10 -> -2.5: away -3, even -2, up -2
TEST(Requant, ExactRoundingModes) {
  const auto away = RoundingMode::half_away_from_zero, even = RoundingMode::half_to_even, up = RoundingMode::half_up;
  struct Row { int64_t acc; int32_t away, even, up; };
  for (const Row& row : {Row{2, 1, 0, 1}, Row{-2, -1, 0, 0}, Row{6, 2, 2, 2}, Row{-10, -3, -2, -2}, Row{3, 1, 1, 1}}) {
    EXPECT_EQ(requant(RequantVariant::exact, 0.5f, 0.5f, 1.0f, row.acc, kInt8, 0, away), row.away) << row.acc;
    EXPECT_EQ(requant(RequantVariant::exact, 0.5f, 0.5f, 1.0f, row.acc, kInt8, 0, even), row.even) << row.acc;
    EXPECT_EQ(requant(RequantVariant::exact, 0.5f, 0.5f, 1.0f, row.acc, kInt8, 0, up), row.up) << row.acc;
  }
  // The zero point is added after rounding: zu = 3, acc 2 -> 0.5 -> 1 + 3 = 4 (away), 0 + 3 (even).
  EXPECT_EQ(requant(RequantVariant::exact, 0.5f, 0.5f, 1.0f, 2, kInt8, 3, away), 4);
  EXPECT_EQ(requant(RequantVariant::exact, 0.5f, 0.5f, 1.0f, 2, kInt8, 3, even), 3);
}

TEST(Requant, TraceOfTies) {
  const Requantizer exact(make_convention(RequantVariant::exact, kInt8, 1.0f, 0), 0.5f, 0.5f);
  RequantTrace t = exact(-6, true);
  EXPECT_EQ(t.tie_distance, 0.0);
  EXPECT_EQ(t.exact_value, "-1.5");
  t = exact(5, true);
  EXPECT_EQ(t.tie_distance, 0.25);
  EXPECT_EQ(t.exact_value, "1.25");
  EXPECT_TRUE(exact(5).exact_value.empty());
  // double_rounding: the last step rounds h / 2^1 = 3/2 (a tie) for acc = 5.
  const Requantizer dbl(make_convention(RequantVariant::double_rounding, kInt8, 1.0f, 0), 0.5f, 0.5f);
  t = dbl(5, true);
  EXPECT_EQ(t.tie_distance, 0.0);
  EXPECT_EQ(t.exact_value, "1.5");
  // single_rounding rounds 5 * 2^30 / 2^32 = 1.25.
  const Requantizer sgl(make_convention(RequantVariant::single_rounding, kInt8, 1.0f, 0), 0.5f, 0.5f);
  t = sgl(5, true);
  EXPECT_EQ(t.tie_distance, 0.25);
  EXPECT_EQ(t.exact_value, "1.25");
  // exact 1/3: sx = 1, sw = 1, su = 3 (float 3 exact): acc 1 -> 0.333.. distance 1/6.
  const Requantizer third(make_convention(RequantVariant::exact, kInt8, 3.0f, 0), 1.0f, 1.0f);
  t = third(1, true);
  EXPECT_NEAR(t.tie_distance, 1.0 / 6, 1e-15);
  EXPECT_EQ(t.exact_value, "0.333333333333333333333333333333");
  EXPECT_EQ(third.exact_multiplier(), "1/3");
}

TEST(Requant, SaturationAtTypeEnds) {
  // M = 1: acc passes through. int8 [-128, 127], narrow [-127, 127], uint8 [0, 255] with zu = 10.
  for (auto v : {RequantVariant::exact, RequantVariant::double_rounding, RequantVariant::single_rounding,
                 RequantVariant::f32_half_even}) {
    const Requantizer r8(make_convention(v, kInt8, 1.0f, 0), 1.0f, 1.0f);
    EXPECT_EQ(r8(127).u, 127);
    EXPECT_FALSE(r8(127).saturated);
    EXPECT_EQ(r8(128).u, 127);
    EXPECT_TRUE(r8(128).saturated);
    EXPECT_EQ(r8(128).u_unsaturated, 128);
    EXPECT_EQ(r8(-128).u, -128);
    EXPECT_FALSE(r8(-128).saturated);
    EXPECT_EQ(r8(-129).u, -128);
    const Requantizer narrow(make_convention(v, kInt8Narrow, 1.0f, 0), 1.0f, 1.0f);
    EXPECT_EQ(narrow(-128).u, -127);
    EXPECT_TRUE(narrow(-128).saturated);
    EXPECT_EQ(narrow(-127).u, -127);
    EXPECT_FALSE(narrow(-127).saturated);
    const Requantizer u8(make_convention(v, kUint8, 1.0f, 10), 1.0f, 1.0f);
    EXPECT_EQ(u8(-10).u, 0);
    EXPECT_FALSE(u8(-10).saturated);
    EXPECT_EQ(u8(-11).u, 0);
    EXPECT_TRUE(u8(-11).saturated);
    EXPECT_EQ(u8(245).u, 255);
    EXPECT_EQ(u8(246).u, 255);
    EXPECT_TRUE(u8(246).saturated);
    const Requantizer r16(make_convention(v, kInt16, 1.0f, 0), 1.0f, 1.0f);
    EXPECT_EQ(r16(40000).u, 32767);
    EXPECT_EQ(r16(-40000).u, -32768);
    EXPECT_EQ(r16(-2147483647).u, -32768);
  }
}

TEST(Requant, LargeMultiplierUsesLeftShift) {
  // M = 4*4/0.5 = 32 = 0.5 * 2^6: m = 2^30, shift 6 -> left shift 6, right 0.
  const Requantizer dbl(make_convention(RequantVariant::double_rounding, kInt16, 0.5f, 0), 4.0f, 4.0f);
  EXPECT_EQ(dbl.quantized_multiplier(), (QuantizedMultiplier{1 << 30, 6}));
  EXPECT_EQ(dbl(3).u, 96);
  EXPECT_EQ(dbl(-5).u, -160);
  EXPECT_EQ(dbl(2000).u, 32767);  // 64000 saturates the int16 intermediate
  // The left shift saturates int32 first: acc * 2^6 > INT32_MAX -> a = 2^31 - 1, then
  // h = floor(((2^31 - 1) 2^30 + 2^30) / 2^31) = floor(2^61 / 2^31) = 2^30.
  EXPECT_EQ(dbl(100000000).u_unsaturated, 1073741824);
  const Requantizer sgl(make_convention(RequantVariant::single_rounding, kInt16, 0.5f, 0), 4.0f, 4.0f);
  EXPECT_EQ(sgl(3).u, 96);
  EXPECT_EQ(sgl(-5).u, -160);
  // M = 2^40: shift 41 is capped at 30 with m = 2^31 - 1 under single rounding: R = acc*(2^31-1)*2^30/2^31.
  const QuantizedMultiplier big = QuantizeMultiplier(std::ldexp(1.0, 40), true);
  EXPECT_EQ(big, (QuantizedMultiplier{std::numeric_limits<int32_t>::max(), 30}));
  EXPECT_EQ(QuantizeMultiplier(std::ldexp(1.0, 40), false), (QuantizedMultiplier{1 << 30, 41}));
}

TEST(Requant, TinyMultiplierGivesZero) {
  // M = 2^-40: e = -39 < -31 -> m = 0, shift 0: every acc requantizes to 0 (+ zu).
  EXPECT_EQ(QuantizeMultiplier(std::ldexp(1.0, -40), false), (QuantizedMultiplier{0, 0}));
  const float tiny = std::ldexp(1.0f, -20);
  for (auto v : {RequantVariant::double_rounding, RequantVariant::single_rounding}) {
    const Requantizer r(make_convention(v, kInt8, 1.0f, 5), tiny, tiny);
    EXPECT_EQ(r.quantized_multiplier(), (QuantizedMultiplier{0, 0}));
    EXPECT_EQ(r(2147483647).u, 5);
    EXPECT_EQ(r(-2147483647).u, 5);
  }
  // exact still sees (2^31 - 1) * 2^-40 = 0.00195..: rounds to 0 as well.
  EXPECT_EQ(requant(RequantVariant::exact, tiny, tiny, 1.0f, 2147483647, kInt8, 5), 5);
}

TEST(Requant, QuantizeMultiplierCarry) {
  // q * 2^31 rounds up to 2^31 -> m = 2^30, e + 1: M = 1 - 2^-40.
  EXPECT_EQ(QuantizeMultiplier(1.0 - std::ldexp(1.0, -40), false), (QuantizedMultiplier{1 << 30, 1}));
  // q = 0.75: m = 0.75 * 2^31.
  EXPECT_EQ(QuantizeMultiplier(0.75, false), (QuantizedMultiplier{3 << 29, 0}));
  // Ties in q * 2^31: M = 0.5 + 2^-32 -> q * 2^31 = 2^30 + 0.5 -> rounds away to 2^30 + 1.
  EXPECT_EQ(QuantizeMultiplier(0.5 + std::ldexp(1.0, -32), false), (QuantizedMultiplier{(1 << 30) + 1, 0}));
  EXPECT_THROW(QuantizeMultiplier(0.0, false), InputError);
  EXPECT_THROW(QuantizeMultiplier(-1.0, false), InputError);
  try {
    QuantizeMultiplier(-1e-300, false);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "requant: real multiplier -1e-300 must be finite and > 0");  // not -0.000000
  }
}

// f32: fl32(acc) rounds before the multiply. acc = 2^25 + 5 -> fl32 = 2^25 + 4 (spacing 4), M32 = 1/8:
// P = 2^22 + 0.5 exactly -> ties to even 2^22; the exact value (2^25+5)/8 = 2^22 + 0.625 rounds to 2^22 + 1.
TEST(Requant, F32RoundsTheAccumulatorFirst) {
  const Requantizer f(make_convention(RequantVariant::f32_half_even, kInt16, 1.0f, 0), 0.25f, 0.5f);
  EXPECT_EQ(f.f32_multiplier(), 0.125f);
  const RequantTrace t = f((1 << 25) + 5, true);
  EXPECT_EQ(t.u_unsaturated, 1 << 22);
  EXPECT_EQ(t.tie_distance, 0.0);
  EXPECT_EQ(t.exact_value, "4194304.5");
  const Requantizer e(make_convention(RequantVariant::exact, kInt16, 1.0f, 0, RoundingMode::half_to_even), 0.25f, 0.5f);
  EXPECT_EQ(e((1 << 25) + 5).u_unsaturated, (1 << 22) + 1);
}

TEST(Requant, RejectsBadParameters) {
  EXPECT_THROW(Requantizer(make_convention(RequantVariant::exact, kInt8, 1.0f, 0), 0.0f, 1.0f), InputError);
  EXPECT_THROW(Requantizer(make_convention(RequantVariant::exact, kInt8, 1.0f, 0), 1.0f, NAN), InputError);
  Convention c = make_convention(RequantVariant::double_rounding, kInt8, 1.0f, 0);
  c.intermediate.rounding = RoundingMode::half_to_even;  // contradicts double_rounding's fixed rounding
  EXPECT_THROW(Requantizer(c, 1.0f, 1.0f), InputError);
  // f32 multiplier overflowing float32.
  EXPECT_THROW(Requantizer(make_convention(RequantVariant::f32_half_even, kInt8, 1e-30f, 0), 1e30f, 1e30f), InputError);
}

// ---- Properties.

// Random positive float32 scale between 2^lo and 2^hi (all mantissas).
rc::Gen<float> scale_gen(int lo, int hi) {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(lo, hi), rc::gen::inRange<uint32_t>(0, 1u << 23)),
                      [](const std::pair<int, uint32_t>& p) {
                        return std::bit_cast<float>((uint32_t(p.first + 127) << 23) | p.second);
                      });
}

// Mostly arbitrary scales, sometimes powers of two (which make exact ties frequent).
rc::Gen<float> scale_or_pow2(int lo, int hi) {
  return rc::gen::oneOf(scale_gen(lo, hi),
                        rc::gen::map(rc::gen::inRange(lo, hi), [](int e) { return std::ldexp(1.0f, e); }));
}

rc::Gen<RoundingMode> mode_gen() {
  return rc::gen::element(RoundingMode::half_away_from_zero, RoundingMode::half_to_even, RoundingMode::half_up);
}

rc::Gen<QuantType> type_gen() { return rc::gen::element(kInt8, kInt8Narrow, kUint8, kInt16); }

// exact vs an independent cpp_rational computation (frexp-based exact scales, textbook rounding formulas).
RC_GTEST_PROP(Requant, ExactMatchesRationalArithmetic, ()) {
  const float sx = *scale_or_pow2(-12, 0), sw = *scale_or_pow2(-12, 0), su = *scale_or_pow2(-8, 2);
  const QuantType type = *type_gen();
  const int32_t zu = *rc::gen::inRange(type.qmin(), type.qmax() + 1);
  const RoundingMode mode = *mode_gen();
  const int64_t acc = *rc::gen::oneOf(rc::gen::inRange<int64_t>(-(int64_t{1} << 31) + 1, int64_t{1} << 31),
                                      rc::gen::inRange<int64_t>(-100000, 100000));
  const RequantTrace got = Requantizer(make_convention(RequantVariant::exact, type, su, zu, mode), sx, sw)(acc, true);
  const cpp_rational value = cpp_rational(acc) * testing::exact(sx) * testing::exact(sw) / testing::exact(su);
  const cpp_int rounded = testing::round_mode(value, mode) + zu;
  RC_ASSERT(got.u == testing::clamp64(rounded, type.qmin(), type.qmax()));
  RC_ASSERT(got.saturated == (rounded < type.qmin() || rounded > type.qmax()));
  const cpp_rational frac = value - cpp_rational(testing::floor_of(value));
  const double dist = abs(frac - cpp_rational(1, 2)).convert_to<double>();
  RC_ASSERT(std::fabs(got.tie_distance - dist) <= 1e-12);
  RC_CLASSIFY(got.saturated, "saturated");
  RC_CLASSIFY(got.tie_distance == 0, "tie");
}

// Literal transcriptions of the gemmlowp / TFLite C code (int64 C arithmetic with truncating division and
// masks), as an independent re-derivation of the mathematical forms used by the library.
int32_t srdhm_literal(int32_t a, int32_t b) {
  const bool overflow = a == b && a == std::numeric_limits<int32_t>::min();
  const int64_t ab_64 = int64_t{a} * int64_t{b};
  const int32_t nudge = ab_64 >= 0 ? (1 << 30) : (1 - (1 << 30));
  const int32_t ab_x2_high32 = static_cast<int32_t>((ab_64 + nudge) / (int64_t{1} << 31));
  return overflow ? std::numeric_limits<int32_t>::max() : ab_x2_high32;
}
int32_t rdbpot_literal(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}
int32_t double_rounding_literal(int32_t x, int32_t m, int shift) {
  const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
  const int64_t shifted = int64_t{x} * (int64_t{1} << left);
  const int32_t a = static_cast<int32_t>(std::clamp<int64_t>(shifted, INT32_MIN, INT32_MAX));
  return rdbpot_literal(srdhm_literal(a, m), right);
}
int64_t single_rounding_literal(int32_t x, int32_t m, int shift) {
  const int64_t total_shift = 31 - shift;
  const int64_t round = int64_t{1} << (total_shift - 1);
  return (int64_t{x} * m + round) >> total_shift;
}

RC_GTEST_PROP(Requant, FixedPointMatchesLiteralCode, ()) {
  const float sx = *scale_or_pow2(-10, 2), sw = *scale_or_pow2(-10, 2), su = *scale_or_pow2(-14, 0);
  const int32_t acc = *rc::gen::oneOf(rc::gen::inRange(-2000, 2000), rc::gen::inRange(INT32_MIN + 1, INT32_MAX));
  const QuantType type = kInt16;
  const Requantizer dbl(make_convention(RequantVariant::double_rounding, type, su, 0), sx, sw);
  const Requantizer sgl(make_convention(RequantVariant::single_rounding, type, su, 0), sx, sw);
  const QuantizedMultiplier qd = dbl.quantized_multiplier(), qs = sgl.quantized_multiplier();
  const double real = double(sx) * double(sw) / double(su);
  RC_ASSERT(qd == QuantizeMultiplier(real, false));
  const int64_t want_d = double_rounding_literal(acc, qd.multiplier, qd.shift);
  RC_ASSERT(dbl(acc).u_unsaturated == want_d);
  const int64_t want_s = std::clamp<int64_t>(single_rounding_literal(acc, qs.multiplier, qs.shift), INT32_MIN, INT32_MAX);
  RC_ASSERT(sgl(acc).u_unsaturated == want_s);
  RC_CLASSIFY(qd.shift > 0, "left shift");
  RC_CLASSIFY(dbl(acc).tie_distance == 0, "tie in the last step");
}

// Exhaustive small check of the SRDHM equivalence claimed in requant.cpp: floor((P + 2^30) / 2^31).
TEST(Requant, HighMulEquivalenceOnTies) {
  for (int32_t a : {-7, -6, -5, -3, -2, -1, 0, 1, 2, 3, 5, 6, 7, 1 << 20, -(1 << 20), INT32_MAX, INT32_MIN + 1}) {
    for (int32_t b : {1 << 30, (1 << 30) + 1, 3 << 29, INT32_MAX, 1, 0}) {
      const int64_t p = int64_t{a} * b;
      const int64_t want = static_cast<int64_t>(std::floor(static_cast<long double>(p + (int64_t{1} << 30)) / 2147483648.0L));
      EXPECT_EQ(srdhm_literal(a, b), want) << a << " " << b;
    }
  }
}

RC_GTEST_PROP(Requant, MonotoneInAccumulator, ()) {
  const RequantVariant v = *rc::gen::element(RequantVariant::exact, RequantVariant::double_rounding,
                                             RequantVariant::single_rounding, RequantVariant::f32_half_even);
  const float sx = *scale_gen(-10, 0), sw = *scale_gen(-10, 0), su = *scale_gen(-14, 0);
  const QuantType type = *type_gen();
  const int32_t zu = *rc::gen::inRange(type.qmin(), type.qmax() + 1);
  const Requantizer r(make_convention(v, type, su, zu, *mode_gen()), sx, sw);
  const int64_t acc = *rc::gen::inRange<int64_t>(-(int64_t{1} << 31) + 1, (int64_t{1} << 31) - 64);
  int64_t prev = r(acc).u_unsaturated;
  for (int64_t a = acc + 1; a < acc + 64; ++a) {
    const RequantTrace t = r(a);
    RC_ASSERT(t.u_unsaturated >= prev);
    RC_ASSERT(t.u == std::clamp<int64_t>(t.u_unsaturated, type.qmin(), type.qmax()));
    prev = t.u_unsaturated;
  }
}

// Error bounds and agreement between variants:
//   |R - acc*M| <= 1/2 (exact), <= 1/2 + |acc| |M - Mq| (single), <= 1 + |acc| |M - Mq| (double), where Mq is
//   the quantized multiplier m 2^(e-31) (|M - Mq| <= Mq 2^-31) and M the real sx*sw/su (the double M is within
//   2^-53 relative of it). Away from ties they agree exactly.
RC_GTEST_PROP(Requant, VariantsAgreeAwayFromTies, ()) {
  const float sx = *scale_or_pow2(-9, -1), sw = *scale_or_pow2(-9, -1), su = *scale_or_pow2(-12, -2);
  // |acc * M| < 30000: no saturation of the int16 intermediate.
  const double m_estimate = double(sx) * double(sw) / double(su);
  const int64_t acc_max = static_cast<int64_t>(std::min(std::ldexp(1.0, 24), std::floor(29999.0 / m_estimate)));
  const int64_t acc = *rc::gen::inRange<int64_t>(-acc_max, acc_max + 1);
  const QuantType type{ScalarType::int16, false};
  const cpp_rational real = testing::exact(sx) * testing::exact(sw) / testing::exact(su);
  RC_ASSERT(abs(cpp_rational(acc) * real) < 30000);
  const auto run = [&](RequantVariant v, RoundingMode mode) {
    return Requantizer(make_convention(v, type, su, 0, mode), sx, sw)(acc);
  };
  const RequantTrace ex = run(RequantVariant::exact, RoundingMode::half_away_from_zero);
  const RequantTrace ex_up = run(RequantVariant::exact, RoundingMode::half_up);
  const RequantTrace ex_even = run(RequantVariant::exact, RoundingMode::half_to_even);
  const RequantTrace dbl = run(RequantVariant::double_rounding, RoundingMode::half_away_from_zero);
  const RequantTrace sgl = run(RequantVariant::single_rounding, RoundingMode::half_up);
  const RequantTrace f32 = run(RequantVariant::f32_half_even, RoundingMode::half_to_even);
  const Requantizer probe(make_convention(RequantVariant::double_rounding, type, su, 0), sx, sw);
  const QuantizedMultiplier q = probe.quantized_multiplier();
  const cpp_rational mq = cpp_rational(q.multiplier) * (q.shift >= 31 ? cpp_rational(cpp_int(1) << (q.shift - 31))
                                                                       : cpp_rational(1, cpp_int(1) << (31 - q.shift)));
  const cpp_rational slack = abs(cpp_rational(acc)) * (abs(mq - real) + real * cpp_rational(1, cpp_int(1) << 52));
  const cpp_rational value = cpp_rational(acc) * real;
  RC_ASSERT(abs(cpp_rational(ex.u) - value) <= cpp_rational(1, 2));
  RC_ASSERT(abs(cpp_rational(sgl.u) - value) <= cpp_rational(1, 2) + slack);
  RC_ASSERT(abs(cpp_rational(dbl.u) - value) <= 1 + slack);
  RC_ASSERT(std::abs(ex.u - dbl.u) <= 1);
  RC_ASSERT(std::abs(ex.u - sgl.u) <= 1);
  RC_ASSERT(std::abs(ex.u - f32.u) <= 1);
  const double margin = slack.convert_to<double>();
  // single rounding is one rounding of acc*Mq: agrees with exact half_up unless within `slack` of a tie.
  if (ex_up.tie_distance > margin + 1e-15) RC_ASSERT(sgl.u == ex_up.u);
  // double rounding first rounds to 2^-right: agrees with exact half-away unless within 2^-(right+1) + slack.
  const int right = q.shift > 0 ? 0 : -q.shift;
  // With right == 0 the high-mul is the only rounding (half up): it agrees with exact half-away off ties.
  const double first_step = right == 0 ? 0.0 : std::ldexp(1.0, -(right + 1));
  if (ex.tie_distance > first_step + margin + 1e-15) RC_ASSERT(dbl.u == ex.u);
  // f32: two float32 roundings (acc, product), each relative 2^-24, plus M32's 2 roundings.
  const double f32_margin = std::fabs(value.convert_to<double>()) * 4 * std::ldexp(1.0, -24);
  if (ex_even.tie_distance > f32_margin) RC_ASSERT(f32.u == ex_even.u);
  RC_CLASSIFY(ex.u != dbl.u, "double differs");
  RC_CLASSIFY(ex_up.u != sgl.u, "single differs");
}

// f32_half_even against the host FPU (IEEE binary32 with round-to-nearest-even is exactly the definition).
RC_GTEST_PROP(Requant, F32MatchesHostFloat, ()) {
  const float sx = *scale_gen(-20, 4), sw = *scale_gen(-20, 4), su = *scale_gen(-30, 6);
  const int64_t acc = *rc::gen::oneOf(rc::gen::inRange<int64_t>(-5000, 5000),
                                      rc::gen::inRange<int64_t>(-(int64_t{1} << 31) + 1, int64_t{1} << 31));
  const QuantType type = kInt16;
  const int32_t zu = *rc::gen::inRange(-100, 100);
  const volatile float prod = sx * sw;  // volatile: one float32 rounding per statement
  const volatile float m32 = prod / su;
  RC_PRE(std::isfinite(m32));
  const volatile float facc = static_cast<float>(acc);
  const volatile float p = facc * m32;
  const Requantizer r(make_convention(RequantVariant::f32_half_even, type, su, zu), sx, sw);
  RC_ASSERT(r.f32_multiplier() == m32);
  const RequantTrace t = r(acc);
  int64_t want;
  if (std::isinf(p)) want = p > 0 ? type.qmax() : type.qmin();
  else want = std::clamp<int64_t>(static_cast<int64_t>(std::clamp<double>(std::nearbyint(double(p)), -1e15, 1e15)) + zu,
                                  type.qmin(), type.qmax());
  RC_ASSERT(t.u == want);
}

}  // namespace
}  // namespace fusediff::reference
