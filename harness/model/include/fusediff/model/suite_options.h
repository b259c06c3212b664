#pragma once
// The options that reshape the embedded suite (`fusediff run`), and the conventions a suite case takes from them:
// shared by the driver's suite (driver/suite.h) and the backends that build their own cases (model/backend.h).
#include <cstdint>
#include <optional>
#include <string>

#include "fusediff/model/activation.h"
#include "fusediff/model/batchnorm.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/quant.h"

namespace fusediff {

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
  // backend's path (model/backend.h): its own suite (ActivationSuiteCases, PatternSuiteCases), or SuiteCases of the
  // built-in suite for a backend without one.
  std::optional<TableKind> table_kind;
  std::optional<std::string> backend;
  std::string backend_arg;  // what --fused's word says beyond the path (CaseSpec::backend_arg)
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
  // A library's float-intermediate measurement (oneDNN's): the graph stores v in this format (f16 / bf16) where the
  // library keeps binary32 (unset: in the default suite one case per format, gelu_erf only).
  std::optional<FloatBoundary> boundary_float;
  // A library's float convolutions (oneDNN's, "bf16 convolutions" in its doc): only this one, with a bf16 and an f32
  // destination, fused and unfused, per activation (unset: in the default suite the three exact-sum paths, relu).
  std::optional<FloatConv> float_conv;
};

// The default quantization of an activation's intermediate / output for a type: 8-bit types cover the domain
// asymmetrically (scale = span/255, zero point placed accordingly); int16 is symmetric with zero point 0.
QuantParams DefaultIntermediate(ActivationKind kind, const QuantType& type);
QuantParams DefaultOutput(ActivationKind kind, const QuantType& type);
// A quantization of [lo, hi] on an 8-bit type (asymmetric, as DefaultIntermediate's).
QuantParams Int8Range(double lo, double hi);

// What a suite convention takes from its toolchain where the options leave it open.
struct ToolchainDefaults {
  RequantVariant requant;
  RoundingMode intermediate_rounding;  // for a requant variant without a fixed rounding
  RoundingMode output_rounding;
  ZeroPointOrder zero_point_order;
};
// gemmlowp/TFLite's default build, for the built-in tables.
inline constexpr ToolchainDefaults kTfliteDefaults{RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                                   RoundingMode::half_away_from_zero, ZeroPointOrder::after_rounding};

// The graph convention of one suite case: the activation's default quantization for `intermediate_type` (and
// the output type that goes with it), every field overridden by the options where given. Validated.
Convention SuiteConvention(const SuiteOptions& options, ActivationKind kind, const QuantType& intermediate_type,
                           const ToolchainDefaults& defaults);

}  // namespace fusediff
