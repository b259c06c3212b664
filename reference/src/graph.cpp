// The unfused graph of a pattern draw, stage by stage on whole tensors (NHWC codes), every boundary by its rule.
#include "fusediff/reference/graph.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/reference/batchnorm.h"
#include "fusediff/reference/float_conv.h"
#include "fusediff/reference/float_formats.h"
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

// A tensor between two stages (NHWC); each element's y holds its current code.
struct Tensor {
  PatternGeometry shape;
  std::vector<GraphElement> e;
  size_t index(int32_t n, int32_t y, int32_t x, int32_t c) const {
    return ((static_cast<size_t>(n) * shape.height + y) * shape.width + x) * shape.channels + c;
  }
};

// acc -> code for every element: one Requantizer per output channel (the convention's variant and boundary).
void Requantize(Tensor& t, const Convention& c, MultiplierRule rule, float input_scale, std::span<const float> weight_scales) {
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

}  // namespace

struct GraphReference::Impl {
  Pattern pattern;
  Convention convention;
  const ActivationTable* table = nullptr;
  double knee_scale = 0;
  std::vector<double> knees;
  // The activation table packed per code (index code - qmin): y and the regions that follow from the code alone.
  // 8 bytes a code instead of the table's 40: the int16 table's points miss the cache on every sample, these hit.
  int32_t qmin = 0;
  std::vector<int32_t> y_of;
  std::vector<RegionSet> regions_of;
  mutable std::optional<ActivationEvaluator> evaluator;  // f32 intermediate
  // conv2d+batchnorm+act: the batchnorm stage, and conv2d+act over the folded conv (a fold reference).
  const Stage* batchnorm = nullptr;
  std::unique_ptr<GraphReference> folded;

  std::vector<GraphElement> RunBatchNorm(const PatternDraw& draw) const;
};

