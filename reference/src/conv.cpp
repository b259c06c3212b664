// Conv2D accumulators from the definition: plain loops over named indices, int64 arithmetic.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

namespace {

// The input's codes; a kernel schedule that reads past the input (ConvCase::column_reads) comes with what lies there.
void require_input(const ConvCase& conv, std::span<const int32_t> input) {
  if (input.size() != conv.input_elements() && (conv.column_reads().empty() || input.size() < conv.input_elements())) {
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

// acc = bias[k] + sum over in-bounds taps (ky, kx) and channels c of (x[n, iy, ix, c] - zx) * w'[k, ky, kx, c],
//   (iy, ix) = (conv.source_row(oy, ky), conv.source_column(ox, kx)): for conv2d
//   iy = oy * stride_h - pad_top + ky * dilation_h; transposed, gathered per output element from its definition,
//   the input row iy that feeds oy through tap ky, iy = (oy + pad_top - ky * dilation_h) / stride_h when exact.
// A tap outside the input is padding: its real value is 0 (code zx), so it contributes exactly 0 and is skipped;
// so is a transposed tap that no input row feeds. w' = w (exact), or with halved_weights 2 * rne(w / 2).
//
// Overflow: |acc| <= |bias[k]| + max|x - zx| * sum|w'[k, ., ., .]|; exact: = conv.accumulator_bound(k), which
// validate() keeps <= 2^31 - 1 (each (x, w) pair appears at most once per output, transposed too); halved:
// |w'| <= |w| + 1 adds at most 255 per term. Every partial sum is bounded by the same quantity, and int64 holds any
// (|x - zx| <= 255, |w'| <= 128, at most 2^16 * 2^10 * 2^10 terms: < 2^63 always).
// A column past the row (ConvCase::column_reads) reads the next pixels in memory: they must be in `input`.
void RequireRead(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t iy, int32_t ix) {
  if (conv.input_index(n, iy, ix, 0) + conv.input_channels() > input.size()) {
    throw std::logic_error("conv.column_reads: column " + std::to_string(ix) + " of row " + std::to_string(iy) +
                           " lies past the codes the input holds");
  }
}

template <typename Weight>
int64_t accumulate(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox, int32_t k,
                   Weight weight) {
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
      RequireRead(conv, input, n, iy, ix);
      const int32_t* x = row + int64_t{ix} * channels;
      const int8_t* w = taps + int64_t{kx} * channels;
      for (int32_t c = 0; c < channels; ++c) acc += (int64_t{x[c]} - zx) * weight(w[c]);
    }
  }
  return acc;
}

constexpr auto Itself = [](int8_t w) { return int64_t{w}; };
// 2 * rne(w / 2): an odd w / 2 lies halfway between two integers and goes to the even one (-127 -> -128, 127 -> 128).
int64_t HalvedToEven(int8_t w) {
  const int64_t low = int64_t{w} >> 1;  // floor(w / 2)
  const int64_t half = (w & 1) == 0 || (low & 1) == 0 ? low : low + 1;
  return 2 * half;
}

// sat16(p) - p: what a saturating int16 sum of p loses (vpmaddubsw's pair sums). Exact in int64.
int64_t SaturationLoss(int64_t p) { return std::clamp<int64_t>(p, -32768, 32767) - p; }

// The saturation losses of the channel pairs (2j, 2j+1) of one output's taps, the pairs taken per tap or over the
// taps' channels flattened in (ky, kx, c) order. Each product is what the kernel multiplies: u * w with u the code as
// the u8 it sees, or with shifted weights (w + 128) * s, s the code as s8. A tap outside the input holds u = 0 (it
// never saturates a pair: |u w| <= 255 * 128 < 2^15). Each p is below 2^17 in magnitude.
int64_t PairLosses(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox, int32_t k,
                   Accumulation rule) {
  const bool per_tap = rule != Accumulation::int16_pairs_flattened;
  const bool shifted_weights = rule == Accumulation::int16_pairs_shifted_weights;
  const int32_t to_u8 = conv.input_quant().type.scalar == ScalarType::int8 ? 128 : 0;
  const int32_t channels = conv.input_channels();
  std::vector<int64_t> products;  // in (ky, kx, c) order
  products.reserve(static_cast<size_t>(conv.kernel_height()) * conv.kernel_width() * channels);
  const auto product = [&](int32_t x, int8_t w) {
    return shifted_weights ? int64_t{w + 128} * (x + to_u8 - 128) : int64_t{x + to_u8} * w;
  };
  int64_t loss = 0;
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      const int32_t iy = conv.source_row(oy, ky), ix = conv.source_column(ox, kx);
      const int8_t* w = &conv.weights()[conv.weight_index(k, ky, kx, 0)];
      if (iy >= 0 && ix >= 0) RequireRead(conv, input, n, iy, ix);
      const int32_t* x = iy < 0 || ix < 0 ? nullptr : &input[conv.input_index(n, iy, ix, 0)];
      for (int32_t c = 0; c < channels; ++c) products.push_back(x ? product(x[c], w[c]) : 0);
      if (!per_tap) continue;
      for (size_t c = products.size() - channels; c < products.size(); c += 2) {
        loss += SaturationLoss(products[c] + (c + 1 < products.size() ? products[c + 1] : 0));
      }
    }
  }
  for (size_t i = 0; !per_tap && i < products.size(); i += 2) {
    loss += SaturationLoss(products[i] + (i + 1 < products.size() ? products[i + 1] : 0));
  }
  return loss;
}

int64_t Accumulator(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox, int32_t k) {
  switch (conv.accumulation()) {
    case Accumulation::exact: return accumulate(conv, input, n, oy, ox, k, Itself);
    case Accumulation::halved_weights: return accumulate(conv, input, n, oy, ox, k, HalvedToEven);
    case Accumulation::int16_pairs_per_tap:
    case Accumulation::int16_pairs_flattened:
    case Accumulation::int16_pairs_shifted_weights:
      return accumulate(conv, input, n, oy, ox, k, Itself) + PairLosses(conv, input, n, oy, ox, k, conv.accumulation());
  }
  throw std::logic_error("Conv2DAccumulator: unknown accumulation");
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
        for (int32_t k = 0; k < conv.output_channels(); ++k) out[first + k] = Accumulator(conv, input, n, oy, ox, k);
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
  return Accumulator(conv, input, n, oy, ox, k);
}

}  // namespace fusediff::reference
