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
//   (iy, ix) = (conv.source_row(oy, ky), conv.source_column(ox, kx)): for conv2d
//   iy = oy * stride_h - pad_top + ky * dilation_h; transposed, gathered per output element from its definition,
//   the input row iy that feeds oy through tap ky, iy = (oy + pad_top - ky * dilation_h) / stride_h when exact.
// A tap outside the input is padding: its real value is 0 (code zx), so it contributes exactly 0 and is skipped;
// so is a transposed tap that no input row feeds.
//
// Overflow: |acc| <= |bias[k]| + max|x - zx| * sum|w[k, ., ., .]| = conv.accumulator_bound(k), which validate()
// keeps <= 2^31 - 1 (each (x, w) pair appears at most once per output, transposed too); every partial sum is bounded
// by the same quantity, so int64 (and even int32) is exact. The int64 type also keeps the loop exact for any case
// whose bound is below 2^63 (|x - zx| <= 255, |w| <= 127, at most 2^16 * 2^10 * 2^10 terms: < 2^63 always).
int64_t accumulate(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox, int32_t k) {
  const int64_t zx = conv.input_quant().zero_point;
  int64_t acc = conv.bias()[static_cast<size_t>(k)];
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    const int32_t iy = conv.source_row(oy, ky);
    if (iy < 0) continue;  // padding row, or none
    // NHWC input and OHWI weights: (x, 0) of a row and (kx, 0) of a kernel row are C apart.
    const int32_t* row = &input[conv.input_index(n, iy, 0, 0)];
    const int8_t* taps = &conv.weights()[conv.weight_index(k, ky, 0, 0)];
    const int32_t channels = conv.input_channels();
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      const int32_t ix = conv.source_column(ox, kx);
      if (ix < 0) continue;  // padding column, or none
      acc += channel_sum(row + int64_t{ix} * channels, taps + int64_t{kx} * channels, channels, zx);
    }
  }
  return acc;
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
        for (int32_t k = 0; k < conv.output_channels(); ++k) out[first + k] = accumulate(conv, input, n, oy, ox, k);
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
  return accumulate(conv, input, n, oy, ox, k);
}

}  // namespace fusediff::reference
