#pragma once
// Declared float summation orders, emulated exactly (model/summation_order.h, docs/summation-orders.md), the
// LayerNorm row under a declared NormalizationOrder, and the rigorous reordering bound. No I/O; never calls fused/.
//
// Emulation: every rounding the order declares is one IEEE operation on float or double, nearest even (the build
// uses -ffp-contract=off and SSE arithmetic, so the compiler neither contracts nor keeps excess precision; fma is
// std::fma). A kernel that follows its declared order therefore matches bit for bit.
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "fusediff/model/batchnorm.h"
#include "fusediff/model/summation_order.h"

namespace fusediff::reference {

// The sum of x_0..x_{n-1} in `order`'s order and precisions; the accumulator's value (a binary32 or bf16
// accumulator's value is exact in double). The empty sum is +0.
double SumInOrder(const SummationOrder& order, std::span<const float> x);
// The sum of the products a_i b_i (a and b of equal length) in `order`'s order, contraction and precisions.
double DotInOrder(const SummationOrder& order, std::span<const float> a, std::span<const float> b);

// One LayerNorm row: y_j = (x_j - mu) / sqrt(var + eps) gamma_j + beta_j by the declared order's roundings, and the
// row's mean and (biased) variance as the kernel stores them. An empty gamma or beta is absent (a kernel run
// without its scale or shift): no gamma multiplies by nothing, as by 1 (exact); no beta adds nothing, so a -0 stays
// -0 where adding +0 would make it +0 (a kernel that adds 0 without a shift is declared with a beta of zeros).
struct LayerNormRow {
  std::vector<float> y;
  float mean = 0;
  float variance = 0;
};
LayerNormRow LayerNormInOrder(const NormalizationOrder& order, std::span<const float> x, std::span<const float> gamma,
                              std::span<const float> beta, float eps);

// gamma_k = k u / (1 - k u) with u = 2^-24, rounded upward (k u < 1/2 required: k < 2^23).
double GammaUpper(size_t k);
// |computed - exact| for a sum of n binary32 terms in any order (any tree, binary32 or binary64 accumulators, with or
// without fma): <= gamma_{n-1} sum |x_i| (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §4.2).
// Evaluated upward: the result is >= the real bound (docs/summation-orders.md, "Evaluating the bound").
double SumReorderingBound(std::span<const float> x);
// The same for the products a_i b_i: each product has at most one rounding more (or none under fma): gamma_n
// sum |a_i b_i| (Higham §3.1), plus n 2^-150 for products that underflow.
double DotReorderingBound(std::span<const float> a, std::span<const float> b);

// The two-pass LayerNorm bound (docs/bisect.md, "LayerNormalization", derives it): for one row of n inputs, per
// element B_i >= |y^_i - y_i| for every two-pass evaluation with unit roundoff u (the mean summed in any order; the
// variance the sum of (x^_j - mu^)^2 in any order; sigma^ = sqrt(var^ + eps); y = (x^ - mu^) / sigma^ gamma + beta
// with at most 5 roundings from the subtraction to the scale and one for beta; model/summation_order.h
// normalization_bound_uncovered names the class) whose inputs x^_j are within error_j of the exact x_j. The caller
// estimates the exact mean, variance and outputs in double (their own error is within the 2^-40 and 2^-30 slack).
// +inf where a sum or a scale may overflow (the derivation assumes none), or where the derivation needs rho < 1/2
// and the cap is not finite either.
struct TwoPassLayerNormRow {
  std::span<const double> x;          // the inputs' exact values (estimates)
  std::span<const double> magnitude;  // bounds on |x^_j|
  std::span<const double> error;      // bounds on |x^_j - x_j|
  std::span<const double> gamma;      // gamma per element; element j reads gamma[j mod size] (a broadcast scale)
  std::span<const double> y;          // the exact outputs (estimates)
  double mean = 0, var = 0;           // the row's exact mean and biased variance (estimates: two-pass in double)
  double eps = 0;
  double u = 0x1p-24;                 // binary32's unit roundoff
  double tiny = 0x1p-150;             // a rounded product's underflow term
  double overflow = 0x1p127;          // a magnitude from which the kernel's format may overflow (binary32: 2^127)
};
void TwoPassLayerNormBounds(const TwoPassLayerNormRow& row, std::span<double> bound);

// The float layernorm's comparison bound (model/pattern.h Stage::ln_float_out): per element of a row of binary32
// inputs (exact: the graph's own values), how far two two-pass binary32 evaluations may differ: 2 B_i
// (TwoPassLayerNormBounds with no input error), each side's y then stored at `out` (absent: binary32) adding
// 2^-8 (|y_i| + B_i) + 2^-126 for bf16 (nearest even, a subnormal flushed or not). +inf where no finite bound holds
// (an infinite or NaN statistic, an output beyond the format's range).
std::vector<double> LayerNormPairBounds(std::span<const float> x, std::span<const float> gamma,
                                        std::span<const float> beta, float eps, const std::optional<FloatBoundary>& out);

// True when every partial sum of x, in every order, is exact in binary32: all x_i are integer multiples of 2^e,
// with 2^e the smallest power of two among their lowest set bits, and sum |x_i| <= 2^(24 + e). Then every order
// returns the exact sum (benchdnn-style rows).
bool SumIsExactInEveryOrder(std::span<const float> x);

// True when a LayerNorm row is exact (model/summation_order.h exact_rows_difference states the condition and why it
// makes every two_pass and mean_in_double order without a bf16 accumulator agree): x is not empty,
// SumIsExactInEveryOrder(x); with S the (exact) sum, mu = fl32(S / n) and d_j = fl32(x_j - mu), every d_j d_j is
// exact in binary32 and SumIsExactInEveryOrder of the d_j^2.
bool LayerNormStatsAreExactInEveryOrder(std::span<const float> x);

}  // namespace fusediff::reference
