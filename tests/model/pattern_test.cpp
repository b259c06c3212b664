// The pattern model: names, validation, fusion legality (each negative case breaks exactly one rule), geometry,
// and the replay fields that carry a pattern.
#include <gtest/gtest.h>

#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/pattern.h"

namespace fusediff {
namespace {

Convention Int8Relu() {
  Convention c;
  c.activation = make_activation(ActivationKind::relu);
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.05f, -3};
  c.output.q = QuantParams{QuantType{ScalarType::uint8}, 0.025f, 0};
  return c;
}

TEST(Pattern, EveryKnownNameRoundTrips) {
  for (const PatternInfo& info : known_patterns()) {
    const Pattern p = parse_pattern_name(info.name, "test");
    EXPECT_EQ(pattern_name(p), info.name);
    EXPECT_FALSE(info.fusions.empty());
  }
  EXPECT_TRUE(is_conv_act(Pattern{}));
  EXPECT_EQ(pattern_name(Pattern{}), "conv2d+act");
}

TEST(Pattern, UnknownNameListsTheKnownOnes) {
  try {
    parse_pattern_name("conv2d+act+add", "--pattern");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--pattern: unknown pattern 'conv2d+act+add'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("conv2d+add+act"), std::string::npos);
  }
}

TEST(Pattern, ValidateRefusesEachBrokenField) {
  const Convention c = Int8Relu();
  Pattern avg = parse_pattern_name("conv2d+act+avgpool", "t");
  avg.stages[1].out = c.output.q;
  EXPECT_NO_THROW(validate(avg, c));
  Pattern other_scale = avg;  // TFLite assumes equal input and output quantization
  other_scale.stages[1].out.scale = 0.5f;
  EXPECT_THROW(validate(other_scale, c), InputError);
  Pattern ort = other_scale;  // ORT's rule requantizes: allowed
  ort.stages[1].pool_rule = AvgPoolRule::ort_qlinear;
  EXPECT_NO_THROW(validate(ort, c));
  Pattern padding = avg;
  padding.stages[1].window = PoolWindow{2, 2, 2};  // padding must be below the kernel
  EXPECT_THROW(validate(padding, c), InputError);
  Pattern fc = parse_pattern_name("fc+fc", "t");
  fc.stages[0].out = c.intermediate.q;
  EXPECT_NO_THROW(validate(fc, c));
  fc.stages[0].fc_outputs = 0;
  EXPECT_THROW(validate(fc, c), InputError);
  Convention f32 = c;
  f32.intermediate.kind = IntermediateKind::f32;
  f32.requant = RequantVariant::f32_half_even;
  f32.intermediate.rounding = RoundingMode::half_to_even;
  EXPECT_NO_THROW(validate(Pattern{}, f32));
  EXPECT_THROW(validate(avg, f32), InputError);  // an f32 intermediate exists for conv2d+act only
}

TEST(Pattern, FusionLegalityNamesTheBrokenRule) {
  const Convention c = Int8Relu();
  Pattern max = parse_pattern_name("conv2d+act+maxpool", "t");
  const std::vector<int32_t> rising = {0, 0, 1, 2, 3};
  const std::vector<int32_t> dipping = {5, 3, 2, 4, 6};
  EXPECT_EQ(fusion_illegality(max, Fusion::keep_all, c, rising), "");
  EXPECT_EQ(fusion_illegality(max, Fusion::pool_first, c, rising), "");
  const std::string dip = fusion_illegality(max, Fusion::pool_first, c, dipping);
  EXPECT_NE(dip.find("pool-before-activation"), std::string::npos) << dip;
  EXPECT_NE(dip.find("code -128 -> 5, code -127 -> 3"), std::string::npos) << dip;
  Pattern avg = parse_pattern_name("conv2d+act+avgpool", "t");
  EXPECT_NE(fusion_illegality(avg, Fusion::pool_first, c, rising).find("average pool commutes with no"), std::string::npos);
  EXPECT_EQ(fusion_illegality(parse_pattern_name("fc+fc", "t"), Fusion::fold, c, {}), "");
  EXPECT_NE(fusion_illegality(parse_pattern_name("fc+act+fc", "t"), Fusion::fold, c, {}).find("fold-linear-only"),
            std::string::npos);
  EXPECT_NE(fusion_illegality(parse_pattern_name("fc+act", "t"), Fusion::fold, c, {}).find("fusion-offered"),
            std::string::npos);
}

