#pragma once
// A quantized Conv2D case, described builder-style (XNNPACK operator-tester style):
//   ConvCase().batch(1).input_size(14, 13).input_channels(3).output_channels(8).kernel_size(3, 3).stride(2)
// Layouts: input NHWC, weights OHWI ([k][ky][kx][c]), output NHWK. group = 1.
// Quantization: input int8/uint8 (sx, zx); weights int8 symmetric per output channel (sw[k]); bias int32 with
// scale sx*sw[k]. Padded input positions hold the real value 0 (code zx), so they add nothing.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fusediff/model/quant.h"

namespace fusediff {

// conv2d:           out[n, oy, ox, k] = bias[k] + sum (x[n, oy*s - pt + ky*d, ox*s - pl + kx*d, c] - zx) * w[k, ky, kx, c]
// conv_transpose2d: out[n, oy, ox, k] = bias[k] + sum over iy*s - pt + ky*d == oy, ix*s - pl + kx*d == ox of
//                   (x[n, iy, ix, c] - zx) * w[k, ky, kx, c]   (PyTorch ConvTranspose2d, group 1, weights OHWI)
//                   output extent (in - 1)*s - pad_begin - pad_end + d*(kernel - 1) + output_padding + 1.
enum class ConvOp { conv2d, conv_transpose2d };

// The int8 weight codes a case may use: symmetric [-127, 127] (TFLite's int8 weights, the default) or the full
// s8 range [-128, 127] (what oneDNN's int8 convolution takes).
enum class WeightRange { symmetric, full };

// How the int32 accumulator is computed. `exact` is the definition above. The others are a library's documented
// integer arithmetic (oneDNN 2.6's int8 kernels without VNNI; docs/onednn.md, "Without VNNI: documented
// behaviour"), each exact integer arithmetic on the draw, for a ledger entry's model (model/known_defects.h):
//   halved_weights:        acc = bias + 2 * sum (x - zx) * rne(w / 2), rne to nearest with ties to even: the
//                          weights halved by the reorder (scale_adjust 0.5), the result scaled back by 2.
//   int16_pairs_per_tap:   the exact acc plus, for every tap and channel pair (2j, 2j+1) of it, sat16(p) - p with
//                          p = u[2j] * w[2j] + u[2j+1] * w[2j+1], sat16 saturation to [-32768, 32767] and u the
//                          input code as the u8 the kernel multiplies (x, or x + 128 for an int8 input): what
//                          vpmaddubsw's saturating int16 pair sums lose. An odd channel count leaves the last
//                          channel alone (its partner weight is 0 in the blocked layout).
//   int16_pairs_flattened: the same over pairs (2j, 2j+1) of the channels of all taps flattened in (ky, kx, c)
//                          order (a gemm's K): a pair may span two taps. A tap outside the input holds u = 0, so a
//                          pair with one never saturates (|u * w| <= 255 * 128 < 2^15).
//   int16_pairs_shifted_weights: as int16_pairs_per_tap with the roles swapped: p = (w[2j] + 128) * s[2j] +
//                          (w[2j+1] + 128) * s[2j+1], the weights shifted to u8 and s the input code as s8 (x - 128
//                          for a uint8 input): a gemm computed as a matrix-vector product with the weights as its
//                          vector (oneDNN's s8 inner product with one output channel).
enum class Accumulation { exact, halved_weights, int16_pairs_per_tap, int16_pairs_flattened, int16_pairs_shifted_weights };
std::string_view to_string(Accumulation a);
std::string_view to_string(ConvOp op);
ConvOp parse_conv_op(std::string_view text, std::string_view field);

class ConvCase {
 public:
  ConvCase& op(ConvOp o) { op_ = o; return *this; }
  // Extra rows/columns at the end of a transposed convolution's output (each < its stride or dilation).
  ConvCase& output_padding(int32_t h, int32_t w) { output_padding_height_ = h; output_padding_width_ = w; return *this; }
  ConvCase& batch(int32_t n) { batch_ = n; return *this; }
  ConvCase& input_size(int32_t height, int32_t width) { input_height_ = height; input_width_ = width; return *this; }
  ConvCase& input_channels(int32_t c) { input_channels_ = c; return *this; }
  ConvCase& output_channels(int32_t k) { output_channels_ = k; return *this; }
  ConvCase& kernel_size(int32_t kh, int32_t kw) { kernel_height_ = kh; kernel_width_ = kw; return *this; }
  ConvCase& stride(int32_t s) { return stride(s, s); }
  ConvCase& stride(int32_t sh, int32_t sw) { stride_height_ = sh; stride_width_ = sw; return *this; }
  ConvCase& padding(int32_t p) { return padding(p, p, p, p); }
  ConvCase& padding(int32_t top, int32_t left, int32_t bottom, int32_t right) {
    padding_top_ = top; padding_left_ = left; padding_bottom_ = bottom; padding_right_ = right; return *this;
  }
  ConvCase& dilation(int32_t d) { return dilation(d, d); }
  ConvCase& dilation(int32_t dh, int32_t dw) { dilation_height_ = dh; dilation_width_ = dw; return *this; }
  ConvCase& input_quant(const QuantParams& q) { input_quant_ = q; return *this; }
  // sw[k], one per output channel.
  ConvCase& weight_scales(std::vector<float> scales) { weight_scales_ = std::move(scales); return *this; }
  // OHWI int8 codes, output_channels * kernel_height * kernel_width * input_channels values.
  ConvCase& weights(std::vector<int8_t> w) { weights_ = std::move(w); return *this; }
  ConvCase& bias(std::vector<int32_t> b) { bias_ = std::move(b); return *this; }
  ConvCase& weight_range(WeightRange r) { weight_range_ = r; return *this; }
  ConvCase& accumulation(Accumulation a) { accumulation_ = a; return *this; }
  // The input column each (output column ox, kernel column kx) reads, at [ox * kernel_width + kx], as a library's
  // kernel schedules it (a ledger entry's model): -1 for none; a column >= input_width reads past the row, the next
  // pixels in memory (NHWC: the next row's first pixels, then the next image's, then what lies past the input, which
  // the input vector must then hold). Empty: the definition (source_column). Transposed convolutions only.
  ConvCase& column_reads(std::vector<int32_t> reads) { column_reads_ = std::move(reads); return *this; }

