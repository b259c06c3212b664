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
//   binary32_libm: an activation table built in binary32 with this system's libm, one entry per intermediate code
//             (XNNPACK's LUT operators, src/operators/lut-elementwise-nc.c:102-119 at ae108ef; docs/xnnpack.md):
//               x  = fl32(su * (u - zu))    (the code difference exact, one binary32 product);
//               e  = F(x) in binary32, F calling the system's binary32 libm functions themselves (glibc's expf,
//                    expm1f, tanhf are not correctly rounded; calling the same function is the rule):
//                    sigmoid    x < 0 ? fl32(1 / fl32(1 + expf(-x))) : fl32(1 - fl32(1 / fl32(1 + expf(x))));
//                    tanh       tanhf(x);
//                    elu        x < 0 ? fl32(alpha * expm1f(x)) : x;
//                    leaky_relu x < 0 ? fl32(x * alpha) : x;
//                    relu, relu6 max(x, 0), min(max(x, 0), 6) (exact);
//               t  = fl32(e * fl32(1/sy));
//               y  = sat(round_half_even(t) + zy)   (lrintf in the default mode, the zero point after rounding).
//             Requires output rounding half_to_even with the zero point after rounding.
enum class PostOpArithmetic { exact, binary32, binary32_libm };

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
  // A float output (oneDNN's bf16 / f32 destinations; FloatConv below): y is the activation's binary32 result e
  // stored in this format by its rules, as its ordered code (float_order_code: neighbouring values differ by 1, so
  // errors count ulps of the output format). q, rounding and the zero point are then unused.
  std::optional<FloatBoundary> float_value{};
  friend bool operator==(const OutputSpec&, const OutputSpec&) = default;
};

// A producer that computes in floating point (oneDNN's bf16 convolutions and f32 ones under fpmath_mode bf16;
// docs/onednn.md, "bf16 convolutions") instead of on integer codes. The draw's codes give the graph's binary32
// tensors x = fl32(sx' (x_code - zx)), w = fl32(sw'[k] w_code), b = fl32(fl32(b_int) fl32(sx' sw'[k])), where
// s' = s, or with pow2_scales the power of two nearest s in log scale (2^round(log2 s), ties up): the exact-sum
// draws, whose every product and partial sum is exact in binary32 while |acc| < 2^24. The operands x, w are stored in
// `operands` (f32 as is, bf16 by oneDNN's conversion rules); then
//   v = fl32(fl32(S) + b),  S = the sum of x w over the taps, exact (oneDNN's summation order is not documented:
//       the exact-sum draws make it irrelevant, docs/onednn.md bounds it for the others),
// stored in the intermediate's `stored` format, the activation in binary32 (PostOpArithmetic::binary32), and the
// output. Requires an f32 intermediate and conv2d+act.
//   fpmath_bf16: the path's attribute (oneDNN's fpmath_mode::bf16 on an f32 convolution): it *allows* the library
//       to convert f32 operands to bf16. The reference computes with `operands`; which one the library matches is
//       measured (docs/onednn.md).
struct FloatConv {
  bool enabled = false;
  FloatFormat operands = FloatFormat::f32;
  bool pow2_scales = false;
  bool fpmath_bf16 = false;
  friend bool operator==(const FloatConv&, const FloatConv&) = default;
};

struct Convention {
  RequantVariant requant = RequantVariant::double_rounding;
  IntermediateSpec intermediate;
  OutputSpec output;
  Activation activation;
  PostOpArithmetic post_ops = PostOpArithmetic::exact;
  FloatConv float_conv{};
  friend bool operator==(const Convention&, const Convention&) = default;
};

// FloatConv's scale rule: s itself, or 2^round(log2 s) (ties up) with pow2_scales. s finite and > 0.
float float_conv_scale(const FloatConv& f, float s);
// The ordered code of a float's bits in `format` (f32: 32 bits, bf16 / f16: the low 16): +-magnitude bits, so that
// +0 and -0 are 0 and neighbouring finite values differ by 1. f32_from_order_code inverts it (f32 and bf16;
// -0 comes back as +0).
int32_t float_order_code(uint32_t bits, FloatFormat format);
float f32_from_order_code(int32_t code, FloatFormat format);
// "bf16" / "bf16:pow2" / "f32:pow2:fpmath_bf16" (FloatConv, enabled); parse throws InputError naming `field`.
std::string format_float_conv(const FloatConv& f);
FloatConv parse_float_conv(std::string_view text, std::string_view field);

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
// another output rounding than half_to_even before rounding, a float conv or output outside their rules.
void validate(const Convention& c);

// "TYPE:SCALE:ZP" or "TYPE" (scale and zero point keep `defaults`); TYPE may end in "_narrow".
QuantParams parse_quant_params(std::string_view text, std::string_view field, const QuantParams& defaults);
// "TYPE:SCALE:ZP" only: for quantization that is written into a file (a table descriptor), where no default scale
// or zero point means anything. Throws InputError naming `field` and what is missing.
QuantParams parse_full_quant_params(std::string_view text, std::string_view field);
std::string format_quant_params(const QuantParams& q);  // "int8:0.25:0" (+ "_narrow")

// One-line human description, e.g. "double_rounding u=int8:0.0625:0 half_away_from_zero -> gelu_erf -> y=int8:...".
std::string describe(const Convention& c);

}  // namespace fusediff
