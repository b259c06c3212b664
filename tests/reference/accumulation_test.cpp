// The documented library accumulations (model/conv_case.h Accumulation) and kernel column schedules
// (ConvCase::column_reads): oneDNN's own examples, and a property against an independent formulation that lists every
// product the kernel multiplies and sums its int16 pairs directly.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <vector>

#include "fusediff/model/known_defects.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {
namespace {

const QuantType kU8{ScalarType::uint8, false};
const QuantType kS8{ScalarType::int8, false};

// One 1x1 tap over `c` channels: acc = bias + sum (x - zx) w.
ConvCase OnePixel(QuantType type, int32_t zx, std::vector<int8_t> w, Accumulation a) {
  ConvCase conv;
  conv.input_channels(static_cast<int32_t>(w.size())).output_channels(1).input_quant({type, 1.0f, zx});
  conv.weight_range(WeightRange::full).weight_scales({1.0f}).weights(std::move(w)).bias({0}).accumulation(a);
  return conv;
}

// oneDNN 2.6.3 doc/advanced/int8_computations.md: u8 {255, 255, 0, 0} x s8 {127, 127, 0, 0} gives 32767 with
// vpmaddubsw where 64770 is exact; s8 {127, 127, 0, 0} x s8 {127, 127, 0, 0} through the +128 shift gives 255 where
// 32258 is exact.
TEST(Accumulation, OneDnnsDocumentedExamples) {
  const ConvCase u8 = OnePixel(kU8, 0, {127, 127, 0, 0}, Accumulation::int16_pairs_per_tap);
  EXPECT_EQ(Conv2DAccumulators(u8, std::vector<int32_t>{255, 255, 0, 0}), std::vector<int64_t>{32767});
  EXPECT_EQ(Conv2DAccumulators(OnePixel(kU8, 0, {127, 127, 0, 0}, Accumulation::exact), std::vector<int32_t>{255, 255, 0, 0}),
            std::vector<int64_t>{64770});
  const ConvCase s8 = OnePixel(kS8, 0, {127, 127, 0, 0}, Accumulation::int16_pairs_per_tap);
  EXPECT_EQ(Conv2DAccumulators(s8, std::vector<int32_t>{127, 127, 0, 0}), std::vector<int64_t>{255});
}

// Weights halved to nearest even: 127 -> 128, -127 -> -128, 125 -> 124, -125 -> -124, 3 -> 4, 1 -> 0, -1 -> 0.
TEST(Accumulation, HalvedWeightsRoundToEven) {
  const std::vector<int8_t> w = {127, -127, 125, -125, 3, 1, -1};
  const std::vector<int64_t> doubled = {128, -128, 124, -124, 4, 0, 0};
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<int8_t> one(w.size(), 0);
    one[i] = w[i];
    std::vector<int32_t> x(w.size(), 0);
    x[i] = 1;
    EXPECT_EQ(Conv2DAccumulators(OnePixel(kS8, 0, one, Accumulation::halved_weights), x), std::vector<int64_t>{doubled[i]})
        << int{w[i]};
  }
}

// Per tap, an odd channel count leaves the last channel alone; flattened, it pairs with the next tap's first.
TEST(Accumulation, PairsPerTapAndFlattenedDiffer) {
  ConvCase conv;
  conv.input_size(1, 2).input_channels(3).output_channels(1).kernel_size(1, 2).input_quant({kU8, 1.0f, 0});
  conv.weight_scales({1.0f}).weights({0, 0, 127, 127, 0, 0}).bias({0});
  const std::vector<int32_t> x = {0, 0, 255, 255, 0, 0};
  EXPECT_EQ(Conv2DAccumulators(conv, x), std::vector<int64_t>{64770});
  EXPECT_EQ(Conv2DAccumulators(ConvCase(conv).accumulation(Accumulation::int16_pairs_per_tap), x), std::vector<int64_t>{64770});
  EXPECT_EQ(Conv2DAccumulators(ConvCase(conv).accumulation(Accumulation::int16_pairs_flattened), x), std::vector<int64_t>{32767});
}

