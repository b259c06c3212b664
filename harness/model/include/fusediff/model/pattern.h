#pragma once
// Fusion patterns as data: a producer (a convolution or a fully connected layer) and an ordered list of stages,
// each with the unfused graph's output boundary (type, scale, zero point) and its arithmetic rule where several
// exist. The conv+activation of every earlier release is the pattern `conv2d+act`: producer conv2d, one
// activation stage, whose boundaries are those of the Convention (model/convention.h). std only.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/batchnorm.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/formulation.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/quant.h"
#include "fusediff/model/stage_kind.h"
#include "fusediff/model/summation_order.h"

namespace fusediff {

// What computes the int32 accumulator. conv2d draws include ConvTranspose2D ones (model/conv_case.h ConvOp; the
// generators make a quarter of them transposed), as every release before patterns did. fully_connected is a
// 1x1 spatial conv over C input features: acc[n, k] = bias[k] + sum_c (x[n, c] - zx) * w[k, c].
enum class Producer { conv2d, fully_connected };

// A stage's kind is a token (model/stage_kind.h) whose module (model/stage_module.h) says what it does. The built-in
// kinds: act, add, maxpool, avgpool, fc, mul, layernorm (below) and batchnorm: y = gamma (x - mean) / sqrt(var + eps) + beta per output
// channel of the producer's real output (acc sx sw[k], never rounded to a code in the graph), then quantized into
// the producer's boundary u by the convention's intermediate rounding (model/batchnorm.h; conv2d+batchnorm+act).

// How a quantized add of two tensors (a: the producer's u, b: the residual r) rounds into its output boundary s
// (docs/conventions.md, "Add").
//   tflite:       left shift 20 (15 for int16); per-input multipliers sa/(2 max(sa, sb)), sb/(2 max), output multiplier
//                 2 max(sa, sb) / (2^20 so), each QuantizeMultiplierSmallerThanOneExp; three roundings (SRDHM, then
//                 RoundingDivideByPOT, half away from zero), + zo, saturate.
//   onnx_spec:    the exact real sum sa(a - za) + sb(b - zb), divided by so, one rounding half to even, + zo,
//                 saturate.
//   ort_mlas:     MLAS on x86 SSE2, binary32: ra = sa/so, rb = sb/so, k = zo - (ra za + rb zb), y = k + ra a + rb b
//                 (separate multiplies and adds), round half to even, saturate.
//   ort_mlas_fma: the same with AVX2's fused multiply-adds: y = fma(a, ra, fma(b, rb, k)) (b's term innermost).
//   ort_raw:      MLAS's portable fallback: v = (sa(a - za) + sb(b - zb)) / so in binary32, clamped to
//                 [qmin - zo, qmax - zo], then nearbyint(v + zo).
//   binary32_unfused: an unfused graph of the add, every step one binary32 rounding to nearest even: dequantizing
//                 va = fl32(sa (a - za)), vb = fl32(sb (b - zb)), c = fl32(va + vb), then quantizing
//                 t = fl32(fl32(c fl32(1/so)) + zo), saturate, round half to even. Any 8-bit types. oneDNN 2.6's
//                 reorders and binary add (src/cpu/x64/jit_uni_reorder.cpp, injectors/jit_uni_binary_injector.cpp:
//                 vsubps, vmulps, vaddps), which its backend names after itself (convention_names, model/backend.h).
//   fixed_point_half_up: 8-bit codes, ratios ra = fl32(sa / so), rb = fl32(sb / so), each in [2^-10, 2^8); shift =
//                 20 - e, e the binary32 exponent of max(ra, rb) (shift in [12, 30]); multipliers ma = rne(ra 2^shift),
//                 mb = rne(rb 2^shift) (the scalings exact, lrintf ties to even; each < 2^21); then, in exact int32,
//                 y = sat(floor((ma (a - za) + mb (b - zb) + 2^(shift - 1)) / 2^shift) + zo): one rounding, half
//                 toward +infinity, of the multiplier-quantized sum. XNNPACK's add_nd_qs8 / add_nd_qu8 on x86
//                 (src/params-init.c:4073-4095, the vadd / vaddc kernels; docs/xnnpack.md), named `xnnpack_add` by
//                 its backend.
// Two more add a residual code r to an f32 intermediate v (a kernel that never rounds u: a library's post-ops); their
// result d is binary32, no code, and the activation reads it (Stage::f32_add_rule):
//   f32_one_rounding:  d = fl32(v + sr (r - zr)), one rounding (r - zr exact in binary32, then one fused
//                      multiply-add): oneDNN 2.6's `sum` post-op in its jit int8 kernels (vfmadd231ps);
//   f32_two_roundings: src1 = fl32(sr (r - zr)) (formed by the caller), d = fl32(v + src1): oneDNN 2.6's
//                      `binary_add` post-op on an f32 src1 holding the residual's real value (vaddps).
// A backend may give a rule the name its conventions are known by (convention_names, model/backend.h): that name is then the
// one printed (cases, replay lines, results), and both are read.
enum class AddRule {
  tflite,
  onnx_spec,
  ort_mlas,
  ort_mlas_fma,
  ort_raw,
  binary32_unfused,
  f32_one_rounding,
  f32_two_roundings,
  fixed_point_half_up
};
bool is_f32_add_rule(AddRule r);  // f32_one_rounding, f32_two_roundings: they read an f32 intermediate, not a code
// Registers a backend's name for a rule; a name already taken, or a second name for one rule, is a programming error
// (std::logic_error).
void RegisterAddRuleName(std::string name, AddRule rule);

// How a quantized multiply of two tensors (a: the codes it reads, b: its second input) rounds into its output
// boundary o. P = (a - za)(b - zb), exact (|P| < 2^17 for 8-bit codes).
//   tflite:    TFLite's integer Mul (tensorflow/lite/kernels/mul.cc Prepare: real_multiplier = sa * sb / so in
//              binary32, each operation one binary32 rounding, then widened to double and QuantizeMultiplier'd to
//              (m, shift), shift may be positive; reference/integer_ops/mul.h MulElementwise, BroadcastMul4DSlow):
//              y = sat(MultiplyByQuantizedMultiplier(P, m, shift) + zo), i.e. RoundingDivideByPOT(SRDHM(P 2^max(shift,
//              0), m), max(-shift, 0)): two roundings (ties toward +infinity, then away from zero). a, b, o of one
//              8-bit type (TFLite's Prepare requires one type), and P 2^max(shift, 0) must fit int32 for every
//              code pair (TFLite computes it in int32): the multiplier below 2^15.
//   onnx_spec: ONNX QLinearMul's definition (dequantize, multiply, quantize): the exact real sa (a - za) sb (b - zb),
//              divided by so, one rounding half to even (QuantizeLinear), + zo, saturate. Any types.
enum class MulRule { tflite, onnx_spec };

// What a mul stage's second input b holds:
//   tensor:      one code per element of the tensor the stage reads (the product's shape, like add's residual);
//   per_channel: one code per output channel k, broadcast over batch and space (a per-channel constant).
enum class MulOperand { tensor, per_channel };

// How a layernorm stage computes between its quantized input and output:
//   f32: ONNX Runtime's DequantizeLinear -> LayerNormalization -> QuantizeLinear: x_j = fl32(s_in (q_j - z_in)) (one
//        binary32 product of the scale and the exact code difference), the row normalized in binary32 by the stage's
//        declared NormalizationOrder (model/summation_order.h; ln_eps added as that order says), y_j =
//        LayerNorm(x)_j gamma_j + beta_j, then QuantizeLinear: the exact quotient y_j / s_out rounded half to even,
//        + z_out, saturated to the output type (the ONNX definition; a NaN, from a one_pass variance below -eps,
//        is declared to give z_out).
//   tflite_int16: TFLite's integer layer norm (PortableApplyLayerNorm, as its integer LSTM runs it; docs/patterns.md
//        "LayerNorm" cites the source lines). Operands, per draw: v_j = q_j - z_in (the int16 input; it must fit
//        int16); s_g = fl32(max_j |gamma_j| / 32767) (1 where every gamma is 0), w_j = round_half_away(gamma_j / s_g)
//        (exact quotient, int16); s_b = s_g 2^-10, b_j = round_half_away(beta_j / s_b) saturated to int32;
//        (a, sh) = QuantizeMultiplier(s_g) (double rounding); variance_limit = max(1, trunc(fl32(10000 s_g))).
//        Per row of n: S = sum v (int64), Q = sum v^2 (int64); mean = trunc(1024 S / n);
//        var = trunc((Q trunc(2^20 / n) - mean^2) / 2^20) (trunc(2^20 / n) is exact only for a power-of-two n),
//        var < 1 -> variance_limit; (m, e) = GetInvSqrtQuantizedMultiplierExp(var) (gemmlowp fixed point, five
//        Newton steps); per element: r = MultiplyByQuantizedMultiplier(1024 v_j - mean, m, -e);
//        t = r w_j + b_j in int32, wrapping modulo 2^32 (TFLite's plain int32 multiply-add: undefined in C++,
//        two's-complement on the builds that run it); t4 = round_half_away(t / 1024);
//        y = MultiplyByQuantizedMultiplier(t4, a, sh + k) with s_out = 2^-k (TFLite: k = 12, int16), saturated to
//        the output type. ln_eps does not enter: variance_limit stands where eps would. out needs a
//        power-of-two scale and zero point 0.
enum class LayerNormArithmetic { f32, tflite_int16 };

// What a layernorm draw's rows look like (generators aim the first row of each draw at it; the others follow the
// producer's draw):
//   benign:        the producer's codes as drawn;
//   cancellation:  a large mean against a spread of a few codes (E[x^2] - mu^2 cancels);
//   tiny_variance: the row constant but for one or two codes one step off: a variance near or below eps;
//   outlier:       one code at an end of the type, the rest within a few codes of the zero point;
//   mixed:         one of the four, drawn per draw;
//   exact_rows:    benchdnn-style rows whose mean and variance are exact in every summation order (oneDNN v2.6.3
//                  tests/benchdnn/lnorm/lnorm.cpp:40-111): every row of every draw (one row a draw) is
//                  c + delta_j in codes with sum delta_j = 0, at a power-of-two input scale 2^e (the stage's
//                  validate requires it), so x_j = (c - z + delta_j) 2^e, mu = (c - z) 2^e and d_j = delta_j 2^e
//                  exactly, and every partial sum of x and of d^2 is exact (generators/src/targets.cpp
//                  ExactRowCodes states the bounds). Each row is checked by the reference
//                  (reference::LayerNormStatsAreExactInEveryOrder); one that is not exact is a harness bug, thrown.
//                  On such rows two orders that exact_rows_difference (model/summation_order.h) finds equal give
//                  the same outputs, so norm_other_order between them is judged (fusion_keeps_meaning).
//                  Never drawn by `mixed`.
enum class LnRegime { mixed, benign, cancellation, tiny_variance, outlier, exact_rows };

// How an average pool rounds (docs/conventions.md, "Average and max pool").
//   tflite:      sum of raw codes over the in-bounds taps, (sum +- n/2) / n truncated: ties away from code 0, not
//                from the zero point; input and output quantization must be equal (TFLite assumes it).
//   ort_qlinear: dequantize, binary32 sum, / n, nearbyint(mean / so + zo), saturate.
//   ort_global:  integer sum - zx n, one requantization by the binary32 multiplier sx / (so n), nearbyint, + zo.
//   fixed_point_half_away: 8-bit codes of one type, sx / so in [2^-8, 2^8); the window's n = kernel^2 taps, padding
//                included: a padding tap reads the code zx (real 0; the only rule that counts padding); acc = sum
//                (q - zx) over the n taps (exact), s = fl32(sx / fl32(so n)) = M 2^-sh exactly (M its 24-bit
//                significand); y = sat(sign(acc) floor((|acc| M + 2^(sh - 1)) / 2^sh) + zo): the exact product acc s
//                rounded half away from zero, in 64-bit integers. XNNPACK's average_pooling2d_nhwc_qu8 on a window
//                smaller than its padded input (the 9x / 9p8x kernels; src/operators/average-pooling-nhwc.c:193 (the
//                padding buffer of zx), :221, src/params-init.c:1440-1480; docs/xnnpack.md).
enum class AvgPoolRule { tflite, ort_qlinear, ort_global, fixed_point_half_away };

// How a fully connected layer forms its real multiplier M = sx sw / su (docs/conventions.md, "Fully connected multiplier"):
//   double_product: in double throughout (TFLite per-channel FC, every conv);
//   float_product:  sx sw formed in binary32 first, then / su in double (TFLite's per-tensor FC).
enum class MultiplierRule { double_product, float_product };

// What the reference runs for an FC -> FC fold (Fusion::fold):
//   graph:         the unfused graph; the fold is then a measurement across conventions (the suite's fold cases);
//   declared_fold: the fold as Fusion::fold declares it, evaluated by the reference's own code (the fused fold must
//                  match it exactly: what catches a fold that quantizes wrongly).
enum class FcReference { graph, declared_fold };

// A 2-D pooling window over the spatial dimensions, square, padding on every side (counted in an average by
// AvgPoolRule::fixed_point_half_away only).
struct PoolWindow {
  int32_t kernel = 2;
  int32_t stride = 2;
  int32_t padding = 0;
  friend bool operator==(const PoolWindow&, const PoolWindow&) = default;
};

struct Stage {
  StageKind kind = StageKind::activation;
  AddRule add_rule = AddRule::tflite;            // add: the graph's rule, on the codes u and r
  // add, where the convention's intermediate is f32 (a fused kernel that never rounds u): the rule that adds r to
  // the f32 value v (f32_one_rounding or f32_two_roundings). The graph keeps add_rule; the fused path declares this
  // one.
  AddRule f32_add_rule = AddRule::f32_one_rounding;
  QuantParams residual;                          // add: the residual r's quantization (r has the sum's shape)
  PoolWindow window;                             // max_pool, avg_pool
  AvgPoolRule pool_rule = AvgPoolRule::tflite;   // avg_pool
  // The stage's output boundary: add (the sum s), avg_pool, fully_connected (requantized by the convention's
  // requant variant). The activation's is Convention::output; a max pool's is its input's (it selects codes).
  QuantParams out;
  int32_t fc_outputs = 4;                        // fully_connected: its output features (1..64)
  FcReference fc_reference = FcReference::graph;  // fully_connected, folded
  // batchnorm: the graph's eps; the fused path's declared fold; what the draws aim at; what the reference runs.
  float bn_eps = 1e-5f;
  BatchNormFold bn_fold;
  BnRegime bn_regime = BnRegime::benign;
  BnReference bn_reference = BnReference::declared_fold;
  // batchnorm placed after another stage (conv2d+act+batchnorm): it reads that stage's codes, dequantized, and
  // writes its own boundary `out` (rounded by the convention's output rounding). Set from the stage's place by
  // parse_pattern_name: one concept, BatchNorm, is one kind wherever it sits; only what it reads differs.
  bool bn_reads_codes = false;
  // mul: its rule, its second input b's quantization and shape; out is the product's boundary.
  MulRule mul_rule = MulRule::tflite;
  QuantParams mul_input;
  MulOperand mul_operand = MulOperand::tensor;
  // layernorm over the last axis (the producer's output features), gamma and beta per feature in the draw
  // (StageOperands::gamma, beta); out is its own boundary. ln_order is the declared convention's order;
  // ln_fused_order the one a fused path runs under Fusion::norm_other_order (a measurement). ln_features: the row
  // length the draws use (0: drawn with the producer, 4 to 16 features).
  LayerNormArithmetic ln_arithmetic = LayerNormArithmetic::f32;
  LayerNormArithmetic ln_fused_arithmetic = LayerNormArithmetic::tflite_int16;  // Fusion::norm_other_arithmetic's
  float ln_eps = 1e-5f;
  NormalizationOrder ln_order = named_normalization_order("ort", "layernorm.order");
  NormalizationOrder ln_fused_order = named_normalization_order("onednn_jit", "layernorm.fused_order");
  LnRegime ln_regime = LnRegime::mixed;
  int32_t ln_features = 0;
  // The graph's float boundaries around the norm (f32 arithmetic only; docs/patterns.md "LayerNorm"): x_j stored in
  // ln_in_float's format and read back before the norm, y_j stored in ln_out_float's before QuantizeLinear, each by
  // its declared rules (model/batchnorm.h FloatBoundary), as oneDNN's bf16 graph DQ -> bf16 -> LayerNormalization
  // -> bf16 -> Q runs. Part of the graph (a convention), not of a fused path's declaration. Absent: x and y stay
  // binary32 (ONNX Runtime's f32 graph).
  std::optional<FloatBoundary> ln_in_float, ln_out_float;
  // The float layernorm (f32 arithmetic, the pattern's last stage): y_j stored at ln_out_float's format (binary32
  // where unset; f32 or bf16) is the pattern's output, compared as its ordered code (model/convention.h
  // float_order_code: errors in the format's ulps) and judged against the rounding-error bound of a two-pass
  // normalization (float_output below); `out` is then unused. Unset: QuantizeLinear into `out`.
  bool ln_float_out = false;
  friend bool operator==(const Stage&, const Stage&) = default;
};

struct Pattern {
  Producer producer = Producer::conv2d;
  MultiplierRule multiplier = MultiplierRule::double_product;
  // conv2d+act. Not `= {Stage{}}`: GCC 12 reports the initializer list's array as maybe uninitialized where this
  // constructor is inlined into a loop (a false positive under -Wmaybe-uninitialized).
  std::vector<Stage> stages = std::vector<Stage>(1);
  friend bool operator==(const Pattern&, const Pattern&) = default;
};

// How a fused path treats the pattern's intermediate boundaries.
//   keep_all:           every boundary of the unfused graph kept, with its own arithmetic (must match exactly);
//   add_in_accumulator: the residual added to the accumulator's real value, one rounding into s (u skipped);
//   pool_first:         the pool applied to the activation's input codes, the activation after it;
//   fold:               FC -> FC folded into one layer (W = W2 W1, b = W2 b1 + b2, requantized per channel), the
//                       first layer's output boundary removed; conv -> batchnorm folded into the conv's weights and
//                       bias by the stage's declared BatchNormFold (model/batchnorm.h); across an activation
//                       (conv2d+act+batchnorm) the same fold is illegal (bn-fold-before-activation) and measured;
//   mul_add_affine:     conv2d+mul+add+act's mul and add as one affine map in double, s = round((sa (u - za) sb
//                       (b - zb) + sr (r - zr)) / ss) + zs, half away from zero: the product's rounding and
//                       saturation skipped.
//   skip_add_f32:       fc+add+layernorm as a fused SkipLayerNorm over dequantized inputs: x = fl32(fl32(su (u - zu))
//                       + fl32(sr (r - zr))) reaches the norm in binary32 (the add's rounding into s skipped);
//   norm_f32_into_act:  fc+layernorm+act with the norm's output kept in binary32: the activation (double) on
//                       LayerNorm(x) gamma + beta, rounded once into the output boundary, half away from zero;
//   norm_other_order:   the layernorm normalized in the stage's ln_fused_order in place of its declared ln_order;
//   norm_other_arithmetic: the layernorm computed in the stage's ln_fused_arithmetic in place of its declared
//                       ln_arithmetic (e.g. a graph of ORT's f32 norm run by TFLite's integer kernel).
enum class Fusion {
  keep_all,
  add_in_accumulator,
  pool_first,
  fold,
  mul_add_affine,
  skip_add_f32,
  norm_f32_into_act,
  norm_other_order,
  norm_other_arithmetic
};

std::string_view to_string(Producer p);
std::string_view to_string(StageKind k);
std::string_view to_string(AddRule r);
std::string_view to_string(AvgPoolRule r);
std::string_view to_string(MulRule r);
std::string_view to_string(MulOperand o);
std::string_view to_string(MultiplierRule r);
std::string_view to_string(FcReference r);
std::string_view to_string(Fusion f);
std::string_view to_string(LayerNormArithmetic a);
std::string_view to_string(LnRegime r);
LayerNormArithmetic parse_layer_norm_arithmetic(std::string_view text, std::string_view field);
LnRegime parse_ln_regime(std::string_view text, std::string_view field);
AddRule parse_add_rule(std::string_view text, std::string_view field);
AvgPoolRule parse_avg_pool_rule(std::string_view text, std::string_view field);
MulRule parse_mul_rule(std::string_view text, std::string_view field);
MulOperand parse_mul_operand(std::string_view text, std::string_view field);
MultiplierRule parse_multiplier_rule(std::string_view text, std::string_view field);
FcReference parse_fc_reference(std::string_view text, std::string_view field);
Fusion parse_fusion(std::string_view text, std::string_view field);

// "conv2d+act", "conv2d+add+act", "conv2d+act+maxpool", "conv2d+act+avgpool", "fc+act", "fc+fc", "fc+act+fc",
// "conv2d+batchnorm+act".
std::string pattern_name(const Pattern& p);
// The stages of a name, with default parameters (boundaries left for the suite to fill). Throws InputError
// naming `field` and the known patterns.
Pattern parse_pattern_name(std::string_view text, std::string_view field);

// " pattern conv2d+add+act (add tflite r=int8:0.05:3 s=int8:0.1:-2), fusion add_in_accumulator": appended to a
// convention's description; empty for conv2d+act kept whole, so the descriptions of earlier releases hold.
// `f32_intermediate`: the convention describes an f32 intermediate, so an add is its f32_add_rule on r (no s).
std::string describe_pattern(const Pattern& p, Fusion fusion, bool f32_intermediate = false);

// The patterns fusediff knows, with a one-line description each (`fusediff patterns --list`): the built-ins, then
// those registered (model/stage_module.h register_pattern).
struct PatternInfo {
  std::string_view name;
  std::string_view description;
  std::span<const Fusion> fusions;  // the fused variants the built-in path offers for it
};
std::span<const PatternInfo> known_patterns();

// The suffix of stage i's replay keys: empty for the first stage of its kind, ".N" for the N-th later one, so that
// a pattern may hold several stages of one kind and the strings of patterns with one of each stay as they were.
std::string stage_field_suffix(const Pattern& p, size_t i);

bool is_conv_act(const Pattern& p);                 // producer conv2d, one activation stage: the original case
bool has_stage(const Pattern& p, StageKind kind);
const Stage* find_stage(const Pattern& p, StageKind kind);

// The activation stage's own convention: intermediate = the boundary it reads (the producer's u, or the add's s),
// output = Convention::output. What the activation tables (reference and fused) are built for.
Convention activation_convention(const Pattern& p, const Convention& c);

// The quantization of the pattern's final output (the last stage's boundary).
QuantParams final_output(const Pattern& p, const Convention& c);
// The boundary whose codes key the per-code statistics (CaseResult::per_code, hard codes): the activation's input
// for an elementwise pattern (conv2d+act, conv2d+add+act, fc+act), the final output for one with a pool or a
// second layer, where an output code does not follow from one input code; for a float output (float_output), the
// codes its last stage reads (a float's ordered codes are no type's).
QuantParams keyed_boundary(const Pattern& p, const Convention& c);
bool keyed_by_activation_input(const Pattern& p);  // an activation, and every stage elementwise

// Throws InputError when a pattern is malformed (unknown stage order, more than one stage of a kind, a pool
// window out of range, a TFLite average pool whose input and output quantization differ, bad boundary, an f32
// intermediate outside conv2d+act, conv2d+add+act and fc+act, an add rule that does not fit its input).
void validate(const Pattern& p, const Convention& c);

// What a graph says around a fusion beyond the pattern itself (a fused-op descriptor states it; generated cases
// are always of the legal kind).
struct FusionFacts {
  int64_t group = 1;                    // the producer's group count
  int32_t intermediate_consumers = 1;   // consumers of each intermediate the fusion removes
  bool residual_broadcast = false;      // add: the residual is broadcast to the producer's output shape
  bool fc_input_flattened = true;       // fully connected stage: it reads the producer's output flattened
  bool activation_supported = true;     // the fused path implements the activation (a table can any)
  friend bool operator==(const FusionFacts&, const FusionFacts&) = default;
};

// Fusion legality, as compiler fusion rules state it. Empty when `fusion` of `p` is legal; otherwise the rule
// broken, named first, e.g. "pool-before-activation: the applied table is not non-decreasing over the reachable
// codes (code -12 -> 5, code -11 -> 3)". The rules, in the order checked:
//   single-consumer        every removed intermediate has exactly one consumer;
//   group-1                the LUT post-processing rule fuses group-1 producers only;
//   residual-shape         an add's residual has the producer output's shape (no broadcast);
//   fc-input-flattened     a fully connected stage reads the producer's output flattened;
//   activation-supported   the fused path implements the activation;
//   fusion-offered         the pattern has this fusion at all;
//   pool-before-activation a pool moves before the activation only if the applied table is non-decreasing over
//                          the codes it can read (max pool; an average pool never: it commutes with no
//                          nonlinear function);
//   fold-linear-only       FC -> FC folds only without a nonlinearity between;
//   bn-fold-before-activation a BatchNorm folds into the producer only where no activation lies between them.
// `table` is the activation table as applied (one output code per input code of its intermediate, from the
// intermediate's qmin), needed for the pool rule; empty when the pattern has no pool.
std::string fusion_illegality(const Pattern& p, Fusion fusion, const Convention& c, std::span<const int32_t> table,
                              const FusionFacts& facts = {});

// Why a legal fusion other than keep_all computes the unfused graph's own outputs on the case's draws, so that it is
// judged against the graph (same_convention, tolerance as kept whole) rather than measured across conventions;
// empty when it does not (every fusion that skips a boundary). Asked of each stage kind
// (StageKindModule::fusion_keeps_meaning); the first answer is the reason:
//   max pool, pool_first: a max pool selects a code, and before a non-decreasing table (the legality rule
//                         pool-before-activation) it selects the same one;
//   layernorm, norm_other_order: on exact rows (LnRegime::exact_rows, f32 arithmetic) between orders that
//                         exact_rows_difference finds equal (model/summation_order.h).
// `table` as for fusion_illegality. Call it only for a legal fusion.
std::string fusion_keeps_meaning(const Pattern& p, Fusion fusion, const Convention& c, std::span<const int32_t> table);

// A pattern whose output is a float rather than codes (its last stage's StageKindModule::float_output): the format
// (its ordered codes are the outputs compared) and whether the reference's per-element bound
// (reference::GraphElement::bound: how far two evaluations of the output's declared class may differ) covers the
// fused side under `fusion`: `unbounded` says why not, empty when it does. nullopt: the output is codes.
struct FloatOutput {
  FloatFormat format = FloatFormat::f32;
  std::string unbounded;
};
std::optional<FloatOutput> float_output(const Pattern& p, Fusion fusion);

// The tensors one stage brings to a draw beside the tensor it reads; empty where its kind takes none.
//   codes:  an elementwise operand, one code per element of the tensor the stage reads (NHWK order): add's
//           residual r, quantized by the stage's `residual`; mul's second input b (one code per output channel
//           where its operand is per_channel), quantized by `mul_input`;
//   weight_scales, weights, bias: a layer (fully_connected: weights [fc_outputs][K] int8 in [-127, 127], one scale
//           per output, int32 bias at scale s_in * weight_scales[j], s_in the boundary the layer reads);
//   bn:     batchnorm: one entry per producer output channel (before or after the activation);
//   gamma, beta: layernorm: one per feature of the row it normalizes.
struct StageOperands {
  std::vector<int32_t> codes;
  std::vector<float> weight_scales;
  std::vector<int8_t> weights;
  std::vector<int32_t> bias;
  BatchNormParams bn{};
  std::vector<float> gamma{}, beta{};
};

// One draw of a pattern: the producer's case and input, and each stage's operands (stages[i] for pattern stage i;
// a draw may list fewer than the pattern has stages where the rest take none).
struct PatternDraw {
  ConvCase conv;
  std::vector<int32_t> input;
  std::vector<StageOperands> stages;
  // How a library path passes the draw (model/formulation.h); the default for the built-in paths.
  Formulation formulation{};

  // Stage i's operands (an empty set past the list).
  const StageOperands& operands(size_t i) const;
  // Stage i's, the list grown to hold them.
  StageOperands& operands_of(size_t i);
  // The operands of the first stage of `kind` in `p` (an empty set where it has none).
  const StageOperands& operands(const Pattern& p, StageKind kind) const;
  StageOperands& operands_of(const Pattern& p, StageKind kind);
};

// The final tensor of a pattern over a producer of this shape (NHWC). A pool's output extent is
// floor((in + 2 padding - kernel) / stride) + 1, or 0 when the padded input is smaller than the window.
struct PatternGeometry {
  int32_t batch = 0, height = 0, width = 0, channels = 0;
  size_t elements() const {
    return static_cast<size_t>(batch) * static_cast<size_t>(height) * static_cast<size_t>(width) *
           static_cast<size_t>(channels);
  }
};
int32_t pooled_extent(int32_t in, const PoolWindow& w);
PatternGeometry pattern_output_geometry(const Pattern& p, const ConvCase& producer);

}  // namespace fusediff
