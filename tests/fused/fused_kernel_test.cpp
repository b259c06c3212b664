// FusedKernel: Create's support matrix, a hand-worked conv in every requantization variant, the int32
// wrap-around of the zero-point-folded accumulator, the exact variant against its defining inequality, the f32
// variant's ties, and Run against a textbook conv on random cases.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/lut.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {
namespace {

QuantParams Q(ScalarType scalar, float scale, int32_t zero_point, bool narrow = false) {
  return QuantParams{QuantType{scalar, narrow}, scale, zero_point};
}

Convention MakeConvention(RequantVariant variant, RoundingMode u_rounding, QuantParams u, QuantParams y,
                          Activation activation = Activation{ActivationKind::relu, 0.0f}) {
  Convention c;
  c.requant = variant;
  c.intermediate.q = u;
  c.intermediate.rounding = u_rounding;
  c.output.q = y;
  c.output.rounding = RoundingMode::half_away_from_zero;
  c.output.zero_point_order = ZeroPointOrder::after_rounding;
  c.activation = activation;
  return c;
}

std::unique_ptr<FusedKernel> MustCreate(const Convention& c, TableKind kind, Mutant mutant = Mutant::none) {
  std::string reason;
  auto kernel = FusedKernel::Create(c, kind, mutant, &reason);
  EXPECT_NE(kernel, nullptr) << reason;
  return kernel;
}

// A case whose only use is Requantize: sx, one sw.
ConvCase ScalesOnly(float sx, float sw) {
  return ConvCase().input_quant(Q(ScalarType::int8, sx, 0)).weight_scales({sw}).weights({1}).bias({0});
}

// ------------------------------------------------------------------------------------------------- Create

TEST(FusedKernelCreate, RejectsUnsupportedConventionsWithOneLineReasons) {
  const auto int8_u = Q(ScalarType::int8, 0.05f, 0);
  const auto int16_u = Q(ScalarType::int16, 0.001f, 0);
  const auto int8_y = Q(ScalarType::int8, 0.01f, 0);
  const auto int16_y = Q(ScalarType::int16, 0.0001f, 0);
  const RoundingMode away = RoundingMode::half_away_from_zero;
  struct Case {
    Convention c;
    TableKind kind;
    std::string expected;
  };
  const Case cases[] = {
      {MakeConvention(RequantVariant::double_rounding, away, int16_u, int16_y), TableKind::lut,
       "fused kind lut needs an 8-bit intermediate (int8 or uint8), got int16"},
      {MakeConvention(RequantVariant::double_rounding, away, int8_u, int16_y), TableKind::lut_interp,
       "fused kind lut_interp needs an int16 intermediate, got int8"},
      {MakeConvention(RequantVariant::double_rounding, away, int16_u, int8_y), TableKind::lut_interp,
       "fused kind lut_interp needs an int16 output, got int8"},
      {MakeConvention(RequantVariant::double_rounding, away, Q(ScalarType::int16, 0.001f, 3), int16_y),
       TableKind::lut_interp, "fused kind lut_interp needs intermediate zero point 0, got int16 zero point 3"},
      {MakeConvention(RequantVariant::double_rounding, away, int16_u, Q(ScalarType::int16, 0.0001f, -2)),
       TableKind::lut_interp, "fused kind lut_interp needs output zero point 0, got int16 zero point -2"},
  };
  for (const Case& c : cases) {
    std::string reason = "stale";
    EXPECT_EQ(FusedKernel::Create(c.c, c.kind, Mutant::none, &reason), nullptr) << c.expected;
    EXPECT_EQ(reason, c.expected);
    EXPECT_EQ(reason.find('\n'), std::string::npos);
    EXPECT_EQ(FusedKernel::Create(c.c, c.kind, Mutant::use_output_scale, nullptr), nullptr);  // null reason is fine
  }
}

TEST(FusedKernelCreate, InvalidConventionIsBadInputNotUnsupported) {
  const RoundingMode away = RoundingMode::half_away_from_zero;
  std::string reason;
  EXPECT_THROW(FusedKernel::Create(MakeConvention(RequantVariant::double_rounding, away, Q(ScalarType::int8, 0.0f, 0),
                                                  Q(ScalarType::int8, 0.01f, 0)),
                                   TableKind::lut, Mutant::none, &reason),
               InputError);
  // double_rounding's last step rounds half away from zero: a declared half_to_even contradicts it.
  EXPECT_THROW(FusedKernel::Create(MakeConvention(RequantVariant::double_rounding, RoundingMode::half_to_even,
                                                  Q(ScalarType::int8, 0.05f, 0), Q(ScalarType::int8, 0.01f, 0)),
                                   TableKind::lut, Mutant::none, &reason),
               InputError);
}

TEST(FusedKernelCreate, AcceptsEverySupportedCombination) {
  const RoundingMode away = RoundingMode::half_away_from_zero;
  for (ScalarType u : {ScalarType::int8, ScalarType::uint8}) {
    for (bool narrow : {false, true}) {
      if (u == ScalarType::uint8 && narrow) continue;
      for (ScalarType y : {ScalarType::int8, ScalarType::uint8, ScalarType::int16}) {
        std::string reason = "stale";
        const auto c = MakeConvention(RequantVariant::double_rounding, away, Q(u, 0.05f, u == ScalarType::uint8 ? 128 : 0, narrow),
                                      Q(y, 0.01f, y == ScalarType::uint8 ? 7 : -3));
        EXPECT_NE(FusedKernel::Create(c, TableKind::lut, Mutant::none, &reason), nullptr);
        EXPECT_TRUE(reason.empty());
      }
    }
  }
  const auto interp = MakeConvention(RequantVariant::single_rounding, RoundingMode::half_up,
                                     Q(ScalarType::int16, 0.001f, 0), Q(ScalarType::int16, 0.0001f, 0, true));
  EXPECT_NE(FusedKernel::Create(interp, TableKind::lut_interp, Mutant::none, nullptr), nullptr);
}

// ----------------------------------------------------------------------------------------------- ApplyTable

TEST(FusedKernelApplyTable, LutReadsTheIntermediateScaleAndTheMutantReadsTheOutputScale) {
  // su = 0.25, sy = 0.0625, relu: code 8 is 2.0 -> 32; the mutant dequantizes with sy: 0.5 -> 8.
  const auto c = MakeConvention(RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                Q(ScalarType::int8, 0.25f, 0), Q(ScalarType::int8, 0.0625f, 0));
  EXPECT_EQ(MustCreate(c, TableKind::lut)->ApplyTable(8), 32);
  EXPECT_EQ(MustCreate(c, TableKind::lut, Mutant::use_output_scale)->ApplyTable(8), 8);
  EXPECT_THROW(MustCreate(c, TableKind::lut)->ApplyTable(128), std::out_of_range);
  EXPECT_THROW(MustCreate(c, TableKind::lut)->ApplyTable(-129), std::out_of_range);
}

TEST(FusedKernelApplyTable, LutInterpIsTfliteLookupAndClampsToANarrowOutput) {
  const Activation sigmoid{ActivationKind::sigmoid, 0.0f};
  const auto c = MakeConvention(RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                Q(ScalarType::int16, 0x1p-12f, 0), Q(ScalarType::int16, 0x1p-15f, 0), sigmoid);
  const auto kernel = MustCreate(c, TableKind::lut_interp);
  const auto mutant = MustCreate(c, TableKind::lut_interp, Mutant::use_output_scale);
  const auto lut = LUTPopulateInt16(sigmoid, 0x1p-12f, 0, 0x1p-15f, 0);
  const auto wrong = LUTPopulateInt16(sigmoid, 0x1p-15f, 0, 0x1p-15f, 0);
  int differ = 0;
  for (int v = -32768; v <= 32767; v += 7) {
    ASSERT_EQ(kernel->ApplyTable(v), LUTLookup(static_cast<int16_t>(v), lut));
    ASSERT_EQ(mutant->ApplyTable(v), LUTLookup(static_cast<int16_t>(v), wrong));
    differ += kernel->ApplyTable(v) != mutant->ApplyTable(v);
  }
  EXPECT_GT(differ, 1000);
  // Identity (leaky_relu alpha 1) with s_in = s_out: knot 0 = round(-32768 * 65536/65535) clamps to -32768, which a
  // narrow int16 output cannot hold.
  const auto narrow = MakeConvention(RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                     Q(ScalarType::int16, 0x1p-10f, 0), Q(ScalarType::int16, 0x1p-10f, 0, true),
                                     Activation{ActivationKind::leaky_relu, 1.0f});
  EXPECT_EQ(MustCreate(narrow, TableKind::lut_interp)->ApplyTable(-32768), -32767);
  // A narrow int16 intermediate has no code -32768.
  const auto narrow_u = MakeConvention(RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                       Q(ScalarType::int16, 0x1p-10f, 0, true), Q(ScalarType::int16, 0x1p-10f, 0),
                                       Activation{ActivationKind::leaky_relu, 1.0f});
  EXPECT_THROW(MustCreate(narrow_u, TableKind::lut_interp)->ApplyTable(-32768), std::out_of_range);
  EXPECT_NO_THROW(MustCreate(narrow_u, TableKind::lut_interp)->ApplyTable(-32767));
}

// --------------------------------------------------------------------------------------- hand-worked conv

// Input 3x4x1 uint8 (sx = 0.5, zx = 10), kernel 2x2, stride (1, 2), dilation (2, 1), padding top/left 1, bottom/right
// 0 -> output 2x2x2. Per output (oy, ox) the taps are input rows oy - 1 + 2 ky and columns 2 ox - 1 + kx.
//   x - zx:   4   0  -8  20        w[0] = [1 2; 3 4], sw = 0.25,  bias 100
//            -2  10   0  -5        w[1] = [-5 6; 7 -127], sw = 0.125, bias -1302
//           -10 245   2  -1
//   (0,0): only tap (ky1,kx1) = -2       -> acc0 = 4*-2 + 100 = 92,     acc1 = -127*-2 - 1302 = -1048
//   (0,1): (ky1,kx0) = 10, (ky1,kx1) = 0 -> acc0 = 30 + 100 = 130,      acc1 = 70 - 1302 = -1232
//   (1,0): (ky0,kx1) = 4, (ky1,kx1) = -10 -> acc0 = 8 - 40 + 100 = 68,  acc1 = 24 + 1270 - 1302 = -8
//   (1,1): 0, -8, 245, 2                  -> acc0 = -16 + 735 + 8 + 100 = 827, acc1 = -48 + 1715 - 254 - 1302 = 111
// su = 1 (zu = -3): M0 = 0.125, M1 = 0.0625, so acc * M = 11.5, 16.25, 8.5, 103.375 and -65.5, -77, -0.5, 6.9375.
ConvCase HandConv() {
  return ConvCase()
      .batch(1)
      .input_size(3, 4)
      .input_channels(1)
      .output_channels(2)
      .kernel_size(2, 2)
      .stride(1, 2)
      .dilation(2, 1)
      .padding(1, 1, 0, 0)
      .input_quant(Q(ScalarType::uint8, 0.5f, 10))
      .weight_scales({0.25f, 0.125f})
      .weights({1, 2, 3, 4, -5, 6, 7, -127})
      .bias({100, -1302});
}
const std::vector<int32_t> kHandInput = {14, 10, 2, 30, 8, 20, 10, 5, 0, 255, 12, 9};
// acc[k][oy * 2 + ox]
const std::array<std::array<int32_t, 4>, 2> kHandAcc = {{{92, 130, 68, 827}, {-1048, -1232, -8, 111}}};

struct VariantCase {
  RequantVariant variant;
  RoundingMode rounding;
  std::array<std::array<int32_t, 4>, 2> scaled;  // u - zu
};

TEST(FusedKernelRun, HandWorkedConvInEveryVariant) {
  using V = RequantVariant;
  using M = RoundingMode;
  const VariantCase cases[] = {
      // ties 11.5, 8.5 away; -65.5 -> -66, -0.5 -> -1. And the double rounding itself: 827 * 2^30 / 2^31 = 413.5
      // -> 414 (SRDHM), then 414 / 4 = 103.5 -> 104, where the exact 103.375 gives 103.
      {V::double_rounding, M::half_away_from_zero, {{{12, 16, 9, 104}, {-66, -77, -1, 7}}}},
      // one rounding, ties up: -65.5 -> -65, -0.5 -> 0
      {V::single_rounding, M::half_up, {{{12, 16, 9, 103}, {-65, -77, 0, 7}}}},
      // ties to even: 8.5 -> 8, -65.5 -> -66, -0.5 -> 0
      {V::f32_half_even, M::half_to_even, {{{12, 16, 8, 103}, {-66, -77, 0, 7}}}},
      {V::exact, M::half_away_from_zero, {{{12, 16, 9, 103}, {-66, -77, -1, 7}}}},
      {V::exact, M::half_up, {{{12, 16, 9, 103}, {-65, -77, 0, 7}}}},
      {V::exact, M::half_to_even, {{{12, 16, 8, 103}, {-66, -77, 0, 7}}}},
  };
  const ConvCase conv = HandConv();
  ASSERT_NO_THROW(conv.validate());
  ASSERT_EQ(conv.output_height(), 2);
  ASSERT_EQ(conv.output_width(), 2);
  for (const VariantCase& vc : cases) {
    // relu, y = int8 (sy = 0.5, zy = -128): y = 2 * max(u - zu, 0) - 128.
    const auto c = MakeConvention(vc.variant, vc.rounding, Q(ScalarType::int8, 1.0f, -3), Q(ScalarType::int8, 0.5f, -128));
    const auto kernel = MustCreate(c, TableKind::lut);
    const auto mutant = MustCreate(c, TableKind::lut, Mutant::use_output_scale);
    std::vector<int32_t> y(8), acc(8), u(8), y_mutant(8);
    kernel->Run(conv, kHandInput, y, acc, u);
    mutant->Run(conv, kHandInput, y_mutant);
    for (int32_t oy = 0; oy < 2; ++oy) {
      for (int32_t ox = 0; ox < 2; ++ox) {
        for (int32_t k = 0; k < 2; ++k) {
          const size_t i = conv.output_index(0, oy, ox, k);
          const int32_t scaled = vc.scaled[static_cast<size_t>(k)][static_cast<size_t>(oy * 2 + ox)];
          const std::string where = "variant " + std::to_string(static_cast<int>(vc.variant)) + " rounding " +
                                    std::to_string(static_cast<int>(vc.rounding)) + " at (" + std::to_string(oy) +
                                    "," + std::to_string(ox) + "," + std::to_string(k) + ")";
          EXPECT_EQ(acc[i], kHandAcc[static_cast<size_t>(k)][static_cast<size_t>(oy * 2 + ox)]) << where;
          EXPECT_EQ(u[i], scaled - 3) << where;
          EXPECT_EQ(y[i], 2 * std::max(scaled, 0) - 128) << where;
          // The mutant reads u with sy = 0.5: y = max(u - zu, 0) - 128.
          EXPECT_EQ(y_mutant[i], std::max(scaled, 0) - 128) << where;
          EXPECT_EQ(kernel->Requantize(conv, k, acc[i]), u[i]) << where;
        }
      }
    }
  }
}

TEST(FusedKernelRun, RejectsSpansOfTheWrongSize) {
  const ConvCase conv = HandConv();
  const auto kernel = MustCreate(MakeConvention(RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                                Q(ScalarType::int8, 1.0f, -3), Q(ScalarType::int8, 0.5f, -128)),
                                 TableKind::lut);
  std::vector<int32_t> y(8), small(7);
  const std::vector<int32_t> short_input(11, 10);
  EXPECT_THROW(kernel->Run(conv, short_input, y), std::invalid_argument);
  EXPECT_THROW(kernel->Run(conv, kHandInput, small), std::invalid_argument);
  EXPECT_THROW(kernel->Run(conv, kHandInput, y, small), std::invalid_argument);
  EXPECT_THROW(kernel->Run(conv, kHandInput, y, {}, small), std::invalid_argument);
  EXPECT_NO_THROW(kernel->Run(conv, kHandInput, y));
}

TEST(FusedKernelRun, ZeroPointFoldingWrapsInInt32AndStillGivesTheTrueAccumulator) {
  // 1x2 conv over 50000 input channels (100000 taps), uint8 input at zx = 128, every weight 127: the raw sum
  // x * w reaches 255 * 127 * 100000 = 3238500000 > 2^31 and wraps, yet acc = 127 * 127 * 100000 = 1612900000
  // comes out exact (the true accumulator bound 128 * 127 * 100000 < 2^31 makes the case valid).
  constexpr int32_t kChannels = 50000;
  constexpr int32_t kTaps = 2 * kChannels;
  const ConvCase conv = ConvCase()
                            .input_size(1, 2)
                            .kernel_size(1, 2)
                            .input_channels(kChannels)
                            .input_quant(Q(ScalarType::uint8, 1.0f, 128))
                            .weight_scales({1.0f})
                            .weights(std::vector<int8_t>(kTaps, 127))
                            .bias({-7});
  ASSERT_NO_THROW(conv.validate());
  const auto kernel = MustCreate(MakeConvention(RequantVariant::exact, RoundingMode::half_to_even,
                                                Q(ScalarType::int8, 1.0f, 0), Q(ScalarType::int8, 1.0f, 0)),
                                 TableKind::lut);
  std::vector<int32_t> y(1), acc(1), u(1);
  kernel->Run(conv, std::vector<int32_t>(kTaps, 255), y, acc, u);
  EXPECT_EQ(acc[0], 1612900000 - 7);
  EXPECT_EQ(u[0], 127);  // saturated
  kernel->Run(conv, std::vector<int32_t>(kTaps, 0), y, acc, u);
  EXPECT_EQ(acc[0], -1625600000 - 7);
  EXPECT_EQ(u[0], -128);
  EXPECT_EQ(y[0], 0);  // relu
}

// -------------------------------------------------------------------------------------------- Requantize

// A kernel with an int16 intermediate (lut_interp), where requantized values have room.
std::unique_ptr<FusedKernel> Int16Kernel(RequantVariant v, RoundingMode m) {
  return MustCreate(MakeConvention(v, m, Q(ScalarType::int16, 1.0f, 0), Q(ScalarType::int16, 1.0f, 0)),
                    TableKind::lut_interp);
}

TEST(FusedKernelRequantize, F32RoundsTheAccumulatorToFloatFirst) {
  // acc = 2^24 + 513 is not a float: it becomes 2^24 + 512 (tie to even), and * 2^-10 = 16384.5 -> 16384 (even).
  // The exact value 16384.5009... rounds to 16385 in every other variant.
  const ConvCase conv = ScalesOnly(0x1p-10f, 1.0f);
  const int32_t acc = (1 << 24) + 513;
  EXPECT_EQ(Int16Kernel(RequantVariant::f32_half_even, RoundingMode::half_to_even)->Requantize(conv, 0, acc), 16384);
  EXPECT_EQ(Int16Kernel(RequantVariant::exact, RoundingMode::half_to_even)->Requantize(conv, 0, acc), 16385);
  EXPECT_EQ(Int16Kernel(RequantVariant::double_rounding, RoundingMode::half_away_from_zero)->Requantize(conv, 0, acc), 16385);
  EXPECT_EQ(Int16Kernel(RequantVariant::single_rounding, RoundingMode::half_up)->Requantize(conv, 0, acc), 16385);
  // Away from exact ties: acc = 36781101 becomes the float 36781100, and * M32 (0x1.ad7796p-12) rounds to just
  // below 15064.5 -> 15064, while the exact product 15064.50079 gives 15065.
  const ConvCase m32 = ScalesOnly(0x1.ad7796p-12f, 1.0f);
  EXPECT_EQ(Int16Kernel(RequantVariant::f32_half_even, RoundingMode::half_to_even)->Requantize(m32, 0, 36781101), 15064);
  EXPECT_EQ(Int16Kernel(RequantVariant::exact, RoundingMode::half_to_even)->Requantize(m32, 0, 36781101), 15065);
}

TEST(FusedKernelRequantize, ExactTiesInEveryRoundingMode) {
  const ConvCase conv = ScalesOnly(0.5f, 1.0f);  // M = 1/2
  const auto away = Int16Kernel(RequantVariant::exact, RoundingMode::half_away_from_zero);
  const auto even = Int16Kernel(RequantVariant::exact, RoundingMode::half_to_even);
  const auto up = Int16Kernel(RequantVariant::exact, RoundingMode::half_up);
  const int32_t accs[] = {5, -5, 7, -7, 1, -1};
  const int32_t want_away[] = {3, -3, 4, -4, 1, -1};
  const int32_t want_even[] = {2, -2, 4, -4, 0, 0};
  const int32_t want_up[] = {3, -2, 4, -3, 1, 0};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(away->Requantize(conv, 0, accs[i]), want_away[i]) << accs[i];
    EXPECT_EQ(even->Requantize(conv, 0, accs[i]), want_even[i]) << accs[i];
    EXPECT_EQ(up->Requantize(conv, 0, accs[i]), want_up[i]) << accs[i];
  }
  // 0.1f * 0.3f / 0.7f is no dyadic fraction; acc = 7: 7 * 0.1f * 0.3f / 0.7f = 0.30000001... -> 0 in all modes.
  const ConvCase odd = ScalesOnly(0.1f, 0.3f);
  const auto k = MustCreate(MakeConvention(RequantVariant::exact, RoundingMode::half_up, Q(ScalarType::int16, 0.7f, 0),
                                           Q(ScalarType::int16, 1.0f, 0)),
                            TableKind::lut_interp);
  EXPECT_EQ(k->Requantize(odd, 0, 7), 0);
  EXPECT_EQ(k->Requantize(odd, 0, 12), 1);        // 0.514...
  EXPECT_EQ(k->Requantize(odd, 0, -1000000), -32768);  // -42857.14 saturates to int16
}

