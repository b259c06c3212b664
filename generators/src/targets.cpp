#include "fusediff/generators/targets.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "fusediff/generators/counter_rng.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/mutants.h"

namespace fusediff::generators {

namespace {
double Sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }
double Softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }
}  // namespace

double ApproximateActivation(const Activation& a, double x) {
  switch (a.kind) {
    case ActivationKind::relu: return std::max(x, 0.0);
    case ActivationKind::relu6: return std::clamp(x, 0.0, 6.0);
    case ActivationKind::leaky_relu: return x >= 0 ? x : double(a.alpha) * x;
    case ActivationKind::hard_sigmoid: return std::clamp(x + 3.0, 0.0, 6.0) / 6.0;
    case ActivationKind::hard_swish: return x * std::clamp(x + 3.0, 0.0, 6.0) / 6.0;
    case ActivationKind::gelu_erf: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case ActivationKind::gelu_tanh: return x * Sigmoid(2.0 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x));
    case ActivationKind::sigmoid: return Sigmoid(x);
    case ActivationKind::tanh: return std::tanh(x);
    case ActivationKind::silu: return x * Sigmoid(x);
    case ActivationKind::elu: return x >= 0 ? x : double(a.alpha) * std::expm1(x);
    case ActivationKind::softplus: return Softplus(x);
    case ActivationKind::mish: return x * std::tanh(Softplus(x));
  }
  return x;
}

namespace {

void AddCode(std::vector<int32_t>& codes, const QuantType& type, int64_t u) {
  if (type.contains(u)) codes.push_back(static_cast<int32_t>(u));
}

void SortUnique(std::vector<int32_t>& codes) {
  std::sort(codes.begin(), codes.end());
  codes.erase(std::unique(codes.begin(), codes.end()), codes.end());
}

// The output value the output rounding rounds, for code u, in double.
double OutputPreRounding(const Convention& c, int32_t u) {
  const double v = double(c.intermediate.q.scale) * (u - c.intermediate.q.zero_point);
  const double t = ApproximateActivation(c.activation, v) / double(c.output.q.scale);
  return c.output.zero_point_order == ZeroPointOrder::before_rounding ? t + c.output.q.zero_point : t;
}

int64_t OutputCode(const Convention& c, int32_t u) {
  const double t = OutputPreRounding(c, u);
  const double code = std::round(t) + (c.output.zero_point_order == ZeroPointOrder::after_rounding ? c.output.q.zero_point : 0);
  return static_cast<int64_t>(std::clamp(code, -1e9, 1e9));
}

// Per-convention code lists are reused by every draw of a case: computing them walks every code (65,536 for
// int16), so they are memoised by the convention's canonical text.
struct CodeLists {
  std::vector<int32_t> knee, knee_centres, saturation, ties, hard;
};
// Returned by value: a cached entry may be evicted by another thread.
CodeLists ListsFor(const Convention& c) {
  static std::mutex mutex;
  static std::map<std::string, CodeLists> cache;
  const std::string key = activation_table_key(c);  // code lists do not depend on requantization
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() > 256) cache.clear();
  CodeLists lists;
  const QuantType& type = c.intermediate.q.type;
  for (double p : knee_points(c.activation)) {
    const double centre = std::round(c.intermediate.q.zero_point + p / double(c.intermediate.q.scale));
    if (!std::isfinite(centre) || std::abs(centre) > 1e6) continue;
    for (int d = -2; d <= 2; ++d) AddCode(lists.knee, type, static_cast<int64_t>(centre) + d);
    AddCode(lists.knee_centres, type, static_cast<int64_t>(centre));
  }
  SortUnique(lists.knee);
  for (int d = 0; d < 3; ++d) {
    AddCode(lists.saturation, type, type.qmin() + d);
    AddCode(lists.saturation, type, type.qmax() - d);
  }
  const int32_t y_min = c.output.q.type.qmin(), y_max = c.output.q.type.qmax();
  std::vector<std::pair<double, int32_t>> tie_distance;
  tie_distance.reserve(type.code_count());
  bool previous_saturated = false;
  for (int32_t u = type.qmin(); u <= type.qmax(); ++u) {
    const int64_t y = OutputCode(c, u);
    const bool saturated = y <= y_min || y >= y_max;
    if (u > type.qmin() && saturated != previous_saturated) {
      for (int d = -2; d <= 1; ++d) AddCode(lists.saturation, type, int64_t{u} + d);
    }
    previous_saturated = saturated;
    const double t = OutputPreRounding(c, u);
    if (std::isfinite(t) && !saturated) tie_distance.emplace_back(std::abs(t - std::floor(t) - 0.5), u);
  }
  SortUnique(lists.saturation);
  const size_t keep = std::min<size_t>(64, tie_distance.size());
  std::partial_sort(tie_distance.begin(), tie_distance.begin() + keep, tie_distance.end());
  for (size_t i = 0; i < keep; ++i) lists.ties.push_back(tie_distance[i].second);
  lists.hard = lists.knee;
  lists.hard.insert(lists.hard.end(), lists.saturation.begin(), lists.saturation.end());
  lists.hard.insert(lists.hard.end(), lists.ties.begin(), lists.ties.begin() + std::min<size_t>(16, lists.ties.size()));
  SortUnique(lists.hard);
  return cache.emplace(key, std::move(lists)).first->second;
}

double RealMultiplier(const Convention& c, float sx, float sw) {
  return double(sx) * double(sw) / double(c.intermediate.q.scale);
}

int64_t ClampAccumulator(double acc) {
  constexpr double kLimit = 2147483000.0;
  return static_cast<int64_t>(std::clamp(acc, -kLimit, kLimit));
}

template <typename T>
const T& Pick(CounterRng& rng, const std::vector<T>& items) {
  return items[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(items.size()) - 1))];
}

Region PickRegion(CounterRng& rng, const RegionMix& mix) {
  const double total = mix.knee + mix.saturation + mix.quant_boundary + mix.bulk;
  double r = rng.uniform01() * total;
  if ((r -= mix.knee) < 0) return Region::knee;
  if ((r -= mix.saturation) < 0) return Region::saturation;
  if ((r -= mix.quant_boundary) < 0) return Region::quant_boundary;
  return Region::bulk;
}

// sum (x - zx) * w over the receptive field of output (0, 0, 0, k): the accumulator without its bias.
int64_t PivotPartialSum(const ConvCase& conv, const std::vector<int32_t>& input, int32_t k) {
  int64_t sum = 0;
  const int32_t zx = conv.input_quant().zero_point;
  if (conv.op() == ConvOp::conv_transpose2d) {  // output (0, 0) gathers iy = (pad_top - ky*d) / s when exact
    for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
      const int32_t ty = conv.padding_top() - ky * conv.dilation_height();
      if (ty < 0 || ty % conv.stride_height() != 0 || ty / conv.stride_height() >= conv.input_height()) continue;
      for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
        const int32_t tx = conv.padding_left() - kx * conv.dilation_width();
        if (tx < 0 || tx % conv.stride_width() != 0 || tx / conv.stride_width() >= conv.input_width()) continue;
        for (int32_t c = 0; c < conv.input_channels(); ++c) {
          sum += int64_t{input[conv.input_index(0, ty / conv.stride_height(), tx / conv.stride_width(), c)] - zx} *
                 conv.weights()[conv.weight_index(k, ky, kx, c)];
        }
      }
    }
    return sum;
  }
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    const int32_t iy = ky * conv.dilation_height() - conv.padding_top();
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      const int32_t ix = kx * conv.dilation_width() - conv.padding_left();
      if (iy < 0 || iy >= conv.input_height() || ix < 0 || ix >= conv.input_width()) continue;
      for (int32_t c = 0; c < conv.input_channels(); ++c) {
        sum += int64_t{input[conv.input_index(0, iy, ix, c)] - zx} * conv.weights()[conv.weight_index(k, ky, kx, c)];
      }
    }
  }
  return sum;
}

}  // namespace

