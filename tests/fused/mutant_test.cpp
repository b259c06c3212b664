// Each mutant of the catalog computes what its definition says, on hand-worked examples.
#include <gtest/gtest.h>

#include <array>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/lut.h"
#include "fusediff/model/mutants.h"

namespace fusediff::fused {
namespace {

Convention Relu(float su, int32_t zu, float sy, int32_t zy) {
  Convention c;
  c.requant = RequantVariant::double_rounding;
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8}, su, zu};
  c.output.q = QuantParams{QuantType{ScalarType::int8}, sy, zy};
  c.activation = make_activation(ActivationKind::relu);
  return c;
}

std::unique_ptr<FusedKernel> Make(const Convention& c, Mutant m, TableKind kind = TableKind::lut) {
  std::string why;
  auto kernel = FusedKernel::Create(c, kind, m, &why);
  EXPECT_TRUE(kernel) << why;
  return kernel;
}

// One channel with M = sx*sw/su = 0.5 * 0.5 / 1 = 0.25 exactly.
ConvCase QuarterMultiplier() {
  ConvCase conv;
  conv.input_quant(QuantParams{QuantType{ScalarType::int8}, 0.5f, 0}).weight_scales({0.5f}).weights({1}).bias({0});
  return conv;
}

TEST(Mutants, CatalogHasTwentyEightNamedEntriesThatParse) {
  EXPECT_EQ(mutant_catalog().size(), 34u);  // 12 conv+act, 6 pattern, 6 BatchNorm fold, 1 FC fold, 3 mul / BatchNorm-after-act, 6 LayerNorm
  for (const MutantInfo& info : mutant_catalog()) {
    EXPECT_EQ(parse_mutant(info.name, "m"), info.mutant);
    EXPECT_FALSE(info.definition.empty());
    EXPECT_FALSE(info.space.empty());
  }
}

TEST(Mutants, RequantTruncateDropsTheRoundingTerm) {
  Convention c = Relu(1.0f, 0, 0.25f, 0);
  // double rounding: SRDHM(5, 2^30) = 3, then 3 >> 1 = 1 where RoundingDivideByPOT gives 2.
  EXPECT_EQ(Make(c, Mutant::none)->Requantize(QuarterMultiplier(), 0, 5), 2);
  EXPECT_EQ(Make(c, Mutant::requant_truncate)->Requantize(QuarterMultiplier(), 0, 5), 1);
  // single rounding: 6 * 0.25 = 1.5 -> 2 (half up); truncated -> 1.
  c.requant = RequantVariant::single_rounding;
  c.intermediate.rounding = RoundingMode::half_up;
  EXPECT_EQ(Make(c, Mutant::none)->Requantize(QuarterMultiplier(), 0, 6), 2);
  EXPECT_EQ(Make(c, Mutant::requant_truncate)->Requantize(QuarterMultiplier(), 0, 6), 1);
}

TEST(Mutants, RequantDoubleForSingle) {
  Convention c = Relu(1.0f, 0, 0.25f, 0);
  c.requant = RequantVariant::single_rounding;
  c.intermediate.rounding = RoundingMode::half_up;
  EXPECT_EQ(Make(c, Mutant::none)->Requantize(QuarterMultiplier(), 0, 5), 1);
  EXPECT_EQ(Make(c, Mutant::requant_double_for_single)->Requantize(QuarterMultiplier(), 0, 5), 2);
  EXPECT_EQ(Make(c, Mutant::requant_double_for_single)->Requantize(QuarterMultiplier(), 0, -6), -2);
}

TEST(Mutants, NoIntermediateSaturationWraps) {
  Convention c = Relu(1.0f, 10, 0.25f, 0);
  // 480 * 0.25 + 10 = 130: saturates to 127, wraps to 130 - 256 = -126.
  EXPECT_EQ(Make(c, Mutant::none)->Requantize(QuarterMultiplier(), 0, 480), 127);
  EXPECT_EQ(Make(c, Mutant::no_intermediate_saturation)->Requantize(QuarterMultiplier(), 0, 480), -126);
}

TEST(Mutants, LutIndexOffByOneReadsTheNextCode) {
  const Convention c = Relu(0.25f, 0, 0.0625f, 0);
  auto right = Make(c, Mutant::none);
  auto wrong = Make(c, Mutant::lut_index_off_by_one);
  for (int32_t u = -128; u < 127; ++u) EXPECT_EQ(wrong->ApplyTable(u), right->ApplyTable(u + 1)) << u;
  EXPECT_EQ(wrong->ApplyTable(127), right->ApplyTable(127));
}

TEST(Mutants, KneeEntryIsOneHigh) {
  const Convention c = Relu(0.25f, 3, 0.0625f, -5);
  auto right = Make(c, Mutant::none);
  auto wrong = Make(c, Mutant::knee_entry_off_by_one);
  for (int32_t u = -128; u <= 127; ++u) {
    // relu's knee 0 is code zu = 3.
    EXPECT_EQ(wrong->ApplyTable(u), right->ApplyTable(u) + (u == 3 ? 1 : 0)) << u;
  }
}