// norm_other_order is judged only on exact rows between orders equal there; a max pool first keeps its meaning; a
// case that claims a verdict for another order without exact rows is refused.
TEST(Pattern, FusionKeepsMeaningOnlyWhereItsReasonHolds) {
  Convention c = Int8Relu();
  c.intermediate.q.scale = 0.03125f;
  Pattern p = parse_pattern_name("fc+layernorm+act", "test");
  Stage& ln = p.stages[0];
  ln.out = c.intermediate.q;
  ln.ln_order = named_normalization_order("ort", "test");
  ln.ln_fused_order = named_normalization_order("onednn_jit", "test");
  EXPECT_EQ(fusion_keeps_meaning(p, Fusion::norm_other_order, c, {}), "");  // mixed rows: a measurement
  ln.ln_regime = LnRegime::exact_rows;
  EXPECT_NE(fusion_keeps_meaning(p, Fusion::norm_other_order, c, {}).find("on exact rows orders ort and onednn_jit"),
            std::string::npos);
  EXPECT_EQ(fusion_keeps_meaning(p, Fusion::keep_all, c, {}), "");
  EXPECT_EQ(fusion_keeps_meaning(p, Fusion::norm_f32_into_act, c, {}), "");  // skips a boundary
  Pattern cpp = p;
  cpp.stages[0].ln_fused_order = named_normalization_order("onednn_cpp", "test");
  EXPECT_EQ(fusion_keeps_meaning(cpp, Fusion::norm_other_order, c, {}), "");
  Pattern integer = p;
  integer.stages[0].ln_arithmetic = LayerNormArithmetic::tflite_int16;
  EXPECT_EQ(fusion_keeps_meaning(integer, Fusion::norm_other_order, c, {}), "");
  const Pattern pool = parse_pattern_name("conv2d+act+maxpool", "test");
  EXPECT_NE(fusion_keeps_meaning(pool, Fusion::pool_first, c, {}), "");
  EXPECT_EQ(fusion_keeps_meaning(parse_pattern_name("conv2d+act+avgpool", "test"), Fusion::pool_first, c, {}), "");

  CaseSpec spec;
  spec.convention = c;
  spec.pattern = p;
  spec.fusion = Fusion::norm_other_order;
  spec.comparison = Comparison::same_convention;
  EXPECT_NO_THROW(validate(spec));
  spec.pattern = cpp;
  EXPECT_THROW(validate(spec), InputError);
  spec.comparison = Comparison::cross_convention;
  EXPECT_NO_THROW(validate(spec));
}

TEST(Pattern, ExactRowsNeedAPowerOfTwoInputScale) {
  Convention c = Int8Relu();  // u at 0.05
  Pattern p = parse_pattern_name("fc+layernorm+act", "test");
  p.stages[0].out = c.intermediate.q;
  p.stages[0].ln_regime = LnRegime::exact_rows;
  try {
    validate(p, c);
    ADD_FAILURE() << "0.05 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pattern.layernorm.regime: exact_rows needs the norm's input scale to be a "
                                         "power of two"),
              std::string::npos)
        << e.what();
  }
  c.intermediate.q.scale = 0.0625f;
  EXPECT_NO_THROW(validate(p, c));
  c.intermediate.q.scale = 0x1p-75f;  // its smallest square 2^-150 is not a binary32 value
  EXPECT_THROW(validate(p, c), InputError);
  EXPECT_EQ(parse_ln_regime("exact_rows", "test"), LnRegime::exact_rows);
  EXPECT_EQ(to_string(LnRegime::exact_rows), "exact_rows");
}

