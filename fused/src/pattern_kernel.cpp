// The built-in fused path of a pattern. Every stage is a production kernel (fused_kernel.cpp for the producer and
// the tables, stages.cpp for add and average pool); this file only wires them in the order the fusion declares.
#include "fusediff/fused/pattern_kernel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fusediff/fused/batchnorm_fold.h"
#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/stages.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused {

namespace {

// TFLite's per-tensor FC forms sx*sw in float32 and divides by the output scale in double: the same as a conv whose
// input scale is that float product and whose weight scale is 1 (double(product) * 1.0 / su).
ConvCase WithMultiplierRule(const ConvCase& conv, MultiplierRule rule) {
  if (rule == MultiplierRule::double_product) return conv;
  ConvCase folded = conv;
  QuantParams q = conv.input_quant();
  q.scale = conv.input_quant().scale * conv.weight_scales().front();  // binary32 product (per-tensor scales)
  folded.input_quant(q);
  folded.weight_scales(std::vector<float>(conv.weight_scales().size(), 1.0f));
  return folded;
}

// round-half-away-from-zero of a double to a code of `type`, saturating.
int32_t RoundToType(double v, int32_t zero_point, const QuantType& type) {
  const double code = std::round(v) + zero_point;
  return static_cast<int32_t>(std::clamp(code, double(type.qmin()), double(type.qmax())));
}

}  // namespace

struct PatternKernel::Impl {
  CaseSpec spec;
  std::unique_ptr<FusedKernel> producer;    // conv/FC int32 kernel, requantization into u, and the table over u
  std::unique_ptr<FusedKernel> activation;  // the table over the activation's own input boundary (add: s)
  std::unique_ptr<FusedKernel> layer;       // a second FC layer, or the folded layer: requantization into its out
  std::optional<QuantizedAddKernel> add;
  std::optional<QuantizedAddKernel> add_after_activation;  // mutant residual-after-activation
  std::optional<AveragePoolKernel> avg;
  const Stage* add_stage = nullptr;
  const Stage* pool_stage = nullptr;
  const Stage* fc_stage = nullptr;
  const Stage* bn_stage = nullptr;
  bool pool_first = false;
  bool fold = false;

  // Every element of the producer: accumulators and u codes, and the u table's outputs.
  struct ProducerOut {
    std::vector<int32_t> acc, u, y_of_u;
  };
  ProducerOut RunProducer(const PatternDraw& draw) const {
    const ConvCase conv = WithMultiplierRule(draw.conv, spec.pattern.multiplier);
    ProducerOut out;
    const size_t n = conv.output_elements();
    out.acc.resize(n);
    out.u.resize(n);
    out.y_of_u.resize(n);
    producer->Run(conv, draw.input, out.y_of_u, out.acc, out.u);
    return out;
  }

