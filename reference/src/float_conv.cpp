// FloatConv's convolution (reference/float_conv.h): operands from the codes, the exact sum of products on
// integers at a common exponent, one rounding to binary32, then the bias in binary32.
#include "fusediff/reference/float_conv.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "fl32.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

namespace {

FloatBoundary OperandRules(FloatFormat operands) {
  return operands == FloatFormat::f32 ? FloatBoundary{} : flush_subnormals_float_boundary(operands);
}

// Values m * 2^exponent with signed integer m, at one exponent (the smallest of the non-zero values'): each
// float's significand shifted up, so the products of two sets are exact integers at the sum of the exponents.
struct Scaled {
  std::vector<__int128> m;
  int exponent = 0;
};

Scaled AtCommonExponent(const std::vector<float>& values) {
  Scaled s;
  int e = INT_MAX;
  for (float v : values) {
    const detail::FloatParts p = detail::decompose(v);
    if (p.mantissa != 0) e = std::min(e, p.exponent);
  }
  s.exponent = e == INT_MAX ? 0 : e;
  s.m.reserve(values.size());
  for (float v : values) {
    const detail::FloatParts p = detail::decompose(v);
    if (p.mantissa == 0) {
      s.m.push_back(0);
      continue;
    }
    const int shift = p.exponent - s.exponent;
    // The codes span at most 2^16 in magnitude, so the shifts stay small; beyond 2^62 the sums could overflow.
    if (shift > 38) throw InputError("float conv: operand values span more than 2^38 (a scale far from its codes)");
    const __int128 m = static_cast<__int128>(p.mantissa) << shift;
    s.m.push_back(p.negative ? -m : m);
  }
  return s;
}

}  // namespace

float FloatConvInput(const ConvCase& conv, const FloatConv& f, FloatFormat operands, int32_t code) {
  const float sx = float_conv_scale(f, conv.input_quant().scale);
  return RoundToFormat(Fl32Multiply(sx, Fl32FromInt64(int64_t{code} - conv.input_quant().zero_point)), OperandRules(operands));
}

float FloatConvWeight(const ConvCase& conv, const FloatConv& f, FloatFormat operands, int32_t k, int32_t code) {
  const float sw = float_conv_scale(f, conv.weight_scales()[static_cast<size_t>(k)]);
  return RoundToFormat(Fl32Multiply(sw, Fl32FromInt64(code)), OperandRules(operands));
}

float FloatConvBias(const ConvCase& conv, const FloatConv& f, int32_t k) {
  const float sx = float_conv_scale(f, conv.input_quant().scale);
  const float sw = float_conv_scale(f, conv.weight_scales()[static_cast<size_t>(k)]);
  return F32IntermediateValue(conv.bias()[static_cast<size_t>(k)], sx, sw);
}

std::vector<FloatConvElement> FloatConvValues(const ConvCase& conv, std::span<const int32_t> input,
                                              const FloatConv& f, FloatFormat operands) {
  conv.validate();
  if (input.size() != conv.input_elements()) throw InputError("float conv: the input has the wrong size");
  const QuantType& type = conv.input_quant().type;
  // x per input code, w per weight (each channel at its own exponent), b per channel.
  std::vector<float> x_of_code;
  for (int32_t code = type.qmin(); code <= type.qmax(); ++code) x_of_code.push_back(FloatConvInput(conv, f, operands, code));
  const Scaled x = AtCommonExponent(x_of_code);
  const int32_t channels = conv.output_channels();
  const size_t per_channel = static_cast<size_t>(conv.kernel_height()) * conv.kernel_width() * conv.input_channels();
  std::vector<Scaled> w(static_cast<size_t>(channels));
  std::vector<std::vector<double>> w_abs(static_cast<size_t>(channels));
  std::vector<float> bias(static_cast<size_t>(channels));
  for (int32_t k = 0; k < channels; ++k) {
    std::vector<float> values(per_channel);
    for (size_t i = 0; i < per_channel; ++i) {
      values[i] = FloatConvWeight(conv, f, operands, k, conv.weights()[static_cast<size_t>(k) * per_channel + i]);
      w_abs[static_cast<size_t>(k)].push_back(std::fabs(static_cast<double>(values[i])));
    }
    w[static_cast<size_t>(k)] = AtCommonExponent(values);
    bias[static_cast<size_t>(k)] = FloatConvBias(conv, f, k);
  }
  const int32_t c_in = conv.input_channels();
  std::vector<FloatConvElement> out(conv.output_elements());
  for (int32_t n = 0; n < conv.batch(); ++n)
    for (int32_t oy = 0; oy < conv.output_height(); ++oy)
      for (int32_t ox = 0; ox < conv.output_width(); ++ox)
        for (int32_t k = 0; k < channels; ++k) {
          __int128 sum = 0;
          double abs_sum = 0;
          int32_t terms = 0;
          const Scaled& wk = w[static_cast<size_t>(k)];
          // The taps of conv.cpp's definitions (ConvCase::source_row and source_column).
          for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
            const int32_t iy = conv.source_row(oy, ky);
            if (iy < 0) continue;
            for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
              const int32_t ix = conv.source_column(ox, kx);
              if (ix < 0) continue;
              const size_t in = conv.input_index(n, iy, ix, 0);
              const size_t wi = conv.weight_index(k, ky, kx, 0) - static_cast<size_t>(k) * per_channel;
              for (int32_t c = 0; c < c_in; ++c) {
                const int32_t code = input[in + static_cast<size_t>(c)];
                if (!type.contains(code)) throw InputError("float conv: input code " + std::to_string(code) + " outside its type");
                const size_t xi = static_cast<size_t>(code - type.qmin());
                sum += x.m[xi] * wk.m[wi + static_cast<size_t>(c)];
                abs_sum += std::fabs(static_cast<double>(x_of_code[xi])) * w_abs[static_cast<size_t>(k)][wi + static_cast<size_t>(c)];
                ++terms;
              }
            }
          }
          const bool negative = sum < 0;
          const unsigned __int128 magnitude = static_cast<unsigned __int128>(negative ? -sum : sum);
          if ((magnitude >> 125) != 0) throw InputError("float conv: the exact sum exceeds 2^125 at its exponent");
          const float s = detail::fl32_dyadic(negative, magnitude, x.exponent + wk.exponent);
          FloatConvElement& e = out[conv.output_index(n, oy, ox, k)];
          e.v = Fl32Add(s, bias[static_cast<size_t>(k)]);
          e.abs_sum = abs_sum + std::fabs(static_cast<double>(bias[static_cast<size_t>(k)]));
          e.terms = terms;
        }
  return out;
}

}  // namespace fusediff::reference
