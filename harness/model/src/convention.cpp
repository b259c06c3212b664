#include "fusediff/model/convention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
constexpr detail::Names<RequantVariant, 5> kRequantVariants{
    {{"exact", RequantVariant::exact},
     {"double_rounding", RequantVariant::double_rounding},
     {"single_rounding", RequantVariant::single_rounding},
     {"f32_half_even", RequantVariant::f32_half_even},
     {"f32_zero_point_first", RequantVariant::f32_zero_point_first}}};
constexpr detail::Names<IntermediateKind, 2> kIntermediateKinds{
    {{"quantized", IntermediateKind::quantized}, {"f32", IntermediateKind::f32}}};
constexpr detail::Names<PostOpArithmetic, 3> kPostOps{{{"exact", PostOpArithmetic::exact},
                                                      {"binary32", PostOpArithmetic::binary32},
                                                      {"binary32_libm", PostOpArithmetic::binary32_libm}}};
// The short forms are accepted too; each value prints as its first, full name.
constexpr detail::Names<ZeroPointOrder, 4> kZeroPointOrders{{{"after_rounding", ZeroPointOrder::after_rounding},
                                                             {"before_rounding", ZeroPointOrder::before_rounding},
                                                             {"after", ZeroPointOrder::after_rounding},
                                                             {"before", ZeroPointOrder::before_rounding}}};
}  // namespace

std::string_view to_string(RequantVariant v) { return detail::NameOf(v, kRequantVariants); }

std::string_view to_string(IntermediateKind k) { return detail::NameOf(k, kIntermediateKinds); }

std::string_view to_string(PostOpArithmetic a) { return detail::NameOf(a, kPostOps); }

std::string_view to_string(ZeroPointOrder o) { return detail::NameOf(o, kZeroPointOrders); }

RequantVariant parse_requant_variant(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "requant variant", kRequantVariants);
}

