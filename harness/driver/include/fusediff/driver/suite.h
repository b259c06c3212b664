#pragma once
// The embedded default suite and the options that reshape it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <memory>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/suite_options.h"
#include "fusediff/model/table.h"

namespace fusediff::driver {

// The options (model/suite_options.h), here under the driver's names.
using fusediff::DefaultIntermediate;
using fusediff::DefaultOutput;
using fusediff::SuiteOptions;

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


}  // namespace fusediff::driver
