#include "fusediff/model/suite_options.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace fusediff {

namespace {
QuantParams QuantizeRange(double lo, double hi, const QuantType& type) {
  QuantParams q;
  q.type = type;
  if (type.scalar == ScalarType::int16) {
    // Symmetric, zero point 0 (TFLite's int16 convention, required by lut_interp).
    q.scale = static_cast<float>(std::max(std::abs(lo), std::abs(hi)) / 32768.0);
    q.zero_point = 0;
    return q;
  }
  q.scale = static_cast<float>((hi - lo) / (double(type.qmax()) - type.qmin()));
  const double zp = std::round(type.qmin() - lo / q.scale);
  q.zero_point = static_cast<int32_t>(std::clamp(zp, double(type.qmin()), double(type.qmax())));
  return q;
}

// "TYPE" -> defaults for that type; "TYPE:SCALE:ZP" -> exactly that.
QuantParams ResolveQuant(const std::string& text, const std::string& field, const QuantParams& for_default_type,
                         bool is_output, ActivationKind kind) {
  QuantParams parsed = parse_quant_params(text, field, for_default_type);
  if (text.find(':') == std::string::npos) {
    return is_output ? DefaultOutput(kind, parsed.type) : DefaultIntermediate(kind, parsed.type);
  }
  return parsed;
}

}  // namespace

QuantParams DefaultIntermediate(ActivationKind kind, const QuantType& type) {
  const ActivationDomain d = default_domain(kind);
  return QuantizeRange(d.input_lo, d.input_hi, type);
}

QuantParams DefaultOutput(ActivationKind kind, const QuantType& type) {
  const ActivationDomain d = default_domain(kind);
  return QuantizeRange(d.output_lo, d.output_hi, type);
}

QuantParams Int8Range(double lo, double hi) { return QuantizeRange(lo, hi, QuantType{ScalarType::int8, false}); }

Convention SuiteConvention(const SuiteOptions& options, ActivationKind kind, const QuantType& intermediate_type,
                           const ToolchainDefaults& defaults) {
  Convention c;
  c.activation = make_activation(kind);
  if (options.alpha && takes_alpha(kind)) c.activation.alpha = *options.alpha;
  c.requant = options.requant.value_or(defaults.requant);
  c.intermediate.q = options.intermediate
                         ? ResolveQuant(*options.intermediate, "--intermediate", QuantParams{}, false, kind)
                         : DefaultIntermediate(kind, intermediate_type);
  c.intermediate.rounding = options.intermediate_rounding.value_or(
      fixed_rounding(c.requant).value_or(defaults.intermediate_rounding));
  // 8-bit intermediates write non-negative activations to uint8 (as deployed graphs do), the rest to int8.
  QuantType output_type = intermediate_type.bits() == 16 ? QuantType{ScalarType::int16, false}
                                                         : QuantType{ScalarType::int8, false};
  if (intermediate_type.bits() == 8 && default_domain(kind).output_lo >= 0) {
    output_type = QuantType{ScalarType::uint8, false};
  }
  c.output.q = options.output ? ResolveQuant(*options.output, "--output", QuantParams{}, true, kind)
                              : DefaultOutput(kind, output_type);
  c.output.rounding = options.output_rounding.value_or(defaults.output_rounding);
  c.output.zero_point_order = options.zero_point_order.value_or(defaults.zero_point_order);
  validate(c);
  return c;
}

}  // namespace fusediff
