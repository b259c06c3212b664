#include "fusediff/model/convention.h"

#include <cmath>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"

namespace fusediff {

std::string_view to_string(RequantVariant v) {
  switch (v) {
    case RequantVariant::exact: return "exact";
    case RequantVariant::double_rounding: return "double_rounding";
    case RequantVariant::single_rounding: return "single_rounding";
    case RequantVariant::f32_half_even: return "f32_half_even";
    case RequantVariant::f32_zero_point_first: return "f32_zero_point_first";
  }
  return "?";
}

std::string_view to_string(IntermediateKind k) { return k == IntermediateKind::f32 ? "f32" : "quantized"; }

std::string_view to_string(PostOpArithmetic a) { return a == PostOpArithmetic::binary32 ? "binary32" : "exact"; }

std::string_view to_string(ZeroPointOrder o) {
  return o == ZeroPointOrder::after_rounding ? "after_rounding" : "before_rounding";
}

RequantVariant parse_requant_variant(std::string_view text, std::string_view field) {
  if (text == "exact") return RequantVariant::exact;
  if (text == "double_rounding") return RequantVariant::double_rounding;
  if (text == "single_rounding") return RequantVariant::single_rounding;
  if (text == "f32_half_even") return RequantVariant::f32_half_even;
  if (text == "f32_zero_point_first") return RequantVariant::f32_zero_point_first;
  throw InputError(std::string(field) + ": unknown requant variant '" + std::string(text) +
                   "' (expected exact, double_rounding, single_rounding, f32_half_even or f32_zero_point_first)");
}

ZeroPointOrder parse_zero_point_order(std::string_view text, std::string_view field) {
  if (text == "after_rounding" || text == "after") return ZeroPointOrder::after_rounding;
  if (text == "before_rounding" || text == "before") return ZeroPointOrder::before_rounding;
  throw InputError(std::string(field) + ": unknown zero-point order '" + std::string(text) +
                   "' (expected after_rounding or before_rounding)");
}

std::optional<RoundingMode> fixed_rounding(RequantVariant v) {
  switch (v) {
    case RequantVariant::exact: return std::nullopt;
    case RequantVariant::double_rounding: return RoundingMode::half_away_from_zero;
    case RequantVariant::single_rounding: return RoundingMode::half_up;
    case RequantVariant::f32_half_even:
    case RequantVariant::f32_zero_point_first: return RoundingMode::half_to_even;
  }
  return std::nullopt;
}

void validate(const Convention& c) {
  if (c.intermediate.kind == IntermediateKind::f32 && c.requant != RequantVariant::f32_half_even) {
    throw InputError("requant: an f32 intermediate is reached by f32_half_even arithmetic only (got " +
                     std::string(to_string(c.requant)) + ")");
  }
  if (c.intermediate.kind == IntermediateKind::quantized) validate(c.intermediate.q, "intermediate");
  if (c.intermediate.kind != IntermediateKind::f32 && !(c.intermediate.stored == FloatBoundary{})) {
    throw InputError("intermediate.stored: a float storage format (" + format_float_boundary(c.intermediate.stored) +
                     ") applies to an f32 intermediate only");
  }
  validate(c.output.q, "output");
  if (auto fixed = fixed_rounding(c.requant); fixed && *fixed != c.intermediate.rounding) {
    throw InputError("intermediate.rounding: " + std::string(to_string(c.intermediate.rounding)) +
                     " contradicts requant " + std::string(to_string(c.requant)) + ", which rounds " +
                     std::string(to_string(*fixed)));
  }
  if (c.post_ops == PostOpArithmetic::binary32 &&
      (c.output.rounding != RoundingMode::half_to_even || c.output.zero_point_order != ZeroPointOrder::before_rounding)) {
    throw InputError("post_ops: binary32 post-ops add the zero point in binary32 and round half to even (got " +
                     std::string(to_string(c.output.rounding)) + " with the zero point " +
                     std::string(to_string(c.output.zero_point_order)) + ")");
  }
  if (!takes_alpha(c.activation.kind) && c.activation.alpha != 0.0f) {
    throw InputError("activation.alpha: " + std::string(to_string(c.activation.kind)) + " takes no alpha");
  }
  if (takes_alpha(c.activation.kind) && !std::isfinite(c.activation.alpha)) {
    throw InputError("activation.alpha: must be finite");
  }
}

QuantParams parse_quant_params(std::string_view text, std::string_view field, const QuantParams& defaults) {
  std::vector<std::string_view> parts;
  for (size_t begin = 0;;) {
    size_t colon = text.find(':', begin);
    parts.push_back(text.substr(begin, colon == std::string_view::npos ? std::string_view::npos : colon - begin));
    if (colon == std::string_view::npos) break;
    begin = colon + 1;
  }
  if (parts.size() != 1 && parts.size() != 3) {
    throw InputError(std::string(field) + ": '" + std::string(text) + "' (expected TYPE or TYPE:SCALE:ZERO_POINT)");
  }
  QuantParams q = defaults;
  std::string_view type = parts[0];
  const bool narrow = type.ends_with("_narrow");
  if (narrow) type.remove_suffix(7);
  q.type = QuantType{parse_scalar_type(type, std::string(field) + ".type"), narrow};
  if (narrow && q.type.scalar == ScalarType::uint8) {
    throw InputError(std::string(field) + ".type: narrow range applies to signed types only");
  }
  if (parts.size() == 3) {
    q.scale = parse_float32(parts[1], std::string(field) + ".scale");
    q.zero_point = static_cast<int32_t>(parse_int(parts[2], std::string(field) + ".zero_point"));
  }
  validate(q, field);
  return q;
}

std::string format_quant_params(const QuantParams& q) {
  return to_string(q.type) + ":" + format_float32(q.scale) + ":" + std::to_string(q.zero_point);
}

std::string describe(const Convention& c) {
  const std::string u =
      c.intermediate.kind == IntermediateKind::f32
          ? (c.intermediate.stored == FloatBoundary{} ? std::string("f32")
                                                      : "f32 stored as " + format_float_boundary(c.intermediate.stored))
          : format_quant_params(c.intermediate.q);
  std::string s = std::string(to_string(c.requant)) + " u=" + u + " " +
                  std::string(to_string(c.intermediate.rounding)) + " -> " +
                  std::string(to_string(c.activation.kind));
  if (takes_alpha(c.activation.kind)) s += "(alpha=" + format_float32(c.activation.alpha) + ")";
  s += " -> y=" + format_quant_params(c.output.q) + " " + std::string(to_string(c.output.rounding)) + " zp " +
       std::string(to_string(c.output.zero_point_order));
  if (c.post_ops != PostOpArithmetic::exact) s += " post_ops " + std::string(to_string(c.post_ops));
  return s;
}

}  // namespace fusediff