std::vector<int32_t> KneeCodes(const Convention& c) { return ListsFor(c).knee; }
std::vector<int32_t> SaturationCodes(const Convention& c) { return ListsFor(c).saturation; }
std::vector<int32_t> OutputTieCodes(const Convention& c, size_t count) {
  const std::vector<int32_t> ties = ListsFor(c).ties;
  return std::vector<int32_t>(ties.begin(), ties.begin() + std::min(count, ties.size()));
}
std::vector<int32_t> HardCodes(const Convention& c) { return ListsFor(c).hard; }

int64_t AccumulatorForCode(const Convention& c, float sx, float sw, int32_t u, double position) {
  // position 0 is the tie below code u, 1 the tie above; 0.5 the centre of its interval.
  return ClampAccumulator(std::round((u - c.intermediate.q.zero_point - 0.5 + position) / RealMultiplier(c, sx, sw)));
}

std::vector<int64_t> TieAccumulators(const Convention& c, float sx, float sw, int32_t u) {
  const double m = RealMultiplier(c, sx, sw);
  std::vector<int64_t> accs;
  for (double side : {-0.5, 0.5}) {
    const double tie = (u - c.intermediate.q.zero_point + side) / m;
    const double below = std::floor(tie);
    for (double d : {-1.0, 0.0, 1.0, 2.0}) accs.push_back(ClampAccumulator(below + d));
  }
  return accs;
}

std::vector<int64_t> BoundaryAccumulators(const Convention& c, float sx, float sw, int64_t u) {
  const double tie = (double(u) - c.intermediate.q.zero_point - 0.5) / RealMultiplier(c, sx, sw);
  const double below = std::floor(tie);
  return {ClampAccumulator(below - 1), ClampAccumulator(below), ClampAccumulator(below + 1), ClampAccumulator(below + 2)};
}

TargetedDraw GenerateTargetedDraw(uint64_t seed, uint64_t case_stream, uint32_t draw, const Convention& convention,
                                  const RegionMix& mix, const ConvShapeLimits& limits) {
  TargetedDraw out{GenerateConvCase(seed, case_stream, draw, convention, limits), {}, {}};
  out.input = GenerateConvInput(seed, case_stream, draw, out.conv);
  CounterRng rng(seed, case_stream, draw, StreamPurpose::targets);
  const CodeLists lists = ListsFor(convention);
  const QuantType& type = convention.intermediate.q.type;
  std::vector<int32_t> bias = out.conv.bias();
  const float sx = out.conv.input_quant().scale;
  for (int32_t k = 0; k < out.conv.output_channels(); ++k) {
    const float sw = out.conv.weight_scales()[k];
    // Stratified: channel 0 of every draw stays unaimed (bulk), so a targeted stream never starves the plain
    // samples that find easy bugs; the other channels follow the mix.
    const Region region = k == 0 ? Region::bulk : PickRegion(rng, mix);
    out.aimed.push_back(region);
    int64_t target = 0;
    switch (region) {
      case Region::bulk:
        continue;  // the generated bias stays
      case Region::knee: {
        // Mostly the code nearest a knee itself, otherwise one of its neighbours.
        int32_t u = lists.knee.empty() ? int32_t(rng.uniform_int(type.qmin(), type.qmax())) : Pick(rng, lists.knee);
        if (!lists.knee_centres.empty() && rng.chance(3, 4)) u = Pick(rng, lists.knee_centres);
        target = AccumulatorForCode(convention, sx, sw, u, rng.uniform01());
        break;
      }
      case Region::saturation: {
        const int64_t pick = rng.uniform_int(0, 4);
        switch (pick < 2 ? 0 : pick < 4 ? 1 : 2) {
          case 0:  // just inside / outside either end of the intermediate range
            target = Pick(rng, TieAccumulators(convention, sx, sw, rng.chance(1, 2) ? type.qmin() : type.qmax()));
            break;
          case 1: {  // well beyond the range (where a wrapping bug shows)
            const double beyond = (rng.chance(1, 2) ? 1.0 : -1.0) * (1.0 + rng.uniform01()) * 0.5 * type.code_count();
            target = ClampAccumulator(beyond / RealMultiplier(convention, sx, sw));
            break;
          }
          default:  // where the output saturates, and the flat ends
            target = AccumulatorForCode(convention, sx, sw, Pick(rng, lists.saturation), rng.uniform01());
        }
        break;
      }
      case Region::quant_boundary: {
        if (rng.chance(1, 2) && !lists.ties.empty()) {
          target = AccumulatorForCode(convention, sx, sw, lists.ties[rng.uniform_int(0, std::min<int64_t>(15, lists.ties.size() - 1))],
                                        rng.uniform01());
        } else {
          const int32_t u = static_cast<int32_t>(rng.uniform_int(type.qmin(), type.qmax()));
          target = Pick(rng, TieAccumulators(convention, sx, sw, u));
        }
        break;
      }
    }
    const int64_t new_bias = target - PivotPartialSum(out.conv, out.input, k);
    if (new_bias < std::numeric_limits<int32_t>::min() || new_bias > std::numeric_limits<int32_t>::max()) continue;
    const int32_t previous = bias[k];
    bias[k] = static_cast<int32_t>(new_bias);
    out.conv.bias(bias);
    if (out.conv.accumulator_bound(k) > std::numeric_limits<int32_t>::max()) {  // keep the case valid
      bias[k] = previous;
      out.conv.bias(bias);
    }
  }
  return out;
}

namespace {
constexpr ActivationKind kPiecewiseRational[] = {ActivationKind::relu, ActivationKind::relu6, ActivationKind::leaky_relu,
                                                 ActivationKind::hard_sigmoid, ActivationKind::hard_swish};

float Jitter(CounterRng& rng, double value) {
  return static_cast<float>(value * std::exp((rng.uniform01() - 0.5) * std::log(4.0)));  // x [1/2, 2]
}
}  // namespace

