#include "fusediff/model/conv_case.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
// Output extent of one spatial dimension: floor((in + pads - dilation*(kernel-1) - 1) / stride) + 1.
int32_t OutputExtent(int32_t in, int32_t pad_begin, int32_t pad_end, int32_t kernel, int32_t stride, int32_t dilation) {
  const int64_t effective_kernel = int64_t{dilation} * (kernel - 1) + 1;
  const int64_t padded = int64_t{in} + pad_begin + pad_end;
  if (stride <= 0 || padded < effective_kernel) return 0;
  return static_cast<int32_t>((padded - effective_kernel) / stride + 1);
}

// Transposed: (in - 1) * stride - pads + dilation * (kernel - 1) + output_padding + 1.
int32_t TransposedExtent(int32_t in, int32_t pad_begin, int32_t pad_end, int32_t kernel, int32_t stride,
                         int32_t dilation, int32_t output_padding) {
  const int64_t extent =
      (int64_t{in} - 1) * stride - pad_begin - pad_end + int64_t{dilation} * (kernel - 1) + output_padding + 1;
  return extent < 0 ? 0 : static_cast<int32_t>(std::min<int64_t>(extent, 1 << 30));
}

void RequireRange(int64_t value, int64_t lo, int64_t hi, const char* field) {
  if (value < lo || value > hi) {
    throw InputError(std::string("conv.") + field + ": " + std::to_string(value) + " is outside [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
}
}  // namespace

namespace {
constexpr detail::Names<Accumulation, 5> kAccumulations{
    {{"exact", Accumulation::exact},
     {"halved_weights", Accumulation::halved_weights},
     {"int16_pairs_per_tap", Accumulation::int16_pairs_per_tap},
     {"int16_pairs_flattened", Accumulation::int16_pairs_flattened},
     {"int16_pairs_shifted_weights", Accumulation::int16_pairs_shifted_weights}}};
constexpr detail::Names<ConvOp, 2> kConvOps{
    {{"conv2d", ConvOp::conv2d}, {"conv_transpose2d", ConvOp::conv_transpose2d}}};
}  // namespace

std::string_view to_string(Accumulation a) { return detail::NameOf(a, kAccumulations); }

std::string_view to_string(ConvOp op) { return detail::NameOf(op, kConvOps); }

ConvOp parse_conv_op(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "op", kConvOps);
}

int32_t ConvCase::output_height() const {
  if (op_ == ConvOp::conv_transpose2d) {
    return TransposedExtent(input_height_, padding_top_, padding_bottom_, kernel_height_, stride_height_,
                            dilation_height_, output_padding_height_);
  }
  return OutputExtent(input_height_, padding_top_, padding_bottom_, kernel_height_, stride_height_, dilation_height_);
}
int32_t ConvCase::output_width() const {
  if (op_ == ConvOp::conv_transpose2d) {
    return TransposedExtent(input_width_, padding_left_, padding_right_, kernel_width_, stride_width_, dilation_width_,
                            output_padding_width_);
  }
  return OutputExtent(input_width_, padding_left_, padding_right_, kernel_width_, stride_width_, dilation_width_);
}
size_t ConvCase::input_elements() const { return size_t(batch_) * input_height_ * input_width_ * input_channels_; }
size_t ConvCase::weight_elements() const {
  return size_t(output_channels_) * kernel_height_ * kernel_width_ * input_channels_;
}
size_t ConvCase::output_elements() const {
  return size_t(batch_) * output_height() * output_width() * output_channels_;
}
size_t ConvCase::input_index(int32_t n, int32_t y, int32_t x, int32_t c) const {
  return ((size_t(n) * input_height_ + y) * input_width_ + x) * input_channels_ + c;
}
size_t ConvCase::weight_index(int32_t k, int32_t ky, int32_t kx, int32_t c) const {
  return ((size_t(k) * kernel_height_ + ky) * kernel_width_ + kx) * input_channels_ + c;
}
size_t ConvCase::output_index(int32_t n, int32_t oy, int32_t ox, int32_t k) const {
  return ((size_t(n) * output_height() + oy) * output_width() + ox) * output_channels_ + k;
}
ConvCase::OutputCoord ConvCase::output_coord(size_t index) const {
  OutputCoord c{};
  c.k = static_cast<int32_t>(index % output_channels_);
  index /= output_channels_;
  c.ox = static_cast<int32_t>(index % output_width());
  index /= output_width();
  c.oy = static_cast<int32_t>(index % output_height());
  c.n = static_cast<int32_t>(index / output_height());
  return c;
}

int64_t ConvCase::accumulator_bound(int32_t k) const {
  const int64_t zx = input_quant_.zero_point;
  const int64_t max_centered_input =
      std::max(int64_t{input_quant_.type.qmax()} - zx, zx - int64_t{input_quant_.type.qmin()});
  int64_t weight_abs_sum = 0;
  for (int32_t ky = 0; ky < kernel_height_; ++ky)
    for (int32_t kx = 0; kx < kernel_width_; ++kx)
      for (int32_t c = 0; c < input_channels_; ++c)
        weight_abs_sum += std::abs(int64_t{weights_[weight_index(k, ky, kx, c)]});
  return std::abs(int64_t{bias_[k]}) + max_centered_input * weight_abs_sum;
}

