// Activation functions and tables: known answers, ties in every rounding mode and zero-point order, the int16
// lookup on hand-made knots, and LUTPopulateInt16 against golden knots and its own structure.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/lut.h"

namespace fusediff::fused {
namespace {

Activation Act(ActivationKind kind, float alpha = 0.0f) { return Activation{kind, alpha}; }

QuantParams Q(ScalarType scalar, float scale, int32_t zero_point, bool narrow = false) {
  return QuantParams{QuantType{scalar, narrow}, scale, zero_point};
}

OutputSpec Out(QuantParams q, RoundingMode rounding = RoundingMode::half_away_from_zero,
               ZeroPointOrder order = ZeroPointOrder::after_rounding) {
  OutputSpec o;
  o.q = q;
  o.rounding = rounding;
  o.zero_point_order = order;
  return o;
}

// The table entry of code v for a table over `in`.
int32_t Entry(const std::vector<int32_t>& table, const QuantParams& in, int32_t v) {
  return LUTLookupInt8(table, in.type.qmin(), v);
}

float AlphaOf(ActivationKind k) {
  if (k == ActivationKind::leaky_relu) return 0.01f;
  if (k == ActivationKind::elu) return 1.0f;
  return 0.0f;
}

// --------------------------------------------------------------------------------------------- activations

TEST(EvaluateActivation, KnownValuesInDouble) {
  using K = ActivationKind;
  EXPECT_EQ(EvaluateActivationDouble(Act(K::relu), -1.5), 0.0);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::relu), 2.5), 2.5);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::relu6), 7.0), 6.0);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::relu6), -7.0), 0.0);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::leaky_relu, 0.25f), -2.0), -0.5);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::leaky_relu, 0.25f), 2.0), 2.0);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::hard_sigmoid), 0.0), 0.5);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::hard_sigmoid), -4.0), 0.0);
  EXPECT_DOUBLE_EQ(EvaluateActivationDouble(Act(K::hard_swish), 1.0), 4.0 / 6.0);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::hard_swish), 3.0), 3.0);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::gelu_erf), 1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::gelu_tanh), 1.0), 0.8411919906082768, 1e-15);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::sigmoid), 0.0), 0.5);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::tanh), 0.5), 0.46211715726000974, 1e-15);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::silu), 1.0), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::elu, 1.0f), -1.0), -0.6321205588285577, 1e-15);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::elu, 0.5f), -1.0), -0.31606027941427883, 1e-15);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::softplus), 0.0), 0.6931471805599453, 1e-15);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::mish), 1.0), 0.8650983882673103, 1e-15);
}

TEST(EvaluateActivation, StableForLargeMagnitudes) {
  using K = ActivationKind;
  // Tails that the naive formulas lose to cancellation (1 + tanh, 1 + erf) or overflow (exp).
  const double gelu_tanh_tail = EvaluateActivationDouble(Act(K::gelu_tanh), -10.0);
  EXPECT_LT(gelu_tanh_tail, 0.0);  // the naive 0.5x(1 + tanh(z)) is exactly 0 here
  EXPECT_GT(gelu_tanh_tail, -1e-30);
  const double gelu_erf_tail = EvaluateActivationDouble(Act(K::gelu_erf), -10.0);
  EXPECT_NEAR(gelu_erf_tail / -7.6198530241605e-23, 1.0, 1e-9);  // -10 * Phi(-10)
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::sigmoid), -30.0) / 9.357622968840175e-14, 1.0, 1e-12);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::sigmoid), -800.0), 0.0);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::sigmoid), 800.0), 1.0);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::softplus), 1000.0), 1000.0);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::softplus), -50.0) / 1.9287498479639178e-22, 1.0, 1e-12);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::mish), -50.0) / -9.643749239819589e-21, 1.0, 1e-9);
  EXPECT_EQ(EvaluateActivationDouble(Act(K::mish), 1000.0), 1000.0);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::silu), -50.0) / -9.643749239819589e-21, 1.0, 1e-9);
  EXPECT_NEAR(EvaluateActivationDouble(Act(K::elu, 1.0f), -1e-10), -1e-10, 1e-19);  // expm1, not exp - 1
  for (ActivationKind k : kAllActivations) {
    for (double x : {-1e4, -100.0, 100.0, 1e4}) {
      EXPECT_TRUE(std::isfinite(EvaluateActivationDouble(Act(k, AlphaOf(k)), x))) << static_cast<int>(k) << " " << x;
      EXPECT_TRUE(std::isfinite(EvaluateActivationFloat(Act(k, AlphaOf(k)), static_cast<float>(x))));
    }
  }
}

