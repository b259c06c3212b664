// Cross checks between the layers that must never share code: the fused path's fixed-point requantization
// against the reference's independent implementation of the same declared variant, and the seed example of the
// wrong-scale table.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "fusediff/driver/driver.h"
#include "fusediff/fused/fused_kernel.h"
#include "fusediff/reference/reference.h"

namespace fusediff {
namespace {

Convention MakeConvention(RequantVariant variant, RoundingMode exact_rounding, const QuantType& u_type, float su,
                          int32_t zu) {
  Convention c;
  c.requant = variant;
  c.intermediate.q = QuantParams{u_type, su, zu};
  c.intermediate.rounding = fixed_rounding(variant).value_or(exact_rounding);
  c.output.q = QuantParams{QuantType{ScalarType::int8}, 0.0625f, 0};
  c.activation = make_activation(ActivationKind::relu);
  return c;
}

ConvCase OneChannelCase(float sx, float sw) {
  ConvCase conv;
  conv.input_quant(QuantParams{QuantType{ScalarType::int8}, sx, 0}).weight_scales({sw}).weights({1}).bias({0});
  return conv;
}

constexpr RequantVariant kVariants[] = {RequantVariant::exact, RequantVariant::double_rounding,
                                        RequantVariant::single_rounding, RequantVariant::f32_half_even};

RC_GTEST_PROP(CrossCheck, FusedRequantEqualsReferenceOnRandomAccumulators, ()) {
  const RequantVariant variant = *rc::gen::elementOf(std::vector<RequantVariant>(std::begin(kVariants), std::end(kVariants)));
  const RoundingMode mode = *rc::gen::element(RoundingMode::half_away_from_zero, RoundingMode::half_to_even,
                                              RoundingMode::half_up);
  const bool int16 = *rc::gen::arbitrary<bool>();
  const QuantType type{int16 ? ScalarType::int16 : ScalarType::int8, false};
  const float sx = std::ldexp(1.0f + *rc::gen::inRange(0, 1 << 20) / float(1 << 20), *rc::gen::inRange(-12, -1));
  const float sw = std::ldexp(1.0f + *rc::gen::inRange(0, 1 << 20) / float(1 << 20), *rc::gen::inRange(-12, -1));
  const float su = std::ldexp(1.0f + *rc::gen::inRange(0, 1 << 20) / float(1 << 20), *rc::gen::inRange(-14, 0));
  // lut_interp (the int16 table) needs zero points 0 on both sides.
  const int32_t zu = int16 ? 0 : *rc::gen::inRange(type.qmin(), type.qmax() + 1);
  const int32_t acc = *rc::gen::inRange(-(1 << 24), 1 << 24);
  Convention c = MakeConvention(variant, mode, type, su, zu);
  if (int16) c.output.q = QuantParams{QuantType{ScalarType::int16}, 1.0f / 4096, 0};
  std::string why;
  auto kernel = fused::FusedKernel::Create(c, int16 ? TableKind::lut_interp : TableKind::lut, Mutant::none, &why);
  RC_ASSERT(kernel != nullptr);
  const reference::Requantizer requantizer(c, sx, sw);
  const reference::RequantTrace ref = requantizer(acc);
  RC_TAG(to_string(variant));
  RC_CLASSIFY(ref.saturated, "saturated");
  RC_ASSERT(kernel->Requantize(OneChannelCase(sx, sw), 0, acc) == ref.u);
}

TEST(CrossCheck, FusedRequantEqualsReferenceOnEveryTieAccumulator) {
  // M = sx*sw/su = 2^-j exactly, so acc = (2i+1) * 2^(j-1) is an exact tie of every variant's last rounding.
  for (RequantVariant variant : kVariants) {
    for (RoundingMode mode : {RoundingMode::half_away_from_zero, RoundingMode::half_to_even, RoundingMode::half_up}) {
      for (int j = 1; j <= 8; ++j) {
        const Convention c = MakeConvention(variant, mode, QuantType{ScalarType::int8}, 1.0f, 0);
        std::string why;
        auto kernel = fused::FusedKernel::Create(c, TableKind::lut, Mutant::none, &why);
        ASSERT_TRUE(kernel) << why;
        const float sx = 0.5f, sw = std::ldexp(1.0f, 1 - j);
        const reference::Requantizer requantizer(c, sx, sw);
        for (int32_t i = -300; i <= 300; ++i) {
          for (int32_t delta : {-1, 0, 1}) {
            const int32_t acc = (2 * i + 1) * (1 << (j - 1)) + delta;
            ASSERT_EQ(kernel->Requantize(OneChannelCase(sx, sw), 0, acc), requantizer(acc).u)
                << to_string(variant) << " " << to_string(mode) << " M=2^-" << j << " acc=" << acc;
          }
        }
      }
    }
  }
}

// The seed example: su = 0.25, sy = 0.0625, zero points 0. u code 8 is 2.0; y code 8 is 0.5. A table built with
// the output scale reads u = 8 as 0.5 and is caught; the right table passes at 0 LSB.
CaseSpec SeedExample(Mutant mutant) {
  CaseSpec spec;
  spec.name = "seed_example";
  spec.source = SampleSource::sweep;
  spec.convention = MakeConvention(RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                   QuantType{ScalarType::int8}, 0.25f, 0);
  spec.table_kind = TableKind::lut;
  spec.mutant = mutant;
  return spec;
}

TEST(SeedExample, RightTablePassesAtZeroLsb) {
  driver::ReferenceCache cache;
  const CaseResult r = driver::RunCase(SeedExample(Mutant::none), driver::RunOptions{}, cache);
  EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
  EXPECT_EQ(r.stats.overall.max_abs(), 0);
  EXPECT_EQ(r.stats.overall.count(), 256u);
  EXPECT_EQ(r.tolerance.max_abs_lsb, 0);
}

TEST(SeedExample, WrongScaleTableIsCaughtAtCodeEight) {
  driver::ReferenceCache cache;
  const CaseResult r = driver::RunCase(SeedExample(Mutant::use_output_scale), driver::RunOptions{}, cache);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_GT(r.stats.overall.max_abs(), 0);
  // Sweep sample i is code -128 + i: code 8 is sample 136.
  ReplayKey key{1, 136, SeedExample(Mutant::use_output_scale), std::nullopt};
  const ReplayTrace t = driver::Replay(key);
  EXPECT_EQ(t.u, 8);
  EXPECT_EQ(t.y_reference, 32);  // relu(2.0) / 0.0625
  EXPECT_EQ(t.y_fused, 8);       // relu(0.5) / 0.0625
  EXPECT_EQ(t.error, -24);
}

TEST(Determinism, SameSeedSameResultsDifferentSeedDifferentSamples) {
  CaseSpec spec;
  spec.name = "gelu";
  spec.convention = MakeConvention(RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                   QuantType{ScalarType::int8}, 0.05f, 3);
  spec.convention.activation = make_activation(ActivationKind::gelu_erf);
  spec.samples = 4000;
  spec.mutant = Mutant::use_output_scale;  // so the worst list is not empty
  spec.convention.output.q = QuantParams{QuantType{ScalarType::int8}, 0.03f, -100};
  driver::ReferenceCache cache;
  driver::RunOptions options;
  options.seed = 11;
  const CaseResult a = driver::RunCase(spec, options, cache);
  const CaseResult b = driver::RunCase(spec, options, cache);
  EXPECT_EQ(a.stats.overall, b.stats.overall);
  EXPECT_EQ(a.stats.worst.sorted(), b.stats.worst.sorted());
  options.seed = 12;
  const CaseResult c = driver::RunCase(spec, options, cache);
  EXPECT_NE(a.stats.worst.sorted(), c.stats.worst.sorted());
  // Every worst case replays to the same numbers.
  for (const WorstCaseReport& w : a.worst) {
    const ReplayTrace t = driver::Replay(parse_replay(w.replay));
    EXPECT_EQ(t.y_reference, w.sample.y_ref) << w.replay;
    EXPECT_EQ(t.y_fused, w.sample.y_fused) << w.replay;
    EXPECT_EQ(t.acc_reference, w.sample.acc) << w.replay;
    EXPECT_EQ(t.acc_fused, w.sample.acc) << w.replay;
  }
}

}  // namespace
}  // namespace fusediff
