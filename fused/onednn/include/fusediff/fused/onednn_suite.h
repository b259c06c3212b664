#pragma once
// oneDNN's share of the suite (`fusediff run`): the cases OneDnnBackend's ActivationSuiteCases and PatternSuiteCases
// give (model/backend.h), on oneDNN's own conventions (model/suite_options.h).
#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/suite_options.h"

namespace fusediff::fused::onednn {

// oneDNN's three comparisons for one activation, on the same draws of the graph's convention (int8 intermediate,
// requant f32_zero_point_first, output half_to_even with the zero point before rounding, unless the options say
// otherwise): the fused kernel against its own f32-intermediate convention (verdict), the fused kernel against the
// graph's quantize-then-activate convention (cross_convention, no verdict), the unfused oneDNN graph against the
// graph's convention (verdict). `--fused onednn` runs all three, `--fused onednn_unfused` the last only. The
// default suite includes them when oneDNN's backend is registered (OneDnnBackend's ActivationSuiteCases).
// With SuiteOptions::float_conv set: that float convolution's cases only (OneDnnFloatConvComparisons).
std::vector<CaseSpec> OneDnnComparisons(const SuiteOptions& options, ActivationKind kind);
// oneDNN's float convolutions (docs/onednn.md, "bf16 convolutions") on the oneDNN convention of `kind`: those of
// SuiteOptions::float_conv with a bf16 and an f32 destination (f32 only under fpmath_bf16), or in the default suite
// (relu, no backend or boundary option) the three exact-sum paths; each fused and unfused.
std::vector<CaseSpec> OneDnnFloatConvComparisons(const SuiteOptions& options, ActivationKind kind);

// oneDNN's post-op chains for one pattern and activation, on the same draws of the graph (oneDNN's conventions as
// above; an add's graph rule onednn_unfused, its residual and sum at the built-in pattern cases' quantization):
//   conv2d+add+act:     PATTERN.ACT.sum.int8.onednn.conv (conv + sum + eltwise against its own f32 convention,
//                       f32 add rule onednn_sum), PATTERN.ACT.sum.int8.onednn.cross.conv (against the graph: no
//                       verdict), the same two for .binary. (conv + binary_add + eltwise, onednn_binary), and
//                       PATTERN.ACT.int8.onednn_unfused.conv (conv, dequantize, binary add, quantize s, dequantize,
//                       eltwise, quantize: against the graph);
//   fc+act:             PATTERN.ACT.int8.onednn.conv, .onednn.cross.conv, .onednn_unfused.conv (inner product);
//   conv2d+act+maxpool: PATTERN.ACT.2x2s2.int8.onednn.conv (unsupported: 2.6 has no conv+pool fusion) and
//                       .onednn_unfused.conv (conv, dequantize, eltwise, quantize, max pooling);
//   fc+layernorm+act, fc+add+layernorm (the latter for relu only: no activation):
//                       PATTERN.ACT.int8.onednn.conv (layer_normalization_forward with use_scale | use_shift, declared
//                       in the order oneDNN dispatches to: DispatchedLayerNorm), .ort.int8.onednn.cross.conv (the same
//                       path declared in ONNX Runtime's order: no verdict), .int8.onednn_unfused.conv (the norm
//                       without scale or shift, binary mul and add), .int8.onednn.bf16.conv (the graph with bf16
//                       boundaries around the norm, run by the bf16 primitive: DispatchedLayerNormBf16; unsupported
//                       below avx512_core), every boundary kept as codes.
// `--fused onednn_unfused` keeps the unfused ones only. Empty for any other pattern.
std::vector<CaseSpec> OneDnnPatternComparisons(const SuiteOptions& options, const std::string& pattern, ActivationKind kind);
// The patterns and activations of oneDNN's chains in the default suite (and with --pattern): a few representatives.
struct OneDnnPatternVariant {
  std::string pattern;
  std::vector<ActivationKind> activations;
};
std::vector<OneDnnPatternVariant> OneDnnPatternVariants();

// oneDNN's chains of the representative patterns and activations (OneDnnPatternVariants), filtered by
// --activation and `only`; the default run (no `only`, no --fused) keeps one layer norm case of six
// (fc+add+layernorm.relu.int8.onednn.conv: the HTML report's size limit).
std::vector<CaseSpec> OneDnnPatternCases(const SuiteOptions& options, const std::optional<std::string>& only);

}  // namespace fusediff::fused::onednn