TEST(Mutants, IgnoreIntermediateZeroPoint) {
  auto wrong = Make(Relu(0.25f, 10, 0.0625f, 0), Mutant::ignore_intermediate_zero_point);
  auto as_if_zero = Make(Relu(0.25f, 0, 0.0625f, 0), Mutant::none);
  for (int32_t u = -128; u <= 127; ++u) EXPECT_EQ(wrong->ApplyTable(u), as_if_zero->ApplyTable(u)) << u;
  EXPECT_NE(Make(Relu(0.25f, 10, 0.0625f, 0), Mutant::none)->ApplyTable(20), wrong->ApplyTable(20));
}

TEST(Mutants, ZeroPointBeforeRoundingAtATie) {
  // u = 1 -> v = 1/32 -> f/sy = 0.5, zy = 1, half to even: after = 0 + 1 = 1; before = round(1.5) = 2.
  Convention c = Relu(0.03125f, 0, 0.0625f, 1);
  c.output.rounding = RoundingMode::half_to_even;
  EXPECT_EQ(Make(c, Mutant::none)->ApplyTable(1), 1);
  EXPECT_EQ(Make(c, Mutant::zero_point_before_rounding)->ApplyTable(1), 2);
}

TEST(Mutants, OutputHalfEvenForHalfAwayAtATie) {
  const Convention c = Relu(0.03125f, 0, 0.0625f, 0);  // u = 1 -> f/sy = 0.5
  EXPECT_EQ(Make(c, Mutant::none)->ApplyTable(1), 1);
  EXPECT_EQ(Make(c, Mutant::output_half_even_for_half_away)->ApplyTable(1), 0);
  EXPECT_EQ(Make(c, Mutant::output_half_even_for_half_away)->ApplyTable(3), 2);  // 1.5 -> 2 either way
}

TEST(Mutants, SkipIntermediateQuantizationUsesTheUnroundedValue) {
  // exact requant, acc 5, M = 0.25: u = 1 (1.25 rounded), relu(1)/0.25 = 4; unrounded relu(1.25)/0.25 = 5.
  Convention c = Relu(1.0f, 0, 0.25f, 0);
  c.requant = RequantVariant::exact;
  ConvCase conv = QuarterMultiplier();
  conv.bias({5});
  const std::vector<int32_t> input = {0};
  std::vector<int32_t> y_right(1), y_wrong(1);
  Make(c, Mutant::none)->Run(conv, input, y_right);
  Make(c, Mutant::skip_intermediate_quantization)->Run(conv, input, y_wrong);
  EXPECT_EQ(y_right[0], 4);
  EXPECT_EQ(y_wrong[0], 5);
}

TEST(Mutants, GeluTanhForErfServesTheOtherFunction) {
  Convention c = Relu(0.05f, 0, 0.02f, -20);
  c.activation = make_activation(ActivationKind::gelu_erf);
  auto wrong = Make(c, Mutant::gelu_tanh_for_erf);
  Convention tanh_form = c;
  tanh_form.activation = make_activation(ActivationKind::gelu_tanh);
  auto tanh_table = Make(tanh_form, Mutant::none);
  auto right = Make(c, Mutant::none);
  int differing = 0;
  for (int32_t u = -128; u <= 127; ++u) {
    EXPECT_EQ(wrong->ApplyTable(u), tanh_table->ApplyTable(u));
    differing += wrong->ApplyTable(u) != right->ApplyTable(u);
  }
  EXPECT_GT(differing, 0);
}

TEST(Mutants, InterpTruncateDropsPlus64) {
  std::array<int16_t, 513> knots{};
  for (size_t i = 0; i < knots.size(); ++i) knots[i] = static_cast<int16_t>(3 * i);  // slope 3 per 128 codes
  // value 64: index 256, offset 64: rounded (3*64 + 64) >> 7 = 2; truncated (3*64) >> 7 = 1.
  EXPECT_EQ(LUTLookup(64, knots), 768 + 2);
  EXPECT_EQ(LUTLookupTruncating(64, knots), 768 + 1);
  EXPECT_EQ(LUTLookupTruncating(0, knots), LUTLookup(0, knots));
}

TEST(Mutants, SpacesSayWhereTheyDiffer) {
  CaseSpec spec;
  spec.convention = Relu(0.25f, 0, 0.25f, 0);
  EXPECT_FALSE(in_mutant_space(Mutant::use_output_scale, spec));
  spec.convention.output.q.scale = 0.0625f;
  EXPECT_TRUE(in_mutant_space(Mutant::use_output_scale, spec));
  EXPECT_FALSE(in_mutant_space(Mutant::ignore_intermediate_zero_point, spec));
  EXPECT_FALSE(in_mutant_space(Mutant::requant_double_for_single, spec));
  EXPECT_FALSE(in_mutant_space(Mutant::interp_truncate, spec));
  spec.table_kind = TableKind::lut_interp;
  EXPECT_TRUE(in_mutant_space(Mutant::interp_truncate, spec));
}

}  // namespace
}  // namespace fusediff::fused