namespace {

// 8-bit quantization of [lo, hi] with the scale jittered and the zero point near the centre.
QuantParams JitteredQuant(CounterRng& rng, const QuantType& type, double lo, double hi) {
  QuantParams q;
  q.type = type;
  q.scale = Jitter(rng, (hi - lo) / (double(type.qmax()) - type.qmin()));
  const double centre = type.qmin() - lo / q.scale;
  q.zero_point = static_cast<int32_t>(std::clamp<double>(std::round(centre) + rng.uniform_int(-8, 8), type.qmin(), type.qmax()));
  return q;
}

// The pattern mutants: the pattern and its stages' boundaries, inside the mutant's non-equivalent space
// (model/mutants.cpp in_mutant_space). The conv+act convention drawn above supplies u, the activation and y.
void AddMutantPattern(CaseSpec& spec, CounterRng& rng) {
  Convention& c = spec.convention;
  const ActivationDomain domain = default_domain(c.activation.kind);
  switch (spec.mutant) {
    case Mutant::residual_after_activation:
    case Mutant::residual_output_scale:
    case Mutant::add_skip_intermediate_rounding: {
      spec.pattern = parse_pattern_name("conv2d+add+act", "mutant");
      Stage& add = spec.pattern.stages[0];
      constexpr AddRule kRules[] = {AddRule::tflite, AddRule::onnx_spec, AddRule::ort_mlas, AddRule::ort_mlas_fma,
                                    AddRule::ort_raw};
      add.add_rule = kRules[rng.uniform_int(0, 4)];
      // u and r each cover about half of the activation's input domain; s covers all of it.
      const double mid = 0.5 * (domain.input_lo + domain.input_hi), half = 0.5 * (domain.input_hi - domain.input_lo);
      c.intermediate.q = JitteredQuant(rng, c.intermediate.q.type, mid - half, mid);
      // ONNX Runtime's QLinearAdd takes one scalar type for all three tensors: u's.
      add.residual = JitteredQuant(rng, c.intermediate.q.type, -0.5 * half, 0.5 * half);
      add.out = JitteredQuant(rng, c.intermediate.q.type, domain.input_lo, domain.input_hi);
      if (add.residual.scale == add.out.scale) add.residual.scale *= 1.5f;
      // residual-after-activation adds r into the output boundary: the output shares the type too.
      c.output.q = JitteredQuant(rng, c.intermediate.q.type, domain.output_lo, domain.output_hi);
      break;
    }
    case Mutant::maxpool_before_activation: {
      constexpr ActivationKind kDipping[] = {ActivationKind::gelu_erf, ActivationKind::gelu_tanh, ActivationKind::silu,
                                             ActivationKind::mish, ActivationKind::hard_swish};
      c.activation = make_activation(kDipping[rng.uniform_int(0, 4)]);
      const ActivationDomain d = default_domain(c.activation.kind);
      c.intermediate.q = JitteredQuant(rng, c.intermediate.q.type, d.input_lo, d.input_hi);
      c.output.q = JitteredQuant(rng, c.output.q.type, d.output_lo, d.output_hi);
      spec.pattern = parse_pattern_name("conv2d+act+maxpool", "mutant");
      spec.pattern.stages[1].window = PoolWindow{static_cast<int32_t>(rng.uniform_int(2, 3)),
                                                 static_cast<int32_t>(rng.uniform_int(1, 2)), 0};
      break;
    }
    case Mutant::avgpool_truncate: {
      spec.pattern = parse_pattern_name("conv2d+act+avgpool", "mutant");
      Stage& pool = spec.pattern.stages[1];
      pool.window = PoolWindow{static_cast<int32_t>(rng.uniform_int(2, 3)), static_cast<int32_t>(rng.uniform_int(1, 2)), 0};
      pool.pool_rule = AvgPoolRule::tflite;
      pool.out = c.output.q;
      break;
    }
    case Mutant::fold_across_activation: {
      spec.pattern = parse_pattern_name("fc+act+fc", "mutant");
      Stage& fc = spec.pattern.stages[1];
      fc.out = JitteredQuant(rng, QuantType{ScalarType::int8, false}, -4.0, 4.0);
      fc.fc_outputs = static_cast<int32_t>(rng.uniform_int(1, 4));
      break;
    }
    case Mutant::fc_fold_first_layer_scale: {
      spec.pattern = parse_pattern_name("fc+fc", "mutant");
      spec.fusion = Fusion::fold;
      Stage& fc = spec.pattern.stages[0];
      fc.out = JitteredQuant(rng, QuantType{ScalarType::int8, false}, -8.0, 8.0);
      fc.fc_outputs = static_cast<int32_t>(rng.uniform_int(1, 4));
      fc.fc_reference = FcReference::declared_fold;  // the correct fold matches it exactly
      break;
    }
    case Mutant::bn_drop_eps:
    case Mutant::bn_f16_for_f32:
    case Mutant::bn_per_tensor_for_per_channel:
    case Mutant::bn_bf16_truncate:
    case Mutant::bn_f16_overflow_wraps:
    case Mutant::bn_after_activation: {
      spec.pattern = parse_pattern_name("conv2d+batchnorm+act", "mutant");
      spec.fusion = Fusion::fold;
      Stage& bn = spec.pattern.stages[0];
      bn.bn_reference = BnReference::declared_fold;
      constexpr FoldFormula kFormulas[] = {FoldFormula::pytorch, FoldFormula::ort, FoldFormula::tflite};
      bn.bn_fold.formula = kFormulas[rng.uniform_int(0, 2)];
      bn.bn_fold.weight_quant = WeightQuant::per_channel;
      bn.bn_fold.overflow = FloatOverflow::saturate;  // the search compares every draw: no fold may refuse one
      bn.bn_regime = BnRegime::benign;
      switch (spec.mutant) {
        case Mutant::bn_drop_eps: bn.bn_regime = BnRegime::tiny_variance; break;
        case Mutant::bn_f16_for_f32: bn.bn_regime = rng.chance(1, 2) ? BnRegime::tiny_variance : BnRegime::benign; break;
        case Mutant::bn_bf16_truncate: bn.bn_fold.precision = FoldPrecision::bf16; break;
        case Mutant::bn_f16_overflow_wraps:
          bn.bn_fold.precision = FoldPrecision::f16;
          bn.bn_regime = BnRegime::large_gamma;
          break;
        default: break;
      }
      break;
    }
    case Mutant::bn_fold_across_activation: {
      spec.pattern = parse_pattern_name("conv2d+act+batchnorm", "mutant");
      spec.pattern.stages[1].out = JitteredQuant(rng, c.output.q.type, -4.0, 4.0);
      break;
    }
    case Mutant::mul_skip_output_rounding:
    case Mutant::mul_ignores_input_zero_point: {
      spec.pattern = parse_pattern_name("conv2d+mul+add+act", "mutant");
      Stage& mul = spec.pattern.stages[0];
      Stage& add = spec.pattern.stages[1];
      const bool tflite = rng.chance(1, 2);
      mul.mul_rule = tflite ? MulRule::tflite : MulRule::onnx_spec;
      add.add_rule = tflite ? AddRule::tflite : AddRule::onnx_spec;
      mul.mul_operand = rng.chance(1, 4) ? MulOperand::per_channel : MulOperand::tensor;
      // u spans the activation's input domain, b [-2, 2], the product twice u's span; one 8-bit type (TFLite's).
      const QuantType type = c.intermediate.q.type;
      const double mid = 0.5 * (domain.input_lo + domain.input_hi), half = 0.5 * (domain.input_hi - domain.input_lo);
      c.intermediate.q = JitteredQuant(rng, type, mid - half, mid + half);
      mul.mul_input = JitteredQuant(rng, type, -2.0, 2.0);
      if (mul.mul_input.zero_point == 0) mul.mul_input.zero_point = 5;
      mul.out = JitteredQuant(rng, type, -2.0 * half, 2.0 * half);
      add.residual = JitteredQuant(rng, type, -0.5 * half, 0.5 * half);
      add.out = JitteredQuant(rng, type, domain.input_lo, domain.input_hi);
      break;
    }
    case Mutant::ln_drop_eps:
    case Mutant::ln_eps_after_sqrt:
    case Mutant::ln_one_pass_variance:
    case Mutant::ln_mean_wrong_axis:
    case Mutant::ln_bf16_variance:
    case Mutant::ln_skip_after_norm: {
      // Either layernorm pattern (the skip mutant: fc+add+layernorm), a declared order among the named ones, the
      // rows aimed where the mutant shows: eps near the variance of a row one code off constant for the eps
      // mutants, a large mean for the one-pass variance.
      const bool skip = spec.mutant == Mutant::ln_skip_after_norm || rng.chance(1, 2);
      spec.pattern = parse_pattern_name(skip ? "fc+add+layernorm" : "fc+layernorm+act", "mutant");
      Stage& ln = spec.pattern.stages[skip ? 1 : 0];
      constexpr const char* kOrders[] = {"onednn_jit", "onednn_cpp", "onednn_ref", "ort", "sequential"};
      ln.ln_order = named_normalization_order(kOrders[rng.uniform_int(0, 4)], "mutant");
      const QuantType type = c.intermediate.q.type;
      QuantParams in = c.intermediate.q;
      if (skip) {
        Stage& add = spec.pattern.stages[0];
        add.add_rule = AddRule::onnx_spec;
        add.residual = JitteredQuant(rng, type, domain.input_lo, domain.input_hi);
        add.out = JitteredQuant(rng, type, 2.0 * domain.input_lo, 2.0 * domain.input_hi);
        in = add.out;
      }
      if (spec.mutant == Mutant::ln_drop_eps || spec.mutant == Mutant::ln_eps_after_sqrt) {
        ln.ln_regime = LnRegime::tiny_variance;
        ln.ln_eps = static_cast<float>(double(in.scale) * in.scale * std::ldexp(1.0, -static_cast<int>(rng.uniform_int(0, 6))));
      } else if (spec.mutant == Mutant::ln_one_pass_variance) {
        ln.ln_regime = LnRegime::cancellation;
      }
      ln.out = JitteredQuant(rng, type, -4.0, 4.0);
      break;
    }
    default:
      place_registered_mutant(spec);  // a stage kind's mutant (model/mutants.h)
      break;
  }
}

}  // namespace

