#pragma once
// The layernorm stage's tflite_int16 arithmetic (model/pattern.h LayerNormArithmetic) from its definition: TFLite's
// integer layer norm (PortableApplyLayerNorm) with its operands derived as TFLite's integer LSTM derives them.
// Exact integers throughout (int64 and __int128, every intermediate range stated); the binary32 steps of the
// operands' derivation emulated exactly (reference.h Fl32*). Sources, pinned (docs/patterns.md "LayerNorm"):
//   tensorflow/tensorflow @ fa42ad217cd4a0e3f566ba25b2ebbe28b501c4cb
//       tensorflow/lite/kernels/internal/reference/portable_tensor_utils.cc:303-351  PortableApplyLayerNorm
//   tensorflow/tensorflow @ ed031a6b8cc49c55745a38c8a8d0b9affe935a7b
//       tensorflow/lite/kernels/internal/common.h:152-161  MultiplyByQuantizedMultiplier (int32 x)
//       tensorflow/lite/kernels/internal/common.h  GetInvSqrtQuantizedMultiplierExp (the Newton iteration)
//   tensorflow/tensorflow @ 4a9ce94e5e19861a536507bbe7c9bcedea8a4491
//       tensorflow/lite/kernels/lstm.cc  PopulateQuantizedLstmParams8x8_16: layer_norm_*_scale_a/b =
//       QuantizeMultiplier(coefficient scale), *_variance_guard = max(1, int32(10000 * coefficient scale)).
// Nothing here calls fused/.
#include <cstdint>
#include <span>
#include <vector>

#include "fusediff/model/quant.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

// GetInvSqrtQuantizedMultiplierExp(input, reverse_shift = -1): (multiplier, shift) with
// 1/sqrt(input) ~= multiplier 2^(shift - 31) (shift <= 0: a right shift in MultiplyByQuantizedMultiplier).
// input <= 1 gives (2^31 - 1, 0). input must be >= 0.
QuantizedMultiplier TfliteInvSqrtMultiplier(int32_t input);

// The integer operands of one draw's gamma and beta (model/pattern.h tflite_int16).
struct TfliteLayerNormOperands {
  float gamma_scale = 1;             // s_g = fl32(max |gamma| / 32767), 1 where every gamma is 0
  std::vector<int32_t> weights;      // w_j = round_half_away(gamma_j / s_g), int16
  std::vector<int32_t> bias;         // b_j = round_half_away(beta_j / (s_g 2^-10)), saturated to int32
  QuantizedMultiplier scale;         // QuantizeMultiplier(s_g), double rounding
  int32_t variance_limit = 1;        // max(1, trunc(fl32(10000 s_g))), saturated to int32
};
TfliteLayerNormOperands DeriveTfliteLayerNormOperands(std::span<const float> gamma, std::span<const float> beta);

// One row: v_j = q_j - z_in (int16), the output codes in `out` (a power-of-two scale 2^-k, zero point 0),
// saturated to its type. *saturated (may be null) receives, per element, whether the code was clamped.
std::vector<int32_t> TfliteLayerNormRow(std::span<const int32_t> v, const TfliteLayerNormOperands& ops,
                                        const QuantParams& out, std::vector<bool>* saturated = nullptr);

}  // namespace fusediff::reference
