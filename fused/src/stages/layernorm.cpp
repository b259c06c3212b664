// Fused kernel of stage kind `layernorm` in its declared arithmetic (or, under Fusion::norm_other_arithmetic, the
// stage's ln_fused_arithmetic). tflite_int16: TFLite's integer layer norm (tflite_layer_norm.h). f32: each row of
// codes dequantized in binary32 (DequantizeLinear), normalized in the declared order, quantized (QuantizeLinear), as
// ONNX Runtime runs DQ -> LayerNormalization -> Q; x and y stored at the stage's declared float boundaries where it
// has them (float16.h StoreAs: bf16's bit rounding); the float layernorm (ln_float_out) writes y's ordered code
// instead of quantizing. A length selector's order is chosen per call's row length (LayerNormRows::Run).
// The sums are this file's own lanes and accumulators (layer_norm_rows.h), written from model/summation_order.h's
// definitions. Mutants select a variant here, once: ln-drop-eps, ln-eps-after-sqrt, ln-mean-wrong-axis (defects),
// ln-one-pass-variance and ln-bf16-variance (another order, a selector's short-row order too).
#include "layer_norm_rows.h"
#include "tflite_layer_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/fused/float16.h"
#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {
namespace {

// bfloat16 round to nearest even on the binary32 bit pattern (subnormals kept, overflow to infinity).
float RoundBf16(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  if ((bits & 0x7f800000u) == 0x7f800000u) return v;  // inf, NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xffff0000u);
}

// s + t into an accumulator of precision p (s and t its values, exact in double). For binary32 the double sum's
// rounding then fl32 equals one binary32 rounding of the real sum (53 >= 2 * 24 + 2).
double Combine(AccumulatorPrecision p, double s, double t) {
  switch (p) {
    case AccumulatorPrecision::binary32: return static_cast<float>(s + t);
    case AccumulatorPrecision::binary64: return s + t;
    case AccumulatorPrecision::bf16: return RoundBf16(static_cast<float>(s + t));
  }
  return s + t;
}

// The sum of terms x_i (squares: x_i x_i) in one SummationOrder.
class OrderedSum {
 public:
  OrderedSum(const SummationOrder& o, std::span<const float> x, bool squares) : o_(o), x_(x), squares_(squares) {}

  double operator()() const {
    switch (o_.shape) {
      case SumShape::sequential: return Run(0, x_.size());
      case SumShape::pairwise: return Pairs(0, x_.size());
      case SumShape::blocked: return Lanes();
    }
    return 0;
  }

