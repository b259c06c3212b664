// ConvTranspose2D accumulators against a hand-worked case.
#include <gtest/gtest.h>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {
namespace {

// 1x2x2x1 input, 3x3 kernel of ones except w[1][1] = 2, stride 2, padding 1 all sides, output padding 1:
// full output (2-1)*2 + 3 = 5, cropped by 1 at each end, + 1 output padding -> 4x4.
// Full-output position p = i*2 + k; cropped oy = p - 1.
ConvCase Example() {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).input_size(2, 2).kernel_size(3, 3).stride(2).padding(1).output_padding(1, 1);
  conv.input_quant(QuantParams{QuantType{ScalarType::int8}, 0.5f, 1});
  std::vector<int8_t> w(9, 1);
  w[4] = 2;  // ky = 1, kx = 1
  conv.weights(w).weight_scales({0.25f}).bias({10});
  return conv;
}

TEST(ConvTranspose2D, SizesFollowThePyTorchFormula) {
  const ConvCase conv = Example();
  EXPECT_EQ(conv.output_height(), 4);
  EXPECT_EQ(conv.output_width(), 4);
  EXPECT_NO_THROW(conv.validate());
}

TEST(ConvTranspose2D, HandWorkedAccumulators) {
  const ConvCase conv = Example();
  // centred inputs x - zx: [[1, 2], [3, 4]] (codes 2, 3, 4, 5 with zx = 1)
  const std::vector<int32_t> input = {2, 3, 4, 5};
  const std::vector<int64_t> acc = Conv2DAccumulators(conv, input);
  // Output (oy, ox) takes input (iy, ix) through tap ky = oy + 1 - 2*iy (0..2), kx likewise.
  // (0,0): iy=0 ky=1, ix=0 kx=1: 1*2 = 2 -> 12.
  EXPECT_EQ(acc[conv.output_index(0, 0, 0, 0)], 12);
  // (1,1): iy in {0 (ky=2), 1 (ky=0)}, ix in {0 (kx=2), 1 (kx=0)}: 1+2+3+4 = 10 -> 20.
  EXPECT_EQ(acc[conv.output_index(0, 1, 1, 0)], 20);
  // (2,2): iy=1 ky=1, ix=1 kx=1: 4*2 = 8 -> 18.
  EXPECT_EQ(acc[conv.output_index(0, 2, 2, 0)], 18);
  // (3,3): only the output padding row/column: iy = (3+1-ky)/2 = 1 with ky = 2, ix likewise: 4*1 -> 14.
  EXPECT_EQ(acc[conv.output_index(0, 3, 3, 0)], 14);
  // (0,1): iy=0 ky=1 (w 1 or 2 by kx); ix=0 kx=2 -> 1*1, ix=1 kx=0 -> 2*1: 3 -> 13.
  EXPECT_EQ(acc[conv.output_index(0, 0, 1, 0)], 13);
  EXPECT_EQ(Conv2DAccumulator(conv, input, 0, 1, 1, 0), 20);
}

TEST(ConvTranspose2D, OutputPaddingNeedsATransposedConv) {
  ConvCase conv = Example();
  conv.op(ConvOp::conv2d);
  EXPECT_THROW(conv.validate(), InputError);
  conv.op(ConvOp::conv_transpose2d).output_padding(2, 0);  // must be < max(stride, dilation) = 2
  EXPECT_THROW(conv.validate(), InputError);
}

}  // namespace
}  // namespace fusediff::reference
