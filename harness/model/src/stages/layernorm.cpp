// Stage kind `layernorm`: each row of the tensor it reads (the producer's output features, the last axis) normalized
// by the stage's declared arithmetic (model/pattern.h LayerNormArithmetic) and order (model/summation_order.h), with
// gamma and beta per feature from the draw and eps a stage parameter, rounded into its own boundary `out`; optional
// declared float boundaries around the norm (ln_in_float, ln_out_float: ln_in_float=bf16:... in a replay string). A row's
// outputs depend on every element of it: not elementwise.
#include <cmath>
#include <string>
#include <utility>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"

namespace fusediff {
namespace {

constexpr int32_t kMaxFeatures = 4096;

class LayerNormStage final : public StageKindModule {
 public:
  StageKind kind() const override { return StageKind::layernorm; }
  bool elementwise() const override { return false; }
  QuantParams output_boundary(const Stage& s, const QuantParams&, const Convention&) const override { return s.out; }

  void validate(const Stage& s, const QuantParams& in, const Convention&, const std::string& field) const override {
    if (!(s.ln_eps > 0.0f) || !std::isfinite(s.ln_eps)) throw InputError(field + ".eps: expected a finite value > 0");
    if (s.ln_features != 0 && (s.ln_features < 1 || s.ln_features > kMaxFeatures)) {
      throw InputError(field + ".features: expected 0 (drawn) or 1.." + std::to_string(kMaxFeatures) + ", got " +
                       std::to_string(s.ln_features));
    }
    fusediff::validate(s.ln_order.mean, field + ".order.mean");
    fusediff::validate(s.ln_order.variance, field + ".order.var");
    fusediff::validate(s.ln_fused_order.mean, field + ".fused_order.mean");
    fusediff::validate(s.ln_fused_order.variance, field + ".fused_order.var");
    for (const auto& [o, name] : {std::pair{&s.ln_order, ".order"}, std::pair{&s.ln_fused_order, ".fused_order"}}) {
      for (const NormalizationOrder& short_rows : o->short_rows) {  // a length selector's order for short rows
        fusediff::validate(short_rows.mean, field + name + ".below.mean");
        fusediff::validate(short_rows.variance, field + name + ".below.var");
      }
    }
    fusediff::validate(s.out, field + ".out");
    if ((s.ln_in_float || s.ln_out_float) && s.ln_arithmetic != LayerNormArithmetic::f32) {
      throw InputError(field + (s.ln_in_float ? ".in_float" : ".out_float") +
                       ": a float boundary around the norm needs arithmetic f32, got " +
                       std::string(to_string(s.ln_arithmetic)));
    }
    if (s.ln_float_out && s.ln_arithmetic != LayerNormArithmetic::f32) {
      throw InputError(field + ".float_out: a float output needs arithmetic f32, got " +
                       std::string(to_string(s.ln_arithmetic)));
    }
    if (s.ln_float_out && s.ln_out_float && s.ln_out_float->format == FloatFormat::f16) {
      throw InputError(field + ".out_float: a float output is f32 or bf16, not f16");
    }
    if (s.ln_arithmetic == LayerNormArithmetic::tflite_int16) ValidateIntegerBoundaries(in, s.out, field);
    if (s.ln_regime == LnRegime::exact_rows) ValidateExactRowsInput(in, field);
  }