 private:
  double Add(double s, size_t i) const {
    const float v = x_[i];
    if (!squares_) return Combine(o_.accumulator, s, v);
    if (o_.contraction == Contraction::fma) return std::fma(v, v, static_cast<float>(s));
    return AddUnfused(s, i);
  }
  // s + P(x_i x_i), the square rounded on its own whatever the contraction.
  double AddUnfused(double s, size_t i) const {
    const float v = x_[i];
    if (o_.product_precision == ProductPrecision::binary32) return Combine(o_.accumulator, s, v * v);
    return Combine(o_.accumulator, s, static_cast<double>(v) * v);
  }
  double Run(size_t begin, size_t end) const {
    double s = 0;
    for (size_t i = begin; i < end; ++i) s = Add(s, i);
    return s;
  }
  double Pairs(size_t begin, size_t end) const {
    if (end - begin <= static_cast<size_t>(o_.leaf)) return Run(begin, end);
    const size_t half = (end - begin) / 2;
    return Combine(o_.accumulator, Pairs(begin, begin + half), Pairs(begin + half, end));
  }
  double Lanes() const {
    const size_t width = static_cast<size_t>(o_.lanes), n = x_.size(), full = n / width;
    const size_t regs = full >= static_cast<size_t>(o_.unroll) ? static_cast<size_t>(o_.unroll) : 1;
    std::vector<double> acc(regs * width, 0.0);  // register r, lane l at r * width + l
    const size_t main = full - full % regs;
    for (size_t v = 0; v < main; ++v) {
      for (size_t l = 0; l < width; ++l) acc[(v % regs) * width + l] = Add(acc[(v % regs) * width + l], v * width + l);
    }
    for (size_t live = regs; live > 1; live /= 2) {
      for (size_t r = 0; r < live / 2; ++r) {
        for (size_t l = 0; l < width; ++l) {
          acc[r * width + l] = Combine(o_.accumulator, acc[r * width + l], acc[(r + live / 2) * width + l]);
        }
      }
    }
    for (size_t v = main; v < full; ++v) {
      for (size_t l = 0; l < width; ++l) acc[l] = Add(acc[l], v * width + l);
    }
    std::vector<double> lane(acc.begin(), acc.begin() + static_cast<std::ptrdiff_t>(width));
    if (o_.tail == BlockedTail::into_lane0) {
      for (size_t i = full * width; i < n; ++i) lane[0] = Add(lane[0], i);
    }
    double s = FoldLanes(lane);
    if (o_.tail == BlockedTail::into_lane0) return s;
    size_t i = full * width;
    if (o_.tail == BlockedTail::after_fold_mul4 && squares_ && n - i >= 4) {
      for (const size_t end = i + 4; i < end; ++i) s = AddUnfused(s, i);  // one 4-lane multiply, in-order adds
    }
    for (; i < n; ++i) s = Add(s, i);
    return s;
  }
  double FoldLanes(std::vector<double>& lane) const {
    if (o_.lane_fold.empty()) {
      double s = lane[0];
      for (size_t l = 1; l < lane.size(); ++l) s = Combine(o_.accumulator, s, lane[l]);
      return s;
    }
    size_t live = lane.size();
    for (LaneFoldStep step : o_.lane_fold) {
      std::vector<double> next(live / 2);
      for (size_t i = 0; i < live / 2; ++i) {
        next[i] = step == LaneFoldStep::halve ? Combine(o_.accumulator, lane[i], lane[i + live / 2])
                                              : Combine(o_.accumulator, lane[2 * i], lane[2 * i + 1]);
      }
      std::copy(next.begin(), next.end(), lane.begin());
      live /= 2;
    }
    return lane[0];
  }

  const SummationOrder& o_;
  std::span<const float> x_;
  bool squares_;
};

// S / n stored in binary32: binary64 accumulators divide in binary64 first.
float Mean(double sum, size_t n, AccumulatorPrecision p) {
  if (p == AccumulatorPrecision::binary64) return static_cast<float>(sum / static_cast<double>(n));
  return static_cast<float>(sum) / static_cast<float>(n);
}

}  // namespace

void LayerNormRows::Run(std::span<const float> x, size_t features, std::span<const float> gamma,
                        std::span<const float> beta, std::span<float> y) const {
  const NormalizationOrder& order = order_for_length(order_, features);  // a length selector's choice
  const size_t rows = x.size() / features;
  std::vector<float> column_mean;
  if (defects_.mean_over_rows) {  // mutant ln-mean-wrong-axis
    column_mean.resize(features);
    std::vector<float> column(rows);
    for (size_t j = 0; j < features; ++j) {
      for (size_t r = 0; r < rows; ++r) column[r] = x[r * features + j];
      column_mean[j] = Mean(OrderedSum(order.mean, column, false)(), rows, order.mean.accumulator);
    }
  }
  std::vector<float> d(features), mean(features);
  for (size_t r = 0; r < rows; ++r) {
    const std::span<const float> row = x.subspan(r * features, features);
    float variance = 0;
    if (order.stats == NormalizationStats::welford && !defects_.mean_over_rows) {
      float m = 0, m2 = 0;
      for (size_t k = 0; k < features; ++k) {
        const float delta = row[k] - m;
        m += delta / static_cast<float>(k + 1);
        m2 += delta * (row[k] - m);
      }
      std::fill(mean.begin(), mean.end(), m);
      variance = m2 / static_cast<float>(features);
    } else {
      if (defects_.mean_over_rows) {
        mean = column_mean;
      } else if (order.stats == NormalizationStats::mean_in_double) {
        double s = 0;
        for (float v : row) s += v;
        std::fill(mean.begin(), mean.end(), static_cast<float>(s / static_cast<double>(features)));
      } else {
        std::fill(mean.begin(), mean.end(), Mean(OrderedSum(order.mean, row, false)(), features, order.mean.accumulator));
      }
      if (order.stats == NormalizationStats::one_pass) {
        const float square = Mean(OrderedSum(order.variance, row, true)(), features, order.variance.accumulator);
        variance = square - mean[0] * mean[0];
      } else {
        for (size_t j = 0; j < features; ++j) d[j] = row[j] - mean[j];
        variance = Mean(OrderedSum(order.variance, d, true)(), features, order.variance.accumulator);
      }
    }
    float s = 0;
    if (defects_.drop_eps) s = std::sqrt(variance);
    else if (defects_.eps_after_sqrt) s = std::sqrt(variance) + eps_;
    else s = std::sqrt(variance + eps_);
    const float inv = 1.0f / s;
    const bool fma = order.output_contraction == Contraction::fma;
    for (size_t j = 0; j < features; ++j) {
      const float c = row[j] - mean[j];
      float p = 0, g = gamma[j];
      switch (order.output) {
        case NormalizationOutput::centered_times_inv: p = c * inv; break;
        case NormalizationOutput::centered_over_sqrt: p = c / s; break;
        case NormalizationOutput::scale_times_inv: p = gamma[j] * inv; g = c; break;
        case NormalizationOutput::scale_over_sqrt: p = gamma[j] / s; g = c; break;
      }
      y[r * features + j] = fma ? std::fma(p, g, beta[j]) : p * g + beta[j];
    }
  }
}

