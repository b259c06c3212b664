#include "fusediff/generators/rc_generators.h"

#include <algorithm>
#include <cmath>

namespace fusediff {
void showValue(const ConvCase& c, std::ostream& os) {
  os << to_string(c.op()) << " N" << c.batch() << " H" << c.input_height() << " W" << c.input_width() << " C"
     << c.input_channels() << " -> K" << c.output_channels() << " kernel " << c.kernel_height() << "x" << c.kernel_width()
     << " stride " << c.stride_height() << "x" << c.stride_width() << " dilation " << c.dilation_height() << "x"
     << c.dilation_width() << " pad " << c.padding_top() << "," << c.padding_left() << "," << c.padding_bottom() << ","
     << c.padding_right() << " output_padding " << c.output_padding_height() << "x" << c.output_padding_width()
     << " input " << format_quant_params(c.input_quant()) << " bias[0] " << (c.bias().empty() ? 0 : c.bias()[0]);
}
}  // namespace fusediff

namespace fusediff::generators {

void showValue(const ConvSample& s, std::ostream& os) {
  fusediff::showValue(s.conv, os);
  os << " (" << s.input.size() << " input codes)";
}

rc::Gen<ConvCase> genConvShape() {
  return rc::gen::exec([] {
    ConvCase c;
    const bool transposed = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    const int kh = *rc::gen::inRange(1, 6), kw = *rc::gen::inRange(1, 6);
    const int sh = *rc::gen::inRange(1, 3), sw = *rc::gen::inRange(1, 3);
    const int dh = *rc::gen::inRange(1, 3), dw = *rc::gen::inRange(1, 3);
    c.op(transposed ? ConvOp::conv_transpose2d : ConvOp::conv2d)
        .batch(*rc::gen::inRange(1, 3))
        .input_channels(*rc::gen::inRange(1, 17))
        .output_channels(*rc::gen::inRange(1, 17))
        .kernel_size(kh, kw)
        .stride(sh, sw)
        .dilation(dh, dw);
    const int ext_h = dh * (kh - 1) + 1, ext_w = dw * (kw - 1) + 1;
    if (transposed) {
      c.input_size(*rc::gen::inRange(1, 9), *rc::gen::inRange(1, 9))
          .padding(*rc::gen::inRange(0, ext_h / 2 + 1), *rc::gen::inRange(0, ext_w / 2 + 1),
                   *rc::gen::inRange(0, ext_h / 2 + 1), *rc::gen::inRange(0, ext_w / 2 + 1))
          .output_padding(*rc::gen::inRange(0, std::max(sh, dh)), *rc::gen::inRange(0, std::max(sw, dw)));
    } else {
      const int pt = *rc::gen::inRange(0, kh), pb = *rc::gen::inRange(0, kh);
      const int pl = *rc::gen::inRange(0, kw), pr = *rc::gen::inRange(0, kw);
      c.padding(pt, pl, pb, pr)
          .input_size(*rc::gen::inRange(std::max(1, ext_h - pt - pb), 17),
                      *rc::gen::inRange(std::max(1, ext_w - pl - pr), 17));
    }
    return c;
  });
}

rc::Gen<ConvSample> genConvSample() {
  // The tensors depend on the shape: gen::mapcat.
  return rc::gen::mapcat(genConvShape(), [](ConvCase shape) {
    return rc::gen::exec([shape]() {
      ConvCase conv = shape;
      QuantParams input;
      input.type = QuantType{*rc::gen::element(ScalarType::int8, ScalarType::uint8), false};
      input.zero_point = *rc::gen::oneOf(rc::gen::just(input.type.qmin()), rc::gen::just(input.type.qmax()),
                                         rc::gen::inRange(input.type.qmin(), input.type.qmax() + 1));
      input.scale = std::ldexp(1.0f + *rc::gen::inRange(0, 1 << 20) / float(1 << 20), *rc::gen::inRange(-10, 0));
      conv.input_quant(input);
      std::vector<int8_t> weights;
      for (size_t i = 0; i < conv.weight_elements(); ++i) weights.push_back(static_cast<int8_t>(*rc::gen::inRange(-127, 128)));
      conv.weights(weights);
      std::vector<float> scales;
      std::vector<int32_t> bias;
      for (int k = 0; k < conv.output_channels(); ++k) {
        scales.push_back(std::ldexp(1.0f + *rc::gen::inRange(0, 1 << 20) / float(1 << 20), *rc::gen::inRange(-14, -2)));
        bias.push_back(*rc::gen::inRange(-(1 << 20), 1 << 20));
      }
      conv.weight_scales(scales).bias(bias);
      std::vector<int32_t> codes;
      for (size_t i = 0; i < conv.input_elements(); ++i) codes.push_back(*rc::gen::inRange(input.type.qmin(), input.type.qmax() + 1));
      return ConvSample{conv, codes};
    });
  });
}

rc::Gen<Convention> genConvention() {
  return rc::gen::exec([] {
    Convention c;
    c.activation = make_activation(*rc::gen::elementOf(std::vector<ActivationKind>(std::begin(kAllActivations),
                                                                                   std::end(kAllActivations))));
    c.requant = *rc::gen::element(RequantVariant::exact, RequantVariant::double_rounding, RequantVariant::single_rounding,
                                  RequantVariant::f32_half_even);
    c.intermediate.rounding = fixed_rounding(c.requant).value_or(
        *rc::gen::element(RoundingMode::half_away_from_zero, RoundingMode::half_to_even, RoundingMode::half_up));
    for (QuantParams* q : {&c.intermediate.q, &c.output.q}) {
      q->type = QuantType{*rc::gen::element(ScalarType::int8, ScalarType::uint8, ScalarType::int16), false};
      if (q->type.scalar == ScalarType::int8) q->type.narrow = *rc::gen::arbitrary<bool>();
      q->zero_point = *rc::gen::inRange(q->type.qmin(), q->type.qmax() + 1);
      q->scale = static_cast<float>(std::exp(*rc::gen::inRange(-1200, 0) / 100.0));  // log-uniform in [6e-6, 1]
    }
    c.output.rounding = *rc::gen::element(RoundingMode::half_away_from_zero, RoundingMode::half_to_even, RoundingMode::half_up);
    c.output.zero_point_order = *rc::gen::element(ZeroPointOrder::after_rounding, ZeroPointOrder::before_rounding);
    return c;
  });
}

}  // namespace fusediff::generators
