// The names each enum prints and parses, as literals: results files and replay strings hold them, so a table edit
// that renames one fails here before it changes a file.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fusediff/model/activation.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/error_stats.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/formulation.h"
#include "fusediff/model/pattern.h"
#include "fusediff/model/quant.h"
#include "fusediff/model/results.h"

namespace fusediff {
namespace {

// Every value prints as its name, and the name parses back to it.
template <typename Enum, typename Parse>
void ExpectNames(const std::vector<std::pair<Enum, std::string>>& names, Parse parse) {
  for (const auto& [value, name] : names) {
    EXPECT_EQ(to_string(value), name);
    EXPECT_EQ(parse(name, "f"), value) << name;
  }
}

template <typename Enum>
void ExpectPrinted(const std::vector<std::pair<Enum, std::string>>& names) {
  for (const auto& [value, name] : names) EXPECT_EQ(to_string(value), name);
}

TEST(NamedEnums, EveryValuePrintsAndParsesByItsName) {
  using A = ActivationKind;
  ExpectNames<A>({{A::relu, "relu"},
                  {A::relu6, "relu6"},
                  {A::leaky_relu, "leaky_relu"},
                  {A::hard_sigmoid, "hard_sigmoid"},
                  {A::hard_swish, "hard_swish"},
                  {A::gelu_erf, "gelu_erf"},
                  {A::gelu_tanh, "gelu_tanh"},
                  {A::sigmoid, "sigmoid"},
                  {A::tanh, "tanh"},
                  {A::silu, "silu"},
                  {A::elu, "elu"},
                  {A::softplus, "softplus"},
                  {A::mish, "mish"}},
                 parse_activation_kind);
  ExpectNames<ScalarType>({{ScalarType::int8, "int8"}, {ScalarType::uint8, "uint8"}, {ScalarType::int16, "int16"}},
                          parse_scalar_type);
  ExpectNames<RoundingMode>({{RoundingMode::half_away_from_zero, "half_away_from_zero"},
                             {RoundingMode::half_to_even, "half_to_even"},
                             {RoundingMode::half_up, "half_up"}},
                            parse_rounding_mode);
  ExpectNames<RequantVariant>({{RequantVariant::exact, "exact"},
                               {RequantVariant::double_rounding, "double_rounding"},
                               {RequantVariant::single_rounding, "single_rounding"},
                               {RequantVariant::f32_half_even, "f32_half_even"},
                               {RequantVariant::f32_zero_point_first, "f32_zero_point_first"}},
                              parse_requant_variant);
  ExpectNames<ZeroPointOrder>(
      {{ZeroPointOrder::after_rounding, "after_rounding"}, {ZeroPointOrder::before_rounding, "before_rounding"}},
      parse_zero_point_order);
  ExpectNames<ConvOp>({{ConvOp::conv2d, "conv2d"}, {ConvOp::conv_transpose2d, "conv_transpose2d"}}, parse_conv_op);
  ExpectNames<Region>({{Region::knee, "knee"},
                       {Region::saturation, "saturation"},
                       {Region::quant_boundary, "quant_boundary"},
                       {Region::bulk, "bulk"}},
                      parse_region);
  ExpectNames<Comparison>(
      {{Comparison::same_convention, "same_convention"}, {Comparison::cross_convention, "cross_convention"}},
      parse_comparison);
  ExpectNames<SampleSource>(
      {{SampleSource::conv, "conv"}, {SampleSource::sweep, "sweep"}, {SampleSource::thresholds, "thresholds"}},
      parse_sample_source);
  ExpectPrinted<IntermediateKind>({{IntermediateKind::quantized, "quantized"}, {IntermediateKind::f32, "f32"}});
  ExpectPrinted<PostOpArithmetic>({{PostOpArithmetic::exact, "exact"}, {PostOpArithmetic::binary32, "binary32"}});
  ExpectPrinted<Accumulation>({{Accumulation::exact, "exact"},
                               {Accumulation::halved_weights, "halved_weights"},
                               {Accumulation::int16_pairs_per_tap, "int16_pairs_per_tap"},
                               {Accumulation::int16_pairs_flattened, "int16_pairs_flattened"},
                               {Accumulation::int16_pairs_shifted_weights, "int16_pairs_shifted_weights"}});
  ExpectPrinted<Verdict>({{Verdict::pass, "pass"},
                          {Verdict::fail, "fail"},
                          {Verdict::unsupported, "unsupported"},
                          {Verdict::cross_convention, "cross_convention"},
                          {Verdict::known_defect, "known_defect"},
                          {Verdict::nondeterministic, "nondeterministic"},
                          {Verdict::documented_behaviour, "documented_behaviour"}});
  ExpectPrinted<Producer>({{Producer::conv2d, "conv2d"}, {Producer::fully_connected, "fc"}});
  EXPECT_EQ(pattern_name(parse_pattern_name("fc+fc", "f")), "fc+fc");
}

// The short zero-point orders still parse; the formulation's source prints and parses inside its text.
TEST(NamedEnums, AliasesAndEmbeddedNamesParse) {
  EXPECT_EQ(parse_zero_point_order("after", "f"), ZeroPointOrder::after_rounding);
  EXPECT_EQ(parse_zero_point_order("before", "f"), ZeroPointOrder::before_rounding);
  for (const auto& [source, name] : std::vector<std::pair<Formulation::Source, std::string>>{
           {Formulation::Source::drawn, "drawn"}, {Formulation::Source::u8, "u8"}, {Formulation::Source::s8, "s8"}}) {
    Formulation f;
    f.source = source;
    EXPECT_NE(format_formulation(f).find("/src:" + name + "/"), std::string::npos) << name;
    EXPECT_EQ(parse_formulation("src:" + name, "form").source, source) << name;
  }
}

// One style for an unknown name: the field, what was expected, the text, and every accepted name.
TEST(NamedEnums, AnUnknownNameListsTheAcceptedOnes) {
  const auto message = [](auto parse, const char* text) {
    try {
      parse(text, "f");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(parse_scalar_type, "int32"), "f: unknown type 'int32' (expected int8, uint8, int16)");
  EXPECT_EQ(message(parse_zero_point_order, "never"),
            "f: unknown zero-point order 'never' (expected after_rounding, before_rounding, after, before)");
  EXPECT_EQ(message(parse_sample_source, "file"), "f: unknown sample source 'file' (expected conv, sweep, thresholds)");
  EXPECT_EQ(message(parse_region_mix, "bogus=1"),
            "f: unknown region 'bogus' (expected knee, saturation, quant_boundary, bulk)");
  EXPECT_EQ(message(parse_formulation, "src:u16"), "f.src: unknown source 'u16' (expected drawn, u8, s8)");
  EXPECT_NE(message(parse_pattern_name, "matmul+act").find("unknown producer 'matmul' (expected conv2d, fc)"),
            std::string::npos);
}

}  // namespace
}  // namespace fusediff
