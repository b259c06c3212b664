#include "fusediff/model/batchnorm.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
using detail::Names;
using detail::NameOf;
using detail::ParseNamed;
using detail::Split;

constexpr Names<FloatFormat, 3> kFormats{{{"f32", FloatFormat::f32}, {"f16", FloatFormat::f16}, {"bf16", FloatFormat::bf16}}};
constexpr Names<FloatRounding, 2> kRoundings{{{"rne", FloatRounding::nearest_even}, {"rtz", FloatRounding::toward_zero}}};
constexpr Names<FloatOverflow, 2> kOverflows{{{"inf", FloatOverflow::infinity}, {"saturate", FloatOverflow::saturate}}};
constexpr Names<SubnormalInputs, 2> kSubnormals{
    {{"keep_subnormals", SubnormalInputs::keep}, {"flush_subnormals", SubnormalInputs::flush_inputs}}};
constexpr Names<NanRule, 3> kNans{{{"nan_payload", NanRule::quiet_payload},
                                   {"nan_canonical", NanRule::canonical},
                                   {"nan_canonical_positive", NanRule::canonical_positive}}};
constexpr Names<FoldPrecision, 4> kPrecisions{{{"exact", FoldPrecision::exact},
                                               {"f32", FoldPrecision::f32},
                                               {"f16", FoldPrecision::f16},
                                               {"bf16", FoldPrecision::bf16}}};
constexpr Names<FoldFormula, 3> kFormulas{
    {{"pytorch", FoldFormula::pytorch}, {"ort", FoldFormula::ort}, {"tflite", FoldFormula::tflite}}};
constexpr Names<WeightQuant, 2> kWeightQuants{
    {{"per_tensor", WeightQuant::per_tensor}, {"per_channel", WeightQuant::per_channel}}};
constexpr Names<BiasOverflow, 2> kBiasOverflows{{{"saturate", BiasOverflow::saturate}, {"reject", BiasOverflow::reject}}};
constexpr Names<BnRegime, 4> kRegimes{{{"benign", BnRegime::benign},
                                       {"tiny_variance", BnRegime::tiny_variance},
                                       {"large_gamma", BnRegime::large_gamma},
                                       {"large_mean", BnRegime::large_mean}}};
constexpr Names<BnReference, 3> kReferences{{{"declared_fold", BnReference::declared_fold},
                                             {"exact_fold", BnReference::exact_fold},
                                             {"graph", BnReference::graph}}};
constexpr Names<RoundingMode, 3> kRoundingModes{{{"half_away_from_zero", RoundingMode::half_away_from_zero},
                                                 {"half_to_even", RoundingMode::half_to_even},
                                                 {"half_up", RoundingMode::half_up}}};

}  // namespace

FloatBoundary flush_subnormals_float_boundary(FloatFormat format) {
  return FloatBoundary{format, FloatRounding::nearest_even, FloatOverflow::infinity, SubnormalInputs::flush_inputs,
                       NanRule::quiet_payload};
}

FloatBoundary pytorch_float_boundary(FloatFormat format) {
  return FloatBoundary{format, FloatRounding::nearest_even, FloatOverflow::infinity, SubnormalInputs::keep,
                       format == FloatFormat::bf16 ? NanRule::canonical_positive : NanRule::canonical};
}

std::string_view to_string(FloatFormat f) { return NameOf(f, kFormats); }
std::string_view to_string(FloatRounding r) { return NameOf(r, kRoundings); }
std::string_view to_string(FloatOverflow o) { return NameOf(o, kOverflows); }
std::string_view to_string(SubnormalInputs s) { return NameOf(s, kSubnormals); }
std::string_view to_string(NanRule n) { return NameOf(n, kNans); }
std::string_view to_string(FoldPrecision p) { return NameOf(p, kPrecisions); }
std::string_view to_string(FoldFormula f) { return NameOf(f, kFormulas); }
std::string_view to_string(WeightQuant q) { return NameOf(q, kWeightQuants); }
std::string_view to_string(BiasOverflow o) { return NameOf(o, kBiasOverflows); }
std::string_view to_string(BnRegime r) { return NameOf(r, kRegimes); }
std::string_view to_string(BnReference r) { return NameOf(r, kReferences); }

FloatFormat parse_float_format(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "float format", kFormats);
}
FoldPrecision parse_fold_precision(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "fold precision", kPrecisions);
}
FoldFormula parse_fold_formula(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "fold formula", kFormulas);
}
WeightQuant parse_weight_quant(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "weight quantization", kWeightQuants);
}
BiasOverflow parse_bias_overflow(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "bias overflow rule", kBiasOverflows);
}
BnRegime parse_bn_regime(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "BatchNorm regime", kRegimes);
}
BnReference parse_bn_reference(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "BatchNorm reference", kReferences);
}

namespace {
// Function-local: a backend may register from a static initializer.
std::vector<std::pair<std::string, FloatBoundaryPreset>>& Presets() {
  static std::vector<std::pair<std::string, FloatBoundaryPreset>> presets{{"pytorch", pytorch_float_boundary}};
  return presets;
}
FloatBoundaryPreset FindPreset(std::string_view name) {
  for (const auto& [n, preset] : Presets()) {
    if (n == name) return preset;
  }
  return nullptr;
}
}  // namespace

