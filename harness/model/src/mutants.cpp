#include "fusediff/model/mutants.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"

namespace fusediff {

namespace {
constexpr MutantInfo kCatalog[] = {
    {Mutant::use_output_scale, "use-output-scale",
     "the table dequantizes u with the output scale sy in place of su (zero point unchanged)", "su != sy", false},
    {Mutant::gelu_tanh_for_erf, "gelu-tanh-for-erf",
     "the table of the tanh-form GELU 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))) serves an erf-GELU node",
     "activation gelu_erf", false},
    {Mutant::requant_truncate, "requant-truncate",
     "the final right shift of requantization drops its rounding term: double_rounding shifts SRDHM's result "
     "arithmetically (floor) instead of RoundingDivideByPOT; single_rounding omits + 2^(t-1)",
     "requant double_rounding or single_rounding", false},
    {Mutant::requant_double_for_single, "requant-double-for-single",
     "the gemmlowp double-rounding multiply (SRDHM then RoundingDivideByPOT) where single rounding is declared",
     "requant single_rounding; differs only near requantization ties", true},
    {Mutant::no_intermediate_saturation, "no-intermediate-saturation",
     "u wraps modulo 2^bits into the intermediate type instead of saturating before the table",
     "any convention; differs only where the requantized value leaves the intermediate range", true},
    {Mutant::lut_index_off_by_one, "lut-index-off-by-one",
     "the table is read one code off: entry u+1 (the last code reads itself)",
     "any convention whose table is not constant on neighbouring codes", false},
    {Mutant::knee_entry_off_by_one, "knee-entry-off-by-one",
     "the lut entry at the code nearest the activation's first knee point is one output LSB high (saturating)",
     "fused lut, the knee inside the intermediate range, the entry below the output maximum; differs at one code",
     true},
    {Mutant::ignore_intermediate_zero_point, "ignore-intermediate-zero-point",
     "the table is built as if zu = 0", "zu != 0", false},
    {Mutant::zero_point_before_rounding, "zero-point-before-rounding",
     "the output zero point is added before rounding (round(zy + f/sy)) where after is declared",
     "zero point declared after rounding, zy != 0, output rounding half_away_from_zero (ties where f/sy and "
     "f/sy + zy differ in sign) or half_to_even (ties with zy odd), fused lut; differs only at exact output ties",
     true},
    {Mutant::skip_intermediate_quantization, "skip-intermediate-quantization",
     "the activation is applied to the unrounded requantized value acc*sx*sw (in double), then quantized once",
     "conv samples (the sweep has no requantization)", false},
    {Mutant::output_half_even_for_half_away, "output-half-even-for-half-away",
     "the table rounds f/sy half to even where half away from zero is declared",
     "output rounding half_away_from_zero, fused lut; differs only at exact output ties with an even floor", true},
    {Mutant::interp_truncate, "interp-truncate",
     "the lut_interp lookup drops its +64 rounding term: (slope*f) >> 7", "fused lut_interp", false},
    {Mutant::residual_after_activation, "residual-after-activation",
     "conv2d+add+act computed as Act(u) + r: the residual added after the activation, into the output boundary "
     "by the add rule",
     "pattern conv2d+add+act", false},
    {Mutant::residual_output_scale, "residual-output-scale",
     "the add reads the residual r with the sum's scale ss in place of its own sr (zero point unchanged)",
     "pattern conv2d+add+act, sr != ss", false},
    {Mutant::add_skip_intermediate_rounding, "add-skip-intermediate-rounding",
     "u is not rounded where the declared convention keeps it: s = round((acc sx sw + sr (r - zr)) / ss) + zs in "
     "double, half away from zero, then the activation",
     "pattern conv2d+add+act; differs where the rounding (or the saturation) of u moves s", false},
    {Mutant::maxpool_before_activation, "maxpool-before-activation",
     "the max pool moved before the activation: the table applied to the largest u of each window",
     "pattern conv2d+act+maxpool with a table that decreases somewhere (gelu, silu, mish, hard_swish): differs "
     "where a window's largest u lies in the activation's dip and another of its codes maps higher",
     false},
    {Mutant::avgpool_truncate, "avgpool-truncate",
     "the average pool divides its raw code sum by the tap count truncating (C division) instead of rounding",
     "pattern conv2d+act+avgpool, rule tflite; differs where the remainder reaches half the tap count", false},
    {Mutant::fold_across_activation, "fold-across-activation",
     "fc+act+fc folded into one layer (W = W2 W1, b = W2 b1 + b2, requantized per channel) across the activation",
     "pattern fc+act+fc with an activation that is not the identity over the first layer's range", false},
    {Mutant::bn_drop_eps, "bn-drop-eps",
     "the BatchNorm fold divides by sqrt(var) instead of sqrt(var + eps)",
     "pattern conv2d+batchnorm+act folded; differs most where var is near or below eps", false},
    {Mutant::bn_f16_for_f32, "bn-f16-for-f32",
     "the BatchNorm fold computes every step in binary16 where binary32 is declared",
     "pattern conv2d+batchnorm+act folded in f32", false},
    {Mutant::bn_per_tensor_for_per_channel, "bn-per-tensor-for-per-channel",
     "the folded weights get one scale max|w'|/127 for the whole tensor where one per channel is declared",
     "pattern conv2d+batchnorm+act folded per channel, with channels of different max|w'|", false},
    {Mutant::bn_bf16_truncate, "bn-bf16-truncate",
     "the BatchNorm fold's bfloat16 steps truncate the binary32 result where round to nearest even is declared",
     "pattern conv2d+batchnorm+act folded in bf16 with rne", false},
    {Mutant::bn_f16_overflow_wraps, "bn-f16-overflow-wraps",
     "the fold's binary16 conversion drops its overflow check: a value of 2^16 or more wraps through the exponent "
     "field where saturation to 65504 is declared",
     "pattern conv2d+batchnorm+act folded in f16 with saturate, where gamma / sqrt(var + eps) or a folded value reaches 2^16",
     false},
    {Mutant::bn_after_activation, "bn-after-activation",
     "the fused path applies the activation to the unfolded conv's output (at the graph's u quantization) and "
     "BatchNorm to the activation's output afterwards",
     "pattern conv2d+batchnorm+act with a BatchNorm that is not the identity", false},
    {Mutant::fc_fold_first_layer_scale, "fc-fold-first-layer-scale",
     "the fc+fc fold quantizes the folded weights and bias with the first layer's weight scale sw1 in place of "
     "their own max|W|/127 per output channel (codes still clamped to [-127, 127])",
     "pattern fc+fc folded, compared with its declared fold (reference declared_fold); differs where max|W|/127 "
     "and sw1 quantize W differently (almost every draw)", false},
    {Mutant::bn_fold_across_activation, "bn-fold-across-activation",
     "conv2d+act+batchnorm computed with the BatchNorm folded into the conv, before the activation: u = round(BN(acc "
     "sx sw) / su), the table, then the activation's output requantized into the BatchNorm's boundary",
     "pattern conv2d+act+batchnorm with a BatchNorm that is not the identity", false},
    {Mutant::mul_skip_output_rounding, "mul-skip-output-rounding",
     "conv2d+mul+add+act with the product kept real into the add: s = round((su (u - zu) sb (b - zb) + sr (r - zr)) "
     "/ ss) + zs in double, half away from zero (the product's rounding and saturation skipped)",
     "pattern conv2d+mul+add+act; differs where the product's rounding (or saturation) moves s", false},
    {Mutant::mul_ignores_input_zero_point, "mul-ignores-input-zero-point",
     "the mul reads its second input b as if zb = 0: (a - za) b in place of (a - za)(b - zb)",
     "pattern conv2d+mul+add+act, zb != 0", false},
    {Mutant::ln_drop_eps, "ln-drop-eps",
     "the layer norm divides by sqrt(var) instead of sqrt(var + eps) (a zero variance gives +-inf, saturated)",
     "a layernorm kept whole; differs most where var is near or below eps", false},
    {Mutant::ln_eps_after_sqrt, "ln-eps-after-sqrt",
     "the layer norm divides by sqrt(var) + eps instead of sqrt(var + eps)",
     "a layernorm kept whole; differs where var is near or below eps (and rarely elsewhere)", false},
    {Mutant::ln_one_pass_variance, "ln-one-pass-variance",
     "the layer norm's variance as E[x^2] - mu^2 in binary32 (one_pass) where the declared order sums (x - mu)^2",
     "a layernorm kept whole; differs where a large mean cancels against a small spread", true},
    {Mutant::ln_mean_wrong_axis, "ln-mean-wrong-axis",
     "the layer norm's mean taken per feature over the rows (the batch axis) instead of per row over the features",
     "a layernorm kept whole", false},
    {Mutant::ln_skip_after_norm, "ln-skip-after-norm",
     "fc+add+layernorm computed as LayerNorm(u) + r: the residual added after the norm, into the norm's boundary by "
     "the add rule",
     "pattern fc+add+layernorm kept whole", false},
    {Mutant::ln_bf16_variance, "ln-bf16-variance",
     "the layer norm's variance summed in a bfloat16 accumulator where the declared order's is binary32",
     "a layernorm kept whole whose declared variance accumulator is binary32 or binary64", false},
};

// The built-ins, then those registered at start-up (before any run; read-only afterwards).
std::vector<MutantInfo>& Catalog() {
  static std::vector<MutantInfo> catalog(std::begin(kCatalog), std::end(kCatalog));
  return catalog;
}
std::vector<RegisteredMutant>& Registered() {
  static std::vector<RegisteredMutant> registered;
  return registered;
}
const RegisteredMutant* FindRegistered(Mutant m) {
  for (const RegisteredMutant& r : Registered()) {
    if (r.info.mutant == m) return &r;
  }
  return nullptr;
}
}  // namespace

std::span<const MutantInfo> mutant_catalog() { return Catalog(); }

Mutant register_mutant(const RegisteredMutant& m) {
  if (!m.in_space || !m.place) throw InputError("mutant " + std::string(m.info.name) + ": space and placement are required");
  for (const MutantInfo& info : Catalog()) {
    if (info.name == m.info.name) throw InputError("mutant " + std::string(m.info.name) + " is registered twice");
  }
  RegisteredMutant r = m;
  r.info.mutant = static_cast<Mutant>(static_cast<int>(Mutant::ln_bf16_variance) + 1 +
                                      static_cast<int>(Registered().size()));
  Registered().push_back(r);
  Catalog().push_back(r.info);
  return r.info.mutant;
}

bool place_registered_mutant(CaseSpec& spec) {
  const RegisteredMutant* r = FindRegistered(spec.mutant);
  if (r) r->place(spec);
  return r != nullptr;
}

const MutantInfo& mutant_info(Mutant m) {
  for (const MutantInfo& info : Catalog()) {
    if (info.mutant == m) return info;
  }
  throw std::invalid_argument("mutant_info: no catalog entry for this mutant");
}

std::string_view to_string(Mutant m) { return m == Mutant::none ? "none" : mutant_info(m).name; }

Mutant parse_mutant(std::string_view text, std::string_view field) {
  if (text == "none") return Mutant::none;
  std::string known;
  for (const MutantInfo& info : Catalog()) {
    if (info.name == text) return info.mutant;
    known += (known.empty() ? "" : ", ") + std::string(info.name);
  }
  throw InputError(std::string(field) + ": unknown mutant '" + std::string(text) + "' (expected one of " + known + ")");
}

bool is_pattern_mutant(Mutant m) {
  switch (m) {
    case Mutant::residual_after_activation:
    case Mutant::residual_output_scale:
    case Mutant::add_skip_intermediate_rounding:
    case Mutant::maxpool_before_activation:
    case Mutant::avgpool_truncate:
    case Mutant::fold_across_activation:
    case Mutant::bn_drop_eps:
    case Mutant::bn_f16_for_f32:
    case Mutant::bn_per_tensor_for_per_channel:
    case Mutant::bn_bf16_truncate:
    case Mutant::bn_f16_overflow_wraps:
    case Mutant::bn_after_activation:
    case Mutant::fc_fold_first_layer_scale:
    case Mutant::bn_fold_across_activation:
    case Mutant::mul_skip_output_rounding:
    case Mutant::mul_ignores_input_zero_point:
    case Mutant::ln_drop_eps:
    case Mutant::ln_eps_after_sqrt:
    case Mutant::ln_one_pass_variance:
    case Mutant::ln_mean_wrong_axis:
    case Mutant::ln_skip_after_norm:
    case Mutant::ln_bf16_variance:
      return true;
    default:
      return FindRegistered(m) != nullptr;  // a stage kind's mutant lives in its pattern's path
  }
}

bool in_mutant_space(Mutant m, const CaseSpec& spec) {
  if (const RegisteredMutant* r = FindRegistered(m)) return r->in_space(spec);
  const Convention& c = spec.convention;
  const std::string pattern = pattern_name(spec.pattern);
  const Stage* add = find_stage(spec.pattern, StageKind::add);
  const Stage* avg = find_stage(spec.pattern, StageKind::avg_pool);
  switch (m) {
    case Mutant::residual_after_activation:
    case Mutant::add_skip_intermediate_rounding:
      return add != nullptr && spec.source == SampleSource::conv;
    case Mutant::residual_output_scale: return add != nullptr && add->residual.scale != add->out.scale;
    case Mutant::maxpool_before_activation: return pattern == "conv2d+act+maxpool";
    case Mutant::avgpool_truncate: return avg != nullptr && avg->pool_rule == AvgPoolRule::tflite;
    case Mutant::fold_across_activation: return pattern == "fc+act+fc";
    case Mutant::bn_fold_across_activation: return pattern == "conv2d+act+batchnorm" && spec.fusion == Fusion::keep_all;
    case Mutant::mul_skip_output_rounding:
      return pattern == "conv2d+mul+add+act" && spec.fusion == Fusion::keep_all && spec.source == SampleSource::conv;
    case Mutant::mul_ignores_input_zero_point: {
      const Stage* mul = find_stage(spec.pattern, StageKind::mul);
      return mul != nullptr && mul->mul_input.zero_point != 0;
    }
    case Mutant::ln_drop_eps:
    case Mutant::ln_eps_after_sqrt:
    case Mutant::ln_one_pass_variance:
    case Mutant::ln_mean_wrong_axis:
    case Mutant::ln_bf16_variance: {
      const Stage* ln = find_stage(spec.pattern, StageKind::layernorm);
      if (ln == nullptr || spec.fusion != Fusion::keep_all) return false;
      if (m == Mutant::ln_one_pass_variance) return ln->ln_order.stats != NormalizationStats::one_pass;
      if (m == Mutant::ln_bf16_variance) return ln->ln_order.variance.accumulator != AccumulatorPrecision::bf16;
      return true;
    }
    case Mutant::ln_skip_after_norm: return pattern == "fc+add+layernorm" && spec.fusion == Fusion::keep_all;
    case Mutant::fc_fold_first_layer_scale:
      return pattern == "fc+fc" && spec.fusion == Fusion::fold &&
             find_stage(spec.pattern, StageKind::fully_connected)->fc_reference == FcReference::declared_fold;
    case Mutant::bn_drop_eps:
    case Mutant::bn_f16_for_f32:
    case Mutant::bn_per_tensor_for_per_channel:
    case Mutant::bn_bf16_truncate:
    case Mutant::bn_f16_overflow_wraps:
    case Mutant::bn_after_activation: {
      const Stage* bn = find_stage(spec.pattern, StageKind::batchnorm);
      if (bn == nullptr || bn->bn_reads_codes || spec.fusion != Fusion::fold) return false;
      const BatchNormFold& f = bn->bn_fold;
      if (m == Mutant::bn_f16_for_f32) return f.precision == FoldPrecision::f32;
      if (m == Mutant::bn_per_tensor_for_per_channel) return f.weight_quant == WeightQuant::per_channel;
      if (m == Mutant::bn_bf16_truncate) return f.precision == FoldPrecision::bf16 && f.rounding == FloatRounding::nearest_even;
      if (m == Mutant::bn_f16_overflow_wraps) return f.precision == FoldPrecision::f16 && f.overflow == FloatOverflow::saturate;
      return true;
    }
    default:
      // The conv+act mutants live in the conv+act fused kernel.
      if (!is_conv_act(spec.pattern)) return false;
      break;
  }
  switch (m) {
    case Mutant::none: return false;
    case Mutant::use_output_scale: return c.intermediate.q.scale != c.output.q.scale;
    case Mutant::gelu_tanh_for_erf: return c.activation.kind == ActivationKind::gelu_erf;
    case Mutant::requant_truncate:
      return spec.source == SampleSource::conv &&
             (c.requant == RequantVariant::double_rounding || c.requant == RequantVariant::single_rounding);
    case Mutant::requant_double_for_single:
      return spec.source == SampleSource::conv && c.requant == RequantVariant::single_rounding;
    case Mutant::no_intermediate_saturation: return spec.source == SampleSource::conv;
    case Mutant::lut_index_off_by_one: return true;
    case Mutant::knee_entry_off_by_one: return uses_table(spec, TableKind::lut);
    case Mutant::ignore_intermediate_zero_point: return c.intermediate.q.zero_point != 0;
    case Mutant::zero_point_before_rounding:
      return uses_table(spec, TableKind::lut) && c.output.zero_point_order == ZeroPointOrder::after_rounding &&
             c.output.q.zero_point != 0 && c.output.rounding != RoundingMode::half_up;
    case Mutant::skip_intermediate_quantization: return spec.source == SampleSource::conv;
    case Mutant::output_half_even_for_half_away:
      return uses_table(spec, TableKind::lut) && c.output.rounding == RoundingMode::half_away_from_zero;
    case Mutant::interp_truncate: return uses_table(spec, TableKind::lut_interp);
    default: return false;  // the pattern mutants, above
  }
}

}  // namespace fusediff