TEST(Pattern, OutputGeometryPoolsAndLayers) {
  EXPECT_EQ(pooled_extent(5, PoolWindow{2, 2, 0}), 2);
  EXPECT_EQ(pooled_extent(5, PoolWindow{3, 1, 1}), 5);
  EXPECT_EQ(pooled_extent(1, PoolWindow{2, 2, 0}), 0);  // the window does not fit: no output
  ConvCase conv;
  conv.batch(2).input_size(5, 4).input_channels(1).output_channels(3).kernel_size(1, 1);
  const PatternGeometry g = pattern_output_geometry(parse_pattern_name("conv2d+act+maxpool", "t"), conv);
  EXPECT_EQ(g.elements(), size_t{2 * 2 * 2 * 3});
  Pattern fc = parse_pattern_name("fc+fc", "t");
  fc.stages[0].fc_outputs = 7;
  ConvCase layer;
  layer.batch(2).input_channels(5).output_channels(3);
  EXPECT_EQ(pattern_output_geometry(fc, layer).elements(), size_t{14});
}

TEST(Pattern, KeyedBoundaryIsTheActivationInputForElementwisePatterns) {
  const Convention c = Int8Relu();
  Pattern add = parse_pattern_name("conv2d+add+act", "t");
  add.stages[0].out = QuantParams{QuantType{ScalarType::uint8}, 0.1f, 128};
  EXPECT_EQ(keyed_boundary(add, c), add.stages[0].out);
  EXPECT_EQ(activation_convention(add, c).intermediate.q, add.stages[0].out);
  EXPECT_EQ(keyed_boundary(Pattern{}, c), c.intermediate.q);
  EXPECT_EQ(keyed_boundary(parse_pattern_name("conv2d+act+maxpool", "t"), c), c.output.q);
}

TEST(Pattern, ReplayCarriesThePatternAndItsTensors) {
  CaseSpec s;
  s.name = "conv2d+add+act.relu.ort_mlas.add_in_accumulator";
  s.convention = Int8Relu();
  s.pattern = parse_pattern_name("conv2d+add+act", "t");
  s.pattern.stages[0].add_rule = AddRule::ort_mlas;
  s.pattern.stages[0].residual = QuantParams{QuantType{ScalarType::int8}, 0.125f, 4};
  s.pattern.stages[0].out = QuantParams{QuantType{ScalarType::int8}, 0.0625f, -1};
  s.fusion = Fusion::add_in_accumulator;
  s.comparison = Comparison::cross_convention;
  const ReplayKey generated{3, 17, s, std::nullopt};
  const std::string text = format_replay(generated);
  EXPECT_NE(text.find(";pattern=conv2d+add+act;add=ort_mlas;r=int8:0.125:4;s=int8:0.0625:-1;fusion=add_in_accumulator"),
            std::string::npos)
      << text;
  const ReplayKey back = parse_replay(text);
  EXPECT_EQ(back.spec.pattern, s.pattern);
  EXPECT_EQ(back.spec.fusion, Fusion::add_in_accumulator);
  EXPECT_EQ(format_replay(back), text);

  ReplayKey shrunk{0, 0, s, std::nullopt};
  ExplicitConv e;
  e.conv.input_quant(QuantParams{QuantType{ScalarType::uint8}, 0.5f, 3}).weight_scales({0.25f}).weights({5}).bias({-2});
  e.input = {7};
  e.stages = {StageOperands{{-9}, {}, {}, {}}};
  shrunk.explicit_conv = e;
  const ReplayKey v2 = parse_replay(format_replay(shrunk));
  ASSERT_TRUE(v2.explicit_conv);
  ASSERT_EQ(v2.explicit_conv->stages.size(), 2u);  // add (its residual) and act (none)
  EXPECT_EQ(v2.explicit_conv->stages[0].codes, std::vector<int32_t>{-9});
  EXPECT_EQ(format_replay(v2), format_replay(shrunk));
  // The sample key leaves the fusion out: every fused variant of a pattern sees the same draws.
  CaseSpec kept = s;
  kept.fusion = Fusion::keep_all;
  kept.comparison = Comparison::same_convention;
  EXPECT_EQ(case_stream_id(kept), case_stream_id(s));
  EXPECT_NE(canonical_key(kept), canonical_key(s));
}

