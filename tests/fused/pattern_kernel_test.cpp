// The built-in pattern kernels on the worked examples of docs/patterns.md (dyadic scales: every value exact on
// paper). Each fusion is checked against the number the document derives for it.
#include <gtest/gtest.h>

#include <vector>

#include "fusediff/fused/fused_path.h"
#include "fusediff/fused/pattern_kernel.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {
namespace {

ConvCase Pointwise(int32_t height, int32_t width, float weight_scale, std::vector<int8_t> weights) {
  ConvCase conv;
  const int32_t k = static_cast<int32_t>(weights.size());
  conv.input_size(height, width).input_channels(1).output_channels(k).kernel_size(1, 1)
      .input_quant(QuantParams{QuantType{ScalarType::int8}, 1.0f, 0})
      .weight_scales(std::vector<float>(static_cast<size_t>(k), weight_scale)).weights(std::move(weights))
      .bias(std::vector<int32_t>(static_cast<size_t>(k), 0));
  return conv;
}

CaseSpec Spec(const char* pattern, ActivationKind act, float su, float sy) {
  CaseSpec spec;
  spec.pattern = parse_pattern_name(pattern, "test");
  spec.convention.requant = RequantVariant::double_rounding;
  spec.convention.activation = make_activation(act);
  spec.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8}, su, 0};
  spec.convention.output.q = QuantParams{QuantType{ScalarType::int8}, sy, 0};
  return spec;
}

int32_t RunOne(const CaseSpec& spec, const PatternDraw& draw) {
  std::string why;
  std::unique_ptr<FusedPath> path = CreateBuiltInPath(spec, &why);
  EXPECT_TRUE(path) << why;
  std::vector<int32_t> y(pattern_output_geometry(spec.pattern, draw.conv).elements());
  EXPECT_TRUE(path->Run(draw, y, nullptr));
  EXPECT_EQ(y.size(), 1u);
  return y.at(0);
}

TEST(PatternKernel, AddKeptRoundsUAndSkippingItDoesNot) {
  // acc = 26 at sx sw = 1/4: u = round(6.5) = 7 (TFLite, half away); r = 1 at 1/2. Kept: s = 7.5 -> 8.
  // In the accumulator: 6.5 + 0.5 = 7 exactly -> 7.
  CaseSpec spec = Spec("conv2d+add+act", ActivationKind::relu, 1.0f, 1.0f);
  Stage& add = spec.pattern.stages[0];
  add.add_rule = AddRule::tflite;
  add.residual = QuantParams{QuantType{ScalarType::int8}, 0.5f, 0};
  add.out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  const PatternDraw draw{Pointwise(1, 1, 0.25f, {2}), {13}, {StageOperands{{1}, {}, {}, {}}}};
  EXPECT_EQ(RunOne(spec, draw), 8);
  spec.fusion = Fusion::add_in_accumulator;
  spec.comparison = Comparison::cross_convention;
  EXPECT_EQ(RunOne(spec, draw), 7);
}

TEST(PatternKernel, MaxPoolBeforeGeluPicksTheDip) {
  // u codes -12 and -3 at su = 1/4: v = -3 and -0.75. gelu(-3) = -0.00405, gelu(-0.75) = -0.16997; sy = 1/64.
  // Kept: max(round(-0.259), round(-10.878)) = max(0, -11) = 0. Pooled first: gelu(max v) -> -11.
  CaseSpec spec = Spec("conv2d+act+maxpool", ActivationKind::gelu_erf, 0.25f, 1.0f / 64);
  spec.pattern.stages[1].window = PoolWindow{2, 2, 0};
  // A 2x2 map holding the two codes twice (acc = 8x at sx sw = 1/32: u = x); one 2x2 window.
  const PatternDraw square{Pointwise(2, 2, 1.0f / 32, {8}), {-12, -3, -12, -3}, {}};
  EXPECT_EQ(RunOne(spec, square), 0);
  spec.fusion = Fusion::pool_first;
  spec.comparison = Comparison::cross_convention;
  EXPECT_EQ(RunOne(spec, square), -11);
}