CaseSpec GenerateMutantCase(Mutant mutant, bool targeted, uint64_t seed, uint64_t case_stream, uint32_t index) {
  CounterRng rng(seed, case_stream, index, StreamPurpose::convention);
  const bool tie_mutant = mutant == Mutant::zero_point_before_rounding || mutant == Mutant::output_half_even_for_half_away;
  // Convention-space aim: exact output ties need a piecewise-rational activation and a dyadic su/sy.
  // Only the tie-only mutants need it; elsewhere such conventions would narrow the space for nothing.
  const bool make_ties = targeted && tie_mutant;
  CaseSpec spec;
  spec.source = SampleSource::conv;
  spec.mutant = mutant;
  spec.table_kind = mutant == Mutant::interp_truncate ? TableKind::lut_interp : TableKind::lut;
  Convention& c = spec.convention;

  if (mutant == Mutant::gelu_tanh_for_erf) {
    c.activation = make_activation(ActivationKind::gelu_erf);
  } else if (make_ties) {
    c.activation = make_activation(kPiecewiseRational[rng.uniform_int(0, 4)]);
  } else {
    c.activation = make_activation(kAllActivations[rng.uniform_int(0, std::size(kAllActivations) - 1)]);
  }

  constexpr RequantVariant kVariants[] = {RequantVariant::exact, RequantVariant::double_rounding,
                                          RequantVariant::single_rounding, RequantVariant::f32_half_even};
  if (mutant == Mutant::requant_double_for_single) {
    c.requant = RequantVariant::single_rounding;
  } else if (mutant == Mutant::requant_truncate) {
    c.requant = rng.chance(1, 2) ? RequantVariant::double_rounding : RequantVariant::single_rounding;
  } else {
    c.requant = kVariants[rng.uniform_int(0, 3)];
  }
  constexpr RoundingMode kModes[] = {RoundingMode::half_away_from_zero, RoundingMode::half_to_even, RoundingMode::half_up};
  c.intermediate.rounding = fixed_rounding(c.requant).value_or(kModes[rng.uniform_int(0, 2)]);

  const ActivationDomain domain = default_domain(c.activation.kind);
  if (spec.table_kind == TableKind::lut_interp) {
    c.intermediate.q = QuantParams{QuantType{ScalarType::int16, false},
                                   Jitter(rng, std::max(std::abs(domain.input_lo), std::abs(domain.input_hi)) / 32768.0), 0};
    c.output.q = QuantParams{QuantType{ScalarType::int16, false},
                             Jitter(rng, std::max(std::abs(domain.output_lo), std::abs(domain.output_hi)) / 32768.0), 0};
  } else {
    const QuantType u_type = rng.chance(1, 2) ? QuantType{ScalarType::uint8, false}
                                              : QuantType{ScalarType::int8, rng.chance(1, 4)};
    const QuantType y_type = rng.chance(1, 2) ? QuantType{ScalarType::uint8, false} : QuantType{ScalarType::int8, false};
    c.intermediate.q.type = u_type;
    c.output.q.type = y_type;
    if (make_ties) {
      // su = 2^-a, sy = su * 2^b: f(v)/sy = (u - zu) * 2^-b * (piecewise-rational f) hits k + 1/2 exactly.
      c.intermediate.q.scale = std::ldexp(1.0f, -static_cast<int>(rng.uniform_int(3, 5)));
      c.output.q.scale = std::ldexp(c.intermediate.q.scale, static_cast<int>(rng.uniform_int(-1, 1)));
    } else {
      c.intermediate.q.scale = Jitter(rng, (domain.input_hi - domain.input_lo) / 255.0);
      c.output.q.scale = Jitter(rng, (domain.output_hi - domain.output_lo) / 255.0);
    }
    const double centre_u = u_type.qmin() - domain.input_lo / c.intermediate.q.scale;
    c.intermediate.q.zero_point = static_cast<int32_t>(std::clamp<double>(
        std::round(centre_u) + rng.uniform_int(-16, 16), u_type.qmin(), u_type.qmax()));
    const double centre_y = y_type.qmin() - domain.output_lo / c.output.q.scale;
    c.output.q.zero_point = static_cast<int32_t>(std::clamp<double>(
        std::round(centre_y) + rng.uniform_int(-16, 16), y_type.qmin(), y_type.qmax()));
  }
  c.output.rounding = kModes[rng.uniform_int(0, 2)];
  c.output.zero_point_order = rng.chance(1, 2) ? ZeroPointOrder::after_rounding : ZeroPointOrder::before_rounding;

  // Stay inside the mutant's non-equivalent space.
  switch (mutant) {
    case Mutant::ignore_intermediate_zero_point:
      if (c.intermediate.q.zero_point == 0) c.intermediate.q.zero_point = 1;
      break;
    case Mutant::zero_point_before_rounding:
      c.output.zero_point_order = ZeroPointOrder::after_rounding;
      if (c.output.rounding == RoundingMode::half_up) c.output.rounding = RoundingMode::half_to_even;
      if (c.output.q.zero_point == 0) c.output.q.zero_point = c.output.q.type.qmin() < 0 ? -1 : 1;
      if (c.output.rounding == RoundingMode::half_to_even && c.output.q.zero_point % 2 == 0) {
        c.output.q.zero_point += c.output.q.zero_point < c.output.q.type.qmax() ? 1 : -1;
      }
      break;
    case Mutant::output_half_even_for_half_away:
      c.output.rounding = RoundingMode::half_away_from_zero;
      break;
    case Mutant::use_output_scale:
      if (c.intermediate.q.scale == c.output.q.scale) c.output.q.scale *= 2;
      break;
    default:
      break;
  }
  AddMutantPattern(spec, rng);
  validate(spec);
  spec.name = std::string("mutant.") + std::string(to_string(mutant)) + "." + std::to_string(index);
  return spec;
}

}  // namespace fusediff::generators

