// Conv2D accumulators: hand-worked cases and a property against a padded-tensor brute force.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {
namespace {

// Input 1x3x3x1 int8, zx = 1, codes 1..9 (so x - zx = 0..8 row-major). One 2x2 filter [[1, -1], [2, 3]],
// bias 10, padding 1, stride 2, dilation 2: the dilated kernel spans 3, the padded input 5, so the output is
// 2x2. Taps: iy = 2 oy - 1 + 2 ky, ix = 2 ox - 1 + 2 kx.
//   (0,0): only (ky,kx) = (1,1) is inside: x[1][1] - zx = 4, w = 3        -> 10 + 12 = 22
//   (0,1): only (1,0) inside: x[1][1] = 4, w = 2                          -> 10 + 8  = 18
//   (1,0): only (0,1) inside: x[1][1] = 4, w = -1                         -> 10 - 4  = 6
//   (1,1): only (0,0) inside: x[1][1] = 4, w = 1                          -> 10 + 4  = 14
TEST(Conv2D, HandWorkedPaddingStrideDilation) {
  ConvCase conv;
  conv.input_size(3, 3).input_channels(1).output_channels(1).kernel_size(2, 2).padding(1).stride(2).dilation(2);
  conv.input_quant(QuantParams{QuantType{ScalarType::int8, false}, 0.5f, 1});
  conv.weight_scales({0.25f}).weights({1, -1, 2, 3}).bias({10});
  const std::vector<int32_t> input = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ASSERT_EQ(conv.output_height(), 2);
  ASSERT_EQ(conv.output_width(), 2);
  EXPECT_EQ(Conv2DAccumulators(conv, input), (std::vector<int64_t>{22, 18, 6, 14}));
  EXPECT_EQ(Conv2DAccumulator(conv, input, 0, 1, 0, 0), 6);
}

// Same input, stride 1, no padding, no dilation, 2x2 kernel -> 2x2 output, every tap inside:
//   (0,0): 0*1 + 1*(-1) + 3*2 + 4*3 = 17 -> 27;  (0,1): 1 - 2 + 8 + 15 = 22 -> 32
//   (1,0): 3 - 4 + 12 + 21 = 32 -> 42;          (1,1): 4 - 5 + 14 + 24 = 37 -> 47
TEST(Conv2D, HandWorkedValidPadding) {
  ConvCase conv;
  conv.input_size(3, 3).input_channels(1).output_channels(1).kernel_size(2, 2);
  conv.input_quant(QuantParams{QuantType{ScalarType::int8, false}, 0.5f, 1});
  conv.weight_scales({0.25f}).weights({1, -1, 2, 3}).bias({10});
  const std::vector<int32_t> input = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(Conv2DAccumulators(conv, input), (std::vector<int64_t>{27, 32, 42, 47}));
}

// Layouts: input NHWC, weights OHWI, output NHWK. 1x1 kernel, uint8 input zx = 128, C = 2, K = 2, 1x2 image:
//   pixel 0 codes (130, 120) -> centered (2, -8); pixel 1 codes (128, 255) -> (0, 127)
//   w[k=0] = (3, 1), w[k=1] = (-2, 5), bias (100, -100)
//   out[0][0][0][0] = 100 + 6 - 8 = 98;     out[..][0][1] = -100 - 4 - 40 = -144
//   out[0][0][1][0] = 100 + 0 + 127 = 227;  out[..][1][1] = -100 + 0 + 635 = 535
TEST(Conv2D, HandWorkedLayouts) {
  ConvCase conv;
  conv.input_size(1, 2).input_channels(2).output_channels(2).kernel_size(1, 1);
  conv.input_quant(QuantParams{QuantType{ScalarType::uint8, false}, 0.1f, 128});
  conv.weight_scales({0.5f, 0.25f}).weights({3, 1, -2, 5}).bias({100, -100});
  const std::vector<int32_t> input = {130, 120, 128, 255};
  EXPECT_EQ(Conv2DAccumulators(conv, input), (std::vector<int64_t>{98, -144, 227, 535}));
  EXPECT_EQ(Conv2DAccumulator(conv, input, 0, 0, 1, 1), 535);
}

TEST(Conv2D, RejectsBadInput) {
  ConvCase conv;
  conv.input_size(2, 2).input_channels(1).output_channels(1).kernel_size(1, 1);
  conv.input_quant(QuantParams{QuantType{ScalarType::int8, false}, 1.0f, 0});
  conv.weight_scales({1.0f}).weights({1}).bias({0});
  EXPECT_THROW(Conv2DAccumulators(conv, std::vector<int32_t>{1, 2, 3}), InputError);     // wrong size
  EXPECT_THROW(Conv2DAccumulators(conv, std::vector<int32_t>{1, 2, 3, 200}), InputError);  // outside int8
  EXPECT_THROW(Conv2DAccumulator(conv, std::vector<int32_t>{1, 2, 3, 4}, 0, 2, 0, 0), InputError);  // oy outside
  EXPECT_THROW(Conv2DAccumulator(conv, std::vector<int32_t>{1, 2, 3, 4}, 0, 0, 0, 1), InputError);  // k outside
  conv.weights({-128});
  EXPECT_THROW(Conv2DAccumulators(conv, std::vector<int32_t>{1, 2, 3, 4}), InputError);  // invalid case
}

// Brute force: materialize the zero-padded input (padding holds code zx), then convolve without any bounds
// logic: acc = bias + sum (P[n][oy*sh + ky*dh][ox*sw + kx*dw][c] - zx) * w.
std::vector<int64_t> brute_force(const ConvCase& conv, const std::vector<int32_t>& input) {
  const int32_t ph = conv.input_height() + conv.padding_top() + conv.padding_bottom();
  const int32_t pw = conv.input_width() + conv.padding_left() + conv.padding_right();
  const int32_t C = conv.input_channels();
  const int32_t zx = conv.input_quant().zero_point;
  std::vector<int32_t> padded(size_t(conv.batch()) * ph * pw * C, zx);
  for (int32_t n = 0; n < conv.batch(); ++n)
    for (int32_t y = 0; y < conv.input_height(); ++y)
      for (int32_t x = 0; x < conv.input_width(); ++x)
        for (int32_t c = 0; c < C; ++c)
          padded[((size_t(n) * ph + y + conv.padding_top()) * pw + x + conv.padding_left()) * C + c] =
              input[((size_t(n) * conv.input_height() + y) * conv.input_width() + x) * C + c];
  std::vector<int64_t> out;
  for (int32_t n = 0; n < conv.batch(); ++n)
    for (int32_t oy = 0; oy < conv.output_height(); ++oy)
      for (int32_t ox = 0; ox < conv.output_width(); ++ox)
        for (int32_t k = 0; k < conv.output_channels(); ++k) {
          int64_t acc = conv.bias()[k];
          for (int32_t ky = 0; ky < conv.kernel_height(); ++ky)
            for (int32_t kx = 0; kx < conv.kernel_width(); ++kx)
              for (int32_t c = 0; c < C; ++c) {
                const int32_t py = oy * conv.stride_height() + ky * conv.dilation_height();
                const int32_t px = ox * conv.stride_width() + kx * conv.dilation_width();
                const int64_t xv = padded[((size_t(n) * ph + py) * pw + px) * C + c];
                const int64_t wv = conv.weights()[((size_t(k) * conv.kernel_height() + ky) * conv.kernel_width() + kx) * C + c];
                acc += (xv - zx) * wv;
              }
          out.push_back(acc);
        }
  return out;
}

RC_GTEST_PROP(Conv2D, MatchesPaddedBruteForce, ()) {
  ConvCase conv;
  const bool u8 = *rc::gen::arbitrary<bool>();
  const QuantType type{u8 ? ScalarType::uint8 : ScalarType::int8, false};
  const int32_t zx = *rc::gen::inRange(type.qmin(), type.qmax() + 1);
  conv.batch(*rc::gen::inRange(1, 3)).input_size(*rc::gen::inRange(1, 7), *rc::gen::inRange(1, 7));
  conv.input_channels(*rc::gen::inRange(1, 4)).output_channels(*rc::gen::inRange(1, 4));
  conv.kernel_size(*rc::gen::inRange(1, 4), *rc::gen::inRange(1, 4));
  conv.stride(*rc::gen::inRange(1, 4), *rc::gen::inRange(1, 4));
  conv.dilation(*rc::gen::inRange(1, 3), *rc::gen::inRange(1, 3));
  conv.padding(*rc::gen::inRange(0, 3), *rc::gen::inRange(0, 3), *rc::gen::inRange(0, 3), *rc::gen::inRange(0, 3));
  RC_PRE(conv.output_height() >= 1 && conv.output_width() >= 1);
  conv.input_quant(QuantParams{type, 0.05f, zx});
  conv.weight_scales(std::vector<float>(size_t(conv.output_channels()), 0.01f));
  conv.weights(*rc::gen::container<std::vector<int8_t>>(conv.weight_elements(), rc::gen::inRange<int8_t>(-127, 127)));
  conv.bias(*rc::gen::container<std::vector<int32_t>>(size_t(conv.output_channels()), rc::gen::inRange(-100000, 100000)));
  const auto input = *rc::gen::container<std::vector<int32_t>>(conv.input_elements(), rc::gen::inRange(type.qmin(), type.qmax() + 1));
  RC_CLASSIFY(conv.padding_top() + conv.padding_left() > 0, "padded");
  RC_CLASSIFY(conv.dilation_height() > 1, "dilated");
  const auto got = Conv2DAccumulators(conv, input);
  RC_ASSERT(got == brute_force(conv, input));
  const size_t i = *rc::gen::inRange<size_t>(0, got.size());
  const auto c = conv.output_coord(i);
  RC_ASSERT(Conv2DAccumulator(conv, input, c.n, c.oy, c.ox, c.k) == got[i]);
}

}  // namespace
}  // namespace fusediff::reference
