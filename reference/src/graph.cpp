// The unfused graph of a pattern draw, stage by stage on whole tensors (NHWC codes), every boundary by its rule.
#include "fusediff/reference/graph.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reference/batchnorm.h"
#include "fusediff/reference/float_conv.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/stage_eval.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {

std::pair<float, float> MultiplierOperands(MultiplierRule rule, float input_scale, float weight_scale) {
  if (rule == MultiplierRule::float_product) return {Fl32Multiply(input_scale, weight_scale), 1.0f};
  return {input_scale, weight_scale};
}

namespace {
constexpr RegionSet kSaturation = region_bit(Region::saturation);
constexpr RegionSet kQuantBoundary = region_bit(Region::quant_boundary);
constexpr RegionSet kKnee = region_bit(Region::knee);

}  // namespace

void RequantizeTensor(GraphTensor& t, const Convention& c, MultiplierRule rule, float input_scale,
                      std::span<const float> weight_scales) {
  std::vector<Requantizer> channels;
  channels.reserve(weight_scales.size());
  for (float sw : weight_scales) {
    const auto [a, b] = MultiplierOperands(rule, input_scale, sw);
    channels.emplace_back(c, a, b);
  }
  for (size_t i = 0; i < t.e.size(); ++i) {
    GraphElement& e = t.e[i];
    const RequantTrace r = channels[i % channels.size()](e.acc);
    e.y = r.u;
    e.regions |= RoundingRegions(r.saturated, r.tie_distance);
  }
}

struct GraphReference::Impl {
  Pattern pattern;
  Convention convention;
  const ActivationTable* table = nullptr;
  double knee_scale = 0;
  std::vector<double> knees;
  // The activation table packed per code: 8 bytes a code instead of the table's 40, so that the int16 table's
  // points, which miss the cache on every sample, are read once at construction.
  ActivationLookup activation;
  mutable std::optional<ActivationEvaluator> evaluator;  // f32 intermediate
  // conv2d+batchnorm+act under a fold reference: the batchnorm stage, and conv2d+act over the folded conv.
  const Stage* batchnorm = nullptr;
  std::unique_ptr<GraphReference> folded;

  // fc+fc under FcReference::declared_fold: the fully connected stage.
  const Stage* fc_fold = nullptr;

  std::vector<GraphElement> RunFoldedBatchNorm(const PatternDraw& draw) const;
  std::vector<GraphElement> RunDeclaredFcFold(const PatternDraw& draw) const;
  std::vector<GraphElement> RunF32(const PatternDraw& draw, GraphTensor& t) const;
  std::vector<GraphElement> RunStages(const PatternDraw& draw, GraphTensor& t) const;
};

// The fold the batchnorm stage's reference names, then the folded conv through conv2d+act.
std::vector<GraphElement> GraphReference::Impl::RunFoldedBatchNorm(const PatternDraw& draw) const {
  const Stage& bn = *batchnorm;
  BatchNormFold fold = bn.bn_fold;
  if (bn.bn_reference == BnReference::exact_fold) fold.precision = FoldPrecision::exact;
  const FoldedConv f = FoldBatchNorm(draw.conv, draw.operands(pattern, StageKind::batchnorm).bn, bn.bn_eps, fold);
  if (!f.refused.empty())
    throw InputError("batchnorm reference (" + std::string(to_string(bn.bn_reference)) + "): " + f.refused);
  PatternDraw folded_draw;
  folded_draw.conv = f.conv;
  folded_draw.input = draw.input;
  return (*folded)(folded_draw);
}