namespace fusediff::generators {

ConvShapeLimits PatternDrawLimits(const Pattern& pattern, const ConvShapeLimits& base) {
  ConvShapeLimits limits = base;
  if (pattern.producer == Producer::fully_connected) {
    limits.max_spatial = 1;
    limits.max_kernel = 1;
    limits.max_stride = 1;
    limits.max_dilation = 1;
    limits.transposed_share = 0;
    limits.max_channels = 16;
    limits.per_tensor_weight_scale = pattern.multiplier == MultiplierRule::float_product;
  }
  if (const Stage* ln = find_stage(pattern, StageKind::layernorm)) {
    // Rows of 4 to 16 features, or exactly the stage's declared length (long rows: one dedicated case).
    limits.min_output_channels = ln->ln_features > 0 ? ln->ln_features : 4;
    if (ln->ln_features > 0) limits.max_output_channels = ln->ln_features;
    if (ln->ln_regime == LnRegime::exact_rows) {  // one row a draw: the aimed row is every row
      limits.max_batch = 1;
      limits.max_spatial = 1;
      limits.max_kernel = 1;
      limits.transposed_share = 0;
    }
  }
  return limits;
}

namespace {

// The residual code that puts s where the pivot was aimed, from the approximate real value of u (double).
int32_t AimResidual(CounterRng& rng, Region region, double real_u, const Stage& add, const Convention& act) {
  const QuantParams& r = add.residual;
  const QuantParams& s = add.out;
  const auto t_of = [&](int32_t code) { return (real_u + double(r.scale) * (code - r.zero_point)) / s.scale; };
  int32_t best = r.type.qmin();
  double best_score = std::numeric_limits<double>::infinity();
  std::vector<int32_t> knees;
  if (region == Region::knee) knees = KneeCodes(act);
  const int32_t knee = knees.empty() ? 0 : Pick(rng, knees);
  const bool high = rng.chance(1, 2);
  for (int32_t code = r.type.qmin(); code <= r.type.qmax(); ++code) {
    const double t = t_of(code);
    double score = 0;
    switch (region) {
      case Region::quant_boundary: score = std::abs(std::abs(t - std::floor(t)) - 0.5); break;
      case Region::saturation: {  // just past either end of s's type, or at it
        const double edge = high ? s.type.qmax() + 0.5 - s.zero_point : s.type.qmin() - 0.5 - s.zero_point;
        score = std::abs(t - edge);
        break;
      }
      case Region::knee: score = std::abs(t + s.zero_point - knee); break;
      case Region::bulk: return static_cast<int32_t>(rng.uniform_int(r.type.qmin(), r.type.qmax()));
    }
    if (score < best_score) {
      best_score = score;
      best = code;
    }
  }
  return best;
}

// mul's second input code b for a pivot whose input code is a (in: a's quantization): a product nearest a rounding tie
// of the mul's output (quant_boundary), just past or at an end of its type (saturation); uniform elsewhere.
int32_t AimMulInput(CounterRng& rng, Region region, int32_t a, const QuantParams& in, const Stage& mul) {
  const QuantParams& qb = mul.mul_input;
  const QuantParams& o = mul.out;
  if (region != Region::quant_boundary && region != Region::saturation) {
    return static_cast<int32_t>(rng.uniform_int(qb.type.qmin(), qb.type.qmax()));
  }
  const double ratio = double(in.scale) * double(qb.scale) / double(o.scale);
  const bool high = rng.chance(1, 2);
  int32_t best = qb.zero_point;
  double best_score = std::numeric_limits<double>::infinity();
  for (int32_t b = qb.type.qmin(); b <= qb.type.qmax(); ++b) {
    const double t = ratio * (double(a) - in.zero_point) * (double(b) - qb.zero_point);
    const double edge = high ? o.type.qmax() + 0.5 - o.zero_point : o.type.qmin() - 0.5 - o.zero_point;
    const double score = region == Region::quant_boundary ? std::abs(std::abs(t - std::floor(t)) - 0.5) : std::abs(t - edge);
    if (score < best_score) {
      best_score = score;
      best = b;
    }
  }
  return best;
}

// A BatchNorm after the activation (Stage::bn_reads_codes), per channel k, on inputs x = s_in (q - z_in) spanning
// the activation's output range R and an output boundary so; g = gamma / sqrt(var + eps) is the channel's gain.
// The pivot's aimed region picks the channel's parameters:
//   bulk:           g = U(1/2, 1) so / s_in-span ratio (the output spans most of its range), mean and beta inside;
//   saturation:     g 4 to 16 times that, or beta past an end of the output range: most outputs saturate;
//   quant_boundary: g = so / (2 s_in) and beta - g mean a multiple of so (each within binary32's rounding): every
//                   other input code lands within about 2^-20 LSB of a rounding tie;
//   knee:           var near or below eps (0, eps/4, eps, 2 eps), gamma scaled so that g stays in the bulk's range:
//                   the regime where a dropped or misplaced eps shows most.
void AimBatchNormOnCodes(CounterRng& rng, const std::vector<Region>& aimed, const QuantParams& in, const Stage& stage,
                         int32_t channels, BatchNormParams& params) {
  const double span_in = double(in.scale) * (double(in.type.qmax()) - in.type.qmin());
  const double span_out = double(stage.out.scale) * (double(stage.out.type.qmax()) - stage.out.type.qmin());
  const double lo_in = double(in.scale) * (in.type.qmin() - in.zero_point);
  const double lo_out = double(stage.out.scale) * (stage.out.type.qmin() - stage.out.zero_point);
  const double eps = stage.bn_eps;
  params = BatchNormParams{};
  for (int32_t k = 0; k < channels; ++k) {
    const Region region = static_cast<size_t>(k) < aimed.size() ? aimed[static_cast<size_t>(k)] : Region::bulk;
    double var = std::pow(10.0, -2.0 + 2.5 * rng.uniform01());
    double gain = (0.5 + 0.5 * rng.uniform01()) * span_out / span_in * (rng.chance(1, 4) ? -1.0 : 1.0);
    double mean = lo_in + span_in * rng.uniform01();
    double centre = lo_out + span_out * (0.25 + 0.5 * rng.uniform01());  // BN(mean) = beta
    switch (region) {
      case Region::saturation:
        if (rng.chance(1, 2)) gain *= 4.0 + 12.0 * rng.uniform01();
        else centre = rng.chance(1, 2) ? lo_out + 1.2 * span_out : lo_out - 0.2 * span_out;
        break;
      case Region::quant_boundary:
        gain = double(stage.out.scale) / (2.0 * in.scale);
        mean = 0;
        centre = double(stage.out.scale) * std::round((lo_out + 0.5 * span_out) / stage.out.scale);
        break;
      case Region::knee: {
        constexpr double kVarOverEps[] = {0.0, 0.25, 1.0, 2.0};
        var = kVarOverEps[rng.uniform_int(0, 3)] * eps;
        break;
      }
      case Region::bulk: break;
    }
    params.var.push_back(static_cast<float>(var));
    params.gamma.push_back(static_cast<float>(gain * std::sqrt(double(params.var.back()) + eps)));
    params.mean.push_back(static_cast<float>(mean));
    params.beta.push_back(static_cast<float>(centre));
  }
}

// BatchNorm parameters for the stage's regime (model/batchnorm.h BnRegime), and the conv rescaled under them so
// that each channel's pivot keeps the u it was aimed at. Per channel k, with z the conv's real output as the
// targeted draw aimed it (z = acc sx sw ~ su (code - zu)):
//   kk = gamma / sqrt(var + eps) (the regime's gamma and var), g = 2^U(-3, 1) (how much of u the channel spans: the
//   folded weights of the channels differ by g, which is what per-tensor weight quantization squeezes);
//   sw' = sw g / kk (16 significant bits, so that q sw' is exact in binary32): the conv now outputs c = g z / kk;
//   beta = kk mean + (1 - g) z_pivot: BN(c) = g z + (1 - g) z_pivot, which is z_pivot at the pivot;
//   large_mean: the conv's bias carries mean = +-10^U(1, 3) times the conv's real range (its accumulators at their
//   extremes, within int32), so that c - mean cancels, and beta = (1 - g) z_pivot.
// `params`: the stage's own operands in `d`.
void AimBatchNorm(CounterRng& rng, const Stage& stage, const Convention& convention, PatternDraw& d,
                  BatchNormParams& params) {
  ConvCase& conv = d.conv;
  const int32_t channels = conv.output_channels();
  const double sx = conv.input_quant().scale;
  const QuantParams& u = convention.intermediate.q;
  const double range_codes = double(u.type.qmax()) - u.type.qmin();
  std::vector<float> scales = conv.weight_scales();
  std::vector<int32_t> bias = conv.bias();
  params = BatchNormParams{};
  const auto log_uniform = [&rng](double lo_exp10, double hi_exp10) {
    return std::pow(10.0, lo_exp10 + (hi_exp10 - lo_exp10) * rng.uniform01());
  };
  for (int32_t k = 0; k < channels; ++k) {
    const size_t kk_index = static_cast<size_t>(k);
    double gamma = 0.5 + 1.5 * rng.uniform01(), var = log_uniform(-1, 0);
    if (stage.bn_regime == BnRegime::tiny_variance) var = log_uniform(-8, -2);
    if (stage.bn_regime == BnRegime::large_gamma) {
      gamma = log_uniform(1, 3);
      var = log_uniform(-4, -2);
    }
    if (rng.chance(1, 8)) gamma = -gamma;
    const float gamma32 = static_cast<float>(gamma), var32 = static_cast<float>(var);
    const double kk = double(gamma32) / std::sqrt(double(var32) + double(stage.bn_eps));
    const double g = std::exp2(-3.0 + 4.0 * rng.uniform01());
    const double z_pivot = double(PivotPartialSum(conv, d.input, k) + bias[kk_index]) * sx * scales[kk_index];
    int exponent = 0;
    const double fraction = std::frexp(double(scales[kk_index]) * g / std::abs(kk), &exponent);
    float sw = static_cast<float>(std::ldexp(std::round(std::ldexp(fraction, 16)), exponent - 16));
    if (!(sw > 0.0f) || !std::isfinite(sw)) sw = scales[kk_index];
    const double ratio = double(sw) / double(scales[kk_index]);  // c = ratio z (|kk| ratio ~ g)
    scales[kk_index] = sw;
    const double conv_range = range_codes * u.scale * ratio;  // the conv's real output span
    const double slope = kk * ratio;                           // BN(c) = slope z + (beta - kk mean)
    double mean = (2 * rng.uniform01() - 1) * conv_range;
    double beta = 0;
    conv.weight_scales(scales);
    if (stage.bn_regime == BnRegime::large_mean) {
      const double wanted = (rng.chance(1, 2) ? 1 : -1) * log_uniform(1, 3) * conv_range / (sx * sw);
      conv.bias(bias);
      const double room = double(std::numeric_limits<int32_t>::max()) - double(conv.accumulator_bound(k)) - 1.0;
      const double shift = std::clamp(std::round(wanted), -0.9 * room, 0.9 * room);
      bias[kk_index] = static_cast<int32_t>(bias[kk_index] + static_cast<int64_t>(shift));
      mean = shift * sx * sw;
      beta = (1 - slope) * z_pivot;
    } else {
      beta = kk * mean + (1 - slope) * z_pivot;
    }
    params.gamma.push_back(gamma32);
    params.var.push_back(var32);
    params.mean.push_back(static_cast<float>(mean));
    params.beta.push_back(static_cast<float>(beta));
  }
  conv.weight_scales(std::move(scales));
  conv.bias(std::move(bias));
}

}  // namespace

namespace {

// The first row's target codes (the pivots (0, 0, 0, k): element k of the producer's output) for a layernorm regime
// (model/pattern.h LnRegime), on the producer's boundary u:
//   cancellation:  c + U{-2..2} with c three codes inside the end of the type farther from zu;
//   tiny_variance: one code c for the whole row, or (half the draws) one feature one code off;
//   outlier:       zu + U{-3..3}, one feature at an end of the type.
std::vector<int32_t> LayerNormRowCodes(CounterRng& rng, LnRegime regime, const QuantParams& u, int32_t features) {
  const int32_t qmin = u.type.qmin(), qmax = u.type.qmax();
  const auto clamp = [&](int64_t q) { return static_cast<int32_t>(std::clamp<int64_t>(q, qmin, qmax)); };
  std::vector<int32_t> codes(static_cast<size_t>(features));
  switch (regime) {
    case LnRegime::cancellation: {
      const int32_t c = qmax - u.zero_point >= u.zero_point - qmin ? qmax - 3 : qmin + 3;
      for (int32_t& q : codes) q = clamp(c + rng.uniform_int(-2, 2));
      break;
    }
    case LnRegime::tiny_variance: {
      const int32_t c = static_cast<int32_t>(rng.uniform_int(qmin + 1, qmax - 1));
      std::fill(codes.begin(), codes.end(), c);
      if (rng.chance(1, 2)) codes[static_cast<size_t>(rng.uniform_int(0, features - 1))] = c + (rng.chance(1, 2) ? 1 : -1);
      break;
    }
    case LnRegime::outlier: {
      for (int32_t& q : codes) q = clamp(u.zero_point + rng.uniform_int(-3, 3));
      codes[static_cast<size_t>(rng.uniform_int(0, features - 1))] = rng.chance(1, 2) ? qmax : qmin;
      break;
    }
    case LnRegime::benign:
    case LnRegime::mixed:
    case LnRegime::exact_rows: break;  // ExactRowCodes
  }
  return codes;
}

// The deltas of ExactRowCodes' shape on centre c (chosen here), each within the type and +-cap; `fixed` is set to the
// outlier's index (else left at n).
std::vector<int64_t> ExactRowDeltas(CounterRng& rng, const QuantParams& in, int64_t n, int64_t cap, int64_t& c,
                                    size_t& fixed) {
  const int64_t qmin = in.type.qmin(), qmax = in.type.qmax(), z = in.zero_point;
  const int64_t centre_room = std::max<int64_t>(0, (int64_t{1} << 24) / n - cap);
  const auto centre_in = [&](int64_t lo, int64_t hi) {  // within the type and within centre_room of z
    lo = std::max({lo, qmin, z - centre_room});
    hi = std::min({hi, qmax, z + centre_room});
    return lo <= hi ? rng.uniform_int(lo, hi) : std::clamp(z, qmin, qmax);
  };
  std::vector<int64_t> delta(static_cast<size_t>(n), 0);
  switch (rng.uniform_int(0, 3)) {
    case 0: {  // spread
      c = centre_in(qmin, qmax);
      const int64_t w = std::min({cap, c - qmin, qmax - c});
      const int64_t width = w > 0 ? rng.uniform_int(1, w) : 0;
      for (int64_t& d : delta) d = rng.uniform_int(-width, width);
      break;
    }
    case 1: {  // large_mean
      const int64_t end = qmax - z >= z - qmin ? qmax - 3 : qmin + 3;
      c = centre_in(end, end);
      for (int64_t& d : delta) d = std::clamp<int64_t>(rng.uniform_int(-2, 2), qmin - c, qmax - c);
      break;
    }
    case 2: {  // near_constant
      c = centre_in(qmin + 1, qmax - 1);
      if (n >= 2 && rng.chance(1, 2)) {
        const size_t a = static_cast<size_t>(rng.uniform_int(0, n - 1));
        const size_t b = (a + static_cast<size_t>(rng.uniform_int(1, n - 1))) % delta.size();
        delta[a] = 1;
        delta[b] = -1;
      }
      break;
    }
    default: {  // outlier
      c = centre_in(z - 3, z + 3);
      for (int64_t& d : delta) d = std::clamp<int64_t>(rng.uniform_int(-3, 3), qmin - c, qmax - c);
      fixed = static_cast<size_t>(rng.uniform_int(0, n - 1));
      delta[fixed] = std::clamp<int64_t>((rng.chance(1, 2) ? qmax : qmin) - c, -cap, cap);
      break;
    }
  }
  return delta;
}

// Steps the deltas toward a sum of 0, one step per element per pass from a random start, each kept within the type
// around c and within +-cap. A pass that moves nothing lets `fixed` (the outlier) move too (a zero point at the end
// of the type leaves the others no room); then some delta of the sum's sign always steps toward 0.
void BalanceDeltas(CounterRng& rng, const QuantParams& in, int64_t c, int64_t cap, size_t fixed,
                   std::vector<int64_t>& delta) {
  int64_t sum = 0;
  for (int64_t d : delta) sum += d;
  const size_t start = static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(delta.size()) - 1));
  bool stuck = false;
  while (sum != 0) {
    const int64_t step = sum > 0 ? -1 : 1;
    bool moved = false;
    for (size_t i = 0; i < delta.size() && sum != 0; ++i) {
      const size_t j = (start + i) % delta.size();
      const int64_t next = delta[j] + step;
      if ((j == fixed && !stuck) || !in.type.contains(c + next) || std::abs(next) > cap) continue;
      delta[j] = next;
      sum += step;
      moved = true;
    }
    if (!moved && stuck) throw std::logic_error("ExactRowCodes: the deltas cannot be balanced (a generator bug)");
    stuck = !moved;
  }
}

