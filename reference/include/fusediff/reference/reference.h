#pragma once
// The exact reference: the unfused graph's semantics, every rounding decision made exactly.
//   acc = bias[k] + sum (x - zx) * w                         integer, int64
//   u   = sat_u(requant(acc) + zu)                           by the declared variant, exact rationals
//   v   = (u - zu) * su                                      exact rational
//   y   = sat_y(round(f(v) / sy) + zy)   (or round(zy + f(v)/sy) when the zero point goes before rounding)
// Piecewise-rational activations are evaluated in exact rationals (boost cpp_rational); transcendental ones
// with a double-first filter whose margin dominates libm's documented error, escalating to rigorous MPFR
// interval arithmetic (directed rounding, held in Boost's mpfr backend) at increasing precision; a decision
// still open at the precision cap throws UndecidableError (v = 0 is settled exactly, e.g. sigmoid(0) = 1/2).
// The formulas, the filter's margin argument and the escalation rule: docs/activations.md.
// Errors are exceptions: InputError for bad arguments, UndecidableError as above. No I/O.
// Nothing here calls fused/: every rule is implemented from its mathematical definition.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"

namespace fusediff::reference {

// acc[output_index(n, oy, ox, k)] for every output element, in int64 (exact; no overflow possible for a
// validated case). Plain loops over n, oy, ox, k, ky, kx, c. `input` holds N*H*W*C codes (NHWC). Throws
// InputError when conv.validate() does, the input has the wrong size or a code is outside the input type.
std::vector<int64_t> Conv2DAccumulators(const ConvCase& conv, std::span<const int32_t> input);

// The accumulator of one output element (same definition).
int64_t Conv2DAccumulator(const ConvCase& conv, std::span<const int32_t> input, int32_t n, int32_t oy, int32_t ox,
                          int32_t k);

struct RequantTrace {
  int32_t u = 0;               // intermediate code: zero point added, saturated to the intermediate type
  int64_t u_unsaturated = 0;   // zero point added, before saturation (R clamped to +-2^62 first)
  bool saturated = false;      // u != u_unsaturated
  // Distance, in units of the last rounding step, between the exact value that step rounds and the nearest
  // rounding tie (k + 1/2): 0 = exactly on a tie, 0.5 = farthest from any tie.
  double tie_distance = 0.5;
  std::string exact_value;     // decimal (up to 30 significant digits) of the value the last step rounds
};

// Q31 multiplier and shift: M ~= multiplier * 2^(shift - 31) (TFLite QuantizeMultiplier conventions).
struct QuantizedMultiplier {
  int32_t multiplier = 0;
  int32_t shift = 0;
  friend bool operator==(const QuantizedMultiplier&, const QuantizedMultiplier&) = default;
};

// QuantizeMultiplier from its definition, for a finite M > 0: M = q * 2^e with q in [0.5, 1) (frexp, exact);
// m = round_half_away(q * 2^31) (exact in double); m == 2^31 -> m = 2^30, e + 1; e < -31 -> m = 0, e = 0.
// With single_rounding (TFLITE_SINGLE_ROUNDING) additionally e > 30 -> e = 30, m = 2^31 - 1.
QuantizedMultiplier QuantizeMultiplier(double real_multiplier, bool single_rounding);

// binary32 arithmetic emulated on exact integers and rationals (round to nearest, ties to even, subnormals,
// overflow to +-infinity), independent of the host FPU: the f32_half_even variant is built on these.
// Inputs must be finite (InputError otherwise); Fl32Divide also rejects b == 0.
float Fl32FromInt64(int64_t value);   // fl32(value)
float Fl32Multiply(float a, float b); // fl32(a * b), the exact product rounded once
float Fl32Divide(float a, float b);   // fl32(a / b), the exact quotient rounded once
float Fl32Add(float a, float b);      // fl32(a + b), the exact sum rounded once (an exact zero: +0 unless both -0)

// The f32 intermediate (IntermediateKind::f32): v = fl32(fl32(acc) * fl32(sx * sw[k])), each step emulated.
float F32IntermediateValue(int64_t acc, float input_scale, float weight_scale);

// acc -> u for one output channel: precomputes what depends only on (convention, sx, sw[k]).
class Requantizer {
 public:
  Requantizer(const Convention& convention, float input_scale, float weight_scale);
  ~Requantizer();
  Requantizer(Requantizer&&) noexcept;
  Requantizer& operator=(Requantizer&&) noexcept;
  // exact_value is filled only when `with_decimal` (it costs a conversion).
  RequantTrace operator()(int64_t acc, bool with_decimal = false) const;