TEST(FusedKernelRequantize, HugeAndTinyMultipliersSaturateOrVanishInEveryVariant) {
  using V = RequantVariant;
  using M = RoundingMode;
  const std::pair<V, M> variants[] = {{V::double_rounding, M::half_away_from_zero},
                                      {V::single_rounding, M::half_up},
                                      {V::f32_half_even, M::half_to_even},
                                      {V::exact, M::half_away_from_zero}};
  for (const auto& [v, m] : variants) {
    const std::string name = std::to_string(static_cast<int>(v));
    const auto kernel_huge = MustCreate(MakeConvention(v, m, Q(ScalarType::int16, 1e-30f, 0), Q(ScalarType::int16, 1.0f, 0)),
                                        TableKind::lut_interp);
    const ConvCase unit = ScalesOnly(1.0f, 1.0f);  // M = 1e30
    EXPECT_EQ(kernel_huge->Requantize(unit, 0, 1), 32767) << name;
    EXPECT_EQ(kernel_huge->Requantize(unit, 0, -1), -32768) << name;
    EXPECT_EQ(kernel_huge->Requantize(unit, 0, 0), 0) << name;
    EXPECT_EQ(kernel_huge->Requantize(unit, 0, std::numeric_limits<int32_t>::min()), -32768) << name;
    // Subnormal su: 1 / 1e-45f overflows float to inf in the f32 variant; acc = 0 must still give 0.
    const auto kernel_subnormal =
        MustCreate(MakeConvention(v, m, Q(ScalarType::int16, 1e-45f, 0), Q(ScalarType::int16, 1.0f, 0)), TableKind::lut_interp);
    EXPECT_EQ(kernel_subnormal->Requantize(unit, 0, 0), 0) << name;
    EXPECT_EQ(kernel_subnormal->Requantize(unit, 0, 3), 32767) << name;
    // M = 1e-30 * 1e-8: every accumulator rounds to 0.
    const ConvCase tiny = ScalesOnly(1e-30f, 1e-8f);
    const auto kernel_unit = MustCreate(MakeConvention(v, m, Q(ScalarType::int16, 1.0f, 0), Q(ScalarType::int16, 1.0f, 0)),
                                        TableKind::lut_interp);
    EXPECT_EQ(kernel_unit->Requantize(tiny, 0, std::numeric_limits<int32_t>::max()), 0) << name;
    EXPECT_EQ(kernel_unit->Requantize(tiny, 0, std::numeric_limits<int32_t>::min()), 0) << name;
  }
}

