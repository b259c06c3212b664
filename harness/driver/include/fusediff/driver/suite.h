#pragma once
// The embedded default suite and the options that reshape it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <memory>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/table.h"

namespace fusediff::driver {

struct SuiteOptions {
  std::optional<ActivationKind> activation;  // only this activation
  std::optional<float> alpha;                // alpha for leaky_relu / elu
  std::optional<std::string> intermediate;   // "TYPE[:SCALE:ZP]"
  std::optional<std::string> output;         // "TYPE[:SCALE:ZP]"
  std::optional<RequantVariant> requant;
  std::optional<RoundingMode> intermediate_rounding;
  std::optional<RoundingMode> output_rounding;
  std::optional<ZeroPointOrder> zero_point_order;
  // --fused: at most one is set. table_kind: the built-in path with this table; backend: another registered
  // backend's path (model/backend.h): oneDNN's comparisons, or any other backend's SuiteCases of the built-in suite.
  std::optional<TableKind> table_kind;
  std::optional<std::string> backend;
  uint64_t samples = 20000;  // per conv case
  Mutant mutant = Mutant::none;
  RegionMix mix;             // what conv draws aim at (bulk only = uniform)
  bool exhaustive = false;   // add a thresholds case per convention (the sweep is always there)
  std::optional<std::string> pattern;  // only this pattern (model/pattern.h names); default: every pattern
  // conv2d+batchnorm+act (docs/batchnorm.md): only these fold settings / regime (unset: the pattern's grid).
  std::optional<FoldPrecision> fold_precision;
  std::optional<FoldFormula> fold_formula;
  std::optional<WeightQuant> weight_quant;
  std::optional<BnRegime> bn_regime;
  // oneDNN's float-intermediate measurement: the graph stores v in this format (f16 / bf16) where oneDNN keeps
  // binary32 (unset: in the default suite one case per format, gelu_erf only).
  std::optional<FloatBoundary> boundary_float;
  // oneDNN's float convolutions (docs/onednn.md, "bf16 convolutions"): only this one, with a bf16 and an f32
  // destination, fused and unfused, per activation (unset: in the default suite the three exact-sum paths, relu).
  std::optional<FloatConv> float_conv;
};

// Every activation x {int8 intermediate with lut, int16 intermediate with lut_interp} x {conv, sweep}, reshaped
// by the options. Default quantization per activation covers its interesting input domain and output range
// (docs/default-suite.md). Throws InputError on bad option values.
std::vector<CaseSpec> BuildSuite(const SuiteOptions& options);

// The cases of the patterns beyond conv2d+act (docs/patterns.md), on 8-bit lut tables under TFLite's conventions:
//   conv2d+add+act:     relu, gelu_erf, sigmoid x every add rule, kept (a verdict); and the add folded into the
//                       accumulator (add_in_accumulator, tflite rule: cross-convention);
//   conv2d+act+maxpool: relu, sigmoid (monotone: pooling first is legal, a verdict) and gelu_erf, silu, hard_swish
//                       (pooling first is illegal: cross-convention), kept and pooled first;
//   conv2d+act+avgpool: relu, gelu_erf, sigmoid x every pool rule kept; pooled first (tflite; cross-convention);
//   fc+act:             relu, gelu_erf, sigmoid x both multiplier rules;
//   fc+fc:              both multiplier rules, kept and folded (cross-convention);
//   fc+act+fc:          relu, kept and folded across the activation (illegal: cross-convention);
//   conv2d+batchnorm+act (BatchNormCases): in the default suite one declared fold per fold precision (gelu_erf,
//                       pytorch formula, per channel, tiny variances: a verdict); alone, the grid below.
// `only`: one pattern's cases. The activation option filters them.
// conv2d+batchnorm+act, folded: relu, gelu_erf, sigmoid x fold precision {exact, f32, f16, bf16} x weight
// quantization {per_tensor, per_channel} x regime {benign, tiny_variance, large_gamma, large_mean} x the three
// references (declared_fold: a verdict; exact_fold and graph: cross-convention), pytorch formula; every option given
// narrows its axis. `default_suite`: the four declared-fold cases of the default run only.
std::vector<CaseSpec> BatchNormCases(const SuiteOptions& options, bool default_suite);
std::vector<CaseSpec> PatternCases(const SuiteOptions& options, std::optional<std::string> only);

// oneDNN's three comparisons for one activation, on the same draws of the graph's convention (int8 intermediate,
// requant f32_zero_point_first, output half_to_even with the zero point before rounding, unless the options say
// otherwise): the fused kernel against its own f32-intermediate convention (verdict), the fused kernel against the
// graph's quantize-then-activate convention (cross_convention, no verdict), the unfused oneDNN graph against the
// graph's convention (verdict). `--fused onednn` runs all three, `--fused onednn_unfused` the last only. The
// default suite includes them when oneDNN's backend is registered (OneDnnBuiltIn).
// With SuiteOptions::float_conv set: that float convolution's cases only (OneDnnFloatConvComparisons).
std::vector<CaseSpec> OneDnnComparisons(const SuiteOptions& options, ActivationKind kind);
// oneDNN's float convolutions (docs/onednn.md, "bf16 convolutions") on the oneDNN convention of `kind`: those of
// SuiteOptions::float_conv with a bf16 and an f32 destination (f32 only under fpmath_bf16), or in the default suite
// (relu, no backend or boundary option) the three exact-sum paths; each fused and unfused.
std::vector<CaseSpec> OneDnnFloatConvComparisons(const SuiteOptions& options, ActivationKind kind);
bool OneDnnBuiltIn();

// oneDNN's post-op chains for one pattern and activation, on the same draws of the graph (oneDNN's conventions as
// above; an add's graph rule onednn_unfused, its residual and sum at the built-in pattern cases' quantization):
//   conv2d+add+act:     PATTERN.ACT.sum.int8.onednn.conv (conv + sum + eltwise against its own f32 convention,
//                       f32 add rule onednn_sum), PATTERN.ACT.sum.int8.onednn.cross.conv (against the graph: no
//                       verdict), the same two for .binary. (conv + binary_add + eltwise, onednn_binary), and
//                       PATTERN.ACT.int8.onednn_unfused.conv (conv, dequantize, binary add, quantize s, dequantize,
//                       eltwise, quantize: against the graph);
//   fc+act:             PATTERN.ACT.int8.onednn.conv, .onednn.cross.conv, .onednn_unfused.conv (inner product);
//   conv2d+act+maxpool: PATTERN.ACT.2x2s2.int8.onednn.conv (unsupported: 2.6 has no conv+pool fusion) and
//                       .onednn_unfused.conv (conv, dequantize, eltwise, quantize, max pooling).
// `--fused onednn_unfused` keeps the unfused ones only. Empty for any other pattern.
std::vector<CaseSpec> OneDnnPatternComparisons(const SuiteOptions& options, const std::string& pattern, ActivationKind kind);
// The patterns and activations of oneDNN's chains in the default suite (and with --pattern): a few representatives.
struct OneDnnPatternVariant {
  std::string pattern;
  std::vector<ActivationKind> activations;
};
std::vector<OneDnnPatternVariant> OneDnnPatternVariants();

// The cases `fusediff gate` runs on a table file: an exhaustive sweep over every intermediate code (the table
// against the exact reference, code by code) and `conv_samples` targeted conv samples through the whole fused
// op under the descriptor's requantization (random Conv2D cases aimed to cover the intermediate range and
// saturate at both ends). Both carry the table, named by `table_file` and the SHA-256 of its bytes (their replay
// strings read it back). conv_transpose2d descriptors are exercised through Conv2D: the table sits after
// requantization, which is the same for both ops.
std::vector<CaseSpec> BuildGateCases(const FusedOpDescriptor& descriptor, std::shared_ptr<const TableData> table,
                                     uint64_t conv_samples, const std::string& table_file = {},
                                     const std::string& table_sha256 = {});

// The fusion rule a descriptor breaks (model/pattern.h fusion_illegality, with its facts), the table read as the
// fused path applies it (for the pool rule); empty when the fusion is legal.
std::string GateFusionIllegality(const FusedOpDescriptor& descriptor, const std::shared_ptr<const TableData>& table);

// The default quantization of an activation's intermediate / output for a type: 8-bit types cover the domain
// asymmetrically (scale = span/255, zero point placed accordingly); int16 is symmetric with zero point 0.
QuantParams DefaultIntermediate(ActivationKind kind, const QuantType& type);
QuantParams DefaultOutput(ActivationKind kind, const QuantType& type);

}  // namespace fusediff::driver