// The gemv's swapped operands: (w + 128) * s pairs, s the code as s8. w = 127 -> 255, s = 127: 64770 saturates.
TEST(Accumulation, ShiftedWeightsPairTheWeightsAsU8) {
  const ConvCase conv = OnePixel(kS8, 0, {127, 127}, Accumulation::int16_pairs_shifted_weights);
  // exact 32258; the pair (255 * 127) * 2 = 64770 -> 32767 loses 32003.
  EXPECT_EQ(Conv2DAccumulators(conv, std::vector<int32_t>{127, 127}), std::vector<int64_t>{32258 + 32767 - 64770});
  // A u8 input is the same source as s8 code x - 128.
  const ConvCase u8 = OnePixel(kU8, 128, {127, 127}, Accumulation::int16_pairs_shifted_weights);
  EXPECT_EQ(Conv2DAccumulators(u8, std::vector<int32_t>{255, 255}), std::vector<int64_t>{32258 + 32767 - 64770});
}

// A dropped column (column_reads) adds no product: with u8 codes at a large zero point, zx * w pairs would saturate.
TEST(Accumulation, SkippedTapsSaturateNoPair) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).input_size(1, 2).input_channels(2).output_channels(1).input_quant({kU8, 1.0f, 250});
  conv.weight_scales({1.0f}).weights({127, 127}).bias({0}).accumulation(Accumulation::int16_pairs_per_tap);
  const std::vector<int32_t> x = {250, 250, 250, 250};  // real value 0 everywhere
  // Each pixel's pair (250 * 127) * 2 = 63500 saturates to 32767 in the kernel's arithmetic; the zero point's
  // compensation is exact, so the accumulator is 32767 - 63500 per tap read.
  EXPECT_EQ(Conv2DAccumulators(conv, x), (std::vector<int64_t>{32767 - 63500, 32767 - 63500}));
  conv.column_reads({0, -1});  // ox = 1 reads nothing
  EXPECT_EQ(Conv2DAccumulators(conv, x), (std::vector<int64_t>{32767 - 63500, 0}));
}

// A column past the row reads the next pixel in memory, and past the input what the input vector holds after it.
TEST(Accumulation, ColumnsPastTheRowReadTheNextPixels) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).batch(1).input_size(2, 2).input_channels(1).output_channels(1);
  conv.input_quant({kU8, 1.0f, 0}).weight_scales({1.0f}).weights({1}).bias({0});
  const std::vector<int32_t> x = {1, 2, 3, 4, 50};  // a 2x2 input, then one code past it
  conv.column_reads({1, 2});                         // ox = 1 reads column 2: row 0 -> (1, 0), row 1 -> past the input
  EXPECT_EQ(Conv2DAccumulators(conv, x), (std::vector<int64_t>{2, 3, 4, 50}));
  EXPECT_THROW(Conv2DAccumulators(conv, std::vector<int32_t>{1, 2, 3, 4}), std::logic_error);  // nothing there
}

// The independent formulation: every product the kernel multiplies, in (ky, kx, c) order with padded taps as 0,
// and each int16 pair summed and saturated by hand.
int64_t ByHand(const ConvCase& conv, const std::vector<int32_t>& x, int32_t oy, int32_t ox, int32_t k, bool per_tap) {
  const int32_t shift = conv.input_quant().type.scalar == ScalarType::int8 ? 128 : 0;
  const int64_t zu = conv.input_quant().zero_point + shift;
  std::vector<int64_t> products;
  int64_t compensation = 0;
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky)
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      const int32_t iy = oy * conv.stride_height() - conv.padding_top() + ky * conv.dilation_height();
      const int32_t ix = ox * conv.stride_width() - conv.padding_left() + kx * conv.dilation_width();
      const bool inside = iy >= 0 && iy < conv.input_height() && ix >= 0 && ix < conv.input_width();
      for (int32_t c = 0; c < conv.input_channels(); ++c) {
        const int64_t w = conv.weights()[conv.weight_index(k, ky, kx, c)];
        products.push_back(inside ? (x[conv.input_index(0, iy, ix, c)] + shift) * w : 0);
        compensation += inside ? zu * w : 0;
      }
      if (per_tap && conv.input_channels() % 2 == 1) products.push_back(0);  // the lone channel's partner
    }
  int64_t acc = conv.bias()[static_cast<size_t>(k)] - compensation;
  for (size_t i = 0; i < products.size(); i += 2) {
    acc += std::clamp<int64_t>(products[i] + (i + 1 < products.size() ? products[i + 1] : 0), -32768, 32767);
  }
  return acc;
}

