#include <gtest/gtest.h>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/diagnostics.h"
#include "fusediff/model/errors.h"

namespace fusediff {
namespace {

ConvCase SmallCase() {
  ConvCase conv;
  conv.batch(2).input_size(14, 13).input_channels(3).output_channels(4).kernel_size(3, 2).stride(2, 1).dilation(1, 2)
      .padding(1, 0, 1, 1);
  conv.input_quant(QuantParams{QuantType{ScalarType::uint8}, 0.5f, 128});
  conv.weight_scales(std::vector<float>(4, 0.01f));
  conv.weights(std::vector<int8_t>(conv.weight_elements(), 1));
  conv.bias(std::vector<int32_t>(4, 7));
  return conv;
}

TEST(ConvCase, DerivedSizes) {
  const ConvCase conv = SmallCase();
  // H: (14 + 2 - 3) / 2 + 1 = 7; W: (13 + 1 - (2*(2-1)+1)) / 1 + 1 = 12.
  EXPECT_EQ(conv.output_height(), 7);
  EXPECT_EQ(conv.output_width(), 12);
  EXPECT_EQ(conv.output_elements(), 2u * 7 * 12 * 4);
  EXPECT_EQ(conv.weight_elements(), 4u * 3 * 2 * 3);
  const ConvCase::OutputCoord c = conv.output_coord(conv.output_index(1, 5, 9, 3));
  EXPECT_EQ(c.n, 1);
  EXPECT_EQ(c.oy, 5);
  EXPECT_EQ(c.ox, 9);
  EXPECT_EQ(c.k, 3);
  EXPECT_NO_THROW(conv.validate());
  // max |x - zx| = 128 for uint8 with zx = 128; sum |w| = 18; bias 7.
  EXPECT_EQ(conv.accumulator_bound(0), 7 + 128 * 18);
}

// -128 belongs to full-range s8 weights (oneDNN), not to symmetric int8 (TFLite); a v2 replay string carries the
// range.
TEST(ConvCase, WeightRangeDecidesWhetherMinus128IsAWeight) {
  ConvCase conv = SmallCase();
  std::vector<int8_t> weights = conv.weights();
  weights[5] = -128;
  conv.weights(weights);
  EXPECT_THROW(conv.validate(), InputError);
  conv.weight_range(WeightRange::full);
  EXPECT_NO_THROW(conv.validate());
  EXPECT_EQ(conv.accumulator_bound(0), 7 + 128 * (17 + 128));

  ReplayKey key;
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // std::string = "literal", inlined (fusediff/model/diagnostics.h)
  key.spec.name = "x";
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
  key.spec.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.5f, 0};
  key.spec.convention.output.q = QuantParams{QuantType{ScalarType::int8}, 0.5f, 0};
  key.explicit_conv = ExplicitConv{conv, std::vector<int32_t>(conv.input_elements(), 130), 3};
  const std::string text = format_replay(key);
  EXPECT_NE(text.find(";wrange=full"), std::string::npos);
  const ReplayKey back = parse_replay(text);
  ASSERT_TRUE(back.explicit_conv);
  EXPECT_EQ(back.explicit_conv->conv.weight_range(), WeightRange::full);
  EXPECT_EQ(back.explicit_conv->conv.weights(), conv.weights());
  std::string symmetric = text;
  symmetric.erase(symmetric.find(";wrange=full"), 12);
  EXPECT_THROW(parse_replay(symmetric), InputError);
}

TEST(ConvCase, RejectsOverflowingAccumulator) {
  ConvCase conv;
  conv.input_size(8, 8).input_channels(4096).output_channels(1).kernel_size(7, 7);
  conv.input_quant(QuantParams{QuantType{ScalarType::int8}, 1.0f, 0});
  conv.weight_scales({1.0f});
  conv.weights(std::vector<int8_t>(conv.weight_elements(), 127));  // 128*127*200704 > 2^31
  conv.bias({0});
  try {
    conv.validate();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("overflows int32"), std::string::npos) << e.what();
  }
}

TEST(ConvCase, RejectsBadShapesAndVectors) {
  ConvCase conv = SmallCase();
  conv.kernel_size(20, 2);
  EXPECT_THROW(conv.validate(), InputError);
  conv = SmallCase();
  conv.bias({1, 2});
  EXPECT_THROW(conv.validate(), InputError);
  conv = SmallCase();
  std::vector<int8_t> w(conv.weight_elements(), 0);
  w[3] = -128;
  conv.weights(w);
  EXPECT_THROW(conv.validate(), InputError);
  conv = SmallCase();
  conv.input_quant(QuantParams{QuantType{ScalarType::int16}, 1.0f, 0});
  EXPECT_THROW(conv.validate(), InputError);
}

}  // namespace
}  // namespace fusediff