  // What the constructor derived (for tests and reports): the (multiplier, shift) of the fixed-point variants
  // (zeros for exact and f32_half_even), M32 of f32_half_even (0 otherwise), and for `exact` the reduced
  // fraction sx*sw/su as decimal strings "num/den" (empty otherwise).
  QuantizedMultiplier quantized_multiplier() const;
  float f32_multiplier() const;
  std::string exact_multiplier() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ActivationPoint {
  int32_t y = 0;               // reference output code (zero point added, saturated)
  bool saturated = false;      // the rounded code was clamped to the output type (next to y: 40 bytes, not 48)
  double v = 0;                // (u - zu) * su, rounded to double for display
  double f = 0;                // f(v), rounded to double for display
  double t = 0;                // the value the output rounding rounds: f/sy (+ zy when before rounding), double
  // |t - nearest (k + 1/2)|: from t_d or MPFR's midpoint, or exact. Its comparison with kQuantBoundaryTieDistance
  // (the quant_boundary region) is always exact for piecewise-rational kinds: near that threshold they are exact.
  double tie_distance = 0.5;
};

// Knobs of the table's decision procedure (defaults are the production settings; tests vary them).
struct ActivationTableOptions {
  bool use_double_filter = true;  // false: every transcendental code goes straight to MPFR (cross-check)
  int mpfr_start_bits = 128;      // first MPFR precision of an escalation
  int mpfr_cap_bits = 8192;       // precision doubles up to this cap; still open there -> UndecidableError
};

// oneDNN 2.x's binary32 post-op steps (PostOpArithmetic::binary32, model/convention.h), each emulated on exact
// integers (round to nearest even, subnormals), independent of the host FPU:
//   Binary32Activation: e = the activation in binary32 at a binary32 input v: relu max(v, 0); leaky_relu
//     v > 0 ? v : fl32(alpha v); relu6 min(max(v, 0), 6); hard_swish fl32(v fl32(min(max(fl32(v + 3), 0), 6) / 6));
//     every other kind fl32(f(v)) with f exact, rounded once (the double filter, then MPFR intervals at doubling
//     precision up to options.mpfr_cap_bits; UndecidableError if still open there). Throws InputError for a
//     non-finite v or a bad activation.
//   Binary32OutputValue: t = fl32(fl32(e fl32(1/sy)) + zy), the value the output rounding rounds (half to even).
//     e must be finite; a product beyond binary32's range is +-infinity, and so is t.
float Binary32Activation(const Activation& activation, float v, const ActivationTableOptions& options = {});
float Binary32OutputValue(float e, float output_scale, int32_t zero_point);

// y_ref for every intermediate code of a convention, computed once (the cache). Only the activation,
// intermediate, output and post_ops fields of the convention matter; requant is ignored. With binary32 post-ops
// the activation sees v = fl32(su (u - zu)) and t follows Binary32OutputValue. Throws InputError for bad
// quantization parameters or alpha, UndecidableError for a code no enclosure up to the cap decides.
class ActivationTable {
 public:
  explicit ActivationTable(const Convention& convention);
  ActivationTable(const Convention& convention, const ActivationTableOptions& options);
  const ActivationPoint& at(int32_t u) const;  // u in [qmin, qmax] of the intermediate type
  size_t size() const { return points_.size(); }
  // How many codes the double filter could not decide and MPFR had to (docs/activations.md). Codes decided in
  // exact rationals (piecewise-rational kinds the filter left open, v == 0) are not counted.
  uint64_t escalations() const { return escalations_; }
  // The highest MPFR precision (bits) any escalation needed; 0 when none escalated.
  int max_mpfr_bits() const { return max_mpfr_bits_; }

 private:
  int32_t qmin_ = 0;
  std::vector<ActivationPoint> points_;
  uint64_t escalations_ = 0;
  int max_mpfr_bits_ = 0;
};

// y_ref for an f32 intermediate (IntermediateKind::f32): the convention's output rule applied to f(v) at any
// binary32 v, by exactly the decision procedure of ActivationTable (the double filter, then MPFR). No cache: an
// f32 intermediate has no finite code set. Not thread-safe (it counts escalations).
class ActivationEvaluator {
 public:
  explicit ActivationEvaluator(const Convention& convention, const ActivationTableOptions& options = {});
  ~ActivationEvaluator();
  ActivationEvaluator(ActivationEvaluator&&) noexcept;
  ActivationPoint operator()(float v);
  uint64_t escalations() const;
  int max_mpfr_bits() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One evaluation for display (replay): f(v) at code u as a decimal with `digits` significant digits,
// computed in MPFR (or exactly for piecewise-rational activations).
std::string ExactActivationDecimal(const Convention& convention, int32_t u, int digits = 30);

// f(x) for an exact decimal x ("-0.7518", "1e-3", "3"), as a decimal with `digits` significant digits,
// correct to the last digit shown but one (MPFR at ample precision; exact for piecewise-rational kinds).
// Used by the golden-value tests against an independent system (mpmath).
std::string ActivationDecimal(const Activation& activation, const std::string& x_decimal, int digits = 40);

// ---- The double-first filter (docs/activations.md, "The double filter").
// A transcendental activation evaluated in binary64 with numerically stable formulas and glibc libm, with a
// rigorous bound on its error, for any double x (exact input):
//   |f - f(x)| <= bound = kFilterRelativeMargin * |f| + kFilterAbsoluteMargin * max(1, |x|)
// `usable` is false when the evaluation left the finite range (the caller must escalate). For piecewise-rational
// kinds the same bound holds with room to spare (at most three roundings of exact operands, each within 2^-53
// relative, or 2^-1074 absolute when subnormal), and the table tries it first too, before exact rationals.
inline constexpr double kFilterRelativeMargin = 0x1p-36;
inline constexpr double kFilterAbsoluteMargin = 0x1p-1000;
struct FilterEvaluation {
  double f = 0;
  double bound = 0;
  bool usable = false;
};
FilterEvaluation ActivationFilter(const Activation& activation, double x);

}  // namespace fusediff::reference
