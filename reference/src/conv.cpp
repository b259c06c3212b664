// Conv2D accumulators from the definition: plain loops over named indices, int64 arithmetic.
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

namespace {

void require_input(const ConvCase& conv, std::span<const int32_t> input) {
  if (input.size() != conv.input_elements()) {
    throw InputError("conv.input: " + std::to_string(input.size()) + " codes, expected N*H*W*C = " +
                     std::to_string(conv.input_elements()));
  }
}

// Every input code must lie in the input type; checked once per call, before any accumulation.
void require_codes(const ConvCase& conv, std::span<const int32_t> input) {
  const QuantType& type = conv.input_quant().type;
  for (size_t index = 0; index < input.size(); ++index) {
    const int32_t code = input[index];
    if (!type.contains(code)) {
      throw InputError("conv.input[" + std::to_string(index) + "]: code " + std::to_string(code) + " is outside " +
                       to_string(type) + " [" + std::to_string(type.qmin()) + ", " + std::to_string(type.qmax()) + "]");
    }
  }
}

// sum over c of (x[c] - zx) * w[c]: one tap's channels, contiguous in both NHWC input and OHWI weights.
int64_t channel_sum(const int32_t* x, const int8_t* w, int32_t channels, int64_t zx) {
  int64_t sum = 0;
  for (int32_t c = 0; c < channels; ++c) sum += (int64_t{x[c]} - zx) * int64_t{w[c]};
  return sum;
}

// acc = bias[k] + sum over in-bounds taps (ky, kx) and channels c of (x[n, iy, ix, c] - zx) * w[k, ky, kx, c],
//   iy = oy * stride_h - pad_top + ky * dilation_h,   ix = ox * stride_w - pad_left + kx * dilation_w.
// A tap outside the input is padding: its real value is 0 (code zx), so it contributes exactly 0 and is skipped.
//
// Overflow: |acc| <= |bias[k]| + max|x - zx| * sum|w[k, ., ., .]| = conv.accumulator_bound(k), which validate()
// keeps <= 2^31 - 1; every partial sum is bounded by the same quantity, so int64 (and even int32) is exact.
// The int64 type also keeps the loop exact for any case whose bound is below 2^63 (|x - zx| <= 255,
// |w| <= 127, at most 2^16 * 2^10 * 2^10 terms: < 2^63 always).
int64_t accumulate(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox, int32_t k) {
  const int64_t zx = conv.input_quant().zero_point;
  int64_t acc = conv.bias()[static_cast<size_t>(k)];
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    const int64_t iy = int64_t{oy} * conv.stride_height() - conv.padding_top() + int64_t{ky} * conv.dilation_height();
    if (iy < 0 || iy >= conv.input_height()) continue;  // padding row
    // NHWC input and OHWI weights: (x, 0) of a row and (kx, 0) of a kernel row are C apart.
    const int32_t* row = &input[conv.input_index(n, static_cast<int32_t>(iy), 0, 0)];
    const int8_t* taps = &conv.weights()[conv.weight_index(k, ky, 0, 0)];
    const int32_t channels = conv.input_channels();
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      const int64_t ix = int64_t{ox} * conv.stride_width() - conv.padding_left() + int64_t{kx} * conv.dilation_width();
      if (ix < 0 || ix >= conv.input_width()) continue;  // padding column
      acc += channel_sum(row + ix * channels, taps + int64_t{kx} * channels, channels, zx);
    }
  }
  return acc;
}

// Transposed convolution, gathered per output element from its definition: input row iy feeds output row
// oy = iy * stride_h - pad_top + ky * dilation_h, so for output (oy, ox) and tap (ky, kx) the source is
//   iy = (oy + pad_top - ky * dilation_h) / stride_h   when that division is exact and iy is inside the input
// (likewise ix). Every other (oy, tap) pair has no source and contributes nothing. Same overflow bound as above:
// each (x, w) pair appears at most once per output.
int64_t accumulate_transposed(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox,
                              int32_t k) {
  const int64_t zx = conv.input_quant().zero_point;
  int64_t acc = conv.bias()[static_cast<size_t>(k)];
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    const int64_t ty = int64_t{oy} + conv.padding_top() - int64_t{ky} * conv.dilation_height();
    if (ty < 0 || ty % conv.stride_height() != 0) continue;
    const int64_t iy = ty / conv.stride_height();
    if (iy >= conv.input_height()) continue;
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      const int64_t tx = int64_t{ox} + conv.padding_left() - int64_t{kx} * conv.dilation_width();
      if (tx < 0 || tx % conv.stride_width() != 0) continue;
      const int64_t ix = tx / conv.stride_width();
      if (ix >= conv.input_width()) continue;
      acc += channel_sum(&input[conv.input_index(n, static_cast<int32_t>(iy), static_cast<int32_t>(ix), 0)],
                         &conv.weights()[conv.weight_index(k, ky, kx, 0)], conv.input_channels(), zx);
    }
  }
  return acc;
}

int64_t accumulate_any(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox,
                       int32_t k) {
  return conv.op() == ConvOp::conv_transpose2d ? accumulate_transposed(conv, input, n, oy, ox, k)
                                               : accumulate(conv, input, n, oy, ox, k);
}

}  // namespace

std::vector<int64_t> Conv2DAccumulators(const ConvCase& conv, std::span<const int32_t> input) {
  conv.validate();
  require_input(conv, input);
  require_codes(conv, input);
  std::vector<int64_t> out(conv.output_elements());
  for (int32_t n = 0; n < conv.batch(); ++n)
    for (int32_t oy = 0; oy < conv.output_height(); ++oy)
      for (int32_t ox = 0; ox < conv.output_width(); ++ox) {
        const size_t first = conv.output_index(n, oy, ox, 0);  // NHWK: k is contiguous
        for (int32_t k = 0; k < conv.output_channels(); ++k) out[first + k] = accumulate_any(conv, input, n, oy, ox, k);
      }
  return out;
}

int64_t Conv2DAccumulator(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox,
                          int32_t k) {
  conv.validate();
  require_input(conv, input);
  require_codes(conv, input);
  if (n < 0 || n >= conv.batch() || oy < 0 || oy >= conv.output_height() || ox < 0 || ox >= conv.output_width() ||
      k < 0 || k >= conv.output_channels()) {
    throw InputError("conv: output element (n=" + std::to_string(n) + ", oy=" + std::to_string(oy) +
                     ", ox=" + std::to_string(ox) + ", k=" + std::to_string(k) + ") is outside the output " +
                     std::to_string(conv.batch()) + "x" + std::to_string(conv.output_height()) + "x" +
                     std::to_string(conv.output_width()) + "x" + std::to_string(conv.output_channels()));
  }
  return accumulate_any(conv, input, n, oy, ox, k);
}

}  // namespace fusediff::reference