  // The one FC layer that replaces FC1 -> FC2, folded in double: W[k][c] = sum_j sw2[k] w2[k][j] sw1[j] w1[j][c],
  // B[k] = su sw2[k] b2[k] + sum_j sw2[k] w2[k][j] sx sw1[j] b1[j]; per output channel scale max|W|/127, codes
  // round(W / scale) in [-127, 127], bias round(B / (sx scale)) saturated to int32.
  void RunFolded(const PatternDraw& draw, std::span<int32_t> y) const {
    const ConvCase& fc1 = draw.conv;
    const int32_t c_in = fc1.input_channels(), hidden = fc1.output_channels(), out = fc_stage->fc_outputs;
    const double sx = fc1.input_quant().scale, su = spec.convention.intermediate.q.scale;
    std::vector<int8_t> weights(static_cast<size_t>(out) * c_in);
    std::vector<float> scales(static_cast<size_t>(out));
    std::vector<int32_t> bias(static_cast<size_t>(out));
    for (int32_t k = 0; k < out; ++k) {
      const double sw2 = draw.fc_weight_scales[static_cast<size_t>(k)];
      std::vector<double> w(static_cast<size_t>(c_in), 0.0);
      double b = su * sw2 * draw.fc_bias[static_cast<size_t>(k)];
      for (int32_t j = 0; j < hidden; ++j) {
        const double a = sw2 * draw.fc_weights[static_cast<size_t>(k) * hidden + j] * fc1.weight_scales()[static_cast<size_t>(j)];
        for (int32_t c = 0; c < c_in; ++c) w[static_cast<size_t>(c)] += a * fc1.weights()[fc1.weight_index(j, 0, 0, c)];
        b += a * sx * fc1.bias()[static_cast<size_t>(j)];
      }
      double max_abs = 0;
      for (double v : w) max_abs = std::max(max_abs, std::abs(v));
      const double scale = max_abs > 0 ? max_abs / 127.0 : 1.0;
      for (int32_t c = 0; c < c_in; ++c) {
        weights[static_cast<size_t>(k) * c_in + c] =
            static_cast<int8_t>(std::clamp(std::round(w[static_cast<size_t>(c)] / scale), -127.0, 127.0));
      }
      scales[static_cast<size_t>(k)] = static_cast<float>(scale);
      bias[static_cast<size_t>(k)] = static_cast<int32_t>(std::clamp(std::round(b / (sx * scale)), -2147483648.0, 2147483647.0));
    }
    ConvCase folded;
    folded.batch(fc1.batch()).input_size(1, 1).input_channels(c_in).output_channels(out).kernel_size(1, 1)
        .input_quant(fc1.input_quant()).weight_scales(std::move(scales)).weights(std::move(weights)).bias(std::move(bias));
    std::vector<int32_t> acc(folded.output_elements()), codes(folded.output_elements()), unused(folded.output_elements());
    layer->Run(folded, draw.input, unused, acc, codes);
    std::copy(codes.begin(), codes.end(), y.begin());
  }
};

namespace {
// Mutant bn-after-activation: the table over the unfolded conv's u, then BatchNorm on the activation's real output,
// rounded half away from zero into the output boundary (double arithmetic, as a misordered kernel would).
void BatchNormAfterActivation(const FusedKernel& producer, const Convention& c, const Stage& bn, const PatternDraw& draw,
                              std::span<int32_t> y) {
  const size_t n = draw.conv.output_elements();
  std::vector<int32_t> acts(n), acc(n), u(n);
  producer.Run(draw.conv, draw.input, acts, acc, u);
  const size_t channels = static_cast<size_t>(draw.conv.output_channels());
  const QuantParams& out = c.output.q;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = i % channels;
    const double real = double(out.scale) * (acts[i] - out.zero_point);
    const double t = double(draw.bn.gamma[k]) * (real - draw.bn.mean[k]) / std::sqrt(double(draw.bn.var[k]) + bn.bn_eps) +
                     draw.bn.beta[k];
    y[i] = RoundToType(t / out.scale, out.zero_point, out.type);
  }
}
}  // namespace

PatternKernel::PatternKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PatternKernel::~PatternKernel() = default;