RC_GTEST_PROP(FusedKernelRequantizeProp, F32TiesGoToEven, ()) {
  // M32 = 0.5 exactly: acc / 2 is exact in float for |acc| < 2^24; odd acc are ties.
  static const auto kernel = Int16Kernel(RequantVariant::f32_half_even, RoundingMode::half_to_even);
  static const ConvCase conv = ScalesOnly(0.5f, 1.0f);
  const int32_t acc = *rc::gen::inRange(-65000, 65001);
  RC_CLASSIFY(acc % 2 != 0, "tie");
  const int32_t floor_half = acc >= 0 ? acc / 2 : -((-acc + 1) / 2);
  const int32_t expected = (acc % 2 == 0) ? acc / 2 : (floor_half % 2 == 0 ? floor_half : floor_half + 1);
  RC_ASSERT(kernel->Requantize(conv, 0, acc) == expected);
}

// sign(a) for the tie check below.
int Sign(__int128 v) { return (v > 0) - (v < 0); }

RC_GTEST_PROP(FusedKernelRequantizeProp, ExactSatisfiesItsDefiningInequality, ()) {
  // u = r (zu = 0) must satisfy |acc * sx * sw - r * su| <= su / 2, with the mode deciding an exact tie. All three
  // scales are dyadic: v = m * 2^e with m < 2^24. Brought to the common exponent emin they are integers < 2^120.
  const RoundingMode mode = *rc::gen::element(RoundingMode::half_away_from_zero, RoundingMode::half_to_even,
                                              RoundingMode::half_up);
  const auto gen_scale = [](int lo, int hi) {
    return rc::gen::apply(
        [](int32_t mantissa, int exponent) { return std::ldexp(static_cast<float>(mantissa), exponent - 23); },
        rc::gen::oneOf(rc::gen::inRange<int32_t>(1 << 23, 1 << 24), rc::gen::just<int32_t>(1 << 23),
                       rc::gen::just<int32_t>(3 << 22)),
        rc::gen::inRange(lo, hi));
  };
  const float sx = *gen_scale(-10, 1);
  const float sw = *gen_scale(-10, 1);
  const float su = *gen_scale(-8, 3);
  const int bits = *rc::gen::inRange(0, 32);
  const int32_t acc = static_cast<int32_t>(*rc::gen::inRange<int64_t>(-(int64_t{1} << bits), int64_t{1} << bits));
  const auto kernel = MustCreate(MakeConvention(RequantVariant::exact, mode, Q(ScalarType::int16, su, 0),
                                                Q(ScalarType::int16, 1.0f, 0)),
                                 TableKind::lut_interp);
  const int32_t r = kernel->Requantize(ScalesOnly(sx, sw), 0, acc);

  int ex = 0, ew = 0, eu = 0;
  const auto mx = static_cast<__int128>(std::ldexp(std::frexp(sx, &ex), 24));
  const auto mw = static_cast<__int128>(std::ldexp(std::frexp(sw, &ew), 24));
  const auto mu = static_cast<__int128>(std::ldexp(std::frexp(su, &eu), 24));
  const int e_value = ex + ew - 48;  // acc * mx * mw * 2^e_value
  const int e_unit = eu - 24;        // mu * 2^e_unit = su
  const int emin = std::min(e_value, e_unit - 1);
  const __int128 value = __int128{acc} * mx * mw * (__int128{1} << (e_value - emin));
  const __int128 unit = mu * (__int128{1} << (e_unit - emin));  // su, in units of 2^emin
  if (r == 32767 || r == -32768) {
    RC_TAG("saturated");
    // At the type's edge r is either the rounded value or the saturation of a larger one.
    const bool consistent = r == 32767 ? 2 * value >= (2 * 32767 - 1) * unit : 2 * value <= (2 * -32768 + 1) * unit;
    RC_ASSERT(consistent);
    return;
  }
  const __int128 diff = value - __int128{r} * unit;  // value - r, scaled
  RC_ASSERT(2 * (diff < 0 ? -diff : diff) <= unit);
  if (2 * (diff < 0 ? -diff : diff) == unit) {
    RC_TAG("tie");
    // value = r + s/2 with s = sign(diff): the other candidate is r + s.
    const int s = Sign(diff);
    const int32_t other = r + s;
    switch (mode) {
      case RoundingMode::half_away_from_zero:
        RC_ASSERT(std::abs(r) > std::abs(other));
        break;
      case RoundingMode::half_to_even:
        RC_ASSERT(r % 2 == 0);
        break;
      case RoundingMode::half_up:
        RC_ASSERT(r > other);
        break;
    }
  }
}

