// The unfused graph of a pattern draw, on hand-worked examples with dyadic scales (every value exact on paper).
#include <gtest/gtest.h>

#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/reference/graph.h"

namespace fusediff::reference {
namespace {

// acc = x * w for a 1x1 conv with zero points 0 and unit scales: u = acc exactly (requant `exact`).
Convention UnitRelu() {
  Convention c;
  c.requant = RequantVariant::exact;
  c.activation = make_activation(ActivationKind::relu);
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  c.output.q = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  return c;
}

ConvCase Pointwise(int32_t height, int32_t width, std::vector<int8_t> weights) {
  ConvCase conv;
  const int32_t k = static_cast<int32_t>(weights.size());
  conv.input_size(height, width).input_channels(1).output_channels(k).kernel_size(1, 1)
      .input_quant(QuantParams{QuantType{ScalarType::int8}, 1.0f, 0})
      .weight_scales(std::vector<float>(static_cast<size_t>(k), 1.0f)).weights(std::move(weights))
      .bias(std::vector<int32_t>(static_cast<size_t>(k), 0));
  return conv;
}

TEST(GraphReference, AddRoundsTheSumAtItsOwnScaleThenActivates) {
  const Convention c = UnitRelu();
  Pattern p = parse_pattern_name("conv2d+add+act", "t");
  p.stages[0].add_rule = AddRule::onnx_spec;
  p.stages[0].residual = QuantParams{QuantType{ScalarType::int8}, 0.5f, 0};
  p.stages[0].out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  const ActivationTable table(activation_convention(p, c));
  const GraphReference graph(p, c, &table, 1.0);
  // u = 3 * 2 = 6; r = 1 is 0.5; s = 6.5 rounds half to even: 6; relu(6) = 6.
  const std::vector<GraphElement> out = graph(PatternDraw{Pointwise(1, 1, {2}), {3}, {StageOperands{{1}, {}, {}, {}}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].acc, 6);
  EXPECT_EQ(out[0].key_code, 6);  // the activation reads s
  EXPECT_EQ(out[0].y, 6);
  EXPECT_TRUE(out[0].regions & region_bit(Region::quant_boundary));  // s sat exactly on a tie
  // r = 3 (1.5): s = 7.5 -> 8; r = -20 (-10): s = -4 -> relu 0.
  EXPECT_EQ(graph(PatternDraw{Pointwise(1, 1, {2}), {3}, {StageOperands{{3}, {}, {}, {}}}})[0].y, 8);
  EXPECT_EQ(graph(PatternDraw{Pointwise(1, 1, {2}), {3}, {StageOperands{{-20}, {}, {}, {}}}})[0].y, 0);
  EXPECT_THROW(graph(PatternDraw{Pointwise(1, 1, {2}), {3}, {}}), InputError);  // no residual: a malformed draw
}

// A residual that does not fit the sum is one fault, bad input, wherever the graph meets it: in the add stage of
// a quantized intermediate and in the binary32 add of an f32 one (oneDNN's post-op chains).
TEST(GraphReference, AResidualOfTheWrongSizeIsInputErrorOnEveryPath) {
  Pattern p = parse_pattern_name("conv2d+add+act", "t");
  p.stages[0].residual = QuantParams{QuantType{ScalarType::int8}, 0.5f, 0};
  p.stages[0].out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
  const Convention quantized = UnitRelu();
  Convention f32 = quantized;
  f32.intermediate.kind = IntermediateKind::f32;
  f32.requant = RequantVariant::f32_half_even;
  f32.intermediate.rounding = RoundingMode::half_to_even;
  f32.post_ops = PostOpArithmetic::binary32;
  f32.output.rounding = RoundingMode::half_to_even;
  f32.output.zero_point_order = ZeroPointOrder::before_rounding;
  const ActivationTable table(activation_convention(p, quantized));
  const GraphReference quantized_graph(p, quantized, &table, 1.0);
  const GraphReference f32_graph(p, f32, nullptr, 1.0);
  const ConvCase conv = Pointwise(1, 1, {2});
  ASSERT_EQ(f32_graph(PatternDraw{conv, {3}, {StageOperands{{1}, {}, {}, {}}}}).size(), 1u);
  const PatternDraw two_codes{conv, {3}, {StageOperands{{1, 1}, {}, {}, {}}}};
  EXPECT_THROW(quantized_graph(two_codes), InputError);
  EXPECT_THROW(f32_graph(two_codes), InputError);
}

TEST(GraphReference, MaxPoolTakesTheLargestActivationOutputAndItsPath) {
  const Convention c = UnitRelu();
  Pattern p = parse_pattern_name("conv2d+act+maxpool", "t");
  p.stages[1].window = PoolWindow{2, 2, 0};
  const ActivationTable table(activation_convention(p, c));
  const GraphReference graph(p, c, &table, 1.0);
  // 2x3 input, w = -1: u = -x; relu; one 2x2 window (the third column has no window).
  const std::vector<GraphElement> out = graph(PatternDraw{Pointwise(2, 3, {-1}), {5, -7, 9, 2, -3, 4}, {}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].y, 7);     // max(relu(-5), relu(7), relu(-2), relu(3))
  EXPECT_EQ(out[0].acc, 7);   // the selected element's accumulator
  EXPECT_EQ(out[0].key_code, 7);
}

TEST(GraphReference, AveragePoolRoundsByItsRule) {
  Convention c = UnitRelu();
  Pattern p = parse_pattern_name("conv2d+act+avgpool", "t");
  p.stages[1].window = PoolWindow{2, 2, 0};
  p.stages[1].out = c.output.q;
  const ActivationTable table(activation_convention(p, c));
  // relu outputs {1, 4, 0, 0}: mean 1.25 -> 1; {1, 4}: 2.5 -> TFLite 3 (away from code 0), ORT 2 (half to even).
  const PatternDraw window{Pointwise(2, 2, {1}), {1, 4, -6, -9}, {}};
  EXPECT_EQ(GraphReference(p, c, &table, 1.0)(window)[0].y, 1);
  const PatternDraw pair{Pointwise(1, 2, {1}), {1, 4}, {}};
  Pattern wide = p;
  wide.stages[1].window = PoolWindow{2, 2, 1};  // padding 1: the taps outside are never counted
  const std::vector<GraphElement> tflite = GraphReference(wide, c, &table, 1.0)(pair);
  ASSERT_EQ(tflite.size(), 2u);  // 1x2 with padding 1 -> 1x2 windows of one or two in-bounds taps
  EXPECT_EQ(tflite[0].y, 1);     // {1} alone
  EXPECT_EQ(tflite[1].y, 4);     // {4} alone
  Pattern both = p;
  both.stages[1].window = PoolWindow{2, 1, 0};
  const PatternDraw tall{Pointwise(2, 1, {1}), {1, 4}, {}};
  EXPECT_EQ(GraphReference(both, c, &table, 1.0)(tall).size(), 0u);  // a 2x1 map has no 2x2 window
  const PatternDraw square{Pointwise(2, 2, {1}), {1, 4, -1, -1}, {}};  // {1, 4, 0, 0}: 1.25
  both.stages[1].pool_rule = AvgPoolRule::ort_qlinear;
  EXPECT_EQ(GraphReference(both, c, &table, 1.0)(square)[0].y, 1);
  const PatternDraw tie{Pointwise(2, 2, {1}), {1, 4, 3, 2}, {}};  // mean 10/4 = 2.5
  EXPECT_EQ(GraphReference(both, c, &table, 1.0)(tie)[0].y, 2);  // half to even
  both.stages[1].pool_rule = AvgPoolRule::tflite;
  EXPECT_EQ(GraphReference(both, c, &table, 1.0)(tie)[0].y, 3);  // (10 + 2) / 4
}

// fc+fc with one output, unit output scale, and FC1 = 2 features -> 2 hidden (W1 = w1_scale * I) with u scale 2.
struct FcChain {
  Convention c = UnitRelu();
  Pattern p = parse_pattern_name("fc+fc", "t");
  ConvCase fc1;
  explicit FcChain(float w1_scale) {
    p.stages[0].out = QuantParams{QuantType{ScalarType::int8}, 1.0f, 0};
    p.stages[0].fc_outputs = 1;
    c.intermediate.q.scale = 2.0f;
    fc1.input_channels(2).output_channels(2).input_quant(QuantParams{QuantType{ScalarType::int8}, 1.0f, 0})
        .weight_scales({w1_scale, w1_scale}).weights({1, 0, 0, 1}).bias({0, 0});
  }
};

TEST(GraphReference, FullyConnectedChainRoundsTheHiddenLayer) {
  // FC1 with unit weights: u = round(acc / 2), half away from zero (exact requant).
  FcChain chain(1.0f);
  const Convention& c = chain.c;
  const Pattern& p = chain.p;
  const ConvCase& fc1 = chain.fc1;
  // x = (3, -5): acc1 = (3, -5) -> u = (2, -3) (1.5 -> 2, -2.5 -> -3); FC2 w = (1, 1), scale 1 on u's scale 2:
  // acc2 = -1, y = round(-1 * 2 / 1) = -2. Without the hidden rounding the answer would be 2 * (-1) = -2 too,
  // but x = (3, 5) gives u = (2, 3), acc2 = 5, y = 10 where the unrounded value is 8.
  const GraphReference graph(p, c, nullptr, 1.0);
  EXPECT_EQ(graph(PatternDraw{fc1, {3, -5}, {StageOperands{{}, {1.0f}, {1, 1}, {0}}}})[0].y, -2);
  const std::vector<GraphElement> out = graph(PatternDraw{fc1, {3, 5}, {StageOperands{{}, {1.0f}, {1, 1}, {0}}}});
  EXPECT_EQ(out[0].acc, 5);
  EXPECT_EQ(out[0].y, 10);
  EXPECT_EQ(out[0].key_code, 10);  // keyed by the output code
  EXPECT_THROW(graph(PatternDraw{fc1, {3, 5}, {StageOperands{{}, {1.0f}, {1}, {0}}}}), InputError);  // weights of the wrong size: a malformed draw
}

TEST(GraphReference, DeclaredFcFoldIsTheFoldNotTheGraph) {
  // W1 = 0.3 I, W2 = (1, 1) at 0.25, x = (3, 5), u scale 2. The declared fold: both folded weights 0.075, codes
  // (127, 127) at 0.075/127, its own accumulator 1016, y = 1016 * 0.075/127 = 0.6 -> 1.
  FcChain chain(0.3f);
  const Convention& c = chain.c;
  Pattern& p = chain.p;
  const ConvCase& fc1 = chain.fc1;
  const std::vector<StageOperands> fc2{StageOperands{{}, {0.25f}, {1, 1}, {0}}};
  p.stages[0].fc_reference = FcReference::declared_fold;
  const GraphReference fold(p, c, nullptr, 1.0);
  const std::vector<GraphElement> out = fold(PatternDraw{fc1, {3, 5}, fc2});
  EXPECT_EQ(out[0].acc, 1016);  // the folded layer's own accumulator: codes (127, 127)
  EXPECT_EQ(out[0].y, 1);
  EXPECT_THROW(fold(PatternDraw{fc1, {3, 5}, {StageOperands{{}, {0.25f}, {1}, {0}}}}), InputError);
  Pattern act = parse_pattern_name("fc+act+fc", "t");
  act.stages[1].fc_reference = FcReference::declared_fold;
  act.stages[1].out = p.stages[0].out;
  EXPECT_THROW(GraphReference(act, c, nullptr, 1.0), InputError);  // no declared fold across an activation
}

TEST(GraphReference, FloatProductMultiplierFormsSxSwInBinary32) {
  const auto [a, b] = MultiplierOperands(MultiplierRule::float_product, 0.1f, 0.3f);
  EXPECT_EQ(b, 1.0f);
  EXPECT_EQ(a, 0.1f * 0.3f);  // one binary32 rounding of the exact product (-ffp-contract=off)
  const auto [x, w] = MultiplierOperands(MultiplierRule::double_product, 0.1f, 0.3f);
  EXPECT_EQ(x, 0.1f);
  EXPECT_EQ(w, 0.3f);
}

}  // namespace
}  // namespace fusediff::reference