std::unique_ptr<PatternKernel> PatternKernel::Create(const CaseSpec& spec, std::string* unsupported_reason) {
  auto reject = [unsupported_reason](std::string reason) -> std::unique_ptr<PatternKernel> {
    if (unsupported_reason != nullptr) *unsupported_reason = std::move(reason);
    return nullptr;
  };
  validate(spec);
  const Pattern& p = spec.pattern;
  const Convention& c = spec.convention;
  if (!uses_table(spec, TableKind::lut)) {
    return reject("the built-in " + pattern_name(p) + " path uses 8-bit lut tables; fused kind " +
                  std::string(fused_path_name(spec)) + " runs conv2d+act only");
  }
  bool offered = false;
  for (const PatternInfo& info : known_patterns()) {
    if (info.name == pattern_name(p)) offered = std::find(info.fusions.begin(), info.fusions.end(), spec.fusion) != info.fusions.end();
  }
  if (!offered) return reject("pattern " + pattern_name(p) + " has no " + std::string(to_string(spec.fusion)) + " fusion");

  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  Impl& k = *impl;
  k.add_stage = find_stage(k.spec.pattern, StageKind::add);
  k.pool_stage = find_stage(k.spec.pattern, StageKind::max_pool);
  if (!k.pool_stage) k.pool_stage = find_stage(k.spec.pattern, StageKind::avg_pool);
  k.fc_stage = find_stage(k.spec.pattern, StageKind::fully_connected);
  k.bn_stage = find_stage(k.spec.pattern, StageKind::batchnorm);
  k.pool_first = spec.fusion == Fusion::pool_first || spec.mutant == Mutant::maxpool_before_activation;
  k.fold = spec.fusion == Fusion::fold || spec.mutant == Mutant::fold_across_activation;

  std::string why;
  k.producer = FusedKernel::Create(c, TableKind::lut, Mutant::none, &why);
  if (!k.producer) return reject("pattern " + pattern_name(p) + ": " + why);
  if (has_stage(p, StageKind::activation)) {
    k.activation = FusedKernel::Create(activation_convention(p, c), TableKind::lut, Mutant::none, &why);
    if (!k.activation) return reject("pattern " + pattern_name(p) + ": " + why);
  }
  if (k.add_stage) {
    QuantParams residual = k.add_stage->residual;
    if (spec.mutant == Mutant::residual_output_scale) residual.scale = k.add_stage->out.scale;
    k.add.emplace(k.add_stage->add_rule, c.intermediate.q, residual, k.add_stage->out);
    if (spec.mutant == Mutant::residual_after_activation) {
      k.add_after_activation.emplace(k.add_stage->add_rule, c.output.q, k.add_stage->residual, c.output.q);
    }
  }
  if (k.pool_stage && k.pool_stage->kind == StageKind::avg_pool) {
    if (k.pool_first && !(k.pool_stage->out == c.output.q)) {
      return reject("pool_first: the average pool's output quantization must equal the activation's to move it");
    }
    // Pooled before the activation, the average reads and writes u's quantization.
    const QuantParams in = k.pool_first ? c.intermediate.q : c.output.q;
    const QuantParams out = k.pool_first ? c.intermediate.q : k.pool_stage->out;
    k.avg.emplace(k.pool_stage->pool_rule, in, out);
  }
  if (k.fc_stage) {
    Convention layer = c;
    layer.intermediate.q = k.fc_stage->out;
    k.layer = FusedKernel::Create(layer, TableKind::lut, Mutant::none, &why);
    if (!k.layer) return reject("pattern " + pattern_name(p) + ": " + why);
  }
  if (unsupported_reason) unsupported_reason->clear();
  return std::unique_ptr<PatternKernel>(new PatternKernel(std::move(impl)));
}

void PatternKernel::Run(const PatternDraw& draw, std::span<int32_t> y) const {
  std::string rejected;
  if (!TryRun(draw, y, &rejected)) throw std::runtime_error("PatternKernel::Run: the draw is refused: " + rejected);
}