TEST(EvaluateActivation, FloatTracksDoubleForAllKinds) {
  int kinds = 0;
  for (ActivationKind k : kAllActivations) {
    ++kinds;
    const Activation a = Act(k, AlphaOf(k));
    for (int i = -2000; i <= 2000; ++i) {
      const float x = static_cast<float>(i) / 128.0f;
      const double expected = EvaluateActivationDouble(a, static_cast<double>(x));
      const double got = static_cast<double>(EvaluateActivationFloat(a, x));
      ASSERT_NEAR(got, expected, 4e-6 * std::max(1.0, std::fabs(expected))) << "kind " << static_cast<int>(k) << " x " << x;
    }
  }
  EXPECT_EQ(kinds, 13);
}

TEST(EvaluateActivation, GeluFloatUsesTfliteExpressions) {
  // TFLite GeluTransform: 0.5f * x * erfc(x * float(-M_SQRT1_2)); GeluTransformApproximate: the plain tanh form,
  // which (unlike the double evaluation) cancels to exactly 0 for large negative x.
  const float x = 0.75f;
  EXPECT_EQ(EvaluateActivationFloat(Act(ActivationKind::gelu_erf), x),
            0.5f * x * std::erfc(x * static_cast<float>(-M_SQRT1_2)));
  EXPECT_EQ(EvaluateActivationFloat(Act(ActivationKind::gelu_tanh), -10.0f), 0.0f);
  // Bit for bit on a grid, evaluation order included (0.044715f * x * x * x is ((0.044715f * x) * x) * x).
  constexpr float kSqrt2dPi = M_2_SQRTPI * M_SQRT1_2;
  for (int i = -4096; i <= 4096; ++i) {
    const float v = static_cast<float>(i) * 0.00390625f * 1.37f;
    const float tflite_tanh = 0.5f * v * (1.f + std::tanh(kSqrt2dPi * (v + 0.044715f * v * v * v)));
    const float tflite_erf = 0.5f * v * std::erfc(v * static_cast<float>(-M_SQRT1_2));
    ASSERT_EQ(EvaluateActivationFloat(Act(ActivationKind::gelu_tanh), v), tflite_tanh) << v;
    ASSERT_EQ(EvaluateActivationFloat(Act(ActivationKind::gelu_erf), v), tflite_erf) << v;
  }
}

// ---------------------------------------------------------------------------------------------- int8 tables

TEST(LUTPopulateInt8, ReluScalesCodesByInputOverOutputScale) {
  // su = 0.25, sy = 0.0625: code 8 reads 2.0 and writes 2.0 / 0.0625 = 32.
  const QuantParams in = Q(ScalarType::int8, 0.25f, 0);
  const auto table = LUTPopulateInt8(Act(ActivationKind::relu), in, Out(Q(ScalarType::int8, 0.0625f, 0)));
  ASSERT_EQ(table.size(), 256u);
  EXPECT_EQ(Entry(table, in, 8), 32);
  EXPECT_EQ(Entry(table, in, -8), 0);
  EXPECT_EQ(Entry(table, in, 31), 124);
  EXPECT_EQ(Entry(table, in, 32), 127);  // 128 saturates
  EXPECT_EQ(Entry(table, in, -128), 0);
  // The use-output-scale bug: dequantizing with sy makes code 8 read 0.5, written as 8.
  const QuantParams wrong_in = Q(ScalarType::int8, 0.0625f, 0);
  const auto wrong = LUTPopulateInt8(Act(ActivationKind::relu), wrong_in, Out(Q(ScalarType::int8, 0.0625f, 0)));
  EXPECT_EQ(Entry(wrong, wrong_in, 8), 8);
}

