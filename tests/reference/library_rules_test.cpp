// The rules a library declares, evaluated by the reference on their own (no library linked): XNNPACK's add
// (fixed_point_half_up), average (fixed_point_half_away) and table arithmetic (binary32_libm), on worked examples
// from docs/xnnpack.md.
#include <gtest/gtest.h>

#include <vector>

#include "fusediff/model/convention.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/pattern.h"
#include "fusediff/reference/reference.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {
namespace {

const QuantType kS8{ScalarType::int8, false};
const QuantType kU8{ScalarType::uint8, false};

// sa 0.05, sb 0.07, so 0.1: ra = 2^-1, rb = 0x1.666666p-1, shift 21, ma = 1048576, mb = 1468006. a - za = 118,
// b - zb = -115: the sum is -45088722, / 2^21 = -21.49999..., and + 1/2 floors to -21 (TFLite's three roundings: -22).
TEST(LibraryRules, FixedPointHalfUpAddRoundsOnceTowardPlusInfinity) {
  const QuantParams qa{kS8, 0.05f, -118}, qb{kS8, 0.07f, 124}, qo{kS8, 0.1f, 0};
  EXPECT_EQ(QuantizedAdd(AddRule::fixed_point_half_up, 0, qa, 9, qb, qo).code, -21);
  EXPECT_EQ(QuantizedAdd(AddRule::tflite, 0, qa, 9, qb, qo).code, -22);
  // An exact tie, sa = sb = so: (1 + 0) / 2 = 1/2 goes up; (-1 + 0) / 2 = -1/2 goes up to 0.
  const QuantParams half{kS8, 0.5f, 0}, one{kS8, 1.0f, 0};
  EXPECT_EQ(QuantizedAdd(AddRule::fixed_point_half_up, 1, half, 0, half, one).code, 1);
  EXPECT_EQ(QuantizedAdd(AddRule::fixed_point_half_up, -1, half, 0, half, one).code, 0);
  // Outside XNNPACK's domain of the ratios: refused, naming it.
  EXPECT_THROW(QuantizedAdd(AddRule::fixed_point_half_up, 0, QuantParams{kS8, 1000.0f, 0}, 0, half, one), InputError);
}

// s = fl32(si / fl32(so n)); the exact product acc s rounded half away from zero around the zero point.
TEST(LibraryRules, FixedPointHalfAwayAverageRoundsAwayFromZero) {
  const QuantParams unit{kU8, 1.0f, 0}, shifted{kU8, 1.0f, 10};
  const std::vector<int32_t> eights = {8, 8, 8, 8}, one_two = {1, 2}, below = {9, 10};
  EXPECT_EQ(AveragePool(AvgPoolRule::fixed_point_half_away, eights, unit, unit).code, 8);
  EXPECT_EQ(AveragePool(AvgPoolRule::fixed_point_half_away, one_two, unit, unit).code, 2);  // 1.5 -> 2
  // acc = -1, -1/2 -> -1 (away from zero), + zo 10; the fp32 rule of the global path (ort_global) rounds to even: 10.
  EXPECT_EQ(AveragePool(AvgPoolRule::fixed_point_half_away, below, shifted, shifted).code, 9);
  EXPECT_EQ(AveragePool(AvgPoolRule::ort_global, below, shifted, shifted).code, 10);
}

// leaky_relu with slope 1/2 and si = so: t = (u - zu) / 2 for u < zu, ties rounded to even by lrintf, the zero point
// after rounding (the exact rule with TFLite's half-away rounding rounds them away from zero).
TEST(LibraryRules, Binary32LibmTableRoundsTiesToEvenAfterTheProduct) {
  Convention c;
  c.activation = Activation{ActivationKind::leaky_relu, 0.5f};
  c.intermediate.q = QuantParams{kU8, 0.25f, 128};
  c.output.q = QuantParams{kU8, 0.25f, 128};
  c.output.rounding = RoundingMode::half_to_even;
  c.output.zero_point_order = ZeroPointOrder::after_rounding;
  c.post_ops = PostOpArithmetic::binary32_libm;
  const ActivationTable table(c);
  EXPECT_EQ(table.at(125).y, 126);  // -3 / 2 = -1.5 -> -2
  EXPECT_EQ(table.at(127).y, 128);  // -1 / 2 = -0.5 -> -0
  EXPECT_EQ(table.at(131).y, 131);  // x >= 0: x
  c.output.rounding = RoundingMode::half_away_from_zero;
  EXPECT_THROW(validate(c), InputError);  // the rule rounds half to even
  c.output.rounding = RoundingMode::half_to_even;
  c.activation = Activation{ActivationKind::gelu_erf, 0.0f};
  EXPECT_THROW(ActivationTable{c}, InputError);  // a function the rule does not define
}

}  // namespace
}  // namespace fusediff::reference