// The unfolded graph (BatchNorm exactly, then u and the table), or the fold the stage's reference names, then the
// folded conv through conv2d+act.
std::vector<GraphElement> GraphReference::Impl::RunBatchNorm(const PatternDraw& draw) const {
  const Stage& bn = *batchnorm;
  const ConvCase& conv = draw.conv;
  if (bn.bn_reference != BnReference::graph) {
    BatchNormFold fold = bn.bn_fold;
    if (bn.bn_reference == BnReference::exact_fold) fold.precision = FoldPrecision::exact;
    const FoldedConv f = FoldBatchNorm(conv, draw.bn, bn.bn_eps, fold);
    if (!f.refused.empty()) throw InputError("batchnorm reference (" + std::string(to_string(bn.bn_reference)) + "): " + f.refused);
    PatternDraw folded_draw;
    folded_draw.conv = f.conv;
    folded_draw.input = draw.input;
    return (*folded)(folded_draw);
  }
  validate(draw.bn, static_cast<size_t>(conv.output_channels()), bn.bn_eps, "pattern draw: batchnorm");
  const std::vector<int64_t> acc = Conv2DAccumulators(conv, draw.input);
  std::vector<GraphElement> out(acc.size());
  const size_t channels = static_cast<size_t>(conv.output_channels());
  for (size_t i = 0; i < acc.size(); ++i) {
    const size_t k = i % channels;
    const BatchNormCode code = BatchNormToCode(acc[i], conv.input_quant().scale, conv.weight_scales()[k], draw.bn.gamma[k],
                                               draw.bn.beta[k], draw.bn.mean[k], draw.bn.var[k], bn.bn_eps, convention.intermediate);
    GraphElement& e = out[i];
    e.acc = acc[i];
    e.regions = RoundingRegions(code.saturated, code.tie_distance);
    const size_t index = static_cast<size_t>(code.u - qmin);
    e.key_code = code.u;
    e.regions |= regions_of[index];
    e.y = y_of[index];
  }
  return out;
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
      throw InputError("GraphReference: a float output is defined with binary32 post-ops (the activation's binary32 "
                       "result stored in the output format)");
    }
    if (c.float_conv.enabled && !is_conv_act(p)) throw InputError("GraphReference: a float convolution is conv2d+act only");
    g.evaluator.emplace(c);
    return;
  }
  if (!has_stage(p, StageKind::activation)) return;
  if (activation_table == nullptr) throw InputError("GraphReference: pattern " + pattern_name(p) + " needs its activation table");
  g.batchnorm = find_stage(g.pattern, StageKind::batchnorm);
  if (g.batchnorm) g.folded = std::make_unique<GraphReference>(Pattern{}, c, activation_table, knee_scale);
  g.table = activation_table;
  g.qmin = activation_convention(p, c).intermediate.q.type.qmin();
  g.y_of.resize(activation_table->size());
  g.regions_of.resize(activation_table->size());
  for (size_t i = 0; i < activation_table->size(); ++i) {
    const ActivationPoint& point = activation_table->at(g.qmin + static_cast<int32_t>(i));
    g.y_of[i] = point.y;
    g.regions_of[i] = ActivationPointRegions(g.knees, knee_scale, point);
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
  const Pattern& p = g.pattern;
  const Convention& c = g.convention;
  const ConvCase& conv = draw.conv;

  if (g.batchnorm) return g.RunBatchNorm(draw);
  Tensor t;
  t.shape = PatternGeometry{conv.batch(), conv.output_height(), conv.output_width(), conv.output_channels()};
  const std::vector<int64_t> acc = Conv2DAccumulators(conv, draw.input);
  t.e.resize(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) t.e[i].acc = acc[i];

  if (g.evaluator) {
    // f32 intermediate (conv2d+act, fc+act, conv2d+add+act; validated): v = fl32(fl32(acc) fl32(sx sw[k])), never a
    // code; an add stage adds the residual to it in binary32 by its f32 rule.
    const size_t channels = static_cast<size_t>(conv.output_channels());
    const Stage* add = find_stage(p, StageKind::add);
    if (add && draw.residual.size() != t.e.size()) {
      throw std::invalid_argument("pattern draw: residual has " + std::to_string(draw.residual.size()) +
                                  " codes, the sum has " + std::to_string(t.e.size()) + " elements (no broadcast)");
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
      if (add) v = F32PostOpAdd(add->f32_add_rule, v, draw.residual[i], add->residual);
      if (c.output.float_value) {
        // A float output: the activation in binary32, stored in the output format, as its ordered code.
        const float e = Binary32Activation(c.activation, v);
        t.e[i].y = FloatOutputCode(e, *c.output.float_value);
        ActivationPoint point;
        point.v = v;
        point.f = e;
        t.e[i].regions = ActivationPointRegions(g.knees, g.knee_scale, point);
        continue;
      }
      const ActivationPoint point = (*g.evaluator)(v);
      t.e[i].y = point.y;
      t.e[i].regions = ActivationPointRegions(g.knees, g.knee_scale, point);
    }
    return std::move(t.e);
  }

  // Producer: the convention's requantization into u.
  Requantize(t, c, p.multiplier, conv.input_quant().scale, conv.weight_scales());
  QuantParams boundary = c.intermediate.q;  // the quantization of t's codes

  for (const Stage& stage : p.stages) {
    switch (stage.kind) {
      case StageKind::activation: {
        for (GraphElement& e : t.e) {
          const size_t i = static_cast<size_t>(e.y - g.qmin);
          e.key_code = e.y;
          e.regions |= g.regions_of[i];
          e.y = g.y_of[i];
        }
        boundary = c.output.q;
        break;
      }
      case StageKind::add: {
        if (draw.residual.size() != t.e.size()) {
          throw std::invalid_argument("pattern draw: residual has " + std::to_string(draw.residual.size()) + " codes, the sum has " +
                           std::to_string(t.e.size()) + " elements (no broadcast)");
        }
        for (size_t i = 0; i < t.e.size(); ++i) {
          GraphElement& e = t.e[i];
          if (!stage.residual.type.contains(draw.residual[i])) {
            throw InputError("pattern draw: residual[" + std::to_string(i) + "] = " + std::to_string(draw.residual[i]) +
                             " is outside " + to_string(stage.residual.type));
          }
          const StageRounding s = QuantizedAdd(stage.add_rule, e.y, boundary, draw.residual[i], stage.residual, stage.out);
          e.regions |= RoundingRegions(s.saturated, s.tie_distance);
          e.y = s.code;
        }
        boundary = stage.out;
        break;
      }
      case StageKind::max_pool:
      case StageKind::avg_pool: {
        Tensor pooled;
        pooled.shape = t.shape;
        pooled.shape.height = pooled_extent(t.shape.height, stage.window);
        pooled.shape.width = pooled_extent(t.shape.width, stage.window);
        pooled.e.resize(pooled.shape.elements());
        std::vector<int32_t> taps;
        std::vector<const GraphElement*> members;
        for (int32_t n = 0; n < pooled.shape.batch; ++n) {
          for (int32_t py = 0; py < pooled.shape.height; ++py) {
            for (int32_t px = 0; px < pooled.shape.width; ++px) {
              for (int32_t ch = 0; ch < pooled.shape.channels; ++ch) {
                taps.clear();
                members.clear();
                // In-bounds taps only: padding is never a candidate for the max nor counted in the average.
                for (int32_t ky = 0; ky < stage.window.kernel; ++ky) {
                  const int32_t iy = py * stage.window.stride - stage.window.padding + ky;
                  if (iy < 0 || iy >= t.shape.height) continue;
                  for (int32_t kx = 0; kx < stage.window.kernel; ++kx) {
                    const int32_t ix = px * stage.window.stride - stage.window.padding + kx;
                    if (ix < 0 || ix >= t.shape.width) continue;
                    const GraphElement& member = t.e[t.index(n, iy, ix, ch)];
                    taps.push_back(member.y);
                    members.push_back(&member);
                  }
                }
                GraphElement& out = pooled.e[pooled.index(n, py, px, ch)];
                if (stage.kind == StageKind::max_pool) {
                  const size_t arg = static_cast<size_t>(std::max_element(taps.begin(), taps.end()) - taps.begin());
                  out = *members[arg];
                } else {
                  out = *members.front();
                  for (const GraphElement* m : members) out.regions |= m->regions;
                  const StageRounding r = AveragePool(stage.pool_rule, taps, boundary, stage.out);
                  out.regions |= RoundingRegions(r.saturated, r.tie_distance);
                  out.y = r.code;
                }
              }
            }
          }
        }
        t = std::move(pooled);
        if (stage.kind == StageKind::avg_pool) boundary = stage.out;
        break;
      }
      case StageKind::fully_connected: {
        if (t.shape.height != 1 || t.shape.width != 1) {
          throw std::invalid_argument("pattern draw: a fully connected stage reads a flattened [N, K] tensor; the producer output is " +
                           std::to_string(t.shape.height) + "x" + std::to_string(t.shape.width));
        }
        const int32_t in = t.shape.channels;
        const int32_t out = stage.fc_outputs;
        if (draw.fc_weights.size() != static_cast<size_t>(in) * static_cast<size_t>(out) ||
            draw.fc_bias.size() != static_cast<size_t>(out) || draw.fc_weight_scales.size() != static_cast<size_t>(out)) {
          throw std::invalid_argument("pattern draw: FC stage tensors do not match [" + std::to_string(out) + ", " +
                           std::to_string(in) + "]");
        }
        Tensor next;
        next.shape = PatternGeometry{t.shape.batch, 1, 1, out};
        next.e.resize(next.shape.elements());
        for (int32_t n = 0; n < t.shape.batch; ++n) {
          RegionSet inputs = 0;
          for (int32_t k = 0; k < in; ++k) inputs |= t.e[static_cast<size_t>(n) * in + k].regions;
          for (int32_t j = 0; j < out; ++j) {
            // |acc| <= |bias| + 65535 * 127 * 64 < 2^30 + |bias|: exact in int64.
            int64_t sum = draw.fc_bias[static_cast<size_t>(j)];
            for (int32_t k = 0; k < in; ++k) {
              sum += (int64_t{t.e[static_cast<size_t>(n) * in + k].y} - boundary.zero_point) *
                     draw.fc_weights[static_cast<size_t>(j) * in + k];
            }
            GraphElement& e = next.e[static_cast<size_t>(n) * out + j];
            e.acc = sum;
            e.regions = inputs;
          }
        }
        Convention layer = c;
        layer.intermediate.q = stage.out;
        Requantize(next, layer, p.multiplier, boundary.scale, draw.fc_weight_scales);
        t = std::move(next);
        boundary = stage.out;
        break;
      }
      case StageKind::batchnorm: throw std::logic_error("GraphReference: batchnorm is evaluated by RunBatchNorm");
    }
  }
  if (!keyed_by_activation_input(p)) {
    for (GraphElement& e : t.e) e.key_code = e.y;
  }
  return std::move(t.e);
}

RegionSet RoundingRegions(bool saturated, double tie_distance) {
  return static_cast<RegionSet>((saturated ? kSaturation : 0) | (tie_distance <= kQuantBoundaryTieDistance ? kQuantBoundary : 0));
}

RegionSet ActivationPointRegions(const std::vector<double>& knees, double knee_scale, const ActivationPoint& point) {
  RegionSet r = RoundingRegions(point.saturated, point.tie_distance);
  for (double p : knees) {
    if (std::abs(point.v - p) <= kKneeHalfWidthLsb * knee_scale) return static_cast<RegionSet>(r | kKnee);
  }
  return r;
}

}  // namespace fusediff::reference