struct TieCase {
  RoundingMode mode;
  ZeroPointOrder order;
  int32_t zy;
  std::array<int32_t, 4> expected;  // codes v = 1, -1, 3, -3 -> f(x) / sy = 0.5, -0.5, 1.5, -1.5
};

TEST(LUTPopulateInt8, EveryRoundingModeAndZeroPointOrderAtExactTies) {
  // Identity (leaky_relu with alpha 1), su = 0.5, sy = 1: v = +-1, +-3 land exactly on ties.
  const QuantParams in = Q(ScalarType::int8, 0.5f, 0);
  using M = RoundingMode;
  using O = ZeroPointOrder;
  const TieCase cases[] = {
      {M::half_away_from_zero, O::after_rounding, 0, {1, -1, 2, -2}},
      {M::half_to_even, O::after_rounding, 0, {0, 0, 2, -2}},
      {M::half_up, O::after_rounding, 0, {1, 0, 2, -1}},
      // zy = 1 after rounding: the above + 1.
      {M::half_away_from_zero, O::after_rounding, 1, {2, 0, 3, -1}},
      {M::half_to_even, O::after_rounding, 1, {1, 1, 3, -1}},
      {M::half_up, O::after_rounding, 1, {2, 1, 3, 0}},
      // zy = 1 before rounding: round(1.5), round(0.5), round(2.5), round(-0.5).
      {M::half_away_from_zero, O::before_rounding, 1, {2, 1, 3, -1}},
      {M::half_to_even, O::before_rounding, 1, {2, 0, 2, 0}},
      {M::half_up, O::before_rounding, 1, {2, 1, 3, 0}},  // translation invariant: same as after
  };
  for (const TieCase& c : cases) {
    const auto table = LUTPopulateInt8(Act(ActivationKind::leaky_relu, 1.0f), in,
                                       Out(Q(ScalarType::int8, 1.0f, c.zy), c.mode, c.order));
    const int32_t codes[] = {1, -1, 3, -3};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(Entry(table, in, codes[i]), c.expected[static_cast<size_t>(i)])
          << "mode " << static_cast<int>(c.mode) << " order " << static_cast<int>(c.order) << " zy " << c.zy
          << " v " << codes[i];
    }
  }
}

TEST(LUTPopulateInt8, NonTiesRoundToNearestInEveryMode) {
  // Values just below a tie round down in every mode (the tie test is exact, not a tolerance).
  const QuantParams in = Q(ScalarType::int8, 1.0f, 0);
  for (RoundingMode m : {RoundingMode::half_away_from_zero, RoundingMode::half_to_even, RoundingMode::half_up}) {
    const auto table = LUTPopulateInt8(Act(ActivationKind::relu), in, Out(Q(ScalarType::int16, 2.0f + 0x1p-22f, 0), m));
    // v = 1: 1 / (2 + 2^-22) = 0.4999998... -> 0; v = 3: 1.49999... -> 1; v = 5 -> 2.4999... -> 2.
    EXPECT_EQ(Entry(table, in, 1), 0);
    EXPECT_EQ(Entry(table, in, 3), 1);
    EXPECT_EQ(Entry(table, in, 5), 2);
  }
}