// ------------------------------------------------------------------------------ Run vs a textbook conv

// The textbook loop in int64: acc = bias + sum over in-bounds taps of (x - zx) * w.
std::vector<int64_t> TextbookAcc(const ConvCase& conv, const std::vector<int32_t>& input) {
  std::vector<int64_t> out(conv.output_elements());
  const int32_t zx = conv.input_quant().zero_point;
  for (int32_t n = 0; n < conv.batch(); ++n)
    for (int32_t oy = 0; oy < conv.output_height(); ++oy)
      for (int32_t ox = 0; ox < conv.output_width(); ++ox)
        for (int32_t k = 0; k < conv.output_channels(); ++k) {
          int64_t acc = conv.bias()[static_cast<size_t>(k)];
          for (int32_t ky = 0; ky < conv.kernel_height(); ++ky)
            for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
              const int32_t iy = oy * conv.stride_height() - conv.padding_top() + ky * conv.dilation_height();
              const int32_t ix = ox * conv.stride_width() - conv.padding_left() + kx * conv.dilation_width();
              if (iy < 0 || ix < 0 || iy >= conv.input_height() || ix >= conv.input_width()) continue;
              for (int32_t c = 0; c < conv.input_channels(); ++c) {
                acc += int64_t{input[conv.input_index(n, iy, ix, c)] - zx} * conv.weights()[conv.weight_index(k, ky, kx, c)];
              }
            }
          out[conv.output_index(n, oy, ox, k)] = acc;
        }
  return out;
}