// An exact row (model/pattern.h LnRegime::exact_rows) on the norm's input boundary `in` (scale 2^e, validated):
// q_j = c + delta_j with sum delta_j = 0, so x_j = (c - z + delta_j) 2^e, S = n (c - z) 2^e and mu = (c - z) 2^e are
// exact for any n (benchdnn pairs src[i] + src[i+1] = 2 mean, oneDNN v2.6.3 tests/benchdnn/lnorm/lnorm.cpp:45, 102;
// here any deltas summing to 0), d_j = delta_j 2^e and d_j^2 = delta_j^2 2^(2e). The bounds that make every partial
// sum exact (model/summation_order.h exact_rows_difference (1), (3)): sum |c - z + delta_j| <= 2^24 (units 2^e),
// |delta_j| <= 2^12 (delta^2 exact) and sum delta_j^2 <= 2^24 (units 2^(2e)): each |delta_j| <= cap =
// min(2^12, floor(sqrt(2^24 / n))) and |c - z| <= 2^24 / n - cap. The shape, per draw: spread (deltas uniform in
// +-w), large_mean (c three codes inside the end farther from z, deltas within +-2: the cancellation regime's
// rows), near_constant (every delta 0, or one +1 / -1 pair: a variance of 0 or 2 2^(2e) / n, near eps), outlier
// (c near z, one code at an end of the type). The deltas are then balanced to sum 0 one step per element per pass.
std::vector<int32_t> ExactRowCodes(CounterRng& rng, const QuantParams& in, int32_t features) {
  const int64_t n = features;
  int64_t cap = 1;  // min(2^12, floor(sqrt(2^24 / n)))
  while ((cap + 1) * (cap + 1) * n <= (int64_t{1} << 24) && cap < (int64_t{1} << 12)) ++cap;
  int64_t c = 0;
  size_t fixed = static_cast<size_t>(n);
  std::vector<int64_t> delta = ExactRowDeltas(rng, in, n, cap, c, fixed);
  BalanceDeltas(rng, in, c, cap, fixed, delta);
  std::vector<int32_t> codes(delta.size());
  int64_t units = 0, squares = 0;
  for (size_t j = 0; j < delta.size(); ++j) {
    codes[j] = static_cast<int32_t>(c + delta[j]);
    units += std::abs(c + delta[j] - in.zero_point);
    squares += delta[j] * delta[j];
  }
  if (units > (int64_t{1} << 24) || squares > (int64_t{1} << 24)) {
    throw std::logic_error("ExactRowCodes: a row beyond the exact-rows bounds (a generator bug)");
  }
  return codes;
}