  std::string describe(const Stage& s, Fusion fusion, bool) const override {
    std::string part = "layernorm " + std::string(to_string(s.ln_arithmetic)) + " eps=" + format_float32(s.ln_eps) +
                       " order " + format_declared_normalization_order(s.ln_order);
    if (fusion == Fusion::norm_other_order) part += " fused order " + format_declared_normalization_order(s.ln_fused_order);
    if (fusion == Fusion::norm_other_arithmetic) part += " fused arithmetic " + std::string(to_string(s.ln_fused_arithmetic));
    part += " regime " + std::string(to_string(s.ln_regime));
    if (s.ln_features != 0) part += " features " + std::to_string(s.ln_features);
    if (s.ln_in_float) part += " in " + format_float_boundary(*s.ln_in_float);
    if (s.ln_out_float) part += " out " + format_float_boundary(*s.ln_out_float);
    if (s.ln_float_out) return part + " y float (its ulps)";
    return part + " o=" + format_quant_params(s.out);
  }

  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage& s, bool for_samples) const override {
    std::vector<std::pair<std::string, std::string>> f{{"ln", std::string(to_string(s.ln_arithmetic))},
                                                       {"ln_eps", format_float32(s.ln_eps)},
                                                       {"ln_regime", std::string(to_string(s.ln_regime))},
                                                       {"ln_out", format_quant_params(s.out)}};
    if (s.ln_features != 0) f.emplace_back("ln_features", std::to_string(s.ln_features));
    if (!for_samples) {  // what the draws do not depend on
      f.emplace_back("ln_order", format_declared_normalization_order(s.ln_order));
      f.emplace_back("ln_fused_order", format_declared_normalization_order(s.ln_fused_order));
      if (s.ln_fused_arithmetic != Stage{}.ln_fused_arithmetic) {  // absent: the default (earlier strings hold)
        f.emplace_back("ln_fused_arithmetic", std::string(to_string(s.ln_fused_arithmetic)));
      }
      // absent: none (earlier strings hold)
      if (s.ln_in_float) f.emplace_back("ln_in_float", format_float_boundary(*s.ln_in_float));
      if (s.ln_out_float) f.emplace_back("ln_out_float", format_float_boundary(*s.ln_out_float));
      if (s.ln_float_out) f.emplace_back("ln_float_out", "1");
    }
    return f;
  }
  void parse_replay_fields(Stage& s, const ReplayFieldSource& f) const override {
    s.ln_arithmetic = parse_layer_norm_arithmetic(f.take("ln"), "replay.ln");
    s.ln_eps = parse_float32(f.take("ln_eps"), "replay.ln_eps");
    s.ln_regime = parse_ln_regime(f.take("ln_regime"), "replay.ln_regime");
    s.out = parse_quant_params(f.take("ln_out"), "replay.ln_out", QuantParams{});
    if (f.has("ln_features")) s.ln_features = ParseFeatures(f.take("ln_features"));
    s.ln_order = parse_declared_normalization_order(f.take("ln_order"), "replay.ln_order");
    s.ln_fused_order = parse_declared_normalization_order(f.take("ln_fused_order"), "replay.ln_fused_order");
    if (f.has("ln_fused_arithmetic")) {
      s.ln_fused_arithmetic = parse_layer_norm_arithmetic(f.take("ln_fused_arithmetic"), "replay.ln_fused_arithmetic");
    }
    if (f.has("ln_in_float")) s.ln_in_float = parse_float_boundary(f.take("ln_in_float"), "replay.ln_in_float");
    if (f.has("ln_out_float")) s.ln_out_float = parse_float_boundary(f.take("ln_out_float"), "replay.ln_out_float");
    if (f.has("ln_float_out")) {
      if (f.take("ln_float_out") != "1") throw InputError("replay.ln_float_out: expected 1 (absent: a quantized output)");
      s.ln_float_out = true;
    }
  }

  std::vector<StageField> results_fields(const Stage& s) const override {
    std::vector<StageField> f{{"arithmetic", std::string(to_string(s.ln_arithmetic))},
                              {"eps", s.ln_eps},
                              {"order", format_declared_normalization_order(s.ln_order)},
                              {"fused_order", format_declared_normalization_order(s.ln_fused_order)},
                              {"regime", std::string(to_string(s.ln_regime))},
                              {"features", s.ln_features},
                              {"out", s.out}};
    if (s.ln_fused_arithmetic != Stage{}.ln_fused_arithmetic) {  // absent: the default (earlier results hold)
      f.push_back({"fused_arithmetic", std::string(to_string(s.ln_fused_arithmetic))});
    }
    if (s.ln_in_float) f.push_back({"in_float", format_float_boundary(*s.ln_in_float)});  // absent: none
    if (s.ln_out_float) f.push_back({"out_float", format_float_boundary(*s.ln_out_float)});
    if (s.ln_float_out) f.push_back({"float_out", std::string("true")});  // absent: quantized
    return f;
  }
  // norm_other_order is judged on exact rows where the two orders agree there (model/summation_order.h).
  std::string fusion_keeps_meaning(const Stage& s, const Pattern&, Fusion fusion, const Convention&,
                                   std::span<const int32_t>) const override {
    // A float boundary before the norm rounds x off the exact rows' lattice (sum delta_j = 0 no longer holds).
    if (fusion != Fusion::norm_other_order || s.ln_regime != LnRegime::exact_rows ||
        s.ln_arithmetic != LayerNormArithmetic::f32 || s.ln_in_float) {
      return {};
    }
    if (!exact_rows_difference(s.ln_order, s.ln_fused_order).empty()) return {};
    return "on exact rows orders " + format_declared_normalization_order(s.ln_order) + " and " +
           format_declared_normalization_order(s.ln_fused_order) +
           " compute the same mean and variance, then the same output roundings";
  }