TEST(PatternKernel, AveragePoolFirstIsNotTheAverageOfActivations) {
  // u = {-6, 4, 3, 2}: relu {0, 4, 3, 2}, TFLite average (9 + 2) / 4 = 2. Pooled first: (3 + 2) / 4 = 1, relu 1.
  CaseSpec spec = Spec("conv2d+act+avgpool", ActivationKind::relu, 1.0f, 1.0f);
  spec.pattern.stages[1].window = PoolWindow{2, 2, 0};
  spec.pattern.stages[1].out = spec.convention.output.q;
  const PatternDraw draw{Pointwise(2, 2, 1.0f / 8, {8}), {-6, 4, 3, 2}, {}};
  EXPECT_EQ(RunOne(spec, draw), 2);
  spec.fusion = Fusion::pool_first;
  spec.comparison = Comparison::cross_convention;
  EXPECT_EQ(RunOne(spec, draw), 1);
  spec.fusion = Fusion::keep_all;
  spec.comparison = Comparison::same_convention;
  spec.mutant = Mutant::avgpool_truncate;  // 9 / 4 truncated: 2; {0, 4, 3, 3}: 10 / 4 -> 2 where rounding gives 3
  const PatternDraw tie{Pointwise(2, 2, 1.0f / 8, {8}), {-6, 4, 3, 3}, {}};
  EXPECT_EQ(RunOne(spec, tie), 2);
  spec.mutant = Mutant::none;
  EXPECT_EQ(RunOne(spec, tie), 3);
}

TEST(PatternKernel, FoldingTwoLayersRemovesTheHiddenRounding) {
  // x = (3, 5), W1 = I, u scale 2: u = (2, 3) (1.5 -> 2, 2.5 -> 3); W2 = (1, 1) at 1: acc2 = 5, y = 10.
  // Folded: W = (1, 1) -> codes (127, 127) at 1/127; acc = 1016; y = 1016 / 127 = 8.
  CaseSpec spec = Spec("fc+fc", ActivationKind::relu, 2.0f, 1.0f);
  spec.pattern.stages[0].out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  spec.pattern.stages[0].fc_outputs = 1;
  ConvCase fc1;
  fc1.input_channels(2).output_channels(2).input_quant(QuantParams{QuantType{ScalarType::int8}, 1.0f, 0})
      .weight_scales({1.0f, 1.0f}).weights({1, 0, 0, 1}).bias({0, 0});
  const PatternDraw draw{fc1, {3, 5}, {StageOperands{{}, {1.0f}, {1, 1}, {0}}}};
  EXPECT_EQ(RunOne(spec, draw), 10);
  spec.fusion = Fusion::fold;
  spec.comparison = Comparison::cross_convention;
  EXPECT_EQ(RunOne(spec, draw), 8);
}

TEST(PatternKernel, FoldFirstLayerScaleMutantQuantizesTheFoldWithTheWrongScale) {
  // W1 = 0.3 I, W2 = (1, 1) at 0.25: both folded weights are 0.075. Declared: scale 0.075/127, codes (127, 127),
  // acc 1016, y = 0.6 -> 1. The mutant quantizes with sw1 = 0.3: 0.075 / 0.3 = 0.25 rounds to code 0, y = 0.
  CaseSpec spec = Spec("fc+fc", ActivationKind::relu, 2.0f, 1.0f);
  spec.pattern.stages[0].out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  spec.pattern.stages[0].fc_outputs = 1;
  spec.fusion = Fusion::fold;
  spec.comparison = Comparison::cross_convention;
  ConvCase fc1;
  fc1.input_channels(2).output_channels(2).input_quant(QuantParams{QuantType{ScalarType::int8}, 1.0f, 0})
      .weight_scales({0.3f, 0.3f}).weights({1, 0, 0, 1}).bias({0, 0});
  const PatternDraw draw{fc1, {3, 5}, {StageOperands{{}, {0.25f}, {1, 1}, {0}}}};
  EXPECT_EQ(RunOne(spec, draw), 1);
  spec.mutant = Mutant::fc_fold_first_layer_scale;
  EXPECT_EQ(RunOne(spec, draw), 0);
}

TEST(PatternKernel, UnofferedFusionsAndForeignMutantsAreUnsupported) {
  std::string why;
  CaseSpec spec = Spec("fc+act", ActivationKind::relu, 1.0f, 1.0f);
  spec.fusion = Fusion::fold;
  spec.comparison = Comparison::cross_convention;
  EXPECT_FALSE(CreateBuiltInPath(spec, &why));
  EXPECT_NE(why.find("no fold fusion"), std::string::npos) << why;
  CaseSpec conv_act = Spec("conv2d+act", ActivationKind::relu, 1.0f, 1.0f);
  conv_act.mutant = Mutant::avgpool_truncate;
  EXPECT_FALSE(CreateBuiltInPath(conv_act, &why));
  EXPECT_NE(why.find("not injected into the conv2d+act path"), std::string::npos) << why;
}

}  // namespace
}  // namespace fusediff::fused