// Exact rows through an add (fc+add+layernorm): s = add(u, r) must land on the exact row's codes. Per feature, the
// pair (u, r) whose real sum (su (u - zu) + sr (r - zr)) / ss + zs is nearest the target code (r = zr first: with
// ss = su the sum is u itself); within 1/4 of it, every add rule (exact, or within its fixed-point error of it)
// rounds to the target. Writes u's target codes into `codes`, r into `residual`.
void AimSumForExactRow(const QuantParams& u, const Stage& add, std::vector<int32_t>& codes, std::vector<int32_t>& residual) {
  const QuantParams& r = add.residual;
  const QuantParams& s = add.out;
  for (size_t k = 0; k < codes.size(); ++k) {
    const double target = codes[k];
    double best = std::numeric_limits<double>::infinity();
    int32_t best_u = 0, best_r = r.zero_point;
    const auto consider = [&](int32_t rc) {
      const double want_u = (double(s.scale) * (target - s.zero_point) - double(r.scale) * (rc - r.zero_point)) / u.scale;
      const int32_t uc = static_cast<int32_t>(std::clamp(std::round(want_u) + u.zero_point, double(u.type.qmin()), double(u.type.qmax())));
      const double got = (double(u.scale) * (uc - u.zero_point) + double(r.scale) * (rc - r.zero_point)) / s.scale + s.zero_point;
      if (std::abs(got - target) < best) {
        best = std::abs(got - target);
        best_u = uc;
        best_r = rc;
      }
    };
    consider(r.zero_point);
    for (int32_t rc = r.type.qmin(); rc <= r.type.qmax() && best > 0; ++rc) consider(rc);
    if (best > 0.25) {
      throw std::logic_error("exact_rows: no (u, r) puts the add's sum within 1/4 of code " + std::to_string(codes[k]) +
                             " (" + format_quant_params(u) + ", r " + format_quant_params(r) + ", s " +
                             format_quant_params(s) + ")");
    }
    codes[k] = best_u;
    residual[k] = best_r;
  }
}

// A layernorm's draw: the regime of this draw (mixed: one of the four; benign where the mix aims at the bulk alone,
// as an unaimed search's does), the first row aimed at it through the
// producer's bias (each feature's accumulator placed mid-interval of its target code), a residual of real 0 on that
// row where an add feeds the norm, and gamma = +-U(1/2, 3/2) (negative one in eight), beta = U(-1/2, 1/2) per
// feature.
void AimLayerNorm(CounterRng& rng, const Stage& ln, const Pattern& pattern, const Convention& convention,
                  const RegionMix& mix, PatternDraw& d) {
  ConvCase& conv = d.conv;
  const int32_t features = conv.output_channels();
  const bool unaimed = mix.knee == 0 && mix.saturation == 0 && mix.quant_boundary == 0;
  const bool exact = ln.ln_regime == LnRegime::exact_rows;  // a promise about every row, aimed whatever the mix
  LnRegime regime = unaimed && !exact ? LnRegime::benign : ln.ln_regime;
  if (regime == LnRegime::mixed) {
    constexpr LnRegime kRegimes[] = {LnRegime::benign, LnRegime::cancellation, LnRegime::tiny_variance,
                                     LnRegime::outlier};
    regime = kRegimes[rng.uniform_int(0, 3)];
  }
  if (regime != LnRegime::benign) {
    const Stage* add = find_stage(pattern, StageKind::add);
    std::vector<int32_t> residual(static_cast<size_t>(features), add ? add->residual.zero_point : 0);
    std::vector<int32_t> codes;
    if (exact) {
      codes = ExactRowCodes(rng, add ? add->out : convention.intermediate.q, features);
      if (add) AimSumForExactRow(convention.intermediate.q, *add, codes, residual);
    } else {
      codes = LayerNormRowCodes(rng, regime, convention.intermediate.q, features);
    }
    std::vector<int32_t> bias = conv.bias();
    for (int32_t k = 0; k < features; ++k) {
      const int64_t target = AccumulatorForCode(convention, conv.input_quant().scale,
                                                conv.weight_scales()[static_cast<size_t>(k)],
                                                codes[static_cast<size_t>(k)], 0.5);
      const int64_t b = target - PivotPartialSum(conv, d.input, k);
      const int32_t previous = bias[static_cast<size_t>(k)];
      if (b >= std::numeric_limits<int32_t>::min() && b <= std::numeric_limits<int32_t>::max()) {
        bias[static_cast<size_t>(k)] = static_cast<int32_t>(b);
        conv.bias(bias);
        if (conv.accumulator_bound(k) <= std::numeric_limits<int32_t>::max()) continue;
        bias[static_cast<size_t>(k)] = previous;  // keep the case valid
        conv.bias(bias);
      }
      if (exact) throw std::logic_error("exact_rows: feature " + std::to_string(k) + " cannot be aimed at its code");
    }
    if (add) {
      std::vector<int32_t>& r = d.operands_of(pattern, StageKind::add).codes;
      for (int32_t k = 0; k < features && static_cast<size_t>(k) < r.size(); ++k) r[static_cast<size_t>(k)] = residual[static_cast<size_t>(k)];
    }
  }
  StageOperands& ops = d.operands_of(pattern, StageKind::layernorm);
  ops.gamma.resize(static_cast<size_t>(features));
  ops.beta.resize(static_cast<size_t>(features));
  for (int32_t k = 0; k < features; ++k) {
    const double g = 0.5 + rng.uniform01();
    ops.gamma[static_cast<size_t>(k)] = static_cast<float>(rng.chance(1, 8) ? -g : g);
    ops.beta[static_cast<size_t>(k)] = static_cast<float>(rng.uniform01() - 0.5);
  }
}

}  // namespace

