#pragma once
// Internal to the fused library: helpers the pattern kernel and the stage kernels share.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/pattern.h"

namespace fusediff::fused {

// TFLite's per-tensor FC forms sx*sw in float32 and divides by the output scale in double: the same as a conv whose
// input scale is that float product and whose weight scale is 1 (double(product) * 1.0 / su).
inline ConvCase WithMultiplierRule(const ConvCase& conv, MultiplierRule rule) {
  if (rule == MultiplierRule::double_product) return conv;
  ConvCase folded = conv;
  QuantParams q = conv.input_quant();
  q.scale = conv.input_quant().scale * conv.weight_scales().front();  // binary32 product (per-tensor scales)
  folded.input_quant(q);
  folded.weight_scales(std::vector<float>(conv.weight_scales().size(), 1.0f));
  return folded;
}

// round-half-away-from-zero of a double to a code of `type`, saturating.
inline int32_t RoundToType(double v, int32_t zero_point, const QuantType& type) {
  const double code = std::round(v) + zero_point;
  return static_cast<int32_t>(std::clamp(code, double(type.qmin()), double(type.qmax())));
}

}  // namespace fusediff::fused