TEST(Pattern, ConvActKeysAreThoseOfEarlierReleases) {
  CaseSpec s;
  s.convention = Int8Relu();
  EXPECT_EQ(canonical_key(s).find("pattern"), std::string::npos);
  EXPECT_EQ(describe_pattern(s.pattern, s.fusion), "");
}

}  // namespace
}  // namespace fusediff

namespace fusediff {
namespace {

TEST(Pattern, BatchNormReadsCodesExactlyWhereItFollowsAnotherStage) {
  const Convention c = Int8Relu();
  Pattern before = parse_pattern_name("conv2d+batchnorm+act", "t");
  Pattern after = parse_pattern_name("conv2d+act+batchnorm", "t");
  EXPECT_FALSE(before.stages[0].bn_reads_codes);
  ASSERT_TRUE(after.stages[1].bn_reads_codes);
  after.stages[1].out = QuantParams{QuantType{ScalarType::int8}, 0.1f, 4};
  EXPECT_NO_THROW(validate(after, c));
  EXPECT_EQ(final_output(after, c), after.stages[1].out);   // its own boundary
  EXPECT_EQ(activation_convention(before, c).intermediate.q, c.intermediate.q);  // written into u
  Pattern misplaced = after;
  misplaced.stages[1].bn_reads_codes = false;
  EXPECT_THROW(validate(misplaced, c), InputError);
  EXPECT_EQ(fusion_illegality(after, Fusion::keep_all, c, {}), "");
  EXPECT_EQ(fusion_illegality(after, Fusion::fold, c, {}).rfind("bn-fold-before-activation: ", 0), 0u);
  EXPECT_EQ(fusion_illegality(before, Fusion::fold, c, {}), "");
}

TEST(Pattern, MulValidatesItsRuleAndTypes) {
  const Convention c = Int8Relu();
  Pattern p = parse_pattern_name("conv2d+mul+add+act", "t");
  Stage& mul = p.stages[0];
  Stage& add = p.stages[1];
  mul.mul_input = QuantParams{QuantType{ScalarType::int8}, 0.02f, 1};
  mul.out = QuantParams{QuantType{ScalarType::int8}, 0.1f, 0};
  add.residual = QuantParams{QuantType{ScalarType::int8}, 0.05f, 0};
  add.out = c.intermediate.q;
  EXPECT_NO_THROW(validate(p, c));
  Pattern mixed = p;  // TFLite's Mul takes one 8-bit type for its three tensors
  mixed.stages[0].mul_input.type = QuantType{ScalarType::uint8};
  mixed.stages[0].mul_input.zero_point = 128;
  EXPECT_THROW(validate(mixed, c), InputError);
  mixed.stages[0].mul_rule = MulRule::onnx_spec;  // the ONNX definition takes any types
  EXPECT_NO_THROW(validate(mixed, c));
  Pattern large = p;  // sa sb / so >= 2^14: (a - za)(b - zb) 2^shift could overflow TFLite's int32
  large.stages[0].out.scale = 1e-8f;
  EXPECT_THROW(validate(large, c), InputError);
  EXPECT_EQ(parse_mul_rule("onnx_spec", "f"), MulRule::onnx_spec);
  EXPECT_EQ(parse_mul_operand("per_channel", "f"), MulOperand::per_channel);
  EXPECT_THROW(parse_mul_rule("ort", "f"), InputError);
  EXPECT_EQ(fusion_illegality(p, Fusion::mul_add_affine, c, {}), "");
}

}  // namespace
}  // namespace fusediff
