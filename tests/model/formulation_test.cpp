// Formulations as text (model/formulation.h) and in replay strings: every choice round-trips, old strings mean
// the default formulation, bad text names its field.
#include <gtest/gtest.h>

#include <string>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/formulation.h"

namespace fusediff {
namespace {

// What the library sees of the source: the passed type, the shift by 128 between types, and the zero-point
// attribute (absent only under zp:absent where the passed zero point is 0).
TEST(Formulation, SourceAsPassedIsWhatTheLibrarySees) {
  Formulation f;
  SourceAsPassed p = source_as_passed(f, /*drawn_u8=*/true, 0);
  EXPECT_TRUE(p.u8);
  EXPECT_EQ(p.shift, 0);
  EXPECT_TRUE(p.zero_point_attribute);  // zp:present: also when 0
  f.zero_points_absent = true;
  EXPECT_FALSE(source_as_passed(f, true, 0).zero_point_attribute);
  EXPECT_TRUE(source_as_passed(f, true, 3).zero_point_attribute);  // a non-zero zero point keeps it
  f.source = Formulation::Source::u8;
  p = source_as_passed(f, /*drawn_u8=*/false, -128);  // s8 passed as u8: +128, zero point -128 -> 0
  EXPECT_TRUE(p.u8);
  EXPECT_EQ(p.shift, 128);
  EXPECT_FALSE(p.zero_point_attribute);
  f.source = Formulation::Source::s8;
  p = source_as_passed(f, /*drawn_u8=*/true, 128);  // u8 passed as s8: -128, zero point 128 -> 0
  EXPECT_FALSE(p.u8);
  EXPECT_EQ(p.shift, -128);
  EXPECT_FALSE(p.zero_point_attribute);
}

TEST(Formulation, EveryChoiceRoundTripsThroughItsText) {
  EXPECT_EQ(format_formulation(Formulation{}), "zp:present/scales:per_channel/opad:negative_pad/src:drawn/wei:full/bias:s32");
  for (int bits = 0; bits < 96; ++bits) {
    Formulation f;
    f.zero_points_absent = bits & 1;
    f.common_scales = bits & 2;
    f.extended_input = bits & 4;
    f.seven_bit_weights = bits & 8;
    f.f32_bias = bits & 16;
    f.source = static_cast<Formulation::Source>(bits / 32);
    EXPECT_EQ(parse_formulation(format_formulation(f), "t"), f) << format_formulation(f);
  }
  // Left out: the default (a draw without output padding reports no opad).
  Formulation f;
  f.extended_input = true;
  const std::string without = format_formulation(f, /*with_output_padding=*/false);
  EXPECT_EQ(without.find("opad"), std::string::npos);
  EXPECT_FALSE(parse_formulation(without, "t").extended_input);
  EXPECT_EQ(formulation_items(without).size(), 5u);
  EXPECT_EQ(formulation_items("zp:absent/wei:7bit"), (std::vector<std::string>{"zp:absent", "wei:7bit"}));
}

TEST(Formulation, BadTextNamesTheFieldAndWhatWasExpected) {
  for (const char* bad : {"zp", "zp:maybe", "zp:absent/zp:present", "colour:red", "src:u16"}) {
    try {
      parse_formulation(bad, "replay.form");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("replay.form"), std::string::npos) << e.what();
    }
  }
}

TEST(Formulation, ReplayStringsCarryTheFormulationAndRepetitions) {
  ReplayKey key;
  key.seed = 1;
  key.sample = 7;
  key.spec.name = "relu.int8.lut.conv";
  key.spec.backend = "builtin";
  key.spec.convention.activation = make_activation(ActivationKind::relu);
  const std::string old = format_replay(key);
  EXPECT_EQ(old.find("form="), std::string::npos);
  EXPECT_FALSE(parse_replay(old).formulation.has_value());  // old strings: the default formulation
  EXPECT_EQ(parse_replay(old).repeat, 0u);

  Formulation f;
  f.zero_points_absent = true;
  f.source = Formulation::Source::s8;
  key.formulation = f;
  key.repeat = 3;
  const std::string text = format_replay(key);
  EXPECT_NE(text.find(";form=zp:absent/"), std::string::npos) << text;
  EXPECT_NE(text.find(";repeat=3"), std::string::npos) << text;
  const ReplayKey back = parse_replay(text);
  ASSERT_TRUE(back.formulation.has_value());
  EXPECT_EQ(*back.formulation, f);
  EXPECT_EQ(back.repeat, 3u);
  EXPECT_EQ(format_replay(back), text);
  EXPECT_THROW(parse_replay(text.substr(0, text.find(";repeat=")) + ";repeat=0"), InputError);

  // v2 (an explicit conv) too.
  key.formulation.reset();
  ConvCase conv;
  conv.input_quant(QuantParams{QuantType{ScalarType::uint8, false}, 0.5f, 0}).weight_scales({1.0f}).weights({3}).bias({1});
  key.explicit_conv = ExplicitConv{conv, {4}, 0};
  key.explicit_conv->formulation = f;
  const ReplayKey v2 = parse_replay(format_replay(key));
  ASSERT_TRUE(v2.explicit_conv && v2.explicit_conv->formulation);
  EXPECT_EQ(*v2.explicit_conv->formulation, f);
  EXPECT_EQ(v2.repeat, 3u);
}

}  // namespace
}  // namespace fusediff