RC_GTEST_PROP(Accumulation, PairsEqualTheKernelsProductsByHand, ()) {
  const bool s8 = *rc::gen::arbitrary<bool>();
  const int32_t c = *rc::gen::inRange(1, 6), kh = *rc::gen::inRange(1, 3), kw = *rc::gen::inRange(1, 3);
  const int32_t pad = *rc::gen::inRange(0, std::min(kh, kw));
  const QuantType type = s8 ? kS8 : kU8;
  const int32_t zx = *rc::gen::inRange(type.qmin(), type.qmax() + 1);
  ConvCase conv;
  conv.input_size(3, 3).input_channels(c).output_channels(1).kernel_size(kh, kw).padding(pad).input_quant({type, 1.0f, zx});
  conv.weight_range(WeightRange::full).weight_scales({1.0f}).bias({*rc::gen::inRange(-1000, 1000)});
  conv.weights(*rc::gen::container<std::vector<int8_t>>(static_cast<size_t>(c * kh * kw), rc::gen::arbitrary<int8_t>()));
  const auto x = *rc::gen::container<std::vector<int32_t>>(conv.input_elements(), rc::gen::inRange(type.qmin(), type.qmax() + 1));
  const bool per_tap = *rc::gen::arbitrary<bool>();
  RC_CLASSIFY(per_tap, "per tap");
  RC_CLASSIFY(s8, "int8 input");
  conv.accumulation(per_tap ? Accumulation::int16_pairs_per_tap : Accumulation::int16_pairs_flattened);
  const std::vector<int64_t> acc = Conv2DAccumulators(conv, x);
  for (int32_t oy = 0; oy < conv.output_height(); ++oy)
    for (int32_t ox = 0; ox < conv.output_width(); ++ox) {
      RC_ASSERT(acc[conv.output_index(0, oy, ox, 0)] == ByHand(conv, x, oy, ox, 0, per_tap));
    }
}

// oneDNN's advice for CPUs without VNNI: u8 codes times 7-bit weights ([-64, 63]) never saturate a pair
// (255 * 64 * 2 = 32640 < 32767), so both pair rules equal the exact sum; 8-bit weights may not.
RC_GTEST_PROP(Accumulation, SevenBitWeightsOnU8CodesNeverSaturate, ()) {
  const int32_t c = *rc::gen::inRange(1, 9);
  ConvCase conv;
  conv.input_size(2, 2).input_channels(c).output_channels(1).kernel_size(2, 2).input_quant({kU8, 1.0f, *rc::gen::inRange(0, 256)});
  conv.weight_range(WeightRange::full).weight_scales({1.0f}).bias({0});
  conv.weights(*rc::gen::container<std::vector<int8_t>>(static_cast<size_t>(4 * c),
                                                         rc::gen::map(rc::gen::inRange(-64, 64), [](int v) { return static_cast<int8_t>(v); })));
  const auto x = *rc::gen::container<std::vector<int32_t>>(conv.input_elements(), rc::gen::inRange(0, 256));
  const std::vector<int64_t> exact = Conv2DAccumulators(conv, x);
  for (Accumulation a : {Accumulation::int16_pairs_per_tap, Accumulation::int16_pairs_flattened}) {
    RC_ASSERT(Conv2DAccumulators(ConvCase(conv).accumulation(a), x) == exact);
  }
}

// Output padding passed as an extended input adds zero-point codes: exact arithmetic gives the same outputs.
RC_GTEST_PROP(Accumulation, ExtendedInputKeepsExactOutputs, ()) {
  const int32_t stride = *rc::gen::inRange(1, 4), kw = *rc::gen::inRange(1, 4), opad = *rc::gen::inRange(0, stride);
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).input_size(2, 3).input_channels(2).output_channels(2).kernel_size(2, kw);
  conv.stride(stride).output_padding(opad, opad).input_quant({kU8, 1.0f, *rc::gen::inRange(0, 256)});
  conv.weight_scales({1.0f, 1.0f}).bias({5, -7});
  conv.weights(*rc::gen::container<std::vector<int8_t>>(static_cast<size_t>(2 * 2 * kw * 2), rc::gen::map(rc::gen::inRange(-127, 128), [](int v) { return static_cast<int8_t>(v); })));
  std::vector<int32_t> x = *rc::gen::container<std::vector<int32_t>>(conv.input_elements(), rc::gen::inRange(0, 256));
  const std::vector<int64_t> before = Conv2DAccumulators(conv, x);
  const auto extension = output_padding_extension(conv, true);
  RC_CLASSIFY(extension.first + extension.second > 0, "extended");
  extend_for_output_padding(&conv, &x, extension);
  RC_ASSERT(Conv2DAccumulators(conv, x) == before);
}

}  // namespace
}  // namespace fusediff::reference