// The fold as Fusion::fold declares it (model/pattern.h), from the declaration, in double: for each output k,
// a_kj = sw2[k] w2[k][j] sw1[j]; W[k][c] = sum_j a_kj w1[j][c] and B[k] = su sw2[k] b2[k] + sum_j a_kj sx b1[j] (j
// ascending); scale max|W|/127 (1 where W is 0); codes round(W / scale) in [-127, 127] and bias round(B / (sx
// scale)) saturated to int32, both half away from zero. Then the folded layer exactly: int64 accumulators
// requantized into the stage's boundary at weight scale fl32(scale).
std::vector<GraphElement> GraphReference::Impl::RunDeclaredFcFold(const PatternDraw& draw) const {
  const ConvCase& fc1 = draw.conv;
  const StageOperands& fc2 = draw.operands(pattern, StageKind::fully_connected);
  const int32_t inputs = fc1.input_channels(), hidden = fc1.output_channels(), outputs = fc_fold->fc_outputs;
  const auto n = static_cast<size_t>(outputs);
  if (fc1.output_height() != 1 || fc1.output_width() != 1 || fc2.weights.size() != n * static_cast<size_t>(hidden) ||
      fc2.bias.size() != n || fc2.weight_scales.size() != n) {
    throw InputError("pattern draw: the fold's layers do not match [" + std::to_string(outputs) + ", " +
                     std::to_string(hidden) + "] over a 1x1 producer output");
  }
  const double sx = fc1.input_quant().scale, su = convention.intermediate.q.scale;
  std::vector<int8_t> codes(n * static_cast<size_t>(inputs));
  std::vector<float> scales(n);
  std::vector<int32_t> bias(n);
  std::vector<double> w(static_cast<size_t>(inputs));
  for (size_t k = 0; k < n; ++k) {
    std::fill(w.begin(), w.end(), 0.0);
    double b = su * fc2.weight_scales[k] * fc2.bias[k];
    for (int32_t j = 0; j < hidden; ++j) {
      const double a = double(fc2.weight_scales[k]) *
                       fc2.weights[k * static_cast<size_t>(hidden) + static_cast<size_t>(j)] *
                       fc1.weight_scales()[static_cast<size_t>(j)];
      for (int32_t c = 0; c < inputs; ++c) w[static_cast<size_t>(c)] += a * fc1.weights()[fc1.weight_index(j, 0, 0, c)];
      b += a * sx * fc1.bias()[static_cast<size_t>(j)];
    }
    double max_abs = 0;
    for (double v : w) max_abs = std::max(max_abs, std::abs(v));
    const double scale = max_abs > 0 ? max_abs / 127.0 : 1.0;
    for (size_t c = 0; c < w.size(); ++c) {
      codes[k * w.size() + c] = static_cast<int8_t>(std::clamp(std::round(w[c] / scale), -127.0, 127.0));
    }
    scales[k] = static_cast<float>(scale);
    bias[k] = static_cast<int32_t>(std::clamp(std::round(b / (sx * scale)), -2147483648.0, 2147483647.0));
  }
  ConvCase folded;
  folded.batch(fc1.batch())
      .input_size(1, 1)
      .input_channels(inputs)
      .output_channels(outputs)
      .kernel_size(1, 1)
      .input_quant(fc1.input_quant())
      .weight_scales(scales)
      .weights(std::move(codes))
      .bias(std::move(bias));
  GraphTensor t;
  t.shape = PatternGeometry{fc1.batch(), 1, 1, outputs};
  const std::vector<int64_t> acc = Conv2DAccumulators(folded, draw.input);
  t.e.resize(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) t.e[i].acc = acc[i];
  Convention layer = convention;
  layer.intermediate.q = fc_fold->out;
  RequantizeTensor(t, layer, MultiplierRule::double_product, fc1.input_quant().scale, scales);
  for (GraphElement& e : t.e) e.key_code = e.y;
  return std::move(t.e);
}

GraphReference::GraphReference(const Pattern& p, const Convention& c, const ActivationTable* activation_table,
                               double knee_scale)
    : impl_(std::make_unique<Impl>()) {
  validate(c);
  validate(p, c);
  Impl& g = *impl_;
  g.pattern = p;
  g.convention = c;
  g.knee_scale = knee_scale;
  g.knees = knee_points(c.activation);
  if (c.intermediate.kind == IntermediateKind::f32) {
    if (c.output.float_value && c.post_ops != PostOpArithmetic::binary32) {
      throw InputError(
          "GraphReference: a float output is defined with binary32 post-ops (the activation's binary32 "
          "result stored in the output format)");
    }
    if (c.float_conv.enabled && !is_conv_act(p))
      throw InputError("GraphReference: a float convolution is conv2d+act only");
    g.evaluator.emplace(c);
    return;
  }
  if (const Stage* fc = find_stage(p, StageKind::fully_connected);
      fc && fc->fc_reference == FcReference::declared_fold) {
    if (pattern_name(p) != "fc+fc") throw InputError("GraphReference: a declared FC fold reference is fc+fc's only");
    g.fc_fold = fc;
  }
  if (!has_stage(p, StageKind::activation)) return;
  if (activation_table == nullptr)
    throw InputError("GraphReference: pattern " + pattern_name(p) + " needs its activation table");
  const Stage* bn = find_stage(g.pattern, StageKind::batchnorm);
  if (bn && !bn->bn_reads_codes && bn->bn_reference != BnReference::graph) {
    g.batchnorm = bn;
    g.folded = std::make_unique<GraphReference>(Pattern{}, c, activation_table, knee_scale);
  }
  g.table = activation_table;
  ActivationLookup& a = g.activation;
  a.qmin = activation_convention(p, c).intermediate.q.type.qmin();
  a.y_of.resize(activation_table->size());
  a.regions_of.resize(activation_table->size());
  for (size_t i = 0; i < activation_table->size(); ++i) {
    const ActivationPoint& point = activation_table->at(a.qmin + static_cast<int32_t>(i));
    a.y_of[i] = point.y;
    a.regions_of[i] = ActivationPointRegions(g.knees, knee_scale, point);
  }
}
GraphReference::~GraphReference() = default;
GraphReference::GraphReference(GraphReference&&) noexcept = default;

