// conv2d+batchnorm+act (docs/batchnorm.md): the built-in fold against the reference's op-by-op emulation, the
// kernel-style float conversions against the reference's, the exact graph at a BatchNorm tie, the generators'
// regimes (RapidCheck, with coverage), and the worked example of the docs.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "fusediff/fused/batchnorm_fold.h"
#include "fusediff/fused/float16.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/batchnorm.h"
#include "fusediff/model/pattern.h"
#include "fusediff/reference/batchnorm.h"
#include "fusediff/reference/float_formats.h"

namespace fusediff {
namespace {

Pattern BatchNormPattern(BnRegime regime) {
  Pattern p = parse_pattern_name("conv2d+batchnorm+act", "test");
  p.stages[0].bn_regime = regime;
  return p;
}

Convention GeluConvention() {
  Convention c;
  c.activation = make_activation(ActivationKind::gelu_erf);
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8, false}, 0.03f, -10};
  c.output.q = QuantParams{QuantType{ScalarType::int8, false}, 0.02f, -100};
  return c;
}

// The fused fold and the reference's emulation give the same folded conv (codes, scales, bias) or refuse alike,
// for every precision, formula, weight quantization, weight rounding and bf16/f16 step rounding, on every regime.
TEST(BatchNormFold, FusedFoldEqualsReferenceEmulation) {
  int compared = 0, refused = 0;
  for (BnRegime regime : {BnRegime::benign, BnRegime::tiny_variance, BnRegime::large_gamma, BnRegime::large_mean}) {
    const Pattern p = BatchNormPattern(regime);
    for (uint32_t draw = 0; draw < 6; ++draw) {
      const PatternDraw d = generators::GeneratePatternDraw(7, 99, draw, p, GeluConvention(), RegionMix{});
      for (FoldPrecision precision : {FoldPrecision::f32, FoldPrecision::f16, FoldPrecision::bf16}) {
        for (FoldFormula formula : {FoldFormula::pytorch, FoldFormula::ort, FoldFormula::tflite}) {
          for (int variant = 0; variant < 4; ++variant) {
            BatchNormFold fold;
            fold.precision = precision;
            fold.formula = formula;
            fold.weight_quant = variant % 2 ? WeightQuant::per_tensor : WeightQuant::per_channel;
            fold.weight_rounding = variant / 2 ? RoundingMode::half_away_from_zero : RoundingMode::half_to_even;
            fold.rounding = variant == 3 ? FloatRounding::toward_zero : FloatRounding::nearest_even;
            fold.overflow = variant == 1 ? FloatOverflow::infinity : FloatOverflow::saturate;
            const reference::FoldedConv ref = reference::FoldBatchNorm(d.conv, d.stages.at(0).bn, 1e-5f, fold);
            std::string why;
            const ConvCase fused = fused::FoldConvBatchNorm(d.conv, d.stages.at(0).bn, 1e-5f, fold,
                                                            fused::FoldStepsOf(Mutant::none), &why);
            ASSERT_EQ(ref.refused.empty(), why.empty()) << ref.refused << " | " << why;
            if (!why.empty()) {
              ++refused;
              continue;
            }
            ASSERT_EQ(ref.conv.weight_scales(), fused.weight_scales()) << format_batchnorm_fold(fold);
            ASSERT_EQ(ref.conv.bias(), fused.bias()) << format_batchnorm_fold(fold);
            ASSERT_EQ(ref.conv.weights(), fused.weights()) << format_batchnorm_fold(fold);
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 700);
  RecordProperty("refused", refused);
}

// The exact fold: x87 extended precision against exact quadratic irrationals agrees on these draws.
TEST(BatchNormFold, ExtendedPrecisionFoldEqualsExactFold) {
  for (BnRegime regime : {BnRegime::benign, BnRegime::tiny_variance, BnRegime::large_gamma, BnRegime::large_mean}) {
    for (uint32_t draw = 0; draw < 8; ++draw) {
      const PatternDraw d =
          generators::GeneratePatternDraw(3, 5, draw, BatchNormPattern(regime), GeluConvention(), RegionMix{});
      for (WeightQuant quant : {WeightQuant::per_tensor, WeightQuant::per_channel}) {
        BatchNormFold fold;
        fold.precision = FoldPrecision::exact;
        fold.weight_quant = quant;
        const reference::FoldedConv ref = reference::FoldBatchNorm(d.conv, d.stages.at(0).bn, 1e-5f, fold);
        std::string why;
        const ConvCase fused =
            fused::FoldConvBatchNorm(d.conv, d.stages.at(0).bn, 1e-5f, fold, fused::FoldStepsOf(Mutant::none), &why);
        ASSERT_TRUE(ref.refused.empty() && why.empty());
        ASSERT_EQ(ref.conv.weight_scales(), fused.weight_scales());
        ASSERT_EQ(ref.conv.bias(), fused.bias());
        ASSERT_EQ(ref.conv.weights(), fused.weights());
      }
    }
  }
}

// Every mutant of the fold changes the folded conv somewhere in its space.
TEST(BatchNormFold, FoldMutantsChangeTheFold) {
  const PatternDraw d = generators::GeneratePatternDraw(1, 2, 0, BatchNormPattern(BnRegime::tiny_variance),
                                                        GeluConvention(), RegionMix{});
  BatchNormFold fold;
  fold.precision = FoldPrecision::f32;
  std::string why;
  const ConvCase good =
      fused::FoldConvBatchNorm(d.conv, d.stages.at(0).bn, 1e-5f, fold, fused::FoldStepsOf(Mutant::none), &why);
  for (Mutant m : {Mutant::bn_drop_eps, Mutant::bn_f16_for_f32, Mutant::bn_per_tensor_for_per_channel}) {
    const ConvCase bad = fused::FoldConvBatchNorm(d.conv, d.stages.at(0).bn, 1e-5f, fold, fused::FoldStepsOf(m), &why);
    EXPECT_TRUE(bad.weights() != good.weights() || bad.bias() != good.bias() ||
                bad.weight_scales() != good.weight_scales())
        << to_string(m);
  }
}

// The fused kernel-style conversions equal the reference's on random patterns and at every edge, under every rule.
TEST(BatchNormFold, KernelConversionsEqualReference) {
  std::mt19937 rng(5);
  std::vector<uint32_t> patterns = {0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x47800000u, 0x33000000u, 0x33000001u,
                                    0x387FFFFFu, 0x38800000u, 0x00000001u, 0x807FFFFFu, 0x7F800000u, 0xFF812345u,
                                    0x7FC00001u, 0x7F7FFFFFu, 0x3F808000u, 0x3F818000u};
  for (int i = 0; i < 1 << 20; ++i) patterns.push_back(rng());
  for (FloatRounding r : {FloatRounding::nearest_even, FloatRounding::toward_zero}) {
    for (FloatOverflow o : {FloatOverflow::infinity, FloatOverflow::saturate}) {
      for (SubnormalInputs s : {SubnormalInputs::keep, SubnormalInputs::flush_inputs}) {
        for (NanRule n : {NanRule::quiet_payload, NanRule::canonical, NanRule::canonical_positive}) {
          const FloatBoundary f16{FloatFormat::f16, r, o, s, n}, bf16{FloatFormat::bf16, r, o, s, n};
          for (uint32_t b : patterns) {
            const float x = std::bit_cast<float>(b);
            ASSERT_EQ(fused::ToF16Bits(x, f16), reference::F32ToF16Bits(x, f16))
                << std::hex << b << " " << format_float_boundary(f16);
            ASSERT_EQ(fused::ToBf16Bits(x, bf16), reference::F32ToBf16Bits(x, bf16))
                << std::hex << b << " " << format_float_boundary(bf16);
          }
        }
      }
    }
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(fused::FromF16Bits(static_cast<uint16_t>(h))),
              std::bit_cast<uint32_t>(reference::F16BitsToF32(static_cast<uint16_t>(h))));
  }
}

// The mutant bn-f16-overflow-wraps's conversion is the checked one wherever binary16 does not overflow (every rule),
// and wraps where it does: 2^16 reads back as 1.0 instead of infinity or 65504.
TEST(BatchNormFold, WrappingF16ConversionDiffersOnlyPastTheOverflowEdge) {
  std::mt19937 rng(11);
  for (FloatRounding r : {FloatRounding::nearest_even, FloatRounding::toward_zero}) {
    for (FloatOverflow o : {FloatOverflow::infinity, FloatOverflow::saturate}) {
      const FloatBoundary f16{FloatFormat::f16, r, o, SubnormalInputs::keep, NanRule::quiet_payload};
      for (int i = 0; i < 1 << 18; ++i) {
        const uint32_t b = rng();
        const uint32_t u = b & 0x7FFFFFFFu;
        if (u >= 0x477FE000u && u <= 0x7F800000u) continue;  // at or past 65504 (finite or infinite): may overflow
        const float x = std::bit_cast<float>(b);
        ASSERT_EQ(fused::ToF16BitsWrappingOverflow(x, f16), fused::ToF16Bits(x, f16)) << std::hex << b;
      }
      EXPECT_EQ(fused::ToF16BitsWrappingOverflow(65536.0f, f16), 0x3C00u);
      EXPECT_NE(fused::ToF16Bits(65536.0f, f16), 0x3C00u);
    }
  }
}

// The graph's BatchNorm at an exact tie: var + eps = 1/4 exactly, so t = (c - mean) / (1/2) + beta is rational.
TEST(BatchNormGraph, ExactTieAndIrrationalNeighbour) {
  IntermediateSpec u;
  u.q = QuantParams{QuantType{ScalarType::int8, false}, 1.0f, 0};
  u.rounding = RoundingMode::half_away_from_zero;
  // c = acc sx sw = 5 / 4; t = 2 c = 2.5: a tie.
  EXPECT_EQ(reference::BatchNormToCode(5, 0.5f, 0.5f, 1.0f, 0.0f, 0.0f, 0.1875f, 0.0625f, u).u, 3);
  u.rounding = RoundingMode::half_to_even;
  EXPECT_EQ(reference::BatchNormToCode(5, 0.5f, 0.5f, 1.0f, 0.0f, 0.0f, 0.1875f, 0.0625f, u).u, 2);
  EXPECT_EQ(reference::BatchNormToCode(-5, 0.5f, 0.5f, 1.0f, 0.0f, 0.0f, 0.1875f, 0.0625f, u).u, -2);
  // var + eps = 2: t = c / sqrt(2) + beta with beta = 1/2 - c / sqrt(2) rounded to binary32: decided exactly
  // against the tie 1/2 (above or below by the binary32 rounding of beta only).
  const float beta = static_cast<float>(0.5 - 1.25 / std::sqrt(2.0));
  const double exact_above = double(beta) + 1.25 / std::sqrt(2.0) - 0.5;  // > 0 or < 0 by ~1e-8, far from 0 in double
  u.rounding = RoundingMode::half_to_even;
  const int32_t code = reference::BatchNormToCode(5, 0.5f, 0.5f, 1.0f, beta, 0.0f, 1.9375f, 0.0625f, u).u;
  EXPECT_EQ(code, exact_above > 0 ? 1 : 0);
}

// The docs' worked example (docs/batchnorm.md): one channel, weight code 64 at 2^-10, input scale 2^-6, conv bias
// 2^20 + 2^9 (b = 16.0078125), gamma 4, var 0.01, eps 1e-5, mean 16, beta 0.5, u scale 1/32. binary16 rounds b to
// 16 (a tie to even), so b - mean = 0 and the folded bias loses kk * 2^-7 = 0.3123: 10 LSB of u.
TEST(BatchNormFold, WorkedExample) {
  ConvCase conv;
  conv.batch(1)
      .input_size(1, 1)
      .input_channels(1)
      .output_channels(1)
      .kernel_size(1, 1)
      .input_quant(QuantParams{QuantType{ScalarType::int8, false}, 0x1p-6f, 0})
      .weight_scales({0x1p-10f})
      .weights({64})
      .bias({(1 << 20) + (1 << 9)});
  const BatchNormParams bn{{4.0f}, {0.5f}, {16.0f}, {0.01f}};
  BatchNormFold fold;
  fold.precision = FoldPrecision::f32;
  const reference::FoldedConv f32 = reference::FoldBatchNorm(conv, bn, 1e-5f, fold);
  fold.precision = FoldPrecision::f16;
  const reference::FoldedConv f16 = reference::FoldBatchNorm(conv, bn, 1e-5f, fold);
  fold.precision = FoldPrecision::exact;
  const reference::FoldedConv exact = reference::FoldBatchNorm(conv, bn, 1e-5f, fold);
  EXPECT_EQ(exact.conv.weights()[0], 127);
  EXPECT_EQ(f16.bias_real[0], 0.5);  // (16 - 16) r gamma + beta
  EXPECT_NEAR(f32.bias_real[0], 0.5 + 4 / std::sqrt(0.01001) * 0x1p-7, 1e-6);
  // The folded int32 bias at sx * s (s = max|w'| / 127): f16 is off by kk 2^-7 / (sx s).
  EXPECT_EQ(exact.conv.bias()[0], f32.conv.bias()[0]);
  IntermediateSpec u;
  u.q = QuantParams{QuantType{ScalarType::int8, false}, 0.03125f, 0};
  const int64_t acc_x0 = (1 << 20) + (1 << 9);  // x = 0
  const int32_t graph = reference::BatchNormToCode(acc_x0, 0x1p-6f, 0x1p-10f, 4.0f, 0.5f, 16.0f, 0.01f, 1e-5f, u).u;
  EXPECT_EQ(graph, 26);  // (4 / sqrt(0.01001) * 2^-7 + 0.5) * 32 = 25.99 -> 26
}

// The generators' regimes: parameters where docs/batchnorm.md says, the conv valid, with coverage of the eps-dominated
// and large-accumulator draws.
RC_GTEST_PROP(BatchNormGenerator, RegimesDrawWhatTheyClaim, ()) {
  const auto regime =
      *rc::gen::element(BnRegime::benign, BnRegime::tiny_variance, BnRegime::large_gamma, BnRegime::large_mean);
  const uint32_t draw = *rc::gen::inRange<uint32_t>(0, 1000);
  const PatternDraw d =
      generators::GeneratePatternDraw(11, 17, draw, BatchNormPattern(regime), GeluConvention(), RegionMix{});
  d.conv.validate();
  validate(d.stages.at(0).bn, static_cast<size_t>(d.conv.output_channels()), 1e-5f, "draw");
  RC_TAG(std::string(to_string(regime)));
  bool eps_dominated = false, large_acc = false;
  for (int32_t k = 0; k < d.conv.output_channels(); ++k) {
    const double gamma = std::abs(d.stages.at(0).bn.gamma[k]), var = d.stages.at(0).bn.var[k];
    eps_dominated = eps_dominated || var < 1e-5;
    large_acc = large_acc || d.conv.accumulator_bound(k) > (int64_t{1} << 26);
    switch (regime) {
      case BnRegime::benign:
      case BnRegime::large_mean:
        RC_ASSERT(gamma >= 0.5 && gamma <= 2.0);
        RC_ASSERT(var >= 0.0999 && var <= 1.0001);
        break;
      case BnRegime::tiny_variance: RC_ASSERT(var >= 0.99e-8 && var <= 1.01e-2); break;
      case BnRegime::large_gamma: RC_ASSERT(gamma >= 9.99 && gamma <= 1000.1); break;
    }
  }
  RC_CLASSIFY(eps_dominated, "eps-dominated variance");
  RC_CLASSIFY(large_acc, "accumulator bound > 2^26");
}

}  // namespace
}  // namespace fusediff
