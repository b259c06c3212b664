#include "fusediff/driver/suite.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/mutants.h"
#include "fusediff/reference/reference.h"

namespace fusediff::driver {

namespace {
// --fused naming another registered backend's path: its own cases of the built-in suite's graphs
// (SuiteCases, model/backend.h).
std::vector<CaseSpec> BackendSuite(const SuiteOptions& options) {
  CaseSpec path;
  path.backend = *options.backend;
  path.backend_arg = options.backend_arg;
  const Backend& backend = BackendOf(path, "--fused");
  SuiteOptions graphs = options;
  graphs.backend.reset();
  graphs.backend_arg.clear();
  std::vector<CaseSpec> suite;
  for (const CaseSpec& graph_case : BuildSuite(graphs)) {
    for (CaseSpec& spec : backend.SuiteCases(graph_case, path)) suite.push_back(std::move(spec));
  }
  if (suite.empty()) throw InputError("--fused " + fused_path_name(path) + ": its backend takes none of these cases");
  return suite;
}

// The registered backends with a suite of their own (model/backend.h has_own_suite), in registration order: the
// default suite's share of each follows the built-in cases it sits beside.
std::vector<const Backend*> SuiteBackends() {
  std::vector<const Backend*> out;
  for (const Backend* backend : RegisteredBackends()) {
    if (backend->has_own_suite()) out.push_back(backend);
  }
  return out;
}

// Each variant pairs an intermediate type with the table kind built for it.
struct Variant {
  QuantType intermediate;
  TableKind table_kind;
};

// The built-in conv2d+act variants: --intermediate's type, --fused lut|lut_interp's own, or int8 lut and int16
// lut_interp; --fused names the table kind of each.
std::vector<Variant> BuiltInVariants(const SuiteOptions& options) {
  std::vector<Variant> variants;
  if (options.intermediate) {
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
  return variants;
}

// --activation (with its --alpha checked), or every activation.
std::vector<ActivationKind> SuiteActivations(const SuiteOptions& options) {
  if (options.alpha && options.activation && !takes_alpha(*options.activation)) {
    throw InputError("--alpha: " + std::string(to_string(*options.activation)) + " takes no alpha");
  }
  if (options.activation) return {*options.activation};
  return std::vector<ActivationKind>(std::begin(kAllActivations), std::end(kAllActivations));
}

void Append(std::vector<CaseSpec>& suite, std::vector<CaseSpec> cases) {
  for (CaseSpec& spec : cases) suite.push_back(std::move(spec));
}

// --pattern P other than conv2d+act: the selected backend's cases of P, or the built-in ones and the share of each
// backend with a suite of its own.
std::vector<CaseSpec> NamedPatternSuite(const SuiteOptions& options, const Backend* selected,
                                        const std::vector<const Backend*>& others) {
  const std::string& pattern = *options.pattern;
  if (selected) {
    std::vector<CaseSpec> suite = selected->PatternSuiteCases(options, pattern, /*selected=*/true);
    if (suite.empty()) {
      throw InputError("--pattern " + pattern + ": backend " + std::string(selected->name()) +
                       " has no path for this pattern here");
    }
    return suite;
  }
  if (options.table_kind && *options.table_kind != TableKind::lut) {
    throw InputError("--pattern " + pattern + ": the built-in pattern paths use 8-bit lut tables (--fused lut)");
  }
  std::vector<CaseSpec> suite = PatternCases(options, pattern);
  for (const Backend* backend : others) Append(suite, backend->PatternSuiteCases(options, pattern, false));
  return suite;
}

// One activation's built-in conv2d+act cases: per variant, the conv and sweep sources (and thresholds with
// --exhaustive).
void AddActivationCases(const SuiteOptions& options, ActivationKind kind, const std::vector<Variant>& variants,
                        std::vector<CaseSpec>& suite) {
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
}

}  // namespace

std::vector<CaseSpec> BuildSuite(const SuiteOptions& options) {
  if (options.samples == 0) throw InputError("--samples: must be at least 1");
  const std::vector<ActivationKind> kinds = SuiteActivations(options);
  const bool fused_given = options.table_kind || options.backend;
  // --fused naming another backend's path: its own suite where it has one, else its share of the built-in one.
  const Backend* selected = nullptr;
  if (options.backend) {
    CaseSpec path;
    path.backend = *options.backend;
    selected = &BackendOf(path, "--fused");
    if (!selected->has_own_suite()) return BackendSuite(options);
  }
  const std::vector<const Backend*> others = fused_given ? std::vector<const Backend*>{} : SuiteBackends();
  // A selected backend builds its own cases, per activation.
  const std::vector<Variant> variants = selected ? std::vector<Variant>{} : BuiltInVariants(options);
  if (options.pattern) parse_pattern_name(*options.pattern, "--pattern");  // a clear error for an unknown name
  if (options.pattern && *options.pattern != "conv2d+act") return NamedPatternSuite(options, selected, others);

  std::vector<CaseSpec> suite;
  // A conv2d+act mutant runs on the conv2d+act cases, a pattern mutant on the pattern cases.
  const bool pattern_mutant = is_pattern_mutant(options.mutant);
  for (ActivationKind kind : pattern_mutant ? std::vector<ActivationKind>{} : kinds) {
    AddActivationCases(options, kind, variants, suite);
    if (selected) Append(suite, selected->ActivationSuiteCases(options, kind, true));
    for (const Backend* backend : options.intermediate ? std::vector<const Backend*>{} : others) {
      Append(suite, backend->ActivationSuiteCases(options, kind, false));
    }
  }
  // Every other pattern, where the options leave the built-in 8-bit conventions in place.
  if (!options.pattern && !fused_given && !options.intermediate && !options.output &&
      (options.mutant == Mutant::none || pattern_mutant)) {
    Append(suite, PatternCases(options, std::nullopt));
    for (const Backend* backend : options.mutant == Mutant::none ? others : std::vector<const Backend*>{}) {
      Append(suite, backend->PatternSuiteCases(options, std::nullopt, false));
    }
  }
  return suite;
}

namespace {

// The activation's table values (reference, exact) over its input boundary: what pool legality reads.
std::vector<int32_t> ReferenceTableValues(const Convention& act) {
  const reference::ActivationTable table(act);
  std::vector<int32_t> y(table.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = table.at(act.intermediate.q.type.qmin() + static_cast<int32_t>(i)).y;
  return y;
}

// The layernorm's exact rows (--pattern only; model/pattern.h LnRegime::exact_rows): the norm's input boundary at
// the power of two nearest its scale (u, and for fc+add+layernorm the add's sum s = u + real 0 at u's boundary);
// ORT's order declared and oneDNN's jit order run: equal on exact rows, so judged at tolerance 0, also on rows of
// 4,096 features; oneDNN's C++ kernel's order, whose output is formed otherwise, stays a measurement.
template <typename AddCase>
void AddExactRowsCases(const Pattern& p, bool skip, const Convention& c, AddCase add_case_in) {
  Convention exact = c;
  int e = 0;
  std::frexp(c.intermediate.q.scale, &e);  // scale in [2^(e-1), 2^e)
  exact.intermediate.q.scale = std::ldexp(1.0f, c.intermediate.q.scale < 0.75f * std::ldexp(1.0f, e) ? e - 1 : e);
  Pattern rows = p;
  Stage& ln = rows.stages[skip ? 1 : 0];
  if (skip) rows.stages[0].out = exact.intermediate.q;
  ln.ln_regime = LnRegime::exact_rows;
  for (const char* order : {"onednn_jit", "onednn_cpp"}) {
    ln.ln_fused_order = named_normalization_order(order, "suite");
    add_case_in(exact, rows, Fusion::norm_other_order, std::string("ort.") + order + ".exact_rows");
  }
  ln.ln_fused_order = named_normalization_order("onednn_jit", "suite");
  ln.ln_features = 4096;
  add_case_in(exact, rows, Fusion::norm_other_order, "ort.onednn_jit.exact_rows.4096");
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
      // One activation each keeps the default run's HTML report under its size limit (reports.output_sizes);
      // `--pattern` adds relu, gelu_erf and sigmoid.
      {"conv2d+act+batchnorm", {K::gelu_erf}},
      {"conv2d+mul+add+act", {K::relu}},
      {"fc+layernorm+act", {K::gelu_erf}},
      {"fc+add+layernorm", {K::relu}},  // no activation: one case set
  };
  std::vector<CaseSpec> cases;
  if (only && *only == "conv2d+batchnorm+act") return BatchNormCases(options, false);
  // A registered pattern (model/stage_module.h register_pattern) runs only when asked for: kept whole, its stages
  // at their parsed defaults.
  const auto listed = [&variants](const std::string& name) {
    return std::any_of(variants.begin(), variants.end(), [&name](const Variant& v) { return v.pattern == name; });
  };
  if (only && *only != "conv2d+act" && !listed(*only)) variants = {{*only, {K::relu, K::gelu_erf, K::sigmoid}}};
  for (Variant& v : variants) {
    if (only && *only == v.pattern &&
        (v.pattern == "conv2d+act+batchnorm" || v.pattern == "conv2d+mul+add+act" || v.pattern == "fc+layernorm+act")) {
      v.activations = {K::relu, K::gelu_erf, K::sigmoid};
    }
  }
  for (const Variant& v : variants) {
    if (only && *only != v.pattern) continue;
    for (ActivationKind kind : v.activations) {
      if (options.activation && *options.activation != kind) continue;
      const Convention c = SuiteConvention(options, kind, QuantType{ScalarType::int8, false}, kTfliteDefaults);
      const Pattern base = parse_pattern_name(v.pattern, "--pattern");
      const std::string act = base.producer == Producer::fully_connected && !has_stage(base, StageKind::activation)
                                  ? std::string("linear")
                                  : std::string(to_string(kind));
      auto add_case_in = [&](const Convention& convention, Pattern pattern, Fusion fusion, const std::string& variant) {
        CaseSpec spec;
        spec.mix = options.mix;
        spec.source = SampleSource::conv;
        spec.convention = convention;
        spec.pattern = std::move(pattern);
        spec.fusion = fusion;
        spec.table_kind = TableKind::lut;
        spec.mutant = options.mutant;
        spec.samples = options.samples;
        spec.comparison = Comparison::same_convention;
        if (fusion != Fusion::keep_all) {
          // A legal fusion that keeps the graph's meaning (model/pattern.h fusion_keeps_meaning: a max pool first
          // under a non-decreasing table, another summation order on exact rows) gets a verdict; the others are
          // measurements across conventions.
          const std::vector<int32_t> table = has_stage(spec.pattern, StageKind::activation)
                                                 ? ReferenceTableValues(activation_convention(spec.pattern, convention))
                                                 : std::vector<int32_t>{};
          const bool same_meaning = fusion_illegality(spec.pattern, fusion, convention, table).empty() &&
                                    !fusion_keeps_meaning(spec.pattern, fusion, convention, table).empty();
          spec.comparison = same_meaning ? Comparison::same_convention : Comparison::cross_convention;
        }
        spec.name =
            v.pattern + "." + act + (variant.empty() ? "" : "." + variant) + "." + std::string(to_string(fusion));
        cases.push_back(std::move(spec));
      };
      auto add_case = [&](Pattern pattern, Fusion fusion, const std::string& variant) {
        add_case_in(c, std::move(pattern), fusion, variant);
      };
      const ActivationDomain d = default_domain(kind);
      if (v.pattern == "conv2d+add+act") {
        for (AddRule rule :
             {AddRule::tflite, AddRule::onnx_spec, AddRule::ort_mlas, AddRule::ort_mlas_fma, AddRule::ort_raw}) {
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
      } else if (v.pattern == "conv2d+act+batchnorm") {
        Pattern p = base;
        p.stages[1].out = Int8Range(-4.0, 4.0);
        add_case(p, Fusion::keep_all, "");
        add_case(p, Fusion::fold, "");  // illegal (bn-fold-before-activation): measured
      } else if (v.pattern == "conv2d+mul+add+act") {
        // u times b in [-2, 2]; the product's scale fl32(su sb) 2^7 makes TFLite's multiplier exactly 2^-7, so
        // (u - zu)(b - zb) an odd multiple of 64 is an exact tie of its rounding. The sum as conv2d+add+act's.
        const double half = 0.5 * (d.input_hi - d.input_lo);
        for (auto [rule, operand] : {std::pair{MulRule::tflite, MulOperand::tensor},
                                     std::pair{MulRule::onnx_spec, MulOperand::tensor},
                                     std::pair{MulRule::tflite, MulOperand::per_channel}}) {
          Pattern p = base;
          Stage& mul = p.stages[0];
          Stage& add = p.stages[1];
          mul.mul_rule = rule;
          mul.mul_operand = operand;
          mul.mul_input = Int8Range(-2.0, 2.0);
          mul.out = c.intermediate.q;
          mul.out.scale = std::ldexp(c.intermediate.q.scale * mul.mul_input.scale, 7);
          add.add_rule = rule == MulRule::tflite ? AddRule::tflite : AddRule::onnx_spec;
          add.residual = Int8Range(-0.5 * half, 0.5 * half);
          add.out = c.intermediate.q;
          std::string variant(to_string(rule));
          if (operand != MulOperand::tensor) variant.append(".").append(to_string(operand));
          add_case(p, Fusion::keep_all, variant);
          if (rule == MulRule::tflite && operand == MulOperand::tensor) add_case(p, Fusion::mul_add_affine, variant);
        }
      } else if (v.pattern == "fc+layernorm+act" || v.pattern == "fc+add+layernorm") {
        // Declared orders: ONNX Runtime's (rows of 8 or more) and oneDNN's jit kernel, each kept whole (exact); the
        // engines' fusions and the other order measured. The norm's output spans [-4, 4] (the activation reads it
        // through its own input boundary where there is one); SkipLayerNorm's sum by the ONNX rule. The default run
        // keeps ORT's order kept whole, fc+layernorm+act's other order and its long rows (the HTML report's size
        // limit, reports.output_sizes: a measurement with many differing samples lists its worst, ~22 kB each);
        // `--pattern` runs them all.
        const bool skip = v.pattern == "fc+add+layernorm";
        const bool all = only.has_value();
        Pattern p = base;
        Stage& ln = p.stages[skip ? 1 : 0];
        ln.out = skip ? Int8Range(-4.0, 4.0) : c.intermediate.q;
        if (skip) {
          Stage& add = p.stages[0];
          const double half = 0.5 * (d.input_hi - d.input_lo);
          add.add_rule = AddRule::onnx_spec;
          add.residual = Int8Range(-0.5 * half, 0.5 * half);
          add.out = c.intermediate.q;
        }
        for (const char* order : {"ort", "onednn_jit"}) {
          ln.ln_order = named_normalization_order(order, "suite");
          if (all || ln.ln_order == Stage{}.ln_order) add_case(p, Fusion::keep_all, order);
        }
        ln.ln_order = named_normalization_order("ort", "suite");
        ln.ln_fused_order = named_normalization_order("onednn_jit", "suite");
        if (all) add_case(p, skip ? Fusion::skip_add_f32 : Fusion::norm_f32_into_act, "ort");
        if (all || !skip) add_case(p, Fusion::norm_other_order, "ort.onednn_jit");
        if (!skip) {  // long rows: one case
          Pattern long_rows = p;
          long_rows.stages[0].ln_features = 4096;
          add_case(long_rows, Fusion::keep_all, "ort.4096");
        }
        if (all) AddExactRowsCases(p, skip, c, add_case_in);
        if (all && skip) {  // the float layernorm: y is the output (binary32 ulps), r against the two-pass bound
          Pattern fp = p;
          Stage& fln = fp.stages[1];
          fln.ln_float_out = true;
          for (const char* order : {"ort", "onednn_jit"}) {
            fln.ln_order = named_normalization_order(order, "suite");
            add_case(fp, Fusion::keep_all, std::string("float.") + order);
          }
          fln.ln_order = named_normalization_order("ort", "suite");
          for (const char* other : {"onednn_jit", "onednn_cpp", "sequential", "ort_short"}) {
            fln.ln_fused_order = named_normalization_order(other, "suite");
            add_case(fp, Fusion::norm_other_order, std::string("float.ort.") + other);
          }
        }
        if (all) {  // TFLite's integer layer norm (--pattern only): the norm's output int8 at 2^-5 (TFLite's shift
                    // + 12 becomes + 5), kept whole under its own arithmetic, and run for ORT's f32 graph (measured)
          Pattern integer = p;
          Stage& iln = integer.stages[skip ? 1 : 0];
          iln.out = QuantParams{QuantType{ScalarType::int8, false}, 0.03125f, 0};
          iln.ln_arithmetic = LayerNormArithmetic::tflite_int16;
          add_case(integer, Fusion::keep_all, "tflite_int16");
          iln.ln_arithmetic = LayerNormArithmetic::f32;
          iln.ln_fused_arithmetic = LayerNormArithmetic::tflite_int16;
          add_case(integer, Fusion::norm_other_arithmetic, "ort.tflite_int16");
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
  const std::vector<K> activations =
      default_suite ? std::vector<K>{K::gelu_erf} : std::vector<K>{K::relu, K::gelu_erf, K::sigmoid};
  const auto axis = [](auto given, auto all) {
    using T = typename decltype(all)::value_type;
    return given ? std::vector<T>{*given} : all;
  };
  const std::vector<FoldPrecision> precisions = axis(
      options.fold_precision,
      std::vector<FoldPrecision>{FoldPrecision::exact, FoldPrecision::f32, FoldPrecision::f16, FoldPrecision::bf16});
  const std::vector<WeightQuant> quants =
      axis(options.weight_quant, default_suite
                                     ? std::vector<WeightQuant>{WeightQuant::per_channel}
                                     : std::vector<WeightQuant>{WeightQuant::per_tensor, WeightQuant::per_channel});
  const std::vector<BnRegime> regimes =
      axis(options.bn_regime, default_suite ? std::vector<BnRegime>{BnRegime::tiny_variance}
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
            spec.comparison =
                reference == BnReference::declared_fold ? Comparison::same_convention : Comparison::cross_convention;
            spec.name = "conv2d+batchnorm+act." + std::string(to_string(kind)) + "." +
                        std::string(to_string(precision)) + "." + std::string(to_string(bn.bn_fold.formula)) + "." +
                        std::string(to_string(quant)) + "." + std::string(to_string(regime)) + "." +
                        std::string(to_string(reference)) + ".fold";
            cases.push_back(std::move(spec));
          }
        }
      }
    }
  }
  return cases;
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

}  // namespace fusediff::driver