int32_t QuantizeLinear(float y, const QuantParams& out) {
  if (std::isnan(y)) return out.zero_point;
  const double q = std::nearbyint(std::clamp(static_cast<double>(y) / out.scale, -0x1p21, 0x1p21));
  return static_cast<int32_t>(std::clamp(q + out.zero_point, double(out.type.qmin()), double(out.type.qmax())));
}

namespace {

// The row length (the tensor's channels), once gamma and beta hold one value per feature.
size_t RowLength(const StageOperands& ops, const StageTensor& t) {
  const size_t features = static_cast<size_t>(t.shape.channels);
  if (ops.gamma.size() != features || ops.beta.size() != features) {
    throw InputError("pattern draw: layernorm's gamma and beta do not hold one value per feature (" +
                     std::to_string(features) + ")");
  }
  return features;
}

// The float layernorm's output (model/pattern.h Stage::ln_float_out): y stored in the format, as its ordered code
// (model/convention.h float_order_code): binary32's bits, or bf16's.
int32_t FloatOutputCode(float y, const FloatBoundary& format) {
  if (format.format == FloatFormat::bf16) return float_order_code(ToBf16Bits(y, format), FloatFormat::bf16);
  return float_order_code(std::bit_cast<uint32_t>(StoreAs(y, format)), FloatFormat::f32);
}

class LayerNormKernel final : public StageKernel {
 public:
  LayerNormKernel(const Stage& s, const QuantParams& in, const NormalizationOrder& order, LayerNormDefects defects)
      : rows_(order, s.ln_eps, defects), in_(in), out_(s.out), in_float_(s.ln_in_float), out_float_(s.ln_out_float),
        float_out_(s.ln_float_out) {}
  void Run(const StageOperands& ops, StageTensor& t) const override {
    const size_t features = RowLength(ops, t);
    std::vector<float> x(t.codes.size()), y(t.codes.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = in_.scale * static_cast<float>(t.codes[i] - in_.zero_point);
      if (in_float_) x[i] = StoreAs(x[i], *in_float_);  // the graph's float boundary before the norm
    }
    rows_.Run(x, features, ops.gamma, ops.beta, y);
    for (size_t i = 0; i < y.size(); ++i) {
      if (float_out_) t.codes[i] = FloatOutputCode(y[i], out_float_.value_or(FloatBoundary{}));
      else t.codes[i] = QuantizeLinear(out_float_ ? StoreAs(y[i], *out_float_) : y[i], out_);
    }
  }