RC_GTEST_PROP(FusedKernelRunProp, MatchesTextbookConvAndItsOwnStages, ()) {
  const bool uint8_input = *rc::gen::arbitrary<bool>();
  const QuantType input_type{uint8_input ? ScalarType::uint8 : ScalarType::int8, false};
  const int32_t zx = *rc::gen::inRange(input_type.qmin(), input_type.qmax() + 1);
  const int32_t kh = *rc::gen::inRange(1, 4), kw = *rc::gen::inRange(1, 4);
  const int32_t cin = *rc::gen::inRange(1, 4), cout = *rc::gen::inRange(1, 4);
  ConvCase conv = ConvCase()
                      .batch(*rc::gen::inRange(1, 3))
                      .input_size(*rc::gen::inRange(1, 7), *rc::gen::inRange(1, 7))
                      .input_channels(cin)
                      .output_channels(cout)
                      .kernel_size(kh, kw)
                      .stride(*rc::gen::inRange(1, 3), *rc::gen::inRange(1, 3))
                      .dilation(*rc::gen::inRange(1, 3), *rc::gen::inRange(1, 3))
                      .padding(*rc::gen::inRange(0, 3), *rc::gen::inRange(0, 3), *rc::gen::inRange(0, 3),
                               *rc::gen::inRange(0, 3))
                      .input_quant(QuantParams{input_type, 0.02f, zx});
  std::vector<float> sw;
  std::vector<int32_t> bias;
  for (int32_t k = 0; k < cout; ++k) {
    sw.push_back(*rc::gen::element(0.001f, 0.0037f, 0.01f, 0.02f));
    bias.push_back(*rc::gen::inRange(-5000, 5001));
  }
  conv.weight_scales(sw).bias(bias).weights(*rc::gen::container<std::vector<int8_t>>(
      static_cast<size_t>(cout * kh * kw * cin),
      rc::gen::map(rc::gen::inRange(-127, 128), [](int w) { return static_cast<int8_t>(w); })));
  try {
    conv.validate();
  } catch (const InputError&) {
    RC_DISCARD("kernel does not fit");
  }
  const std::vector<int32_t> input = *rc::gen::container<std::vector<int32_t>>(
      conv.input_elements(), rc::gen::inRange(input_type.qmin(), input_type.qmax() + 1));
  const bool padded = conv.padding_top() + conv.padding_left() + conv.padding_bottom() + conv.padding_right() > 0;
  RC_CLASSIFY(padded, "padded");
  RC_CLASSIFY(uint8_input, "uint8 input");

  const auto variant = *rc::gen::element(std::make_pair(RequantVariant::double_rounding, RoundingMode::half_away_from_zero),
                                         std::make_pair(RequantVariant::single_rounding, RoundingMode::half_up),
                                         std::make_pair(RequantVariant::f32_half_even, RoundingMode::half_to_even),
                                         std::make_pair(RequantVariant::exact, RoundingMode::half_to_even));
  const auto kernel = MustCreate(MakeConvention(variant.first, variant.second, Q(ScalarType::int8, 0.05f, 3),
                                                Q(ScalarType::uint8, 0.02f, 40), Activation{ActivationKind::silu, 0.0f}),
                                 TableKind::lut);
  std::vector<int32_t> y(conv.output_elements()), acc(y.size()), u(y.size());
  kernel->Run(conv, input, y, acc, u);
  const std::vector<int64_t> expected = TextbookAcc(conv, input);
  for (size_t i = 0; i < y.size(); ++i) {
    const int32_t k = conv.output_coord(i).k;
    RC_ASSERT(int64_t{acc[i]} == expected[i]);
    RC_ASSERT(u[i] == kernel->Requantize(conv, k, acc[i]));
    RC_ASSERT(y[i] == kernel->ApplyTable(u[i]));
  }
  // The optional spans are optional: y alone is the same.
  std::vector<int32_t> y_only(y.size());
  kernel->Run(conv, input, y_only);
  RC_ASSERT(y_only == y);
}

}  // namespace
}  // namespace fusediff::fused