PatternDraw GeneratePatternDraw(uint64_t seed, uint64_t case_stream, uint32_t draw, const Pattern& pattern,
                                const Convention& convention, const RegionMix& mix, const ConvShapeLimits& limits) {
  TargetedDraw targeted = GenerateTargetedDraw(seed, case_stream, draw, convention, mix, limits);
  PatternDraw d{std::move(targeted.conv), std::move(targeted.input), std::vector<StageOperands>(pattern.stages.size()),
                DrawFormulation(seed, case_stream, draw, limits)};
  CounterRng rng(seed, case_stream, draw, StreamPurpose::pattern);
  const ConvCase& conv = d.conv;
  // The code each pivot's later stage reads (approximately, from the producer's aim): u, then mul's product.
  const QuantParams& u = convention.intermediate.q;
  std::vector<int32_t> pivot_code(static_cast<size_t>(conv.output_channels()));
  for (int32_t k = 0; k < conv.output_channels(); ++k) {
    const double acc = double(PivotPartialSum(conv, d.input, k) + conv.bias()[static_cast<size_t>(k)]);
    const double m = RealMultiplier(convention, conv.input_quant().scale, conv.weight_scales()[static_cast<size_t>(k)]);
    pivot_code[static_cast<size_t>(k)] = static_cast<int32_t>(
        std::clamp(std::round(acc * m) + u.zero_point, double(u.type.qmin()), double(u.type.qmax())));
  }
  QuantParams add_reads = u;  // the boundary the add reads
  if (const Stage* mul = find_stage(pattern, StageKind::mul)) {
    const QuantType& type = mul->mul_input.type;
    std::vector<int32_t>& b = d.operands_of(pattern, StageKind::mul).codes;
    const bool per_channel = mul->mul_operand == MulOperand::per_channel;
    b.resize(per_channel ? static_cast<size_t>(conv.output_channels()) : conv.output_elements());
    for (int32_t& code : b) code = static_cast<int32_t>(rng.uniform_int(type.qmin(), type.qmax()));
    const double ratio = double(u.scale) * double(mul->mul_input.scale) / double(mul->out.scale);
    for (int32_t k = 0; k < conv.output_channels(); ++k) {
      int32_t& pivot = pivot_code[static_cast<size_t>(k)];
      int32_t& code = b[static_cast<size_t>(k)];  // the pivot (0, 0, 0, k) is element k, and channel k's constant
      code = AimMulInput(rng, targeted.aimed[static_cast<size_t>(k)], pivot, u, *mul);
      const double product = std::round(ratio * (double(pivot) - u.zero_point) * (double(code) - mul->mul_input.zero_point));
      pivot = static_cast<int32_t>(std::clamp(product + mul->out.zero_point, double(mul->out.type.qmin()),
                                              double(mul->out.type.qmax())));
    }
    add_reads = mul->out;
  }
  if (const Stage* add = find_stage(pattern, StageKind::add)) {
    const QuantType& type = add->residual.type;
    std::vector<int32_t>& residual = d.operands_of(pattern, StageKind::add).codes;
    residual.resize(conv.output_elements());
    for (int32_t& r : residual) r = static_cast<int32_t>(rng.uniform_int(type.qmin(), type.qmax()));
    const Convention act = activation_convention(pattern, convention);
    for (int32_t k = 0; k < conv.output_channels(); ++k) {
      const Region region = targeted.aimed[static_cast<size_t>(k)];
      if (region == Region::bulk) continue;
      // The pivot (0, 0, 0, k) is output element k (NHWK). The code the add reads there, approximately.
      const double real = double(add_reads.scale) * (pivot_code[static_cast<size_t>(k)] - add_reads.zero_point);
      residual[static_cast<size_t>(k)] = AimResidual(rng, region, real, *add, act);
    }
  }
  if (const Stage* bn = find_stage(pattern, StageKind::batchnorm); bn && bn->bn_reads_codes) {
    AimBatchNormOnCodes(rng, targeted.aimed, activation_convention(pattern, convention).output.q, *bn,
                        conv.output_channels(), d.operands_of(pattern, StageKind::batchnorm).bn);
  } else if (bn) {
    AimBatchNorm(rng, *bn, convention, d, d.operands_of(pattern, StageKind::batchnorm).bn);
  }
  if (const Stage* fc = find_stage(pattern, StageKind::fully_connected)) {
    // The layer reads the producer's codes (through the activation in fc+act+fc): sized like GenerateConvCase.
    const QuantParams in = has_stage(pattern, StageKind::activation) ? convention.output.q : convention.intermediate.q;
    const int32_t hidden = conv.output_channels();
    StageOperands& layer = d.operands_of(pattern, StageKind::fully_connected);
    layer.weights.resize(static_cast<size_t>(fc->fc_outputs) * hidden);
    for (int8_t& w : layer.weights) w = static_cast<int8_t>(rng.uniform_int(-127, 127));
    const double rms_in = 0.5 * (in.type.qmax() - in.type.qmin()) / std::sqrt(3.0);
    const double acc_scale = std::sqrt(double(hidden)) * rms_in * (127.0 / std::sqrt(3.0));
    const double out_range = double(fc->out.type.qmax()) - fc->out.type.qmin();
    for (int32_t j = 0; j < fc->fc_outputs; ++j) {
      const double multiplier = (out_range / 6.0) / acc_scale * std::exp(std::log(2.0) * (rng.uniform01() - 0.5));
      float sw = static_cast<float>(multiplier * fc->out.scale / in.scale);
      if (!(sw > 0.0f) || !std::isfinite(sw)) sw = 1.0f;
      layer.weight_scales.push_back(pattern.multiplier == MultiplierRule::float_product && j > 0 ? layer.weight_scales.front() : sw);
      const int64_t span = static_cast<int64_t>(0.5 * acc_scale) + 1;
      layer.bias.push_back(static_cast<int32_t>(rng.uniform_int(-span, span)));
    }
  }
  if (const Stage* ln = find_stage(pattern, StageKind::layernorm)) AimLayerNorm(rng, *ln, pattern, convention, mix, d);
  return d;
}

}  // namespace fusediff::generators
