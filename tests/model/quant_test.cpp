#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "fusediff/model/convention.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/quant.h"

namespace fusediff {
namespace {

TEST(QuantType, RangesOfEveryType) {
  EXPECT_EQ(QuantType{ScalarType::int8}.qmin(), -128);
  EXPECT_EQ((QuantType{ScalarType::int8, true}).qmin(), -127);
  EXPECT_EQ(QuantType{ScalarType::uint8}.qmax(), 255);
  EXPECT_EQ(QuantType{ScalarType::int16}.code_count(), 65536u);
  EXPECT_EQ((QuantType{ScalarType::int16, true}).code_count(), 65535u);
}

TEST(ParseFloat32, NearestFloatOfTheDecimal) {
  EXPECT_EQ(parse_float32("0.1", "f"), 0.1f);
  EXPECT_EQ(parse_float32("+2.5e-3", "f"), 2.5e-3f);
  // 2^-149 is the smallest subnormal; 1.401298464324817e-45 is its shortest decimal.
  EXPECT_EQ(parse_float32("1.401298464324817e-45", "f"), std::bit_cast<float>(1u));
  EXPECT_THROW(parse_float32("1.5x", "f"), InputError);
  EXPECT_THROW(parse_float32("nan", "f"), InputError);
  EXPECT_THROW(parse_float32("1e39", "f"), InputError);
  EXPECT_THROW(parse_float32("", "f"), InputError);
}

RC_GTEST_PROP(ParseFloat32, FormatRoundTripsEveryFiniteFloat, (uint32_t bits)) {
  const float value = std::bit_cast<float>(bits);
  RC_PRE(std::isfinite(value));
  const float back = parse_float32(format_float32(value), "f");
  RC_ASSERT(std::bit_cast<uint32_t>(back) == bits);
}

TEST(FormatDouble, ShortestDecimalNeverFixedPoint) {
  // %f (std::to_string) shows both of the first two as 0.000000.
  EXPECT_EQ(format_double(1e-300), "1e-300");
  EXPECT_EQ(format_double(-1e-300), "-1e-300");
  EXPECT_EQ(format_double(static_cast<double>(1e-30f)), "1.0000000031710769e-30");  // the float32 nearest 1e-30
  EXPECT_EQ(format_float32(1e-30f), "1e-30");
  EXPECT_EQ(format_double(0.25), "0.25");
  EXPECT_EQ(format_double(1e300), "1e+300");
}

RC_GTEST_PROP(FormatDouble, RoundTripsEveryFiniteDouble, (uint64_t bits)) {
  const double value = std::bit_cast<double>(bits);
  RC_PRE(std::isfinite(value));
  const std::string text = format_double(value);
  double back = 0;
  std::from_chars(text.data(), text.data() + text.size(), back);
  RC_ASSERT(std::bit_cast<uint64_t>(back) == bits);
}

TEST(QuantParams, ValidationNamesTheField) {
  try {
    validate(QuantParams{QuantType{ScalarType::uint8}, 0.5f, 300}, "output");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("output.zero_point"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 255]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(validate(QuantParams{QuantType{ScalarType::int8}, 0.0f, 0}, "u"), InputError);
  EXPECT_THROW(validate(QuantParams{QuantType{ScalarType::int8}, -1.0f, 0}, "u"), InputError);
  EXPECT_THROW(validate(QuantParams{QuantType{ScalarType::int8}, INFINITY, 0}, "u"), InputError);
}

TEST(QuantParams, ParseTypeScaleZeroPoint) {
  const QuantParams q = parse_quant_params("int8_narrow:0.25:-3", "--intermediate", QuantParams{});
  EXPECT_EQ(q.type, (QuantType{ScalarType::int8, true}));
  EXPECT_EQ(q.scale, 0.25f);
  EXPECT_EQ(q.zero_point, -3);
  EXPECT_EQ(format_quant_params(q), "int8_narrow:0.25:-3");
  EXPECT_THROW(parse_quant_params("int8:0.25", "--intermediate", QuantParams{}), InputError);
  EXPECT_THROW(parse_quant_params("int32:1:0", "--intermediate", QuantParams{}), InputError);
  EXPECT_THROW(parse_quant_params("uint8_narrow:1:0", "--intermediate", QuantParams{}), InputError);
  EXPECT_THROW(parse_quant_params("int8:1:200", "--intermediate", QuantParams{}), InputError);
}

TEST(Convention, FixedRoundingMustMatchTheDeclaredOne) {
  Convention c;
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.25f, 0};
  c.output.q = QuantParams{QuantType{ScalarType::int8}, 0.0625f, 0};
  c.activation = make_activation(ActivationKind::relu);
  c.requant = RequantVariant::double_rounding;
  c.intermediate.rounding = RoundingMode::half_away_from_zero;
  EXPECT_NO_THROW(validate(c));
  c.intermediate.rounding = RoundingMode::half_up;
  EXPECT_THROW(validate(c), InputError);
  c.requant = RequantVariant::single_rounding;
  EXPECT_NO_THROW(validate(c));
  c.requant = RequantVariant::exact;
  c.intermediate.rounding = RoundingMode::half_to_even;
  EXPECT_NO_THROW(validate(c));
  c.activation.alpha = 0.5f;  // relu takes no alpha
  EXPECT_THROW(validate(c), InputError);
}

}  // namespace
}  // namespace fusediff