void ConvCase::validate() const {
  RequireRange(batch_, 1, 1 << 16, "batch");
  RequireRange(input_height_, 1, 1 << 16, "input_height");
  RequireRange(input_width_, 1, 1 << 16, "input_width");
  RequireRange(input_channels_, 1, 1 << 16, "input_channels");
  RequireRange(output_channels_, 1, 1 << 16, "output_channels");
  RequireRange(kernel_height_, 1, 1 << 10, "kernel_height");
  RequireRange(kernel_width_, 1, 1 << 10, "kernel_width");
  RequireRange(stride_height_, 1, 1 << 10, "stride_height");
  RequireRange(stride_width_, 1, 1 << 10, "stride_width");
  RequireRange(dilation_height_, 1, 1 << 10, "dilation_height");
  RequireRange(dilation_width_, 1, 1 << 10, "dilation_width");
  RequireRange(padding_top_, 0, 1 << 10, "padding_top");
  RequireRange(padding_left_, 0, 1 << 10, "padding_left");
  RequireRange(padding_bottom_, 0, 1 << 10, "padding_bottom");
  RequireRange(padding_right_, 0, 1 << 10, "padding_right");
  if (op_ == ConvOp::conv2d && (output_padding_height_ != 0 || output_padding_width_ != 0)) {
    throw InputError("conv.output_padding: only a transposed convolution has output padding");
  }
  RequireRange(output_padding_height_, 0, std::max(stride_height_, dilation_height_) - 1, "output_padding_height");
  RequireRange(output_padding_width_, 0, std::max(stride_width_, dilation_width_) - 1, "output_padding_width");
  if (output_height() < 1 || output_width() < 1) {
    throw InputError("conv: the dilated kernel (" + std::to_string(kernel_height_) + "x" +
                     std::to_string(kernel_width_) + ") does not fit the padded input; output would be empty");
  }
  if (input_quant_.type.scalar == ScalarType::int16) {
    throw InputError("conv.input.type: int16 input is not supported (expected int8 or uint8)");
  }
  fusediff::validate(input_quant_, "conv.input");
  if (weight_scales_.size() != size_t(output_channels_)) {
    throw InputError("conv.weight_scales: " + std::to_string(weight_scales_.size()) +
                     " values, expected one per output channel (" + std::to_string(output_channels_) + ")");
  }
  for (size_t k = 0; k < weight_scales_.size(); ++k) {
    fusediff::validate(QuantParams{QuantType{ScalarType::int8, true}, weight_scales_[k], 0},
                       "conv.weight_scales[" + std::to_string(k) + "]");
  }
  if (weights_.size() != weight_elements()) {
    throw InputError("conv.weights: " + std::to_string(weights_.size()) +
                     " values, expected K*KH*KW*C = " + std::to_string(weight_elements()));
  }
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i] == -128 && weight_range_ == WeightRange::symmetric) {
      throw InputError("conv.weights[" + std::to_string(i) + "]: -128 is outside symmetric int8 [-127, 127]");
    }
  }
  if (!column_reads_.empty() &&
      (op_ != ConvOp::conv_transpose2d || column_reads_.size() != size_t(output_width()) * kernel_width_)) {
    throw InputError("conv.column_reads: " + std::to_string(column_reads_.size()) +
                     " values, expected one per output column and kernel column of a transposed convolution");
  }
  if (bias_.size() != size_t(output_channels_)) {
    throw InputError("conv.bias: " + std::to_string(bias_.size()) + " values, expected one per output channel (" +
                     std::to_string(output_channels_) + ")");
  }
  for (int32_t k = 0; k < output_channels_; ++k) {
    const int64_t bound = accumulator_bound(k);
    if (bound > std::numeric_limits<int32_t>::max()) {
      throw InputError("conv: output channel " + std::to_string(k) + " accumulator can reach " + std::to_string(bound) +
                       ", which overflows int32");
    }
  }
}

std::string describe(const ConvCase& conv) {
  char buffer[320];
  std::snprintf(buffer, sizeof buffer,
                "%s N%d H%d W%d C%d -> K%d, kernel %dx%d, stride %dx%d, dilation %dx%d, pad t%d l%d b%d r%d%s",
                conv.op() == ConvOp::conv2d ? "conv2d" : "conv_transpose2d", conv.batch(), conv.input_height(),
                conv.input_width(), conv.input_channels(), conv.output_channels(), conv.kernel_height(),
                conv.kernel_width(), conv.stride_height(), conv.stride_width(), conv.dilation_height(),
                conv.dilation_width(), conv.padding_top(), conv.padding_left(), conv.padding_bottom(),
                conv.padding_right(),
                conv.op() == ConvOp::conv2d ? ""
                                            : (", output padding " + std::to_string(conv.output_padding_height()) +
                                               "x" + std::to_string(conv.output_padding_width()))
                                                  .c_str());
  return buffer;
}

}  // namespace fusediff
