#pragma once
// The convention: every decision that fixes a rounding between the int32 accumulator and the output code.
// Reference and fused path are compared only under one and the same Convention.
#include <optional>
#include <string>
#include <string_view>

#include "fusediff/model/activation.h"
#include "fusediff/model/batchnorm.h"
#include "fusediff/model/quant.h"

namespace fusediff {

// How the accumulator acc (scale sx*sw[k]) becomes the intermediate code u (scale su, zero point zu).
// In every variant the result is then offset by zu and saturated to the intermediate type.
//   exact:           u = round_mode(acc * sx*sw[k] / su) with the real values of the float32 scales and the
//                    declared intermediate rounding mode.
//   double_rounding: gemmlowp/TFLite default. M = double(sx)*double(sw[k]) / double(su) in double;
//                    QuantizeMultiplier(M) -> (m Q31, shift); SaturatingRoundingDoublingHighMul(acc << max(shift,0),
//                    m) then RoundingDivideByPOT(., max(-shift,0)). Fixed rounding: half_away_from_zero.
//   single_rounding: TFLite's TFLITE_SINGLE_ROUNDING build: same (m, shift) with shift capped at 30; then
//                    (acc*m + 2^(t-1)) >> t, t = 31 - shift. Fixed rounding: half_up.
//   f32_half_even:   ONNX/ORT style: M32 = float32(float32(sx*sw[k]) / su); u = nearbyint(float32(float32(acc)*M32)),
//                    ties to even. Fixed rounding: half_to_even.
//                    With an f32 intermediate (below) there is no su and no code: the value handed to the activation
//                    is v = float32(float32(acc) * float32(sx*sw[k])), each step rounded to nearest even.
//   f32_zero_point_first: oneDNN 2.x int8 convolution writing an 8-bit tensor: M32 as in f32_half_even, then the zero
//                    point is added in float32 before the one rounding: u = sat(nearbyint(float32(float32(float32(acc)
//                    * M32) + zu))), ties to even. Differs from f32_half_even when zu is odd at an exact tie, and when
//                    the float32 sum loses low bits. Fixed rounding: half_to_even.
enum class RequantVariant { exact, double_rounding, single_rounding, f32_half_even, f32_zero_point_first };

// What the intermediate is between the convolution and the activation.
//   quantized: an integer tensor u with scale su and zero point zu, as in the unfused graph;
//   f32:       a binary32 value never rounded to a code (oneDNN's post-ops): requant must be f32_half_even, the
//              rounding half_to_even, and q is not used.
enum class IntermediateKind { quantized, f32 };

// Whether the output zero point is added after rounding f(v)/sy (TFLite) or before (Vela Sigmoid/Tanh LUTs:
// round(zy + f(v)/sy)). They differ at ties whenever the rounding mode is not translation invariant.
enum class ZeroPointOrder { after_rounding, before_rounding };

// How the activation's output becomes the value t that the output rounding rounds.
//   exact:    t = f(v)/sy (+ zy when the zero point goes before rounding), the real value, rounded once.
//   binary32: oneDNN 2.x's post-op arithmetic, every step one binary32 rounding to nearest even (docs/onednn.md,
//             "Exact binary32 post-ops"; verified bit for bit against oneDNN 2.6.3 on every kernel it dispatched):
//               v  = the activation's binary32 input: the f32 intermediate as it is, or a dequantized code
//                    fl32(su * (u - zu));
//               e  = f in binary32: relu max(v, 0); leaky_relu v > 0 ? v : fl32(alpha * v); relu6 min(max(v, 0), 6);
//                    hard_swish fl32(v * fl32(min(max(fl32(v + 3), 0), 6) / 6)) (the jit eltwise injector's order);
//                    every other kind fl32(f(v)), f exactly rounded once (the library's own approximation of f is
//                    then its only departure from this rule);
//               t  = fl32(fl32(e * fl32(1/sy)) + zy)   (a multiply, then an add: no kernel fuses them);
//               y  = sat(round_half_even(t)).
//             Requires output rounding half_to_even with the zero point before rounding.
enum class PostOpArithmetic { exact, binary32 };

struct IntermediateSpec {
  IntermediateKind kind = IntermediateKind::quantized;
  QuantParams q;
  RoundingMode rounding = RoundingMode::half_away_from_zero;
  // f32 intermediate only: the graph stores v in this format before the activation reads it (binary16 / bfloat16
  // by the boundary's rules, model/batchnorm.h); f32: v as computed. A fused path that keeps binary32 declares f32.
  FloatBoundary stored{};
  friend bool operator==(const IntermediateSpec&, const IntermediateSpec&) = default;
};

struct OutputSpec {
  QuantParams q;
  RoundingMode rounding = RoundingMode::half_away_from_zero;
  ZeroPointOrder zero_point_order = ZeroPointOrder::after_rounding;
  friend bool operator==(const OutputSpec&, const OutputSpec&) = default;
};

struct Convention {
  RequantVariant requant = RequantVariant::double_rounding;
  IntermediateSpec intermediate;
  OutputSpec output;
  Activation activation;
  PostOpArithmetic post_ops = PostOpArithmetic::exact;
  friend bool operator==(const Convention&, const Convention&) = default;
};

std::string_view to_string(RequantVariant v);
std::string_view to_string(ZeroPointOrder o);
std::string_view to_string(IntermediateKind k);
std::string_view to_string(PostOpArithmetic a);
RequantVariant parse_requant_variant(std::string_view text, std::string_view field);
ZeroPointOrder parse_zero_point_order(std::string_view text, std::string_view field);

// The rounding a fixed-point variant imposes on its last step, or nullopt for `exact` (which uses the
// declared intermediate rounding).
std::optional<RoundingMode> fixed_rounding(RequantVariant v);

// Throws InputError when the convention is inconsistent: bad scales or zero points, a requant variant whose
// fixed rounding contradicts intermediate.rounding, alpha on an activation that takes none, binary32 post-ops with
// another output rounding than half_to_even before rounding.
void validate(const Convention& c);

// "TYPE:SCALE:ZP" or "TYPE" (scale and zero point keep `defaults`); TYPE may end in "_narrow".
QuantParams parse_quant_params(std::string_view text, std::string_view field, const QuantParams& defaults);
std::string format_quant_params(const QuantParams& q);  // "int8:0.25:0" (+ "_narrow")

// One-line human description, e.g. "double_rounding u=int8:0.0625:0 half_away_from_zero -> gelu_erf -> y=int8:...".
std::string describe(const Convention& c);

}  // namespace fusediff
