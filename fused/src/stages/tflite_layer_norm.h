#pragma once
// Internal to the fused library: the layernorm stage's tflite_int16 arithmetic (model/pattern.h) as TFLite's
// integer kernel computes it (PortableApplyLayerNorm, tensorflow/lite/kernels/internal/reference/
// portable_tensor_utils.cc:303-351 at tensorflow/tensorflow fa42ad217cd4a0e3f566ba25b2ebbe28b501c4cb), on
// fixedpoint.h's gemmlowp primitives, with its operands prepared as TFLite's integer LSTM prepares them
// (tensorflow/lite/kernels/lstm.cc PopulateQuantizedLstmParams8x8_16 at 4a9ce94e5e19861a536507bbe7c9bcedea8a4491).
// Its own code: it never calls the reference.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fusediff/model/quant.h"

namespace fusediff::fused {

// One draw's int16 weights, int32 biases, output multiplier and variance guard, from gamma and beta.
struct TfliteLayerNormParams {
  std::vector<int16_t> weights;
  std::vector<int32_t> bias;
  int32_t scale_a = 0;  // QuantizeMultiplier(s_g)
  int scale_b = 0;
  int32_t variance_limit = 1;
};
TfliteLayerNormParams PrepareTfliteLayerNorm(std::span<const float> gamma, std::span<const float> beta);

// Every row of `v` (int16 values q - z_in, rows of `features`) into output codes of `out` (scale 2^-k, zero
// point 0), saturated to its type: TFLite's output shift scale_b + 12 becomes scale_b + k.
void ApplyTfliteLayerNorm(std::span<const int16_t> v, size_t features, const TfliteLayerNormParams& p,
                          const QuantParams& out, std::span<int32_t> y);

}  // namespace fusediff::fused
