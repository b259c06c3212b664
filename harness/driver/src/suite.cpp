#include "fusediff/driver/suite.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/mutants.h"
#include "fusediff/fused/fused_kernel.h"
#include "fusediff/reference/reference.h"

namespace fusediff::driver {

namespace {
QuantParams QuantizeRange(double lo, double hi, const QuantType& type) {
  QuantParams q;
  q.type = type;
  if (type.scalar == ScalarType::int16) {
    // Symmetric, zero point 0 (TFLite's int16 convention, required by lut_interp).
    q.scale = static_cast<float>(std::max(std::abs(lo), std::abs(hi)) / 32768.0);
    q.zero_point = 0;
    return q;
  }
  q.scale = static_cast<float>((hi - lo) / (double(type.qmax()) - type.qmin()));
  const double zp = std::round(type.qmin() - lo / q.scale);
  q.zero_point = static_cast<int32_t>(std::clamp(zp, double(type.qmin()), double(type.qmax())));
  return q;
}

// "TYPE" -> defaults for that type; "TYPE:SCALE:ZP" -> exactly that.
QuantParams ResolveQuant(const std::string& text, const std::string& field, const QuantParams& for_default_type,
                         bool is_output, ActivationKind kind) {
  QuantParams parsed = parse_quant_params(text, field, for_default_type);
  if (text.find(':') == std::string::npos) {
    return is_output ? DefaultOutput(kind, parsed.type) : DefaultIntermediate(kind, parsed.type);
  }
  return parsed;
}

// What a suite convention takes from its toolchain where the options leave it open.
struct ToolchainDefaults {
  RequantVariant requant;
  RoundingMode intermediate_rounding;  // for a requant variant without a fixed rounding
  RoundingMode output_rounding;
  ZeroPointOrder zero_point_order;
};
// gemmlowp/TFLite's default build, for the built-in tables.
constexpr ToolchainDefaults kTfliteDefaults{RequantVariant::double_rounding, RoundingMode::half_away_from_zero,
                                            RoundingMode::half_away_from_zero, ZeroPointOrder::after_rounding};
// oneDNN's own arithmetic: its int8 convolution requantizes in float with the zero point inside the rounding, and
// rounds half to even with the destination zero point added first.
constexpr ToolchainDefaults kOneDnnDefaults{RequantVariant::f32_zero_point_first, RoundingMode::half_to_even,
                                            RoundingMode::half_to_even, ZeroPointOrder::before_rounding};

// The graph convention of one suite case: the activation's default quantization for `intermediate_type` (and
// the output type that goes with it), every field overridden by the options where given. Validated.
Convention SuiteConvention(const SuiteOptions& options, ActivationKind kind, const QuantType& intermediate_type,
                           const ToolchainDefaults& defaults) {
  Convention c;
  c.activation = make_activation(kind);
  if (options.alpha && takes_alpha(kind)) c.activation.alpha = *options.alpha;
  c.requant = options.requant.value_or(defaults.requant);
  c.intermediate.q = options.intermediate
                         ? ResolveQuant(*options.intermediate, "--intermediate", QuantParams{}, false, kind)
                         : DefaultIntermediate(kind, intermediate_type);
  c.intermediate.rounding = options.intermediate_rounding.value_or(
      fixed_rounding(c.requant).value_or(defaults.intermediate_rounding));
  // 8-bit intermediates write non-negative activations to uint8 (as deployed graphs do), the rest to int8.
  QuantType output_type = intermediate_type.bits() == 16 ? QuantType{ScalarType::int16, false}
                                                         : QuantType{ScalarType::int8, false};
  if (intermediate_type.bits() == 8 && default_domain(kind).output_lo >= 0) {
    output_type = QuantType{ScalarType::uint8, false};
  }
  c.output.q = options.output ? ResolveQuant(*options.output, "--output", QuantParams{}, true, kind)
                              : DefaultOutput(kind, output_type);
  c.output.rounding = options.output_rounding.value_or(defaults.output_rounding);
  c.output.zero_point_order = options.zero_point_order.value_or(defaults.zero_point_order);
  validate(c);
  return c;
}
// oneDNN's chains of the representative patterns and activations (OneDnnPatternVariants), filtered by
// --activation and `only`.
std::vector<CaseSpec> OneDnnPatternCases(const SuiteOptions& options, const std::optional<std::string>& only);
}  // namespace

QuantParams DefaultIntermediate(ActivationKind kind, const QuantType& type) {
  const ActivationDomain d = default_domain(kind);
  return QuantizeRange(d.input_lo, d.input_hi, type);
}

QuantParams DefaultOutput(ActivationKind kind, const QuantType& type) {
  const ActivationDomain d = default_domain(kind);
  return QuantizeRange(d.output_lo, d.output_hi, type);
}

std::vector<CaseSpec> BuildSuite(const SuiteOptions& options) {
  if (options.samples == 0) throw InputError("--samples: must be at least 1");
  std::vector<ActivationKind> kinds;
  if (options.activation) {
    kinds.push_back(*options.activation);
  } else {
    kinds.assign(std::begin(kAllActivations), std::end(kAllActivations));
  }
  if (options.alpha && options.activation && !takes_alpha(*options.activation)) {
    throw InputError("--alpha: " + std::string(to_string(*options.activation)) + " takes no alpha");
  }

  // Each variant pairs an intermediate type with the table kind built for it.
  struct Variant {
    QuantType intermediate;
    TableKind table_kind;
  };
  std::vector<Variant> variants;
  const bool fused_given = options.table_kind || options.backend;
  const bool onednn_only = options.backend && *options.backend != Backend::builtin;
  if (onednn_only) {
    // The oneDNN comparisons are built below, per activation.
  } else if (options.intermediate) {
    const QuantParams q = parse_quant_params(*options.intermediate, "--intermediate", QuantParams{});
    variants.push_back({q.type, q.type.bits() == 16 ? TableKind::lut_interp : TableKind::lut});
  } else if (options.table_kind) {
    variants.push_back({QuantType{*options.table_kind == TableKind::lut ? ScalarType::int8 : ScalarType::int16, false},
                        *options.table_kind});
  } else {
    variants.push_back({QuantType{ScalarType::int8, false}, TableKind::lut});
    variants.push_back({QuantType{ScalarType::int16, false}, TableKind::lut_interp});
  }
  if (options.table_kind) {
    for (Variant& v : variants) v.table_kind = *options.table_kind;
  }

  std::vector<CaseSpec> suite;
  if (options.pattern) parse_pattern_name(*options.pattern, "--pattern");  // a clear error for an unknown name
  if (options.pattern && *options.pattern != "conv2d+act") {
    if (onednn_only) {
      // Every activation (or the one asked for) through oneDNN's chains of this pattern.
      for (ActivationKind kind : kinds) {
        for (CaseSpec& spec : OneDnnPatternComparisons(options, *options.pattern, kind)) suite.push_back(std::move(spec));
      }
      if (suite.empty()) throw InputError("--pattern " + *options.pattern + ": oneDNN has no path for this pattern here");
      return suite;
    }
    if (options.table_kind && *options.table_kind != TableKind::lut) {
      throw InputError("--pattern " + *options.pattern + ": the built-in pattern paths use 8-bit lut tables (--fused lut)");
    }
    suite = PatternCases(options, options.pattern);
    if (!fused_given && OneDnnBuiltIn()) {
      for (CaseSpec& spec : OneDnnPatternCases(options, options.pattern)) suite.push_back(std::move(spec));
    }
    return suite;
  }
  // A conv2d+act mutant runs on the conv2d+act cases, a pattern mutant on the pattern cases.
  const bool pattern_mutant = is_pattern_mutant(options.mutant);
  for (ActivationKind kind : pattern_mutant ? std::vector<ActivationKind>{} : kinds) {
    for (const Variant& variant : variants) {
      const Convention c = SuiteConvention(options, kind, variant.intermediate, kTfliteDefaults);
      std::vector<SampleSource> sources = {SampleSource::conv, SampleSource::sweep};
      if (options.exhaustive) sources.push_back(SampleSource::thresholds);
      for (SampleSource source : sources) {
        CaseSpec spec;
        spec.mix = options.mix;
        spec.source = source;
        spec.convention = c;
        spec.table_kind = variant.table_kind;
        spec.mutant = options.mutant;
        spec.samples = options.samples;
        spec.name = std::string(to_string(kind)) + "." + to_string(c.intermediate.q.type) + "." +
                    std::string(fused_path_name(spec)) + "." + std::string(to_string(source));
        suite.push_back(std::move(spec));
      }
    }
    if (onednn_only || (!fused_given && !options.intermediate && OneDnnBuiltIn())) {
      for (CaseSpec& spec : OneDnnComparisons(options, kind)) suite.push_back(std::move(spec));
      // The default suite's float convolutions (relu); --float-conv's are OneDnnComparisons' own.
      if (!options.float_conv) {
        for (CaseSpec& spec : OneDnnFloatConvComparisons(options, kind)) suite.push_back(std::move(spec));
      }
    }
  }
  // Every other pattern, where the options leave the built-in 8-bit conventions in place.
  if (!options.pattern && !fused_given && !options.intermediate && !options.output &&
      (options.mutant == Mutant::none || pattern_mutant)) {
    for (CaseSpec& spec : PatternCases(options, std::nullopt)) suite.push_back(std::move(spec));
    if (options.mutant == Mutant::none && OneDnnBuiltIn()) {
      for (CaseSpec& spec : OneDnnPatternCases(options, std::nullopt)) suite.push_back(std::move(spec));
    }
  }
  return suite;
}

namespace {
// A quantization of [lo, hi] on an 8-bit type (asymmetric, as DefaultIntermediate's).
QuantParams Int8Range(double lo, double hi) { return QuantizeRange(lo, hi, QuantType{ScalarType::int8, false}); }

// The activation's table values (reference, exact) over its input boundary: what pool legality reads.
std::vector<int32_t> ReferenceTableValues(const Convention& act) {
  const reference::ActivationTable table(act);
  std::vector<int32_t> y(table.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = table.at(act.intermediate.q.type.qmin() + static_cast<int32_t>(i)).y;
  return y;
}
}  // namespace

std::vector<CaseSpec> PatternCases(const SuiteOptions& options, std::optional<std::string> only) {
  struct Variant {
    std::string pattern;
    std::vector<ActivationKind> activations;
  };
  using K = ActivationKind;
  std::vector<Variant> variants = {
      {"conv2d+add+act", {K::relu, K::gelu_erf, K::sigmoid}},
      {"conv2d+act+maxpool", {K::relu, K::sigmoid, K::gelu_erf, K::silu, K::hard_swish}},
      {"conv2d+act+avgpool", {K::relu, K::gelu_erf, K::sigmoid}},
      {"fc+act", {K::relu, K::gelu_erf, K::sigmoid}},
      {"fc+fc", {K::relu}},
      {"fc+act+fc", {K::relu}},
  };
  std::vector<CaseSpec> cases;
  if (only && *only == "conv2d+batchnorm+act") return BatchNormCases(options, false);
  // A registered pattern (model/stage_module.h register_pattern) runs only when asked for: kept whole, its stages
  // at their parsed defaults.
  const auto listed = [&variants](const std::string& name) {
    return std::any_of(variants.begin(), variants.end(), [&name](const Variant& v) { return v.pattern == name; });
  };
  if (only && *only != "conv2d+act" && !listed(*only)) variants = {{*only, {K::relu, K::gelu_erf, K::sigmoid}}};
  for (const Variant& v : variants) {
    if (only && *only != v.pattern) continue;
    for (ActivationKind kind : v.activations) {
      if (options.activation && *options.activation != kind) continue;
      const Convention c = SuiteConvention(options, kind, QuantType{ScalarType::int8, false}, kTfliteDefaults);
      const Pattern base = parse_pattern_name(v.pattern, "--pattern");
      const std::string act = base.producer == Producer::fully_connected && !has_stage(base, StageKind::activation)
                                  ? std::string("linear")
                                  : std::string(to_string(kind));
      auto add_case = [&](Pattern pattern, Fusion fusion, const std::string& variant) {
        CaseSpec spec;
        spec.mix = options.mix;
        spec.source = SampleSource::conv;
        spec.convention = c;
        spec.pattern = std::move(pattern);
        spec.fusion = fusion;
        spec.table_kind = TableKind::lut;
        spec.mutant = options.mutant;
        spec.samples = options.samples;
        spec.comparison = Comparison::same_convention;
        if (fusion != Fusion::keep_all) {
          // A fusion that keeps the graph's meaning (max pool first under a non-decreasing table) gets a verdict;
          // the others are measurements across conventions.
          const std::vector<int32_t> table = has_stage(spec.pattern, StageKind::activation)
                                                 ? ReferenceTableValues(activation_convention(spec.pattern, c))
                                                 : std::vector<int32_t>{};
          const bool legal = fusion_illegality(spec.pattern, fusion, c, table).empty();
          const bool same_meaning = legal && fusion == Fusion::pool_first && has_stage(spec.pattern, StageKind::max_pool);
          spec.comparison = same_meaning ? Comparison::same_convention : Comparison::cross_convention;
        }
        spec.name = v.pattern + "." + act + (variant.empty() ? "" : "." + variant) + "." + std::string(to_string(fusion));
        cases.push_back(std::move(spec));
      };
      const ActivationDomain d = default_domain(kind);
      if (v.pattern == "conv2d+add+act") {
        for (AddRule rule : {AddRule::tflite, AddRule::onnx_spec, AddRule::ort_mlas, AddRule::ort_mlas_fma, AddRule::ort_raw}) {
          Pattern p = base;
          Stage& add = p.stages[0];
          add.add_rule = rule;
          // The residual spans half the activation's input domain around 0; the sum spans all of it.
          const double half = 0.5 * (d.input_hi - d.input_lo);
          add.residual = Int8Range(-0.5 * half, 0.5 * half);
          add.out = c.intermediate.q;
          add_case(p, Fusion::keep_all, std::string(to_string(rule)));
          if (rule == AddRule::tflite) add_case(p, Fusion::add_in_accumulator, std::string(to_string(rule)));
        }
      } else if (v.pattern == "conv2d+act+maxpool") {
        Pattern p = base;
        p.stages[1].window = PoolWindow{2, 2, 0};
        add_case(p, Fusion::keep_all, "2x2s2");
        add_case(p, Fusion::pool_first, "2x2s2");
      } else if (v.pattern == "conv2d+act+avgpool") {
        for (AvgPoolRule rule : {AvgPoolRule::tflite, AvgPoolRule::ort_qlinear, AvgPoolRule::ort_global}) {
          Pattern p = base;
          Stage& pool = p.stages[1];
          pool.window = PoolWindow{3, 1, 1};
          pool.pool_rule = rule;
          pool.out = c.output.q;
          add_case(p, Fusion::keep_all, std::string(to_string(rule)));
          if (rule == AvgPoolRule::tflite) add_case(p, Fusion::pool_first, std::string(to_string(rule)));
        }
      } else if (v.pattern == "fc+act") {
        for (MultiplierRule rule : {MultiplierRule::double_product, MultiplierRule::float_product}) {
          Pattern p = base;
          p.multiplier = rule;
          add_case(p, Fusion::keep_all, std::string(to_string(rule)));
        }
      } else if (v.pattern == "fc+fc" || v.pattern == "fc+act+fc") {
        for (MultiplierRule rule : {MultiplierRule::double_product, MultiplierRule::float_product}) {
          if (v.pattern == "fc+act+fc" && rule == MultiplierRule::float_product) continue;
          Pattern p = base;
          p.multiplier = rule;
          Stage& fc = p.stages.back();
          fc.out = Int8Range(-8.0, 8.0);
          fc.fc_outputs = 4;
          add_case(p, Fusion::keep_all, std::string(to_string(rule)));
          add_case(p, Fusion::fold, std::string(to_string(rule)));
        }
      } else {
        add_case(base, Fusion::keep_all, "");
      }
    }
  }
  if (!only) {
    for (CaseSpec& spec : BatchNormCases(options, true)) cases.push_back(std::move(spec));
  }
  return cases;
}

std::vector<CaseSpec> BatchNormCases(const SuiteOptions& options, bool default_suite) {
  using K = ActivationKind;
  std::vector<CaseSpec> cases;
  const std::vector<K> activations = default_suite ? std::vector<K>{K::gelu_erf} : std::vector<K>{K::relu, K::gelu_erf, K::sigmoid};
  const auto axis = [](auto given, auto all) {
    using T = typename decltype(all)::value_type;
    return given ? std::vector<T>{*given} : all;
  };
  const std::vector<FoldPrecision> precisions = axis(
      options.fold_precision, std::vector<FoldPrecision>{FoldPrecision::exact, FoldPrecision::f32, FoldPrecision::f16, FoldPrecision::bf16});
  const std::vector<WeightQuant> quants = axis(
      options.weight_quant, default_suite ? std::vector<WeightQuant>{WeightQuant::per_channel}
                                          : std::vector<WeightQuant>{WeightQuant::per_tensor, WeightQuant::per_channel});
  const std::vector<BnRegime> regimes = axis(
      options.bn_regime, default_suite ? std::vector<BnRegime>{BnRegime::tiny_variance}
                                       : std::vector<BnRegime>{BnRegime::benign, BnRegime::tiny_variance,
                                                               BnRegime::large_gamma, BnRegime::large_mean});
  const std::vector<BnReference> references =
      default_suite ? std::vector<BnReference>{BnReference::declared_fold}
                    : std::vector<BnReference>{BnReference::declared_fold, BnReference::exact_fold, BnReference::graph};
  for (K kind : activations) {
    if (options.activation && *options.activation != kind) continue;
    const Convention c = SuiteConvention(options, kind, QuantType{ScalarType::int8, false}, kTfliteDefaults);
    for (FoldPrecision precision : precisions) {
      for (WeightQuant quant : quants) {
        for (BnRegime regime : regimes) {
          for (BnReference reference : references) {
            CaseSpec spec;
            spec.mix = options.mix;
            spec.source = SampleSource::conv;
            spec.convention = c;
            spec.pattern = parse_pattern_name("conv2d+batchnorm+act", "--pattern");
            Stage& bn = spec.pattern.stages[0];
            bn.bn_fold.precision = precision;
            bn.bn_fold.formula = options.fold_formula.value_or(FoldFormula::pytorch);
            bn.bn_fold.weight_quant = quant;
            // A binary16 step beyond 65504 saturates (declared), so that large-gamma draws fold rather than refuse.
            bn.bn_fold.overflow = FloatOverflow::saturate;
            bn.bn_regime = regime;
            bn.bn_reference = reference;
            spec.fusion = Fusion::fold;
            spec.table_kind = TableKind::lut;
            spec.mutant = options.mutant;
            spec.samples = options.samples;
            spec.comparison = reference == BnReference::declared_fold ? Comparison::same_convention : Comparison::cross_convention;
            spec.name = "conv2d+batchnorm+act." + std::string(to_string(kind)) + "." + std::string(to_string(precision)) +
                        "." + std::string(to_string(bn.bn_fold.formula)) + "." + std::string(to_string(quant)) + "." +
                        std::string(to_string(regime)) + "." + std::string(to_string(reference)) + ".fold";
            cases.push_back(std::move(spec));
          }
        }
      }
    }
  }
  return cases;
}

namespace {
// A conv-source case whose intermediate is the binary32 value (oneDNN's float boundaries and convolutions): u
// rounds half to even once, as oneDNN's f32 does.
CaseSpec F32IntermediateCase(const SuiteOptions& options, const Convention& c) {
  CaseSpec spec;
  spec.mix = options.mix;
  spec.source = SampleSource::conv;
  spec.convention = c;
  spec.convention.intermediate.kind = IntermediateKind::f32;
  spec.convention.requant = RequantVariant::f32_half_even;
  spec.convention.intermediate.rounding = RoundingMode::half_to_even;
  return spec;
}
}  // namespace

std::vector<CaseSpec> OneDnnComparisons(const SuiteOptions& options, ActivationKind kind) {
  const Convention c = SuiteConvention(options, kind, QuantType{ScalarType::int8, false}, kOneDnnDefaults);
  struct OneDnnComparison {
    Backend backend;
    Comparison comparison;
    const char* label;
  };
  if (options.float_conv) return OneDnnFloatConvComparisons(options, kind);  // --float-conv: those cases only
  const OneDnnComparison comparisons[] = {{Backend::onednn, Comparison::same_convention, "onednn"},
                                     {Backend::onednn, Comparison::cross_convention, "onednn.cross"},
                                     {Backend::onednn_unfused, Comparison::same_convention, "onednn_unfused"}};
  std::vector<CaseSpec> specs;
  for (const OneDnnComparison& k : comparisons) {
    if (options.backend == Backend::onednn_unfused && k.backend != Backend::onednn_unfused) continue;
    CaseSpec spec;
    spec.mix = options.mix;
    spec.source = SampleSource::conv;
    spec.convention = c;
    spec.backend = k.backend;
    spec.comparison = k.comparison;
    spec.mutant = options.mutant;
    spec.samples = options.samples;
    spec.name = std::string(to_string(kind)) + "." + to_string(c.intermediate.q.type) + "." + k.label + ".conv";
    specs.push_back(std::move(spec));
  }
  // The float intermediate: the graph computes v = fl32(fl32(acc) fl32(sx sw)) and stores it as binary16 / bfloat16
  // (PyTorch's conversions) before the activation; oneDNN's post-op reads the binary32 value (cross-convention).
  std::vector<FloatBoundary> stores;
  if (options.boundary_float) stores.push_back(*options.boundary_float);
  else if (kind == ActivationKind::gelu_erf && !options.backend) {  // the default suite only
    stores = {pytorch_float_boundary(FloatFormat::f16), pytorch_float_boundary(FloatFormat::bf16)};
  }
  for (const FloatBoundary& stored : stores) {
    CaseSpec spec = F32IntermediateCase(options, c);
    spec.convention.intermediate.stored = stored;
    validate(spec.convention);
    spec.backend = Backend::onednn;
    spec.comparison = Comparison::cross_convention;
    spec.mutant = options.mutant;
    spec.samples = options.samples;
    spec.name = std::string(to_string(kind)) + "." + std::string(to_string(stored.format)) + "_intermediate.onednn.cross.conv";
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<CaseSpec> OneDnnFloatConvComparisons(const SuiteOptions& options, ActivationKind kind) {
  const Convention c = SuiteConvention(options, kind, QuantType{ScalarType::int8, false}, kOneDnnDefaults);
  // (float conv, destination format): the default suite's three exact-sum paths (relu: exact in binary32, so the
  // tolerance is 0), or --float-conv's convolution with both destinations.
  std::vector<std::pair<FloatConv, FloatFormat>> paths;
  if (options.float_conv) {
    paths = {{*options.float_conv, FloatFormat::bf16}, {*options.float_conv, FloatFormat::f32}};
    if (options.float_conv->fpmath_bf16) paths.erase(paths.begin());  // an f32 convolution writes f32
  } else if (kind == ActivationKind::relu && !options.backend && !options.boundary_float) {
    const FloatConv bf16{true, FloatFormat::bf16, true, false};
    const FloatConv fpmath{true, FloatFormat::f32, true, true};
    paths = {{bf16, FloatFormat::bf16}, {bf16, FloatFormat::f32}, {fpmath, FloatFormat::f32}};
  }
  std::vector<CaseSpec> specs;
  for (const auto& [float_conv, dst] : paths) {
    // The graph: the float conv, u stored in the destination's type (what its unfused oneDNN graph writes), the
    // activation, y stored as the destination. The fused kernel keeps u in binary32 (declared_convention).
    CaseSpec spec = F32IntermediateCase(options, c);
    spec.convention.float_conv = float_conv;
    spec.convention.intermediate.stored = dst == FloatFormat::bf16 ? onednn_float_boundary(dst) : FloatBoundary{};
    spec.convention.output.float_value = dst == FloatFormat::bf16 ? onednn_float_boundary(dst) : FloatBoundary{};
    validate(spec.convention);
    spec.mutant = options.mutant;
    spec.samples = options.samples;
    std::string label = "float_conv_" + format_float_conv(float_conv) + ".y_" + std::string(to_string(dst));
    std::replace(label.begin(), label.end(), ':', '_');
    for (Backend backend : {Backend::onednn, Backend::onednn_unfused}) {
      if (options.backend == Backend::onednn_unfused && backend != Backend::onednn_unfused) continue;
      CaseSpec s = spec;
      s.backend = backend;
      s.name = std::string(to_string(kind)) + "." + label + "." + std::string(fused_path_name(s)) + ".conv";
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

std::vector<CaseSpec> BuildGateCases(const FusedOpDescriptor& descriptor, std::shared_ptr<const TableData> table,
                                     uint64_t conv_samples, const std::string& table_file,
                                     const std::string& table_sha256) {
  validate(descriptor.convention);
  const std::string stem = "gate." + std::string(to_string(descriptor.convention.activation.kind)) + "." +
                           to_string(descriptor.convention.intermediate.q.type) + "." +
                           std::string(to_string(descriptor.table_kind));
  std::vector<CaseSpec> cases;
  for (SampleSource source : {SampleSource::sweep, SampleSource::conv}) {
    CaseSpec spec;
    spec.name = stem + "." + std::string(to_string(source));
    spec.source = source;
    spec.convention = descriptor.convention;
    spec.table_kind = descriptor.table_kind;
    spec.samples = conv_samples;
    set_external_table(spec, table, table_file, table_sha256);
    if (source == SampleSource::conv && conv_samples == 0) continue;
    cases.push_back(std::move(spec));
  }
  return cases;
}

std::string GateFusionIllegality(const FusedOpDescriptor& descriptor, const std::shared_ptr<const TableData>& table) {
  std::vector<int32_t> applied;
  if (has_stage(descriptor.pattern, StageKind::max_pool) || has_stage(descriptor.pattern, StageKind::avg_pool)) {
    std::string why;
    const std::unique_ptr<fused::FusedKernel> kernel =
        fused::FusedKernel::Create(descriptor.convention, descriptor.table_kind, Mutant::none, &why, table);
    if (!kernel) throw InputError("gate: the table cannot serve its descriptor: " + why);
    const QuantType& type = descriptor.convention.intermediate.q.type;
    for (int32_t u = type.qmin(); u <= type.qmax(); ++u) applied.push_back(kernel->ApplyTable(u));
  }
  return fusion_illegality(descriptor.pattern, descriptor.fusion, descriptor.convention, applied, descriptor.facts);
}

std::vector<OneDnnPatternVariant> OneDnnPatternVariants() {
  using K = ActivationKind;
  // Few, because every oneDNN draw builds its primitives (docs/onednn.md measures the default run's time):
  // a piecewise-linear and a smooth activation for the add chains, a smooth one for the others (gelu_erf is also
  // non-monotone, where pooling order would matter).
  return {{"conv2d+add+act", {K::relu, K::gelu_erf}}, {"fc+act", {K::gelu_erf}}, {"conv2d+act+maxpool", {K::gelu_erf}}};
}

namespace {
std::vector<CaseSpec> OneDnnPatternCases(const SuiteOptions& options, const std::optional<std::string>& only) {
  std::vector<CaseSpec> cases;
  for (const OneDnnPatternVariant& v : OneDnnPatternVariants()) {
    if (only && *only != v.pattern) continue;
    for (ActivationKind kind : v.activations) {
      if (options.activation && *options.activation != kind) continue;
      for (CaseSpec& spec : OneDnnPatternComparisons(options, v.pattern, kind)) cases.push_back(std::move(spec));
    }
  }
  return cases;
}
}  // namespace

std::vector<CaseSpec> OneDnnPatternComparisons(const SuiteOptions& options, const std::string& pattern, ActivationKind kind) {
  const Convention c = SuiteConvention(options, kind, QuantType{ScalarType::int8, false}, kOneDnnDefaults);
  Pattern base = parse_pattern_name(pattern, "--pattern");
  std::string variant;
  if (pattern == "conv2d+add+act") {
    // As the built-in pattern cases: the residual spans half the activation's input domain around 0, the sum all
    // of it (at u's quantization); the graph adds as oneDNN's own unfused graph does (onednn_unfused: binary32
    // reorders and binary add), so that its one rounding of s is declared exactly.
    const ActivationDomain d = default_domain(kind);
    const double half = 0.5 * (d.input_hi - d.input_lo);
    Stage& add = base.stages[0];
    add.add_rule = AddRule::onednn_unfused;
    add.residual = Int8Range(-0.5 * half, 0.5 * half);
    add.out = c.intermediate.q;
  } else if (pattern == "fc+act") {
    base.multiplier = MultiplierRule::double_product;
  } else if (pattern == "conv2d+act+maxpool") {
    base.stages[1].window = PoolWindow{2, 2, 0};
    variant = "2x2s2.";
  } else {
    return {};
  }
  struct ChainComparison {
    Backend backend;
    Comparison comparison;
    AddRule f32_add;
    std::string label;
  };
  std::vector<ChainComparison> comparisons;
  if (pattern == "conv2d+add+act") {
    comparisons = {{Backend::onednn, Comparison::same_convention, AddRule::onednn_sum, "sum.int8.onednn"},
                   {Backend::onednn, Comparison::cross_convention, AddRule::onednn_sum, "sum.int8.onednn.cross"},
                   {Backend::onednn, Comparison::same_convention, AddRule::onednn_binary, "binary.int8.onednn"},
                   {Backend::onednn, Comparison::cross_convention, AddRule::onednn_binary, "binary.int8.onednn.cross"},
                   {Backend::onednn_unfused, Comparison::same_convention, AddRule::onednn_sum, "int8.onednn_unfused"}};
  } else if (pattern == "fc+act") {
    comparisons = {{Backend::onednn, Comparison::same_convention, AddRule::onednn_sum, "int8.onednn"},
                   {Backend::onednn, Comparison::cross_convention, AddRule::onednn_sum, "int8.onednn.cross"},
                   {Backend::onednn_unfused, Comparison::same_convention, AddRule::onednn_sum, "int8.onednn_unfused"}};
  } else {
    // The fused case stays in the suite to say why it cannot run (2.6 has no conv+pool fusion).
    comparisons = {{Backend::onednn, Comparison::same_convention, AddRule::onednn_sum, "int8.onednn"},
                   {Backend::onednn_unfused, Comparison::same_convention, AddRule::onednn_sum, "int8.onednn_unfused"}};
  }
  std::vector<CaseSpec> specs;
  for (const ChainComparison& k : comparisons) {
    if (options.backend == Backend::onednn_unfused && k.backend != Backend::onednn_unfused) continue;
    CaseSpec spec;
    spec.mix = options.mix;
    spec.source = SampleSource::conv;
    spec.convention = c;
    spec.pattern = base;
    for (Stage& stage : spec.pattern.stages) {
      if (stage.kind == StageKind::add) stage.f32_add_rule = k.f32_add;
    }
    spec.backend = k.backend;
    spec.comparison = k.comparison;
    spec.mutant = options.mutant;
    spec.samples = options.samples;
    spec.name = pattern + "." + std::string(to_string(kind)) + "." + variant + k.label + ".conv";
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace fusediff::driver