ZeroPointOrder parse_zero_point_order(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "zero-point order", kZeroPointOrders);
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
  if (c.post_ops == PostOpArithmetic::binary32 && (c.output.rounding != RoundingMode::half_to_even ||
                                                   c.output.zero_point_order != ZeroPointOrder::before_rounding)) {
    throw InputError("post_ops: binary32 post-ops add the zero point in binary32 and round half to even (got " +
                     std::string(to_string(c.output.rounding)) + " with the zero point " +
                     std::string(to_string(c.output.zero_point_order)) + ")");
  }
  if (c.post_ops == PostOpArithmetic::binary32_libm &&
      (c.output.rounding != RoundingMode::half_to_even || c.output.zero_point_order != ZeroPointOrder::after_rounding ||
       c.intermediate.kind != IntermediateKind::quantized)) {
    throw InputError("post_ops: a binary32_libm table reads intermediate codes, rounds half to even and adds the zero "
                     "point after rounding (got " + std::string(to_string(c.output.rounding)) + " with the zero point " +
                     std::string(to_string(c.output.zero_point_order)) + ")");
  }
  if (c.float_conv.enabled) {
    if (c.intermediate.kind != IntermediateKind::f32)
      throw InputError("float_conv: a float convolution has an f32 intermediate");
    if (c.float_conv.operands == FloatFormat::f16) throw InputError("float_conv.operands: f32 or bf16, not f16");
    if (c.float_conv.fpmath_bf16 && c.float_conv.operands != FloatFormat::f32) {
      throw InputError("float_conv: fpmath_bf16 applies to f32 operands");
    }
  } else if (c.float_conv != FloatConv{}) {
    throw InputError("float_conv: operands, pow2 or fpmath set on an integer convolution");
  }
  if (c.output.float_value) {
    if (!c.float_conv.enabled) throw InputError("output.float_value: a float output needs a float convolution");
    if (c.output.float_value->format == FloatFormat::f16) throw InputError("output.float_value: f32 or bf16, not f16");
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

QuantParams parse_full_quant_params(std::string_view text, std::string_view field) {
  const size_t colons = static_cast<size_t>(std::count(text.begin(), text.end(), ':'));
  if (colons != 2) {
    throw InputError(
        std::string(field) + ": '" + std::string(text) + "' " +
        (colons == 0 ? "names the type only: the scale and zero point are missing" : "is not TYPE:SCALE:ZERO_POINT") +
        " (expected TYPE:SCALE:ZERO_POINT, e.g. int16:0.000244140625:0; they are written into the file)");
  }
  return parse_quant_params(text, field, QuantParams{});
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
                  std::string(to_string(c.intermediate.rounding)) + " -> " + std::string(to_string(c.activation.kind));
  if (takes_alpha(c.activation.kind)) s += "(alpha=" + format_float32(c.activation.alpha) + ")";
  s += " -> y=" + format_quant_params(c.output.q) + " " + std::string(to_string(c.output.rounding)) + " zp " +
       std::string(to_string(c.output.zero_point_order));
  if (c.post_ops != PostOpArithmetic::exact) s += " post_ops " + std::string(to_string(c.post_ops));
  if (c.float_conv.enabled) s = "float conv " + format_float_conv(c.float_conv) + ": " + s;
  if (c.output.float_value) s += " stored as " + format_float_boundary(*c.output.float_value) + " (y in its ulps)";
  return s;
}

float float_conv_scale(const FloatConv& f, float s) {
  if (!(s > 0.0f) || !std::isfinite(s)) throw InputError("float_conv: a scale must be finite and > 0");
  if (!f.pow2_scales) return s;
  // 2^round(log2 s): s = m 2^e with m in [0.5, 1) (frexp, exact); log2 s rounds up to e when m >= 2^-1/2.
  int e = 0;
  const double m = std::frexp(static_cast<double>(s), &e);
  return static_cast<float>(std::ldexp(1.0, m * m >= 0.5 ? e : e - 1));
}

int32_t float_order_code(uint32_t bits, FloatFormat format) {
  const uint32_t sign = format == FloatFormat::f32 ? 0x80000000u : 0x8000u;
  const uint32_t magnitude = bits & (sign - 1u);
  return (bits & sign) != 0 ? -static_cast<int32_t>(magnitude) : static_cast<int32_t>(magnitude);
}

float f32_from_order_code(int32_t code, FloatFormat format) {
  const uint32_t magnitude =
      code < 0 ? static_cast<uint32_t>(-static_cast<int64_t>(code)) : static_cast<uint32_t>(code);
  uint32_t bits = format == FloatFormat::f32 ? magnitude : magnitude << 16;
  if (code < 0) bits |= 0x80000000u;
  float out;
  static_assert(sizeof out == sizeof bits);
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

std::string format_float_conv(const FloatConv& f) {
  std::string s(to_string(f.operands));
  if (f.pow2_scales) s += ":pow2";
  if (f.fpmath_bf16) s += ":fpmath_bf16";
  return s;
}

FloatConv parse_float_conv(std::string_view text, std::string_view field) {
  FloatConv f;
  f.enabled = true;
  size_t colon = text.find(':');
  f.operands = parse_float_format(text.substr(0, colon), field);
  while (colon != std::string_view::npos) {
    const size_t begin = colon + 1;
    colon = text.find(':', begin);
    const std::string_view part =
        text.substr(begin, colon == std::string_view::npos ? std::string_view::npos : colon - begin);
    if (part == "pow2")
      f.pow2_scales = true;
    else if (part == "fpmath_bf16")
      f.fpmath_bf16 = true;
    else
      throw InputError(std::string(field) + ": unknown float conv option '" + std::string(part) +
                       "' (expected pow2 or fpmath_bf16)");
  }
  if (f.operands == FloatFormat::f16) throw InputError(std::string(field) + ": operands f32 or bf16, not f16");
  return f;
}

}  // namespace fusediff
