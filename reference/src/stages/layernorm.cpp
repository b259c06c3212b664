// Reference of stage kind `layernorm` in its declared arithmetic (model/pattern.h LayerNormArithmetic). f32: per row
// of features, the dequantized values x_j = fl32(s_in (q_j - z_in)), LayerNormInOrder (summation.h) by the stage's
// declared order (x and y each stored at the stage's declared float boundary, ln_in_float / ln_out_float, where it
// has one), then ONNX's QuantizeLinear from its definition: the exact quotient y_j / s_out rounded half to
// even, + z_out, saturated; or, for the float layernorm (ln_float_out), y_j's ordered code with the two-pass pair
// bound (summation.h LayerNormPairBounds). A length selector's order is chosen per row (LayerNormInOrder).
// tflite_int16: TFLite's integer layer norm from its definition (tflite_layer_norm.h).
// Under ln_regime exact_rows each row is first checked exact in every order (summation.h
// LayerNormStatsAreExactInEveryOrder): a row that is not is a harness bug, thrown.
#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/stage_eval.h"
#include "fusediff/reference/stages.h"
#include "fusediff/reference/summation.h"
#include "fusediff/reference/tflite_layer_norm.h"

namespace fusediff::reference {

StageRounding QuantizeLinearHalfEven(float y, const QuantParams& out) {
  StageRounding r;
  const int64_t qmin = out.type.qmin(), qmax = out.type.qmax();
  const double t = static_cast<double>(y) / static_cast<double>(out.scale);
  int64_t q = 0;
  if (std::isnan(t)) {  // declared: a NaN (a negative one-pass variance's square root) gives the zero point
    r.code = out.zero_point;
    r.unsaturated = out.zero_point;
    r.saturated = true;  // the output left the real line: counted where saturations are
    return r;
  }
  if (!std::isfinite(t) || std::abs(t) > 0x1p20) {  // beyond every type: saturates (+-inf included)
    q = t > 0 ? (int64_t{1} << 21) : -(int64_t{1} << 21);
  } else {
    // k = floor(t) may be one off where t rounded; the comparisons below are exact (|2k + 1| < 2^22: (2k + 1) s_out
    // and 2y are exact in binary64), so the nearest integer is right either way.
    const int64_t k = static_cast<int64_t>(std::floor(t));
    const double twice_y = 2.0 * static_cast<double>(y);
    const double half_point = static_cast<double>(2 * k + 1) * static_cast<double>(out.scale);
    if (twice_y > half_point) q = k + 1;
    else if (twice_y < half_point) q = k;
    else q = (k % 2 == 0) ? k : k + 1;  // an exact tie: to even
    r.tie_distance = std::abs(t - (static_cast<double>(k) + 0.5));
  }
  r.unsaturated = q + out.zero_point;
  r.code = static_cast<int32_t>(std::clamp<int64_t>(r.unsaturated, qmin, qmax));
  r.saturated = r.code != r.unsaturated;
  return r;
}

namespace {

class LayerNormReference final : public ReferenceStage {
 public:
  StageKind kind() const override { return StageKind::layernorm; }
  void Apply(const Stage& stage, const StageInputs& in, GraphTensor& t) const override {
    const size_t features = static_cast<size_t>(t.shape.channels);
    const std::vector<float>& gamma = in.operands.gamma;
    const std::vector<float>& beta = in.operands.beta;
    if (gamma.size() != features || beta.size() != features) {
      throw InputError("pattern draw: layernorm's gamma and beta have " + std::to_string(gamma.size()) + " and " +
                       std::to_string(beta.size()) + " values, the row has " + std::to_string(features) + " features");
    }
    if (stage.ln_regime == LnRegime::exact_rows) {  // the regime's promise, checked on every row it drew
      size_t row = 0;
      ForEachRow(t, features, [&](std::span<GraphElement> e, RegionSet) { CheckExactRow(in.in, e, row++); });
    }
    // The arithmetic is chosen once per call: the only place the reference looks at it.
    if (stage.ln_arithmetic == LayerNormArithmetic::tflite_int16) {
      const TfliteLayerNormOperands ops = DeriveTfliteLayerNormOperands(gamma, beta);
      ForEachRow(t, features, [&](std::span<GraphElement> e, RegionSet r) { TfliteInt16Row(stage, in, ops, e, r); });
    } else {
      ForEachRow(t, features, [&](std::span<GraphElement> e, RegionSet r) { F32Row(stage, in, e, r); });
    }
  }