 private:
  LayerNormRows rows_;
  QuantParams in_, out_;
  std::optional<FloatBoundary> in_float_, out_float_;  // model/pattern.h Stage::ln_in_float, ln_out_float
  bool float_out_ = false;                              // Stage::ln_float_out
};

// tflite_int16: v = q - z_in as int16, TFLite's integer row (tflite_layer_norm.h), the operands prepared per draw.
class TfliteLayerNormKernel final : public StageKernel {
 public:
  TfliteLayerNormKernel(const QuantParams& in, const QuantParams& out) : in_(in), out_(out) {}
  void Run(const StageOperands& ops, StageTensor& t) const override {
    const size_t features = RowLength(ops, t);
    const TfliteLayerNormParams params = PrepareTfliteLayerNorm(ops.gamma, ops.beta);
    std::vector<int16_t> v(t.codes.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int16_t>(t.codes[i] - in_.zero_point);  // validated
    ApplyTfliteLayerNorm(v, features, params, out_, t.codes);
  }

 private:
  QuantParams in_, out_;
};

// Why the tflite_int16 kernel cannot read `in` or write `out` (model/pattern.h); empty when it can.
std::string TfliteBoundaryProblem(const QuantParams& in, const QuantParams& out) {
  int exponent = 0;
  if (in.type.qmin() - in.zero_point < -32768 || in.type.qmax() - in.zero_point > 32767) {
    return "tflite_int16 layer norm: q - z_in leaves int16 for " + format_quant_params(in);
  }
  if (std::frexp(out.scale, &exponent) != 0.5f || out.zero_point != 0) {
    return "tflite_int16 layer norm: the output needs a power-of-two scale and zero point 0, got " +
           format_quant_params(out);
  }
  return {};
}

// The mutants that run another order: ln-one-pass-variance (E[x^2] - mu^2), ln-bf16-variance (its sum in bf16).
void MisorderForMutant(NormalizationOrder& order, Mutant mutant) {
  if (mutant == Mutant::ln_one_pass_variance) order.stats = NormalizationStats::one_pass;
  if (mutant == Mutant::ln_bf16_variance) {
    order.variance.accumulator = AccumulatorPrecision::bf16;
    order.variance.contraction = Contraction::none;  // an fma rounds in binary32; the bf16 store follows it
  }
}

class LayerNormStage final : public FusedStage {
 public:
  StageKind kind() const override { return StageKind::layernorm; }
  std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage& s, const QuantParams& in,
                                      std::string* why) const override {
    const LayerNormArithmetic arithmetic =
        spec.fusion == Fusion::norm_other_arithmetic ? s.ln_fused_arithmetic : s.ln_arithmetic;
    if (arithmetic == LayerNormArithmetic::tflite_int16) {
      std::string problem = TfliteBoundaryProblem(in, s.out);
      if (s.ln_float_out) problem = "tflite_int16 layer norm: its output is codes, not the float layernorm's y";
      for (Mutant m : {Mutant::ln_drop_eps, Mutant::ln_eps_after_sqrt, Mutant::ln_mean_wrong_axis,
                       Mutant::ln_one_pass_variance, Mutant::ln_bf16_variance}) {
        if (problem.empty() && spec.mutant == m) problem = "the layernorm mutants vary the f32 arithmetic";
      }
      if (!problem.empty()) {
        if (why) *why = problem;
        return nullptr;
      }
      return std::make_unique<TfliteLayerNormKernel>(in, s.out);
    }
    NormalizationOrder order = spec.fusion == Fusion::norm_other_order ? s.ln_fused_order : s.ln_order;
    LayerNormDefects defects;
    switch (spec.mutant) {
      case Mutant::ln_drop_eps: defects.drop_eps = true; break;
      case Mutant::ln_eps_after_sqrt: defects.eps_after_sqrt = true; break;
      case Mutant::ln_mean_wrong_axis: defects.mean_over_rows = true; break;
      default: break;
    }
    MisorderForMutant(order, spec.mutant);
    for (NormalizationOrder& short_rows : order.short_rows) MisorderForMutant(short_rows, spec.mutant);
    return std::make_unique<LayerNormKernel>(s, in, order, defects);
  }
};

}  // namespace

std::unique_ptr<const FusedStage> MakeLayerNormStage() { return std::make_unique<LayerNormStage>(); }

}  // namespace fusediff::fused
