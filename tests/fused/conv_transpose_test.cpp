// The fused path's scatter-form ConvTranspose2D on the hand-worked case (same numbers as the reference test).
#include <gtest/gtest.h>

#include "fusediff/fused/fused_kernel.h"

namespace fusediff::fused {
namespace {

TEST(FusedConvTranspose2D, HandWorkedAccumulatorsAndCodes) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).input_size(2, 2).kernel_size(3, 3).stride(2).padding(1).output_padding(1, 1);
  conv.input_quant(QuantParams{QuantType{ScalarType::int8}, 0.5f, 1});
  std::vector<int8_t> w(9, 1);
  w[4] = 2;
  conv.weights(w).weight_scales({0.25f}).bias({10});
  Convention c;
  c.requant = RequantVariant::exact;  // M = 0.5 * 0.25 / 0.125 = 1: u = acc
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.125f, 0};
  c.output.q = QuantParams{QuantType{ScalarType::int8}, 0.125f, 0};
  c.activation = make_activation(ActivationKind::relu);
  std::string why;
  auto kernel = FusedKernel::Create(c, TableKind::lut, Mutant::none, &why);
  ASSERT_TRUE(kernel) << why;
  const std::vector<int32_t> input = {2, 3, 4, 5};
  std::vector<int32_t> y(16), acc(16), u(16);
  kernel->Run(conv, input, y, acc, u);
  EXPECT_EQ(acc[conv.output_index(0, 0, 0, 0)], 12);
  EXPECT_EQ(acc[conv.output_index(0, 1, 1, 0)], 20);
  EXPECT_EQ(acc[conv.output_index(0, 2, 2, 0)], 18);
  EXPECT_EQ(acc[conv.output_index(0, 3, 3, 0)], 14);
  EXPECT_EQ(acc[conv.output_index(0, 0, 1, 0)], 13);
  EXPECT_EQ(u[conv.output_index(0, 1, 1, 0)], 20);
  EXPECT_EQ(y[conv.output_index(0, 1, 1, 0)], 20);  // relu(20 * 0.125) / 0.125
}

}  // namespace
}  // namespace fusediff::fused