TEST(LUTPopulateInt8, SaturatesToOutputTypeAndHonoursUint8AndNarrow) {
  // uint8 intermediate with zero point 128, tanh, int8 output with a tiny scale: both ends saturate.
  const QuantParams in = Q(ScalarType::uint8, 0.05f, 128);
  const auto table = LUTPopulateInt8(Act(ActivationKind::tanh), in, Out(Q(ScalarType::int8, 0.001f, 0)));
  ASSERT_EQ(table.size(), 256u);
  EXPECT_EQ(Entry(table, in, 0), -128);
  EXPECT_EQ(Entry(table, in, 255), 127);
  EXPECT_EQ(Entry(table, in, 128), 0);
  EXPECT_EQ(Entry(table, in, 129), 50);  // tanh(0.05) / 0.001 = 49.958
  // uint8 output: negatives clamp to 0 after the zero point.
  const auto to_uint8 = LUTPopulateInt8(Act(ActivationKind::tanh), in, Out(Q(ScalarType::uint8, 1.0f / 128, 128)));
  EXPECT_EQ(Entry(to_uint8, in, 0), 0);  // round(tanh(-6.4) * 128) + 128 = round(-127.9993) + 128 = 0
  EXPECT_EQ(Entry(to_uint8, in, 108), 31);  // tanh(-1) * 128 = -97.48 -> -97, + 128
  EXPECT_EQ(Entry(to_uint8, in, 255), 255);
  // narrow int8 intermediate: 255 entries starting at -127; narrow output clamps at -127.
  const QuantParams narrow = Q(ScalarType::int8, 1.0f, 0, true);
  const auto n = LUTPopulateInt8(Act(ActivationKind::leaky_relu, 1.0f), narrow, Out(Q(ScalarType::int8, 0.5f, 0, true)));
  ASSERT_EQ(n.size(), 255u);
  EXPECT_EQ(LUTLookupInt8(n, -127, -127), -127);  // -254 clamps to -127 (narrow), not -128
  EXPECT_EQ(n.front(), -127);
  EXPECT_EQ(LUTLookupInt8(n, -127, 1), 2);
  EXPECT_EQ(LUTLookupInt8(n, -127, 127), 127);
  // One code past the narrow end: identity from int8 to int8_narrow sends -128 to -127.
  const QuantParams full = Q(ScalarType::int8, 1.0f, 0);
  const auto to_narrow = LUTPopulateInt8(Act(ActivationKind::leaky_relu, 1.0f), full, Out(Q(ScalarType::int8, 1.0f, 0, true)));
  EXPECT_EQ(Entry(to_narrow, full, -128), -127);
  EXPECT_EQ(Entry(to_narrow, full, -127), -127);
  EXPECT_EQ(Entry(to_narrow, full, 127), 127);
}

TEST(LUTLookupInt8, IndexesFromQmin) {
  const std::vector<int32_t> table = {10, 11, 12};
  EXPECT_EQ(LUTLookupInt8(table, -1, -1), 10);
  EXPECT_EQ(LUTLookupInt8(table, -1, 1), 12);
  EXPECT_THROW(LUTLookupInt8(table, -1, 2), std::out_of_range);
}

RC_GTEST_PROP(LUTPopulateInt8Prop, EntryIsWithinHalfAnLsbOfTheExactValueUnlessSaturated, ()) {
  const ActivationKind k = *rc::gen::elementOf(std::vector<ActivationKind>(std::begin(kAllActivations), std::end(kAllActivations)));
  const Activation a = Act(k, AlphaOf(k));
  const float su = std::ldexp(1.0f + static_cast<float>(*rc::gen::inRange(0, 1 << 20)) / (1 << 20), *rc::gen::inRange(-8, 0));
  const float sy = std::ldexp(1.0f + static_cast<float>(*rc::gen::inRange(0, 1 << 20)) / (1 << 20), *rc::gen::inRange(-9, -2));
  const QuantParams in = Q(ScalarType::int8, su, *rc::gen::inRange(-20, 21));
  const OutputSpec out = Out(Q(ScalarType::int8, sy, *rc::gen::inRange(-128, 128)));
  const auto table = LUTPopulateInt8(a, in, out);
  int saturated = 0;
  for (int32_t v = -128; v <= 127; ++v) {
    const double exact = EvaluateActivationDouble(a, static_cast<double>(su) * (v - in.zero_point)) / sy + out.q.zero_point;
    const int32_t got = Entry(table, in, v);
    if (got == -128 || got == 127) {
      ++saturated;
      const bool consistent = got == -128 ? exact <= -127.5 : exact >= 126.5;
      RC_ASSERT(consistent);
    } else {
      RC_ASSERT(std::fabs(got - exact) <= 0.5 + 1e-9);
    }
  }
  RC_CLASSIFY(saturated > 0, "some saturated");
  RC_TAG(std::string(to_string(k)));
}

// ------------------------------------------------------------------------------------------ int16 lookup