bool PatternKernel::TryRun(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) const {
  const Impl& k = *impl_;
  const Pattern& p = k.spec.pattern;
  const Convention& c = k.spec.convention;
  const PatternGeometry geometry = pattern_output_geometry(p, draw.conv);
  if (y.size() != geometry.elements()) {
    throw std::invalid_argument("PatternKernel::Run: y has " + std::to_string(y.size()) + " slots, the pattern has " +
                     std::to_string(geometry.elements()) + " outputs");
  }
  if (k.bn_stage) {
    // conv2d+batchnorm+act: fold (declared), quantize, the int conv and the table over u.
    validate(draw.bn, static_cast<size_t>(draw.conv.output_channels()), k.bn_stage->bn_eps, "pattern draw: batchnorm");
    if (k.spec.mutant == Mutant::bn_after_activation) {
      BatchNormAfterActivation(*k.producer, c, *k.bn_stage, draw, y);
      return true;
    }
    std::string why;
    const ConvCase folded = FoldConvBatchNorm(draw.conv, draw.bn, k.bn_stage->bn_eps, k.bn_stage->bn_fold,
                                              FoldBugsOf(k.spec.mutant), &why);
    if (!why.empty()) {
      if (rejected) *rejected = why;
      return false;
    }
    k.producer->Run(folded, draw.input, y);
    return true;
  }
  if (k.fold) {
    k.RunFolded(draw, y);
    return true;
  }
  Impl::ProducerOut producer = k.RunProducer(draw);
  const size_t n = producer.u.size();
  const int32_t channels = draw.conv.output_channels();

  if (k.add_stage == nullptr && k.pool_stage == nullptr && k.fc_stage == nullptr) {
    std::copy(producer.y_of_u.begin(), producer.y_of_u.end(), y.begin());  // fc+act: the table over u
    return true;
  }
  if (k.add_stage) {
    if (draw.residual.size() != n) throw std::invalid_argument("PatternKernel::Run: residual size does not match the conv output");
    for (size_t i = 0; i < n; ++i) {
      const int32_t r = draw.residual[i];
      if (k.add_after_activation) {
        y[i] = (*k.add_after_activation)(producer.y_of_u[i], r);
        continue;
      }
      int32_t s = 0;
      if (k.spec.fusion == Fusion::add_in_accumulator || k.spec.mutant == Mutant::add_skip_intermediate_rounding) {
        // One rounding of the accumulator's real value plus the residual's, in double.
        const int32_t ch = static_cast<int32_t>(i % static_cast<size_t>(channels));
        const double real = double(producer.acc[i]) * draw.conv.input_quant().scale * draw.conv.weight_scales()[static_cast<size_t>(ch)] +
                            double(k.add_stage->residual.scale) * (r - k.add_stage->residual.zero_point);
        s = RoundToType(real / k.add_stage->out.scale, k.add_stage->out.zero_point, k.add_stage->out.type);
      } else {
        s = (*k.add)(producer.u[i], r);
      }
      y[i] = k.activation->ApplyTable(s);
    }
    return true;
  }
  if (k.pool_stage) {
    // Window over the producer's spatial grid; the values pooled are the u codes (pool first) or their table
    // outputs (kept).
    const int32_t height = draw.conv.output_height(), width = draw.conv.output_width();
    const std::vector<int32_t>& values = k.pool_first ? producer.u : producer.y_of_u;
    const PoolWindow& w = k.pool_stage->window;
    std::vector<int32_t> taps;
    size_t out = 0;
    for (int32_t b = 0; b < geometry.batch; ++b) {
      for (int32_t py = 0; py < geometry.height; ++py) {
        for (int32_t px = 0; px < geometry.width; ++px) {
          for (int32_t ch = 0; ch < geometry.channels; ++ch, ++out) {
            taps.clear();
            for (int32_t ky = 0; ky < w.kernel; ++ky) {
              const int32_t iy = py * w.stride - w.padding + ky;
              if (iy < 0 || iy >= height) continue;
              for (int32_t kx = 0; kx < w.kernel; ++kx) {
                const int32_t ix = px * w.stride - w.padding + kx;
                if (ix < 0 || ix >= width) continue;
                taps.push_back(values[draw.conv.output_index(b, iy, ix, ch)]);
              }
            }
            int32_t pooled = 0;
            if (k.pool_stage->kind == StageKind::max_pool) {
              pooled = *std::max_element(taps.begin(), taps.end());
            } else if (k.spec.mutant == Mutant::avgpool_truncate) {
              pooled = AveragePoolTruncating(taps);
            } else {
              pooled = (*k.avg)(taps);
            }
            y[out] = k.pool_first ? k.activation->ApplyTable(pooled) : pooled;
          }
        }
      }
    }
    return true;
  }
  // A second FC layer over the flattened [N, K] producer output (through the activation in fc+act+fc).
  const std::vector<int32_t>& hidden = k.activation ? producer.y_of_u : producer.u;
  const QuantParams in_q = k.activation ? c.output.q : c.intermediate.q;
  ConvCase fc2;
  fc2.batch(draw.conv.batch()).input_size(1, 1).input_channels(channels).output_channels(k.fc_stage->fc_outputs)
      .kernel_size(1, 1).input_quant(in_q).weight_scales(draw.fc_weight_scales).weights(draw.fc_weights).bias(draw.fc_bias);
  const ConvCase layer = WithMultiplierRule(fc2, p.multiplier);
  std::vector<int32_t> acc(layer.output_elements()), codes(layer.output_elements()), unused(layer.output_elements());
  k.layer->Run(layer, hidden, unused, acc, codes);
  std::copy(codes.begin(), codes.end(), y.begin());
  return true;
}

}  // namespace fusediff::fused