void RegisterFloatBoundaryPreset(std::string name, FloatBoundaryPreset preset) {
  if (FindPreset(name)) throw std::logic_error("float boundary preset '" + name + "' is registered twice");
  Presets().emplace_back(std::move(name), preset);
}

FloatBoundary parse_float_boundary(std::string_view text, std::string_view field) {
  const std::vector<std::string_view> parts = Split(text, ':');
  FloatBoundary b;
  b.format = parse_float_format(parts[0], field);
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    const std::string part_field = std::string(field) + "[" + std::to_string(i) + "]";
    if (const FloatBoundaryPreset preset = FindPreset(p)) b = preset(b.format);
    else if (p == "rne" || p == "rtz") b.rounding = ParseNamed(p, part_field, "float rounding", kRoundings);
    else if (p == "inf" || p == "saturate") b.overflow = ParseNamed(p, part_field, "float overflow", kOverflows);
    else if (p.ends_with("_subnormals")) b.subnormals = ParseNamed(p, part_field, "subnormal rule", kSubnormals);
    else if (p.starts_with("nan_")) b.nan = ParseNamed(p, part_field, "NaN rule", kNans);
    else {
      std::string expected = "rne, rtz, inf, saturate, keep_subnormals, flush_subnormals, nan_payload, nan_canonical, "
                             "nan_canonical_positive";
      for (const auto& [name, preset] : Presets()) expected += ", " + name;
      throw InputError(part_field + ": unknown float boundary rule '" + std::string(p) + "' (expected " + expected + ")");
    }
  }
  return b;
}

std::string format_float_boundary(const FloatBoundary& b) {
  return std::string(to_string(b.format)) + ":" + std::string(to_string(b.rounding)) + ":" +
         std::string(to_string(b.overflow)) + ":" + std::string(to_string(b.subnormals)) + ":" +
         std::string(to_string(b.nan));
}

FloatBoundary fold_step_boundary(const BatchNormFold& fold) {
  FloatBoundary b;
  switch (fold.precision) {
    case FoldPrecision::exact:
    case FoldPrecision::f32: return b;
    case FoldPrecision::f16: b.format = FloatFormat::f16; break;
    case FoldPrecision::bf16: b.format = FloatFormat::bf16; break;
  }
  b.rounding = fold.rounding;
  b.overflow = fold.overflow;
  return b;
}

std::string format_batchnorm_fold(const BatchNormFold& f) {
  return std::string(to_string(f.precision)) + "/" + std::string(to_string(f.formula)) + "/" +
         std::string(to_string(f.weight_quant)) + "/" + std::string(to_string(f.weight_rounding)) + "/" +
         std::string(to_string(f.bias_overflow)) + "/" + std::string(to_string(f.rounding)) + "/" +
         std::string(to_string(f.overflow));
}

BatchNormFold parse_batchnorm_fold(std::string_view text, std::string_view field) {
  const std::vector<std::string_view> parts = Split(text, '/');
  if (parts.size() != 7) {
    throw InputError(std::string(field) + ": '" + std::string(text) +
                     "' (expected PRECISION/FORMULA/WEIGHT_QUANT/ROUNDING/BIAS_OVERFLOW/rne|rtz/inf|saturate)");
  }
  BatchNormFold f;
  f.precision = parse_fold_precision(parts[0], field);
  f.formula = parse_fold_formula(parts[1], field);
  f.weight_quant = parse_weight_quant(parts[2], field);
  f.weight_rounding = ParseNamed(parts[3], field, "rounding mode", kRoundingModes);
  f.bias_overflow = parse_bias_overflow(parts[4], field);
  f.rounding = ParseNamed(parts[5], field, "float rounding", kRoundings);
  f.overflow = ParseNamed(parts[6], field, "float overflow", kOverflows);
  return f;
}

void validate(const BatchNormParams& p, size_t channels, float eps, std::string_view field) {
  const std::string f(field);
  if (!(eps > 0.0f) || !std::isfinite(eps)) throw InputError(f + ".eps: expected a finite value > 0");
  const std::pair<const char*, const std::vector<float>*> tensors[] = {
      {"gamma", &p.gamma}, {"beta", &p.beta}, {"mean", &p.mean}, {"var", &p.var}};
  for (const auto& [name, values] : tensors) {
    if (values->size() != channels) {
      throw InputError(f + "." + name + ": " + std::to_string(values->size()) + " values, the conv has " +
                       std::to_string(channels) + " output channels");
    }
    for (size_t i = 0; i < values->size(); ++i) {
      if (!std::isfinite((*values)[i])) throw InputError(f + "." + name + "[" + std::to_string(i) + "]: not finite");
    }
  }
  for (size_t i = 0; i < p.var.size(); ++i) {
    if (p.var[i] < 0.0f) throw InputError(f + ".var[" + std::to_string(i) + "]: negative");
  }
}

}  // namespace fusediff