TEST(LUTLookup, InterpolatesHandMadeKnots) {
  std::array<int16_t, 513> lut{};
  lut[256] = 0;
  lut[257] = 1;  // slope +1: (1 * f + 64) >> 7 is 0 up to f = 63, 1 from f = 64 (the +64 rounds the tie up)
  EXPECT_EQ(LUTLookup(0, lut), 0);
  EXPECT_EQ(LUTLookup(63, lut), 0);
  EXPECT_EQ(LUTLookup(64, lut), 1);
  EXPECT_EQ(LUTLookup(127, lut), 1);
  lut[258] = 0;  // slope -1 from knot 257 (x = 128 .. 255): (-f + 64) >> 7 is 0 up to f = 64, -1 from 65
  EXPECT_EQ(LUTLookup(128, lut), 1);
  EXPECT_EQ(LUTLookup(128 + 64, lut), 1);  // tie at -1/2 goes toward +infinity
  EXPECT_EQ(LUTLookup(128 + 65, lut), 0);  // (-65 + 64) >> 7 = -1: arithmetic shift floors
  // Negative x: -1 >> 7 = -1 -> knot 255 with offset -1 & 127 = 127.
  lut[255] = -10;  // slope from 255 to 256: +10; (10 * 127 + 64) >> 7 = 1334 >> 7 = 10
  EXPECT_EQ(LUTLookup(-1, lut), 0);
  EXPECT_EQ(LUTLookup(-128, lut), -10);  // offset 0
  EXPECT_EQ(LUTLookup(-64, lut), -5);    // (10 * 64 + 64) >> 7 = 704 >> 7 = 5
  // -129 >> 7 = -2 -> knot 254, offset 127. knot 254 = -300: slope 290, (290 * 127 + 64) >> 7 = 36894 >> 7 = 288.
  lut[254] = -300;
  EXPECT_EQ(LUTLookup(-129, lut), -12);
  // Extremes: -32768 -> knot 0, offset 0; 32767 -> knot 511, offset 127, interpolating toward knot 512.
  lut[0] = -32768;
  lut[511] = 1000;
  lut[512] = 1256;  // slope 256: (256 * 127 + 64) >> 7 = 254
  EXPECT_EQ(LUTLookup(-32768, lut), -32768);
  EXPECT_EQ(LUTLookup(32767, lut), 1254);
  EXPECT_EQ(LUTLookup(32767 - 127, lut), 1000);
}

// ---------------------------------------------------------------------------------------- int16 populate

// Golden knots and lookups produced by compiling tflite-micro's detail::LUTPopulateInt16<float> and LUTLookup
// (tensorflow/lite/kernels/internal/common.h) out of tree with the same transforms.
struct GoldenKnot {
  int index;
  int16_t value;
};
struct GoldenLookup {
  int16_t x;
  int16_t y;
};

TEST(LUTPopulateInt16, MatchesTfliteGoldenKnotsSigmoid) {
  const auto lut = LUTPopulateInt16(Act(ActivationKind::sigmoid), 0x1p-12f, 0, 0x1p-15f, 0);
  const GoldenKnot knots[] = {{0, 11},      {1, 12},      {100, 248},   {255, 16127}, {256, 16383}, {257, 16639},
                              {300, 26155}, {384, 32179}, {450, 32693}, {511, 32757}, {512, 32758}};
  for (const GoldenKnot& k : knots) EXPECT_EQ(lut[static_cast<size_t>(k.index)], k.value) << "knot " << k.index;
  const GoldenLookup lookups[] = {{-32768, 11}, {-20000, 246}, {-129, 16125}, {-128, 16127}, {-1, 16381},
                                  {0, 16383},   {1, 16385},    {63, 16509},   {64, 16511},   {65, 16513},
                                  {127, 16637}, {128, 16639},  {1000, 18374}, {32767, 32758}};
  for (const GoldenLookup& l : lookups) EXPECT_EQ(LUTLookup(l.x, lut), l.y) << "x " << l.x;
}