  void read_results_fields(Stage& s, const StageFieldReader& f) const override {
    s.ln_arithmetic = f.parsed("arithmetic", parse_layer_norm_arithmetic);
    s.ln_eps = f.float32("eps");
    s.ln_order = f.parsed("order", parse_declared_normalization_order);
    s.ln_fused_order = f.parsed("fused_order", parse_declared_normalization_order);
    s.ln_regime = f.parsed("regime", parse_ln_regime);
    s.ln_features = f.integer("features");
    s.out = f.quant("out");
    if (f.has("fused_arithmetic")) s.ln_fused_arithmetic = f.parsed("fused_arithmetic", parse_layer_norm_arithmetic);
    if (f.has("in_float")) s.ln_in_float = f.parsed("in_float", parse_float_boundary);
    if (f.has("out_float")) s.ln_out_float = f.parsed("out_float", parse_float_boundary);
    if (f.has("float_out")) s.ln_float_out = f.parsed("float_out", ParseFloatOut);
  }

  // The float layernorm: the bound (summation_order.h normalization_bound_uncovered) holds for the two-pass class;
  // it covers a comparison when the graph's order and the one the fused path runs are both of it.
  std::optional<FloatOutput> float_output(const Stage& s, Fusion fusion) const override {
    if (!s.ln_float_out) return std::nullopt;
    FloatOutput out{s.ln_out_float ? s.ln_out_float->format : FloatFormat::f32, {}};
    out.unbounded = normalization_bound_uncovered(s.ln_order);
    if (out.unbounded.empty() && fusion == Fusion::norm_other_order) {
      out.unbounded = normalization_bound_uncovered(s.ln_fused_order);
    }
    if (out.unbounded.empty() && fusion != Fusion::keep_all && fusion != Fusion::norm_other_order) {
      out.unbounded = "fusion " + std::string(to_string(fusion)) + " computes another graph";
    }
    return out;
  }

 private:
  // tflite_int16 (model/pattern.h): the input's code differences q - z_in are TFLite's int16 input; the output
  // scale 2^-k replaces TFLite's fixed 2^-12 (the shift's + 12), with no zero point.
  static void ValidateIntegerBoundaries(const QuantParams& in, const QuantParams& out, const std::string& field) {
    const int64_t lo = int64_t{in.type.qmin()} - in.zero_point, hi = int64_t{in.type.qmax()} - in.zero_point;
    if (lo < -32768 || hi > 32767) {
      throw InputError(field + ".in: the tflite_int16 arithmetic reads q - z_in as int16; " + format_quant_params(in) +
                       " spans " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    int k = 0;
    const float m = std::frexp(out.scale, &k);
    if (m != 0.5f || out.zero_point != 0 || out.type.bits() > 16) {
      throw InputError(field + ".out: the tflite_int16 arithmetic needs a power-of-two scale, zero point 0 and at most "
                       "16 bits (TFLite: int16 at 2^-12), got " + format_quant_params(out));
    }
  }

  // exact_rows (model/pattern.h): x_j = k_j 2^e must be exact, so the input scale is a power of two 2^e; the
  // generator keeps sum |k_j| and sum delta_j^2 within 2^24 and |delta_j| within 2^12, so e >= -74 keeps the
  // smallest d_j^2 = 2^(2e) representable (2e >= -149) and e <= 51 keeps sum d_j^2 < 2^(24 + 2e) finite.
  static void ValidateExactRowsInput(const QuantParams& in, const std::string& field) {
    int e = 0;
    const float m = std::frexp(in.scale, &e);  // in.scale = m 2^e, m in [1/2, 1)
    if (m != 0.5f || e - 1 < -74 || e - 1 > 51) {
      throw InputError(field + ".regime: exact_rows needs the norm's input scale to be a power of two 2^e with e in "
                       "[-74, 51] (x = 2^e (q - z) exact), got " + format_quant_params(in));
    }
  }

  // A results file's float_out: "true" (absent: a quantized output); anything else is an error naming the field.
  static bool ParseFloatOut(const std::string& text, std::string_view field) {
    if (text != "true") throw InputError(std::string(field) + ": expected true (absent: a quantized output)");
    return true;
  }

  static int32_t ParseFeatures(const std::string& text) {
    int32_t n = 0;
    for (char ch : text) {
      if (ch < '0' || ch > '9' || n > kMaxFeatures) throw InputError("replay.ln_features: expected 1.." + std::to_string(kMaxFeatures) + ", got '" + text + "'");
      n = n * 10 + (ch - '0');
    }
    if (text.empty() || n < 1 || n > kMaxFeatures) {
      throw InputError("replay.ln_features: expected 1.." + std::to_string(kMaxFeatures) + ", got '" + text + "'");
    }
    return n;
  }
};

}  // namespace

std::unique_ptr<const StageKindModule> make_layernorm_stage() { return std::make_unique<LayerNormStage>(); }

}  // namespace fusediff
