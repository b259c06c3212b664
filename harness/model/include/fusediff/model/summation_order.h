#pragma once
// Float summation order as a declared convention (issue 30, docs/summation-orders.md). std only.
//
// A float reduction's result depends on the order of its roundings. A kernel declares its order; the reference
// emulates it exactly (reference/summation.h), so a correctly declared kernel passes at tolerance 0, and any other
// order is a cross-convention measurement judged against the reordering bound.
//
// SummationOrder: how n terms t_0..t_{n-1} (a value x_i, or a product a_i b_i) are summed.
//   sequential  s = (((0 + t_0) + t_1) + ...) + t_{n-1}, one rounding per addition.
//   pairwise    n <= leaf: sequential; else sum(t[0, m)) + sum(t[m, n)) with m = n / 2 (floor), one rounding more.
//   blocked     V = n / lanes full vectors (floor); U = unroll when V >= unroll, else 1 (oneDNN's rule,
//               jit_uni_layer_normalization_kernels.cpp:368). Vector i, for i < (V / U) U, goes to accumulator
//               i mod U, lane by lane; the U accumulators fold by halving (acc[j] += acc[j + m/2], m = U, U/2, .., 2);
//               the remaining vectors (V mod U of them) add into accumulator 0, in order; its lanes fold by
//               `lane_fold` (below) to one value. The scalar tail t[V lanes, n) adds in order, by `tail`:
//                 after_fold   to the folded value (oneDNN's jit: jit_uni_layer_normalization_kernels.cpp:402);
//                 into_lane0   to lane 0 of accumulator 0, before the lane fold (GCC's `omp simd` reduction: the
//                              scalar epilogue runs on the private copy of lane 0, measured on oneDNN's C++ kernel).
//                 after_fold_mul4  to the folded value, but when the tail holds 4 or more terms its first 4 products
//                              are rounded, P(a b), never contracted, and added in order; the remaining terms add by
//                              the order's contraction (GCC's vectorized epilogue of a scalar `s += d * d` loop: one
//                              4-lane vmulps, then in-order vaddss, then vfmadd231ss; read in ONNX Runtime 1.30's
//                              MLAS AVX2 layer norm, docs/summation-orders.md). For value terms it is after_fold.
//               lane_fold is either "sequential" (l_0 + l_1 + ... + l_{lanes-1}) or a list of steps on m lanes:
//                 halve     lane i = lane i + lane i + m/2   (vextractf128 + vaddps: "4+4")
//                 adjacent  lane i = lane 2i + lane 2i + 1   (vhaddps)
//               e.g. oneDNN's f32 jit: halve, adjacent, adjacent; "4+4, 2+2, 1+1" is halve, halve, halve.
// Each term is rounded into the accumulator by its precision:
//   contraction        none: t = P(a b) then s = A(s + t); fma: s = A(a b + s) with one rounding (binary32
//                      accumulators only: std::fma on floats).
//   product_precision  binary32: P = fl32; binary64: P = fl64 (exact for binary32 factors).
//   accumulator        binary32: A = fl32 of the exact sum; binary64: A = fl64; bf16: A = the binary32 sum rounded
//                      to nearest even in bfloat16 (a kernel that stores its accumulator in bf16).
//   A binary32 accumulator adding a binary64 term computes fl32(fl64(s + t)), as C's `float += double` does.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fusediff {

enum class SumShape { sequential, pairwise, blocked };
enum class LaneFoldStep { halve, adjacent };
enum class BlockedTail { after_fold, into_lane0, after_fold_mul4 };
enum class Contraction { none, fma };
enum class ProductPrecision { binary32, binary64 };
enum class AccumulatorPrecision { binary32, binary64, bf16 };

struct SummationOrder {
  SumShape shape = SumShape::sequential;
  int leaf = 1;                         // pairwise only: largest block summed sequentially (>= 1)
  int lanes = 1;                        // blocked only: a power of two, 1..64
  int unroll = 1;                       // blocked only: accumulator vectors, a power of two, 1..64
  std::vector<LaneFoldStep> lane_fold;  // blocked only: log2(lanes) steps, or empty for sequential across lanes
  BlockedTail tail = BlockedTail::after_fold;  // blocked only
  Contraction contraction = Contraction::none;
  ProductPrecision product_precision = ProductPrecision::binary32;
  AccumulatorPrecision accumulator = AccumulatorPrecision::binary32;
  friend bool operator==(const SummationOrder&, const SummationOrder&) = default;
};

std::string_view to_string(SumShape s);              // "sequential", "pairwise", "blocked"
std::string_view to_string(LaneFoldStep s);          // "halve", "adjacent"
std::string_view to_string(BlockedTail t);           // "tail_after_fold", "tail_into_lane0", "tail_after_fold_mul4"
std::string_view to_string(Contraction c);           // "nofma", "fma"
std::string_view to_string(ProductPrecision p);      // "prod32", "prod64"
std::string_view to_string(AccumulatorPrecision a);  // "acc32", "acc64", "accbf16"
SumShape parse_sum_shape(std::string_view text, std::string_view field);
LaneFoldStep parse_lane_fold_step(std::string_view text, std::string_view field);
BlockedTail parse_blocked_tail(std::string_view text, std::string_view field);
Contraction parse_contraction(std::string_view text, std::string_view field);
ProductPrecision parse_product_precision(std::string_view text, std::string_view field);
AccumulatorPrecision parse_accumulator_precision(std::string_view text, std::string_view field);