TEST(LUTPopulateInt16, MatchesTfliteGoldenKnotsGelu) {
  const auto erf = LUTPopulateInt16(Act(ActivationKind::gelu_erf), 0x1p-11f, 0, 0x1p-12f, 0);
  const GoldenKnot erf_knots[] = {{0, 0},       {100, 0},     {255, -123},  {256, -1},    {257, 133},
                                  {300, 11229}, {384, 32767}, {511, 32767}, {512, 32767}};
  for (const GoldenKnot& k : erf_knots) EXPECT_EQ(erf[static_cast<size_t>(k.index)], k.value) << "knot " << k.index;
  EXPECT_EQ(LUTLookup(-1, erf), -2);
  EXPECT_EQ(LUTLookup(1000, erf), 1373);
  const auto tanh_form = LUTPopulateInt16(Act(ActivationKind::gelu_tanh), 3.0f / 4096, 0, 0x1p-12f, 0);
  const GoldenKnot tanh_knots[] = {{0, 0}, {255, -180}, {256, -3}, {257, 203}, {300, 16894}, {512, 32767}};
  for (const GoldenKnot& k : tanh_knots) {
    EXPECT_EQ(tanh_form[static_cast<size_t>(k.index)], k.value) << "knot " << k.index;
  }
  EXPECT_EQ(LUTLookup(1000, tanh_form), 2303);
  EXPECT_EQ(LUTLookup(-129, tanh_form), -181);
}

// The TFLite formula for one knot i < 512, spelled out step by step in float.
int16_t KnotByFormula(const Activation& a, float s_in, float s_out, int i) {
  const auto f = [&a](float v) { return EvaluateActivationFloat(a, v); };
  const float in_min = s_in * -32768.0f;
  const float in_max = s_in * 32767.0f;
  const float step = (in_max - in_min) / 512.0f;
  const float inv = 65536.0f / (s_out * 32767.0f - s_out * -32768.0f);
  const float x = in_min + static_cast<float>(i) * step;
  const float sample = std::round(f(x) * inv);
  const float interp = std::round((f(in_min + static_cast<float>(i + 1) * step) * inv + sample) / 2.0f);
  const float mid = std::round(f(x + step / 2.0f) * inv);
  const float bias = std::round((interp - mid) / 2.0f);
  return static_cast<int16_t>(std::fmin(std::fmax(sample - bias, -32768.0f), 32767.0f));
}

TEST(LUTPopulateInt16, StructureOfTheTable) {
  // relu, s_in = s_out = 2^-8: range [-128, 127.996]; step = 65535 * 2^-17.
  const Activation relu = Act(ActivationKind::relu);
  const auto lut = LUTPopulateInt16(relu, 0x1p-8f, 0, 0x1p-8f, 0);
  EXPECT_EQ(lut[0], 0);
  // knot 512 = f(input_max) * 65536 / 65535 / s_out = 32767 * 65536 / 65535 = 32767.4999..: 32767.
  EXPECT_EQ(lut[512], 32767);
  // Linear pieces: the midpoint correction is at most one code. Above 0 the knot follows x * 65536/65535 / s_out.
  for (int i = 258; i < 512; ++i) {
    const double x = -128.0 + i * (65535.0 / 131072.0);
    EXPECT_NEAR(lut[static_cast<size_t>(i)], x * 256.0 * 65536.0 / 65535.0, 1.5 + 1e-6) << i;
  }
  // Hand-derived knots from the TFLite formula, for activations with curvature.
  for (ActivationKind k : {ActivationKind::sigmoid, ActivationKind::gelu_erf, ActivationKind::silu, ActivationKind::mish}) {
    const Activation a = Act(k);
    const auto t = LUTPopulateInt16(a, 0x1p-12f, 0, 0x1p-13f, 0);
    for (int i : {0, 3, 200, 255, 256, 257, 300, 400, 511}) {
      EXPECT_EQ(t[static_cast<size_t>(i)], KnotByFormula(a, 0x1p-12f, 0x1p-13f, i)) << "kind " << static_cast<int>(k) << " knot " << i;
    }
    // Knot 512 is f(input_max) itself, no correction.
    const float inv = 65536.0f / (0x1p-13f * 65535.0f);
    EXPECT_EQ(t[512], static_cast<int16_t>(std::fmin(std::round(EvaluateActivationFloat(a, 0x1p-12f * 32767.0f) * inv), 32767.0f)));
  }
}