  ConvOp op() const { return op_; }
  int32_t output_padding_height() const { return output_padding_height_; }
  int32_t output_padding_width() const { return output_padding_width_; }
  int32_t batch() const { return batch_; }
  int32_t input_height() const { return input_height_; }
  int32_t input_width() const { return input_width_; }
  int32_t input_channels() const { return input_channels_; }
  int32_t output_channels() const { return output_channels_; }
  int32_t kernel_height() const { return kernel_height_; }
  int32_t kernel_width() const { return kernel_width_; }
  int32_t stride_height() const { return stride_height_; }
  int32_t stride_width() const { return stride_width_; }
  int32_t padding_top() const { return padding_top_; }
  int32_t padding_left() const { return padding_left_; }
  int32_t padding_bottom() const { return padding_bottom_; }
  int32_t padding_right() const { return padding_right_; }
  int32_t dilation_height() const { return dilation_height_; }
  int32_t dilation_width() const { return dilation_width_; }
  const QuantParams& input_quant() const { return input_quant_; }
  const std::vector<float>& weight_scales() const { return weight_scales_; }
  const std::vector<int8_t>& weights() const { return weights_; }
  const std::vector<int32_t>& bias() const { return bias_; }
  WeightRange weight_range() const { return weight_range_; }
  Accumulation accumulation() const { return accumulation_; }
  const std::vector<int32_t>& column_reads() const { return column_reads_; }