// Canonical text, every field in this order, ':'-separated (a key: equal orders print equally):
//   "sequential:nofma:prod32:acc32"
//   "pairwise(8):nofma:prod32:acc32"
//   "blocked(8x8,halve.adjacent.adjacent,tail_after_fold):fma:prod32:acc32"   (lanes x unroll, lane fold or
//   "sequential", tail)
// parse takes exactly this text; InputError names `field` and the part that is wrong.
std::string format_summation_order(const SummationOrder& order);
SummationOrder parse_summation_order(std::string_view text, std::string_view field);
// Throws InputError naming `field` when the order's numbers break the rules above.
void validate(const SummationOrder& order, std::string_view field);

// ---- Mean and variance of a row x_0..x_{n-1} (binary32), and how LayerNorm's output is formed from them.
//   two_pass        mu = fl32(S(x) / n); var = fl32(S((x - mu)^2) / n), where each centred value d_j = fl32(x_j - mu)
//                   (its sign does not matter: d^2 is the same) and S sums by its declared order.
//   mean_in_double  mu = fl32(fl64(S64(x)) / n) with S64 the sequential binary64 sum (the mean's order is
//                   ignored); var as two_pass.
//   welford         sequential binary32 Welford: for k = 1..n: d = x - m; m = m + d / k; M2 = M2 + d (x - m)
//                   (every operation one binary32 rounding, no contraction); mu = m; var = fl32(M2 / n).
//   one_pass        mu = fl32(S(x) / n); var = fl32(fl32(S(x^2) / n) - fl32(mu mu)) (E[x^2] - mu^2: the named,
//                   wrong-but-used variant; a large mean cancels catastrophically).
// Output, with r the inverse standard deviation:
//   centered_times_inv  s = fl32(sqrt(fl32(var + eps))); r = fl32(1 / s); y = F(fl32(fl32(x - mu) r), gamma, beta)
//                       (oneDNN's f32 jit: vsqrtps, vdivps, then vfmadd213ps);
//   scale_times_inv     r as above; y = G(fl32(fl32(gamma r) fl32(x - mu)), beta)   (oneDNN's C++ kernel);
//   scale_over_sqrt     s as above; y = G(fl32(fl32(gamma / s) fl32(x - mu)), beta) (oneDNN's lnorm_ref);
//   centered_over_sqrt  s as above; y = F(fl32(fl32(x - mu) / s), gamma, beta) (ONNX Runtime 1.30's short rows,
//                       measured: docs/summation-orders.md);
//   where F(p, g, b) = fma(p, g, b) under output_contraction fma, else fl32(fl32(p g) + b); G(p, b) = fl32(p + b).
enum class NormalizationStats { two_pass, mean_in_double, welford, one_pass };
enum class NormalizationOutput { centered_times_inv, scale_times_inv, scale_over_sqrt, centered_over_sqrt };

struct NormalizationOrder {
  NormalizationStats stats = NormalizationStats::two_pass;
  SummationOrder mean;      // two_pass, one_pass: the sum of x
  SummationOrder variance;  // two_pass, mean_in_double: the sum of d^2; one_pass: the sum of x^2
  NormalizationOutput output = NormalizationOutput::centered_times_inv;
  Contraction output_contraction = Contraction::none;
  // A kernel chosen by row length (ONNX Runtime's LayerNormalization: MLAS from 8 features, a scalar Welford loop
  // below): a row shorter than short_below runs short_rows[0] (itself without a selector); 0 and empty: the order
  // above at every length.
  int32_t short_below = 0;
  std::vector<NormalizationOrder> short_rows;
  friend bool operator==(const NormalizationOrder&, const NormalizationOrder&) = default;
};
// The order a row of n values runs (NormalizationOrder::short_below).
const NormalizationOrder& order_for_length(const NormalizationOrder& order, size_t n);

std::string_view to_string(NormalizationStats s);   // "two_pass", "mean_in_double", "welford", "one_pass"
std::string_view to_string(NormalizationOutput o);  // "centered_times_inv", "scale_times_inv", "scale_over_sqrt",
                                                    // "centered_over_sqrt"
NormalizationStats parse_normalization_stats(std::string_view text, std::string_view field);
NormalizationOutput parse_normalization_output(std::string_view text, std::string_view field);

// "STATS;mean=ORDER;var=ORDER;OUTPUT:fma|nofma", e.g.
// "two_pass;mean=sequential:nofma:prod32:acc32;var=sequential:nofma:prod32:acc32;scale_over_sqrt:nofma"; with a
// length selector, "LONG|belowN=SHORT" (each an order's text, N in 2..4096). parse throws InputError naming the
// field for bad text, and validates the sums (validate below) and the selector.
std::string format_normalization_order(const NormalizationOrder& order);
NormalizationOrder parse_normalization_order(std::string_view text, std::string_view field);