TEST(LUTPopulateInt16, SmoothMonotoneActivationsGiveMonotoneKnots) {
  // Knot 256 is f(~0): within the one-code midpoint correction plus rounding.
  using K = ActivationKind;
  for (K k : {K::sigmoid, K::tanh, K::elu, K::softplus}) {
    const Activation a = Act(k, AlphaOf(k));
    for (float s_in : {0x1p-12f, 0x1p-10f, 3e-4f}) {
      const auto lut = LUTPopulateInt16(a, s_in, 0, 0x1p-12f, 0);
      for (size_t i = 1; i < lut.size(); ++i) {
        ASSERT_LE(lut[i - 1], lut[i]) << "kind " << static_cast<int>(k) << " s_in " << s_in << " knot " << i;
      }
      // input_min + 256 * step = s_in * (-32768 + 32767.5) = -s_in / 2.
      const double at_zero = EvaluateActivationDouble(a, -0.5 * s_in) / 0x1p-12 * 65536.0 / 65535.0;
      EXPECT_NEAR(lut[256], at_zero, 1.5 + 1e-3) << static_cast<int>(k);
    }
  }
}

TEST(LUTPopulateInt16, KinkQuirkMatchesTflite) {
  // TFLite's midpoint correction puts half the interpolation error at a convex kink into the knot before it:
  // the knots of relu dip below 0 (by 16 codes here) and a monotone activation gets non-monotone knots. The
  // fused path reproduces that (golden values from the out-of-tree TFLite build): relu(0) reads -16 codes.
  const auto relu = LUTPopulateInt16(Act(ActivationKind::relu), 0x1p-8f, 0, 0x1p-15f, 0);
  const GoldenKnot knots[] = {{254, 0}, {255, 0}, {256, -16}, {257, 16320}, {258, 32704}};
  for (const GoldenKnot& k : knots) EXPECT_EQ(relu[static_cast<size_t>(k.index)], k.value) << "knot " << k.index;
  const GoldenLookup lookups[] = {{-200, 0}, {-128, 0}, {-64, -8}, {-1, -16}, {0, -16}, {1, 112}, {64, 8152}};
  for (const GoldenLookup& l : lookups) EXPECT_EQ(LUTLookup(l.x, relu), l.y) << "x " << l.x;
  // hard_sigmoid's lower kink (x = -3) likewise.
  const auto hard_sigmoid = LUTPopulateInt16(Act(ActivationKind::hard_sigmoid), 0.0003f, 0, 0x1p-15f, 0);
  const GoldenKnot hs[] = {{175, 0}, {176, 0}, {177, -7}, {178, 25}, {179, 235}};
  for (const GoldenKnot& k : hs) EXPECT_EQ(hard_sigmoid[static_cast<size_t>(k.index)], k.value) << "knot " << k.index;
  // The same scale with s_out = s_in gives the one-code dip.
  EXPECT_EQ(LUTPopulateInt16(Act(ActivationKind::relu), 0x1p-8f, 0, 0x1p-8f, 0)[256], -1);
}

TEST(LUTPopulateInt16, ReluIdentityLookupIsWithinTwoCodes) {
  // s_in = s_out: the fused int16 relu is the identity on u >= 0, off by the 65536/65535 quirk and the 7-bit
  // interpolation grid (each step spans 65535/512 codes, the lookup assumes 128).
  const auto lut = LUTPopulateInt16(Act(ActivationKind::relu), 0x1p-10f, 0, 0x1p-10f, 0);
  int max_error = 0;
  for (int v = -32768; v <= 32767; ++v) {
    const int err = std::abs(LUTLookup(static_cast<int16_t>(v), lut) - std::max(v, 0));
    max_error = std::max(max_error, err);
  }
  EXPECT_LE(max_error, 2);
  EXPECT_GE(max_error, 1);  // the quirk is visible: not an exact identity
}

}  // namespace
}  // namespace fusediff::fused
