// The mul rules (stages.h QuantizedMul) and the chains conv2d+mul+add+act and conv2d+act+batchnorm in the reference,
// on hand-worked examples with dyadic scales (every value exact on paper): ties, saturation, zero points, a
// multiplier above 1 (TFLite's left shift), and each boundary of the graph.
#include <gtest/gtest.h>

#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/reference/graph.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {
namespace {

QuantParams Int8(float scale, int32_t zero_point) { return QuantParams{QuantType{ScalarType::int8}, scale, zero_point}; }

// M = sa sb / so = 1/2 * 1/4 / 1 = 2^-3 exactly under both rules.
TEST(QuantizedMul, TiesRoundAwayUnderTfliteAndToEvenUnderTheOnnxSpec) {
  const QuantParams a = Int8(0.5f, 0), b = Int8(0.25f, 0), o = Int8(1.0f, 0);
  // P = 5 * 4 = 20: 20 / 8 = 2.5. TFLite: SRDHM(20, 2^30) = 10 exactly, RoundingDivideByPOT(10, 2) = 2.5 -> 3
  // (half away from zero). ONNX: 2.5 -> 2 (half to even).
  EXPECT_EQ(QuantizedMul(MulRule::tflite, 5, a, 4, b, o).code, 3);
  EXPECT_EQ(QuantizedMul(MulRule::onnx_spec, 5, a, 4, b, o).code, 2);
  EXPECT_EQ(QuantizedMul(MulRule::tflite, -5, a, 4, b, o).code, -3);
  EXPECT_EQ(QuantizedMul(MulRule::onnx_spec, -5, a, 4, b, o).code, -2);
  EXPECT_EQ(QuantizedMul(MulRule::onnx_spec, 5, a, 4, b, o).tie_distance, 0.0);
  // P = 12: 1.5 -> 2 under both (away from zero; even).
  EXPECT_EQ(QuantizedMul(MulRule::tflite, 3, a, 4, b, o).code, 2);
  EXPECT_EQ(QuantizedMul(MulRule::onnx_spec, 3, a, 4, b, o).code, 2);
  // P = 5: SRDHM(5 * 2^30 / 2^31 = 2.5) rounds toward +infinity to 3, then 3 / 4 -> 1; exactly 0.625 -> 1.
  EXPECT_EQ(QuantizedMul(MulRule::tflite, 5, a, 1, b, o).code, 1);
}

TEST(QuantizedMul, ZeroPointsAreSubtractedBeforeTheProductAndAddedAfterIt) {
  // (7 - 2)(1 - (-3)) = 20 -> 2.5; + zo = -4: tflite -1, onnx_spec -2.
  const QuantParams a = Int8(0.5f, 2), b = Int8(0.25f, -3), o = Int8(1.0f, -4);
  EXPECT_EQ(QuantizedMul(MulRule::tflite, 7, a, 1, b, o).code, -1);
  EXPECT_EQ(QuantizedMul(MulRule::onnx_spec, 7, a, 1, b, o).code, -2);
}

TEST(QuantizedMul, SaturatesAtEitherEndOfTheOutputType) {
  const QuantParams a = Int8(0.5f, 0), b = Int8(0.25f, 0), o = Int8(1.0f, 0);
  for (MulRule rule : {MulRule::tflite, MulRule::onnx_spec}) {
    const StageRounding high = QuantizedMul(rule, 127, a, 127, b, o);  // 16129 / 8 = 2016.125
    EXPECT_EQ(high.code, 127);
    EXPECT_TRUE(high.saturated);
    EXPECT_EQ(high.unsaturated, 2016);
    EXPECT_EQ(QuantizedMul(rule, -128, a, 127, b, o).code, -128);
  }
}

TEST(QuantizedMul, TfliteShiftsLeftForAMultiplierAboveOne) {
  // M = 1 * 1 / 0.25 = 4: QuantizeMultiplier -> (2^30, shift 3); P 2^3 = 24, SRDHM(24, 2^30) = 12.
  const QuantParams a = Int8(1.0f, 0), b = Int8(1.0f, 0), o = Int8(0.25f, 0);
  EXPECT_EQ(QuantizedMul(MulRule::tflite, 3, a, 1, b, o).code, 12);
  EXPECT_EQ(QuantizedMul(MulRule::onnx_spec, 3, a, 1, b, o).code, 12);
  // TFLite's one-type requirement, and a product past int32 after the shift, are bad input.
  EXPECT_THROW(QuantizedMul(MulRule::tflite, 3, a, 1, QuantParams{QuantType{ScalarType::uint8}, 1.0f, 0}, o), InputError);
  EXPECT_THROW(QuantizedMul(MulRule::tflite, 127, a, 127, b, Int8(0x1p-20f, 0)), InputError);
  EXPECT_NO_THROW(QuantizedMul(MulRule::onnx_spec, 127, a, 127, b, Int8(0x1p-20f, 0)));
}

Convention UnitRelu() {
  Convention c;
  c.requant = RequantVariant::exact;
  c.activation = make_activation(ActivationKind::relu);
  c.intermediate.q = Int8(1.0f, 0);
  c.output.q = Int8(1.0f, 0);
  return c;
}

ConvCase Pointwise(std::vector<int8_t> weights) {
  ConvCase conv;
  const int32_t k = static_cast<int32_t>(weights.size());
  conv.input_size(1, 1).input_channels(1).output_channels(k).kernel_size(1, 1).input_quant(Int8(1.0f, 0))
      .weight_scales(std::vector<float>(static_cast<size_t>(k), 1.0f)).weights(std::move(weights))
      .bias(std::vector<int32_t>(static_cast<size_t>(k), 0));
  return conv;
}

// The worked example of docs/patterns.md: u = 3 (acc 3 at su = 1); b = 5 at sb = 1/2 (2.5); p = 7.5 at sp = 1
// rounds (tflite) to 8; r = 1 at sr = 1/2 adds 0.5: s = 8.5 -> 9 (tflite, half away); relu: 9. Unrounded, the
// product would have given 7.5 + 0.5 = 8.
TEST(GraphReference, MulRoundsTheProductAtItsOwnScaleBeforeTheAdd) {
  const Convention c = UnitRelu();
  Pattern p = parse_pattern_name("conv2d+mul+add+act", "t");
  p.stages[0].mul_rule = MulRule::tflite;
  p.stages[0].mul_input = Int8(0.5f, 0);
  p.stages[0].out = Int8(1.0f, 0);
  p.stages[1].add_rule = AddRule::tflite;
  p.stages[1].residual = Int8(0.5f, 0);
  p.stages[1].out = Int8(1.0f, 0);
  const ActivationTable table(activation_convention(p, c));
  const GraphReference graph(p, c, &table, 1.0);
  const std::vector<GraphElement> out =
      graph(PatternDraw{Pointwise({1}), {3}, {StageOperands{{5}, {}, {}, {}, {}}, StageOperands{{1}, {}, {}, {}, {}}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key_code, 9);  // the activation reads s
  EXPECT_EQ(out[0].y, 9);
  // onnx_spec: p = 7.5 -> 8 (even), s = 8.5 -> 8 (even).
  p.stages[0].mul_rule = MulRule::onnx_spec;
  p.stages[1].add_rule = AddRule::onnx_spec;
  const GraphReference onnx(p, c, &table, 1.0);
  EXPECT_EQ(onnx(PatternDraw{Pointwise({1}), {3}, {StageOperands{{5}, {}, {}, {}, {}}, StageOperands{{1}, {}, {}, {}, {}}}})[0].y,
            8);
  // A per-channel b: one code per output channel, broadcast over space (channel 0: b = 5, channel 1: b = -2).
  p.stages[0].mul_operand = MulOperand::per_channel;
  const GraphReference per_channel(p, c, &table, 1.0);
  const std::vector<GraphElement> two = per_channel(
      PatternDraw{Pointwise({1, 2}), {3}, {StageOperands{{5, -2}, {}, {}, {}, {}}, StageOperands{{1, 1}, {}, {}, {}, {}}}});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].y, 8);
  EXPECT_EQ(two[1].y, 0);  // u = 6, p = -6, s = -5.5 -> relu 0
  EXPECT_THROW(graph(PatternDraw{Pointwise({1}), {3}, {StageOperands{{5, 5}, {}, {}, {}, {}}, StageOperands{{1}, {}, {}, {}, {}}}}),
               InputError);
}

// BatchNorm after relu, var + eps = 0.75 + 0.25 = 1 exactly: t = 2 (x - 1) + 0.5 on x = relu's output (sy = 1/2);
// its own boundary so = 1, rounded by the output rounding (half away from zero).
TEST(GraphReference, BatchNormAfterTheActivationReadsItsCodesAndWritesItsOwnBoundary) {
  Convention c = UnitRelu();
  c.output.q = Int8(0.5f, 0);
  Pattern p = parse_pattern_name("conv2d+act+batchnorm", "t");
  ASSERT_TRUE(p.stages[1].bn_reads_codes);
  p.stages[1].bn_eps = 0.25f;
  p.stages[1].out = Int8(1.0f, 3);
  const ActivationTable table(activation_convention(p, c));
  const GraphReference graph(p, c, &table, 1.0);
  BatchNormParams bn;
  bn.gamma = {2.0f};
  bn.beta = {0.5f};
  bn.mean = {1.0f};
  bn.var = {0.75f};
  const auto run = [&](int8_t w, int32_t x) {
    return graph(PatternDraw{Pointwise({w}), {x}, {StageOperands{}, StageOperands{{}, {}, {}, {}, bn}}})[0];
  };
  // acc = 5: u = 5, relu 5 at 1/2 -> y = 10 (x = 5); t = 2 (5 - 1) + 0.5 = 8.5 -> 9 (away), + 3 = 12.
  EXPECT_EQ(run(1, 5).y, 12);
  // acc = -4: relu 0 (x = 0); t = -1.5 -> -2, + 3 = 1.
  EXPECT_EQ(run(1, -4).y, 1);
  // acc = 127: x = 63.5; t = 125.5 -> 126 + 3 = 129: saturates at 127.
  const GraphElement high = run(1, 127);
  EXPECT_EQ(high.y, 127);
  EXPECT_TRUE(high.regions & region_bit(Region::saturation));
}

}  // namespace
}  // namespace fusediff::reference