 private:
  template <typename RowFunction>
  static void ForEachRow(GraphTensor& t, size_t features, RowFunction row_function) {
    for (size_t row = 0; row * features < t.e.size(); ++row) {
      const std::span<GraphElement> e(&t.e[row * features], features);
      RegionSet row_regions = 0;  // every output of a row reads every input of it
      for (const GraphElement& g : e) row_regions |= g.regions;
      row_function(e, row_regions);
    }
  }
  // exact_rows (model/pattern.h LnRegime): the row's x must be exact in every order, or a verdict at tolerance 0
  // between two orders would rest on nothing. The generator builds such rows; one that is not is a harness bug.
  static void CheckExactRow(const QuantParams& in, std::span<const GraphElement> e, size_t row) {
    std::vector<float> x(e.size());
    for (size_t j = 0; j < e.size(); ++j) x[j] = in.scale * static_cast<float>(int64_t{e[j].y} - in.zero_point);
    if (LayerNormStatsAreExactInEveryOrder(x)) return;
    std::string codes;
    for (size_t j = 0; j < e.size() && j < 16; ++j) codes += (j ? "," : "") + std::to_string(e[j].y);
    throw std::logic_error("layernorm regime exact_rows: row " + std::to_string(row) + " (codes " + codes +
                           (e.size() > 16 ? ",..." : "") + " at " + format_quant_params(in) +
                           ") is not exact in every order: the draw broke the regime (a harness bug)");
  }
  // f32: x_j = fl32(s_in (q_j - z_in)) (the code difference is exact in binary32, |q - z| < 2^17; the product one
  // binary32 rounding), stored at ln_in_float where declared, LayerNormInOrder, y_j stored at ln_out_float where
  // declared (float_formats.h RoundToFormat: the format's definition on exact integers), QuantizeLinear.
  static void F32Row(const Stage& stage, const StageInputs& in, std::span<GraphElement> e, RegionSet row_regions) {
    std::vector<float> x(e.size());
    for (size_t j = 0; j < e.size(); ++j) {
      x[j] = in.in.scale * static_cast<float>(int64_t{e[j].y} - in.in.zero_point);
      if (stage.ln_in_float) x[j] = RoundToFormat(x[j], *stage.ln_in_float);
    }
    const LayerNormRow y = LayerNormInOrder(stage.ln_order, x, in.operands.gamma, in.operands.beta, stage.ln_eps);
    if (stage.ln_float_out) {
      FloatRow(stage, in, x, y, e, row_regions);
      return;
    }
    for (size_t j = 0; j < e.size(); ++j) {
      const float yj = stage.ln_out_float ? RoundToFormat(y.y[j], *stage.ln_out_float) : y.y[j];
      const StageRounding r = QuantizeLinearHalfEven(yj, stage.out);
      e[j].regions = row_regions | RoundingRegions(r.saturated, r.tie_distance);
      e[j].y = r.code;
    }
  }
  // The float layernorm (model/pattern.h Stage::ln_float_out): y_j stored at ln_out_float's format as its ordered
  // code, with the bound two two-pass evaluations stay within (summation.h LayerNormPairBounds). Whether that class
  // covers the declared orders is the model's to say (model/pattern.h float_output), once, for the comparison.
  static void FloatRow(const Stage& stage, const StageInputs& in, std::span<const float> x, const LayerNormRow& y,
                       std::span<GraphElement> e, RegionSet row_regions) {
    const FloatBoundary format = stage.ln_out_float.value_or(FloatBoundary{});
    const std::vector<double> bound =
        LayerNormPairBounds(x, in.operands.gamma, in.operands.beta, stage.ln_eps, stage.ln_out_float);
    for (size_t j = 0; j < e.size(); ++j) {
      e[j].y = FloatOutputCode(y.y[j], format);
      e[j].regions = row_regions;
      e[j].bound = bound[j];
    }
  }
  // tflite_int16 (tflite_layer_norm.h): v_j = q_j - z_in, TFLite's integer row. Its last rounding is a fixed-point
  // one whose tie distance is not tracked (0.5: never counted near a tie).
  static void TfliteInt16Row(const Stage& stage, const StageInputs& in, const TfliteLayerNormOperands& ops,
                             std::span<GraphElement> e, RegionSet row_regions) {
    std::vector<int32_t> v(e.size());
    for (size_t j = 0; j < e.size(); ++j) v[j] = static_cast<int32_t>(int64_t{e[j].y} - in.in.zero_point);
    std::vector<bool> saturated;
    const std::vector<int32_t> y = TfliteLayerNormRow(v, ops, stage.out, &saturated);
    for (size_t j = 0; j < e.size(); ++j) {
      e[j].regions = row_regions | RoundingRegions(saturated[j], 0.5);
      e[j].y = y[j];
    }
  }
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakeLayerNormReference() { return std::make_unique<LayerNormReference>(); }

}  // namespace fusediff::reference