namespace fusediff::fused {
namespace {

// docs/patterns.md, conv2d+mul+add+relu: u = 3; b = 5 at 1/2; p = 7.5 -> 8 (tflite); r = 1 at 1/2: s = 8.5 -> 9.
// onnx_spec rounds both ties to even: 8. As one affine: 7.5 + 0.5 = 8. The mutant mul-skip-output-rounding
// computes that affine where the rules are declared kept; mul-ignores-input-zero-point reads b as if zb = 0.
TEST(PatternKernel, MulRoundsTheProductAndTheAffineDoesNot) {
  CaseSpec spec = Spec("conv2d+mul+add+act", ActivationKind::relu, 1.0f, 1.0f);
  Stage& mul = spec.pattern.stages[0];
  Stage& add = spec.pattern.stages[1];
  mul.mul_input = QuantParams{QuantType{ScalarType::int8}, 0.5f, 0};
  mul.out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  add.residual = QuantParams{QuantType{ScalarType::int8}, 0.5f, 0};
  add.out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  const PatternDraw draw{Pointwise(1, 1, 1.0f, {1}), {3}, {StageOperands{{5}, {}, {}, {}, {}}, StageOperands{{1}, {}, {}, {}, {}}}};
  EXPECT_EQ(RunOne(spec, draw), 9);
  mul.mul_rule = MulRule::onnx_spec;
  add.add_rule = AddRule::onnx_spec;
  EXPECT_EQ(RunOne(spec, draw), 8);
  spec.mutant = Mutant::mul_skip_output_rounding;
  EXPECT_EQ(RunOne(spec, draw), 8);
  spec.mutant = Mutant::none;
  spec.fusion = Fusion::mul_add_affine;
  spec.comparison = Comparison::cross_convention;
  EXPECT_EQ(RunOne(spec, draw), 8);
  // zb = 1: declared (5 - 1) 1/2 = 2, p = 6, s = 6.5 -> 6 (even); the mutant's 7.5 -> 8, s = 8.5 -> 8.
  spec.fusion = Fusion::keep_all;
  spec.comparison = Comparison::same_convention;
  mul.mul_input.zero_point = 1;
  EXPECT_EQ(RunOne(spec, draw), 6);
  spec.mutant = Mutant::mul_ignores_input_zero_point;
  EXPECT_EQ(RunOne(spec, draw), 8);
}

// docs/patterns.md, conv2d+relu+batchnorm: gamma 2, mean 1, beta 1/2, var + eps = 1; out scale 1, zero point 3.
// Kept: acc 5 -> 12, acc -4 -> 1. Folded into the conv across the relu (illegal; mutant bn-fold-across-activation):
// acc 5 -> 12, acc -4 -> 3.
TEST(PatternKernel, BatchNormAfterReluKeptAndFoldedAcrossIt) {
  CaseSpec spec = Spec("conv2d+act+batchnorm", ActivationKind::relu, 1.0f, 0.5f);
  Stage& bn = spec.pattern.stages[1];
  bn.bn_eps = 0.25f;
  bn.out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 3};
  BatchNormParams params;
  params.gamma = {2.0f};
  params.beta = {0.5f};
  params.mean = {1.0f};
  params.var = {0.75f};
  const auto draw = [&](int32_t x) {
    return PatternDraw{Pointwise(1, 1, 1.0f, {1}), {x}, {StageOperands{}, StageOperands{{}, {}, {}, {}, params}}};
  };
  EXPECT_EQ(RunOne(spec, draw(5)), 12);
  EXPECT_EQ(RunOne(spec, draw(-4)), 1);
  spec.mutant = Mutant::bn_fold_across_activation;
  EXPECT_EQ(RunOne(spec, draw(5)), 12);
  EXPECT_EQ(RunOne(spec, draw(-4)), 3);
  spec.mutant = Mutant::none;
  spec.fusion = Fusion::fold;
  spec.comparison = Comparison::cross_convention;
  EXPECT_EQ(RunOne(spec, draw(-4)), 3);
}

}  // namespace
}  // namespace fusediff::fused