uint64_t GraphReference::escalations() const {
  if (impl_->evaluator) return impl_->evaluator->escalations();
  return impl_->table ? impl_->table->escalations() : 0;
}

std::vector<GraphElement> GraphReference::operator()(const PatternDraw& draw) const {
  const Impl& g = *impl_;
  if (g.batchnorm) return g.RunFoldedBatchNorm(draw);
  if (g.fc_fold) return g.RunDeclaredFcFold(draw);
  const ConvCase& conv = draw.conv;
  GraphTensor t;
  t.shape = PatternGeometry{conv.batch(), conv.output_height(), conv.output_width(), conv.output_channels()};
  const std::vector<int64_t> acc = Conv2DAccumulators(conv, draw.input);
  t.e.resize(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) t.e[i].acc = acc[i];
  return g.evaluator ? g.RunF32(draw, t) : g.RunStages(draw, t);
}

// f32 intermediate (conv2d+act, fc+act, conv2d+add+act; validated): v = fl32(fl32(acc) fl32(sx sw[k])), never a
// code; an add stage adds the residual to it in binary32 by its f32 rule.
std::vector<GraphElement> GraphReference::Impl::RunF32(const PatternDraw& draw, GraphTensor& t) const {
  const Convention& c = convention;
  const ConvCase& conv = draw.conv;
  const size_t channels = static_cast<size_t>(conv.output_channels());
  const Stage* add = find_stage(pattern, StageKind::add);
  const std::vector<int32_t>& residual = draw.operands(pattern, StageKind::add).codes;
  if (add && residual.size() != t.e.size()) {
    throw InputError("pattern draw: residual has " + std::to_string(residual.size()) + " codes, the sum has " +
                     std::to_string(t.e.size()) + " elements (no broadcast)");
  }
  // A float convolution (FloatConv) computes v from its float operands instead of from acc.
  std::vector<FloatConvElement> float_conv;
  if (c.float_conv.enabled) float_conv = FloatConvValues(conv, draw.input, c.float_conv, c.float_conv.operands);
  for (size_t i = 0; i < t.e.size(); ++i) {
    // Stored by the graph in its declared float format, if narrower (reference/float_formats.h).
    float v = RoundToFormat(c.float_conv.enabled ? float_conv[i].v
                                                 : F32IntermediateValue(t.e[i].acc, conv.input_quant().scale,
                                                                        conv.weight_scales()[i % channels]),
                            c.intermediate.stored);
    if (add) v = F32PostOpAdd(add->f32_add_rule, v, residual[i], add->residual);
    ActivationPoint point;
    if (c.output.float_value) {
      // A float output: the activation in binary32, stored in the output format, as its ordered code.
      point.v = v;
      point.f = Binary32Activation(c.activation, v);
      t.e[i].y = FloatOutputCode(point.f, *c.output.float_value);
    } else {
      point = (*evaluator)(v);
      t.e[i].y = point.y;
    }
    t.e[i].regions = ActivationPointRegions(knees, knee_scale, point);
  }
  return std::move(t.e);
}

// The producer's requantization into u, then every stage by its reference side (stage_eval.h) in pattern order.
std::vector<GraphElement> GraphReference::Impl::RunStages(const PatternDraw& draw, GraphTensor& t) const {
  const ConvCase& conv = draw.conv;
  RequantizeTensor(t, convention, pattern.multiplier, conv.input_quant().scale, conv.weight_scales());
  QuantParams boundary = convention.intermediate.q;  // the quantization of t's codes
  const bool float_out = float_output(pattern, Fusion::keep_all).has_value();
  for (size_t i = 0; i < pattern.stages.size(); ++i) {
    const Stage& stage = pattern.stages[i];
    if (float_out && i + 1 == pattern.stages.size()) {  // keyed by the codes the float output's stage reads
      for (GraphElement& e : t.e) e.key_code = e.y;
    }
    reference_stage(stage.kind)
        .Apply(stage, StageInputs{pattern, convention, draw, draw.operands(i), activation, boundary}, t);
    boundary = stage_module(stage.kind).output_boundary(stage, boundary, convention);
  }
  if (!keyed_by_activation_input(pattern) && !float_out) {
    for (GraphElement& e : t.e) e.key_code = e.y;
  }
  return std::move(t.e);
}

RegionSet RoundingRegions(bool saturated, double tie_distance) {
  return static_cast<RegionSet>((saturated ? kSaturation : 0) |
                                (tie_distance <= kQuantBoundaryTieDistance ? kQuantBoundary : 0));
}

RegionSet ActivationPointRegions(const std::vector<double>& knees, double knee_scale, const ActivationPoint& point) {
  RegionSet r = RoundingRegions(point.saturated, point.tie_distance);
  for (double p : knees) {
    if (std::abs(point.v - p) <= kKneeHalfWidthLsb * knee_scale) return static_cast<RegionSet>(r | kKnee);
  }
  return r;
}

}  // namespace fusediff::reference