// Declarations known by name (docs/summation-orders.md gives each one's source lines or measurement):
//   onednn_jit  oneDNN 2.6.3 simple_layer_normalization, x64 jit kernel (AVX2 and above);
//   onednn_jit_bf16  the same kernel on bf16 src/dst (avx512_core and above): 16-lane zmm sums of the bf16 values
//               (exact in binary32); y is rounded to bf16 after, by a FloatBoundary the ISA decides (not part of
//               the order: docs/summation-orders.md);
//   onednn_cpp  its C++ kernel (below AVX2; Debian's libdnnl2 build, measured);
//   onednn_ref  oneDNN's lnorm_ref;
//   ort         ONNX Runtime 1.30 LayerNormalization, rows of 8 or more: MLAS's AVX2 kernel (read, and proven
//               bit for bit by tests/bisect/ort_layer_norm_order_test.cpp);
//   ort_short   ORT 1.30's scalar Welford path: LayerNormalization's rows shorter than 8, and every row of
//               SkipLayerNormalization (measured, the same test);
//   ort_layernorm  ORT 1.30's LayerNormalization operator at every row length: ort from 8 features, ort_short
//               below (the same test proves it bit for bit, rows of 1 to 4,096);
//   sequential  two_pass, every sum left to right in binary32, centered_times_inv without fma (a plain C loop).
struct NamedNormalizationOrder {
  std::string_view name;
  std::string_view text;  // format_normalization_order's text
};
std::span<const NamedNormalizationOrder> named_normalization_orders();
// The named order `name`; InputError naming `field` and the names otherwise.
NormalizationOrder named_normalization_order(std::string_view name, std::string_view field);
// A declared order as one field of a replay string (whose fields are ';'-separated): its name where it has one, else
// its text with each ';' written '/'. parse takes either (and the plain text).
std::string format_declared_normalization_order(const NormalizationOrder& order);
NormalizationOrder parse_declared_normalization_order(std::string_view text, std::string_view field);

// ---- The rounding-error bound of a float LayerNorm output (reference::LayerNormPairBounds; docs/summation-orders.md,
// "r: the float layernorm against its bound"). It holds for every two-pass evaluation: the mean summed in any order
// (binary32 or binary64 accumulators and products, with or without fma, or mean_in_double), the variance as the sum
// of fl32(x - mu)^2 in any such order, s = fl32(sqrt(fl32(var + eps))) and any of the four output forms with or
// without fma. Empty when `order` is of that class, else why not: welford (a running mean rounded at every step),
// one_pass (E[x^2] - mu^2, another formula) or a bf16 accumulator (8-bit partial sums).
std::string normalization_bound_uncovered(const NormalizationOrder& order);

// ---- Exact rows (benchdnn-style; model/pattern.h LnRegime::exact_rows, docs/summation-orders.md).
// A row x of n binary32 values is exact when (reference::LayerNormStatsAreExactInEveryOrder checks it):
//   (1) every partial sum of x, of any subset, is exact in binary32 (all x_j integer multiples of one 2^e with
//       sum |x_j| <= 2^(24 + e)), so S = sum x_j is one exact value in every order, tree and accumulator of binary32
//       or binary64 (never bf16, which rounds to 8 bits);
//   (2) mu = fl32(S / n): two_pass with a binary32 accumulator divides S by n in binary32; with a binary64 one, and
//       mean_in_double, it stores fl32(fl64(S / n)), the same value, since S and n are binary32 values and double
//       rounding is innocuous for a quotient when 53 >= 2 * 24 + 2 (S. A. Figueroa, "When is double rounding
//       innocuous?", SIGNUM Newsletter 30(3), 1995). So every d_j = fl32(x_j - mu) is the same;
//   (3) every d_j^2 is exact in binary32, and every partial sum of the d_j^2 is exact as in (1): S(d^2) is one
//       exact value with or without fma, with binary32 or binary64 products and binary32 or binary64 accumulators,
//       and var = fl32(S(d^2) / n) one rounding of it (innocuous twice, as in (2)).
// On such a row, what is left of LayerNorm is s = fl32(sqrt(fl32(var + eps))), r = fl32(1 / s) and the output formula:
// one fixed sequence of roundings given the output form and its contraction. So two orders give the same mean,
// variance and outputs on every exact row unless this returns why not (empty: they do):
//   - they are not identical and either's stats are welford (m += d / k rounds at every step: the condition does
//     not cover it) or one_pass (it sums x^2, which (1)-(3) do not make exact, and forms var = fl32(E[x^2]) -
//     fl32(mu^2): another formula);
//   - a sum the stats read (two_pass: mean and variance; mean_in_double: variance) has a bf16 accumulator;
//   - their output forms or output contractions differ.
std::string exact_rows_difference(const NormalizationOrder& a, const NormalizationOrder& b);

}  // namespace fusediff
