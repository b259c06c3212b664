// A pattern is a list of stages of any length: two stages of one kind (conv2d+add+add+act, registered here) keep
// their own parameters and operands through a replay string, the second's keys suffixed ".1", and the activation
// reads the last add's boundary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

CaseSpec TwoAdds() {
  static const bool registered = [] {
    static constexpr Fusion kKeepAll[] = {Fusion::keep_all};
    register_pattern({"conv2d+add+add+act", "Act(Conv(x) + r1 + r2): two residuals, each rounded", kKeepAll});
    return true;
  }();
  (void)registered;
  CaseSpec s;
  s.convention.activation = make_activation(ActivationKind::relu);
  s.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.05f, -3};
  s.convention.output.q = QuantParams{QuantType{ScalarType::uint8}, 0.025f, 0};
  s.pattern = parse_pattern_name("conv2d+add+add+act", "test");
  Stage& first = s.pattern.stages[0];
  first.add_rule = AddRule::tflite;
  first.residual = QuantParams{QuantType{ScalarType::int8}, 0.125f, 4};
  first.out = QuantParams{QuantType{ScalarType::int8}, 0.0625f, -1};
  Stage& second = s.pattern.stages[1];
  second.add_rule = AddRule::onnx_spec;
  second.residual = QuantParams{QuantType{ScalarType::int8}, 0.25f, 0};
  second.out = QuantParams{QuantType{ScalarType::int8}, 0.1f, 2};
  return s;
}

TEST(MultiStage, TwoStagesOfOneKindKeepTheirOwnReplayFields) {
  const CaseSpec s = TwoAdds();
  validate(s);
  EXPECT_EQ(stage_field_suffix(s.pattern, 0), "");
  EXPECT_EQ(stage_field_suffix(s.pattern, 1), ".1");
  EXPECT_EQ(stage_field_suffix(s.pattern, 2), "");  // the activation: the first of its kind
  ReplayKey key{0, 0, s, std::nullopt};
  ExplicitConv e;
  e.conv.input_quant(QuantParams{QuantType{ScalarType::uint8}, 0.5f, 3}).weight_scales({0.25f}).weights({5}).bias({-2});
  e.input = {7};
  e.stages = {StageOperands{{-9}, {}, {}, {}}, StageOperands{{11}, {}, {}, {}}, StageOperands{}};
  key.explicit_conv = e;
  const std::string text = format_replay(key);
  EXPECT_NE(text.find(";add=tflite;r=int8:0.125:4;s=int8:0.0625:-1;add.1=onnx_spec;r.1=int8:0.25:0;s.1=int8:0.1:2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(";res=-9;res.1=11"), std::string::npos) << text;
  const ReplayKey back = parse_replay(text);
  EXPECT_EQ(back.spec.pattern, s.pattern);
  ASSERT_TRUE(back.explicit_conv);
  ASSERT_EQ(back.explicit_conv->stages.size(), 3u);
  EXPECT_EQ(back.explicit_conv->stages[0].codes, std::vector<int32_t>{-9});
  EXPECT_EQ(back.explicit_conv->stages[1].codes, std::vector<int32_t>{11});
  EXPECT_EQ(format_replay(back), text);
}

TEST(MultiStage, TheActivationReadsTheLastStageBeforeIt) {
  const CaseSpec s = TwoAdds();
  EXPECT_EQ(activation_convention(s.pattern, s.convention).intermediate.q, s.pattern.stages[1].out);
  EXPECT_EQ(final_output(s.pattern, s.convention), s.convention.output.q);
  EXPECT_TRUE(pattern_is_elementwise(s.pattern));
  EXPECT_TRUE(keyed_by_activation_input(s.pattern));
}

TEST(MultiStage, AMissingSecondResidualIsRefusedByItsOwnKey) {
  CaseSpec s = TwoAdds();
  ReplayKey key{0, 0, s, std::nullopt};
  ExplicitConv e;
  e.conv.input_quant(QuantParams{QuantType{ScalarType::uint8}, 0.5f, 3}).weight_scales({0.25f}).weights({5}).bias({-2});
  e.input = {7};
  e.stages = {StageOperands{{-9}, {}, {}, {}}};
  key.explicit_conv = e;
  try {
    parse_replay(format_replay(key));
    FAIL() << "a replay string without the second residual parsed";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("replay.res.1: 0 codes, the pattern needs 1"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace fusediff
