#pragma once
// A ConvTranspose2D of one row, for the ledger tests of the model's generic rules and of a library's own (its
// geometry is what the rules read): iw inputs, kernel 1 x kw, stride 1 x sw, padding pl left and right, output
// padding opw, oc output channels; u8 input (scale 1, zero point 3), every weight 1, bias 0.
#include <cstdint>
#include <vector>

#include "fusediff/model/conv_case.h"

namespace fusediff::test_support {

inline ConvCase RowDeconv(int32_t iw, int32_t kw, int32_t sw, int32_t pl, int32_t opw, int32_t oc = 1) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).output_padding(0, opw).padding(0, pl, 0, pl);
  conv.batch(1).input_size(1, iw).input_channels(1).output_channels(oc).kernel_size(1, kw).stride(1, sw);
  conv.input_quant(QuantParams{QuantType{ScalarType::uint8, false}, 1.0f, 3})
      .weight_scales(std::vector<float>(static_cast<size_t>(oc), 1.0f));
  conv.weights(std::vector<int8_t>(static_cast<size_t>(oc * kw), 1))
      .bias(std::vector<int32_t>(static_cast<size_t>(oc), 0));
  return conv;
}

}  // namespace fusediff::test_support