  // Derived sizes.
  int32_t output_height() const;
  int32_t output_width() const;
  size_t input_elements() const;   // N*H*W*C
  size_t weight_elements() const;  // K*KH*KW*C
  size_t output_elements() const;  // N*OH*OW*K

  // The input row (column) that tap ky (kx) reads for output row oy (column ox), by the op's definition, or -1 where
  // the tap reads padding or, transposed, no input row lands on that output row:
  //   conv2d:            iy = oy * stride_h - pad_top + ky * dilation_h
  //   conv_transpose2d:  input row iy feeds oy = iy * stride_h - pad_top + ky * dilation_h, so
  //                      iy = (oy + pad_top - ky * dilation_h) / stride_h when that division is exact.
  // Inline: the exact reference's accumulator loops call them for every tap.
  int32_t source_row(int32_t oy, int32_t ky) const {
    return source_index(oy, ky, stride_height_, padding_top_, dilation_height_, input_height_);
  }
  int32_t source_column(int32_t ox, int32_t kx) const {
    if (!column_reads_.empty()) return column_reads_[static_cast<size_t>(ox) * kernel_width_ + kx];
    return source_index(ox, kx, stride_width_, padding_left_, dilation_width_, input_width_);
  }

  size_t input_index(int32_t n, int32_t y, int32_t x, int32_t c) const;
  size_t weight_index(int32_t k, int32_t ky, int32_t kx, int32_t c) const;
  size_t output_index(int32_t n, int32_t oy, int32_t ox, int32_t k) const;

  struct OutputCoord { int32_t n, oy, ox, k; };
  OutputCoord output_coord(size_t output_index) const;

  // Largest |acc| any input can produce for output channel k:
  //   |bias[k]| + max|x - zx| * sum |w[k, ., ., .]|.
  int64_t accumulator_bound(int32_t k) const;

  // Throws InputError if any size is out of range, vectors have the wrong length, the input type is not
  // 8-bit, a scale is bad, weights use -128 (symmetric int8 is [-127, 127]) or an int32 accumulator could
  // overflow.
  void validate() const;

 private:
  ConvOp op_ = ConvOp::conv2d;
  int32_t output_padding_height_ = 0, output_padding_width_ = 0;
  int32_t batch_ = 1;
  int32_t input_height_ = 1, input_width_ = 1, input_channels_ = 1, output_channels_ = 1;
  int32_t kernel_height_ = 1, kernel_width_ = 1;
  int32_t stride_height_ = 1, stride_width_ = 1;
  int32_t padding_top_ = 0, padding_left_ = 0, padding_bottom_ = 0, padding_right_ = 0;
  int32_t dilation_height_ = 1, dilation_width_ = 1;

  int32_t source_index(int32_t o, int32_t t, int32_t stride, int32_t pad, int32_t dilation, int32_t size) const {
    int64_t i;
    if (op_ == ConvOp::conv_transpose2d) {
      const int64_t shifted = int64_t{o} + pad - int64_t{t} * dilation;
      if (shifted < 0 || shifted % stride != 0) return -1;
      i = shifted / stride;
    } else {
      i = int64_t{o} * stride - pad + int64_t{t} * dilation;
    }
    return i < 0 || i >= size ? -1 : static_cast<int32_t>(i);
  }
  QuantParams input_quant_{QuantType{ScalarType::int8, false}, 1.0f, 0};
  std::vector<float> weight_scales_;
  std::vector<int8_t> weights_;
  std::vector<int32_t> bias_;
  WeightRange weight_range_ = WeightRange::symmetric;
  Accumulation accumulation_ = Accumulation::exact;
  std::vector<int32_t> column_reads_;
};

// One line: "conv2d N1 H7 W5 C3 -> K4, kernel 3x2, stride 1x2, dilation 1x1, pad t0 l1 b1 r0" (+ output padding).
std::string describe(const ConvCase& conv);

}  // namespace fusediff
