// The built-in fused path of a pattern. Every stage is a production kernel (fused_kernel.cpp for the producer and
// the tables, stage_kernel.h for each stage kind); this file only wires them in the order the fusion declares. Its
// Create selects one plan per case: the pattern kept whole (the producer, then each stage's kernel), or a fusion
// that removes a boundary, or a pattern mutant's variant of one; no plan tests a mutant inside its arithmetic.
#include "fusediff/fused/pattern_kernel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fusediff/fused/batchnorm_fold.h"
#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/stage_kernel.h"
#include "fusediff/fused/stages.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/fused/lut.h"
#include "stages/layer_norm_rows.h"
#include "stages/stage_common.h"

namespace fusediff::fused {

namespace {

// The folded layer's per-output-channel weight scale, from its real weights w[c] (FC -> FC fold).
using FoldScale = double (*)(std::span<const double> w, const ConvCase& fc1);

// Declared: max|W|/127, so that the largest weight maps to code 127.
double FoldScaleOwn(std::span<const double> w, const ConvCase&) {
  double max_abs = 0;
  for (double v : w) max_abs = std::max(max_abs, std::abs(v));
  return max_abs > 0 ? max_abs / 127.0 : 1.0;
}

// Mutant fc-fold-first-layer-scale: the first layer's weight scale reused for the folded weights.
double FoldScaleFirstLayer(std::span<const double>, const ConvCase& fc1) { return fc1.weight_scales().front(); }

}  // namespace

struct PatternKernel::Impl {
  using Plan = bool (Impl::*)(const PatternDraw&, std::span<int32_t>, std::string*) const;

  CaseSpec spec;
  Plan plan = nullptr;
  std::unique_ptr<FusedKernel> producer;    // conv/FC int32 kernel, requantization into u, and the table over u
  std::unique_ptr<FusedKernel> activation;  // the table over the activation's own input boundary (add: s)
  std::unique_ptr<FusedKernel> layer;       // the folded layer: requantization into its out
  std::vector<std::unique_ptr<StageKernel>> stages;  // kept whole: one kernel per stage
  std::unique_ptr<StageKernel> pool;                 // pool first: the pool over u's codes
  StageKind pool_kind;
  std::optional<QuantizedAddKernel> add_after_activation;  // mutant residual-after-activation
  const Stage* add_stage = nullptr;
  const Stage* fc_stage = nullptr;
  const Stage* bn_stage = nullptr;
  const Stage* mul_stage = nullptr;
  const Stage* ln_stage = nullptr;
  std::optional<LayerNormRows> ln_rows;  // the layernorm fusions: the norm in the declared order
  FoldScale fold_scale = FoldScaleOwn;
  FoldSteps bn_fold_steps = FoldStepsOf(Mutant::none);

  // Every element of the producer: accumulators and u codes, and the u table's outputs.
  struct ProducerOut {
    std::vector<int32_t> acc, u, y_of_u;
  };
  ProducerOut RunProducer(const PatternDraw& draw) const;

  bool RunKept(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunAddInAccumulator(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunResidualAfterActivation(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunPoolFirst(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunFolded(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunBatchNormFold(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) const;
  bool RunBatchNormAfterActivation(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunBatchNormFoldAcrossActivation(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunMulAddAffine(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunSkipAddF32(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunNormF32IntoAct(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  bool RunSkipAfterNorm(const PatternDraw& draw, std::span<int32_t> y, std::string*) const;
  const StageOperands& LayerNormOperands(const PatternDraw& draw) const;

  std::string SelectPlan();
  std::string CreateStageKernels();
};

PatternKernel::Impl::ProducerOut PatternKernel::Impl::RunProducer(const PatternDraw& draw) const {
  const ConvCase conv = WithMultiplierRule(draw.conv, spec.pattern.multiplier);
  ProducerOut out;
  const size_t n = conv.output_elements();
  out.acc.resize(n);
  out.u.resize(n);
  out.y_of_u.resize(n);
  producer->Run(conv, draw.input, out.y_of_u, out.acc, out.u);
  return out;
}

// Kept whole: u, then each stage's production kernel on the codes the previous one wrote.
bool PatternKernel::Impl::RunKept(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  StageTensor t;
  t.shape = PatternGeometry{draw.conv.batch(), draw.conv.output_height(), draw.conv.output_width(),
                            draw.conv.output_channels()};
  t.codes = RunProducer(draw).u;
  for (size_t i = 0; i < stages.size(); ++i) stages[i]->Run(draw.operands(i), t);
  std::copy(t.codes.begin(), t.codes.end(), y.begin());
  return true;
}

// add_in_accumulator (and mutant add-skip-intermediate-rounding, which computes the same where keep_all is
// declared): one rounding of the accumulator's real value plus the residual's, in double, then the table over s.
bool PatternKernel::Impl::RunAddInAccumulator(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  const ProducerOut producer = RunProducer(draw);
  const size_t n = producer.u.size();
  const std::vector<int32_t>& residual = draw.operands(spec.pattern, StageKind::add).codes;
  if (residual.size() != n) throw InputError("PatternKernel::Run: residual size does not match the conv output");
  const Stage& add = *add_stage;
  const size_t channels = static_cast<size_t>(draw.conv.output_channels());
  for (size_t i = 0; i < n; ++i) {
    const double real =
        double(producer.acc[i]) * draw.conv.input_quant().scale * draw.conv.weight_scales()[i % channels] +
        double(add.residual.scale) * (residual[i] - add.residual.zero_point);
    y[i] = activation->ApplyTable(RoundToType(real / add.out.scale, add.out.zero_point, add.out.type));
  }
  return true;
}

// Mutant residual-after-activation: Act(u) + r, into the output boundary by the add rule.
bool PatternKernel::Impl::RunResidualAfterActivation(const PatternDraw& draw, std::span<int32_t> y,
                                                     std::string*) const {
  const ProducerOut producer = RunProducer(draw);
  const std::vector<int32_t>& residual = draw.operands(spec.pattern, StageKind::add).codes;
  if (residual.size() != producer.u.size()) {
    throw InputError("PatternKernel::Run: residual size does not match the conv output");
  }
  for (size_t i = 0; i < producer.u.size(); ++i) y[i] = (*add_after_activation)(producer.y_of_u[i], residual[i]);
  return true;
}

// pool_first (and mutant maxpool-before-activation): the pool over u's codes, then the table over each result.
bool PatternKernel::Impl::RunPoolFirst(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  StageTensor t;
  t.shape = PatternGeometry{draw.conv.batch(), draw.conv.output_height(), draw.conv.output_width(),
                            draw.conv.output_channels()};
  t.codes = RunProducer(draw).u;
  pool->Run(draw.operands(spec.pattern, pool_kind), t);
  for (size_t i = 0; i < t.codes.size(); ++i) y[i] = activation->ApplyTable(t.codes[i]);
  return true;
}

// The one FC layer that replaces FC1 -> FC2, folded in double: W[k][c] = sum_j sw2[k] w2[k][j] sw1[j] w1[j][c],
// B[k] = su sw2[k] b2[k] + sum_j sw2[k] w2[k][j] sx sw1[j] b1[j]; per output channel scale fold_scale (declared:
// max|W|/127), codes round(W / scale) in [-127, 127], bias round(B / (sx scale)) saturated to int32.
bool PatternKernel::Impl::RunFolded(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  const ConvCase& fc1 = draw.conv;
  const StageOperands& fc2 = draw.operands(spec.pattern, StageKind::fully_connected);
  const int32_t c_in = fc1.input_channels(), hidden = fc1.output_channels(), out = fc_stage->fc_outputs;
  const double sx = fc1.input_quant().scale, su = spec.convention.intermediate.q.scale;
  std::vector<int8_t> weights(static_cast<size_t>(out) * c_in);
  std::vector<float> scales(static_cast<size_t>(out));
  std::vector<int32_t> bias(static_cast<size_t>(out));
  std::vector<double> w(static_cast<size_t>(c_in));
  for (int32_t k = 0; k < out; ++k) {
    const double sw2 = fc2.weight_scales[static_cast<size_t>(k)];
    std::fill(w.begin(), w.end(), 0.0);
    double b = su * sw2 * fc2.bias[static_cast<size_t>(k)];
    for (int32_t j = 0; j < hidden; ++j) {
      const double a =
          sw2 * fc2.weights[static_cast<size_t>(k) * hidden + j] * fc1.weight_scales()[static_cast<size_t>(j)];
      for (int32_t c = 0; c < c_in; ++c) w[static_cast<size_t>(c)] += a * fc1.weights()[fc1.weight_index(j, 0, 0, c)];
      b += a * sx * fc1.bias()[static_cast<size_t>(j)];
    }
    const double scale = fold_scale(w, fc1);
    for (int32_t c = 0; c < c_in; ++c) {
      weights[static_cast<size_t>(k) * c_in + c] =
          static_cast<int8_t>(std::clamp(std::round(w[static_cast<size_t>(c)] / scale), -127.0, 127.0));
    }
    scales[static_cast<size_t>(k)] = static_cast<float>(scale);
    bias[static_cast<size_t>(k)] =
        static_cast<int32_t>(std::clamp(std::round(b / (sx * scale)), -2147483648.0, 2147483647.0));
  }
  ConvCase folded;
  folded.batch(fc1.batch())
      .input_size(1, 1)
      .input_channels(c_in)
      .output_channels(out)
      .kernel_size(1, 1)
      .input_quant(fc1.input_quant())
      .weight_scales(std::move(scales))
      .weights(std::move(weights))
      .bias(std::move(bias));
  std::vector<int32_t> acc(folded.output_elements()), codes(folded.output_elements()), unused(folded.output_elements());
  layer->Run(folded, draw.input, unused, acc, codes);
  std::copy(codes.begin(), codes.end(), y.begin());
  return true;
}

// conv2d+batchnorm+act: fold (by the fold's steps: declared, or a fold mutant's variant of one), quantize, the int conv
// and the table over u.
bool PatternKernel::Impl::RunBatchNormFold(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) const {
  const BatchNormParams& bn = draw.operands(spec.pattern, StageKind::batchnorm).bn;
  validate(bn, static_cast<size_t>(draw.conv.output_channels()), bn_stage->bn_eps, "pattern draw: batchnorm");
  std::string why;
  const ConvCase folded = FoldConvBatchNorm(draw.conv, bn, bn_stage->bn_eps, bn_stage->bn_fold, bn_fold_steps, &why);
  if (!why.empty()) {
    if (rejected) *rejected = why;
    return false;
  }
  producer->Run(folded, draw.input, y);
  return true;
}

// Mutant bn-after-activation: the table over the unfolded conv's u, then BatchNorm on the activation's real output,
// rounded half away from zero into the output boundary (double arithmetic, as a misordered kernel would).
bool PatternKernel::Impl::RunBatchNormAfterActivation(const PatternDraw& draw, std::span<int32_t> y,
                                                      std::string*) const {
  const BatchNormParams& bn = draw.operands(spec.pattern, StageKind::batchnorm).bn;
  validate(bn, static_cast<size_t>(draw.conv.output_channels()), bn_stage->bn_eps, "pattern draw: batchnorm");
  const size_t n = draw.conv.output_elements();
  std::vector<int32_t> acts(n), acc(n), u(n);
  producer->Run(draw.conv, draw.input, acts, acc, u);
  const size_t channels = static_cast<size_t>(draw.conv.output_channels());
  const QuantParams& out = spec.convention.output.q;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = i % channels;
    const double real = double(out.scale) * (acts[i] - out.zero_point);
    const double t =
        double(bn.gamma[k]) * (real - bn.mean[k]) / std::sqrt(double(bn.var[k]) + bn_stage->bn_eps) + bn.beta[k];
    y[i] = RoundToType(t / out.scale, out.zero_point, out.type);
  }
  return true;
}

// conv2d+act+batchnorm folded across the activation (Fusion::fold, illegal: bn-fold-before-activation; and mutant
// bn-fold-across-activation): t = BN(acc sx sw[k]) in double, u = round(t / su) half away from zero, the table
// over u, then the activation's output code requantized into the BatchNorm's boundary (half away from zero).
bool PatternKernel::Impl::RunBatchNormFoldAcrossActivation(const PatternDraw& draw, std::span<int32_t> y,
                                                           std::string*) const {
  const BatchNormParams& bn = draw.operands(spec.pattern, StageKind::batchnorm).bn;
  const size_t channels = static_cast<size_t>(draw.conv.output_channels());
  validate(bn, channels, bn_stage->bn_eps, "pattern draw: batchnorm");
  const ProducerOut producer = RunProducer(draw);
  const QuantParams& u = spec.convention.intermediate.q;
  const QuantParams& act = spec.convention.output.q;
  const QuantParams& out = bn_stage->out;
  for (size_t i = 0; i < producer.acc.size(); ++i) {
    const size_t k = i % channels;
    const double c = double(producer.acc[i]) * draw.conv.input_quant().scale * draw.conv.weight_scales()[k];
    const double t = double(bn.gamma[k]) * (c - bn.mean[k]) / std::sqrt(double(bn.var[k]) + bn_stage->bn_eps) + bn.beta[k];
    const int32_t a = activation->ApplyTable(RoundToType(t / u.scale, u.zero_point, u.type));
    y[i] = RoundToType(double(act.scale) * (a - act.zero_point) / out.scale, out.zero_point, out.type);
  }
  return true;
}

// conv2d+mul+add+act as one affine map (Fusion::mul_add_affine; and mutant mul-skip-output-rounding, which computes
// the same where keep_all is declared): s = round((su (u - zu) sb (b - zb) + sr (r - zr)) / ss) + zs in double, half
// away from zero, then the table over s. u is kept; the product's rounding and saturation are not.
bool PatternKernel::Impl::RunMulAddAffine(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  const ProducerOut producer = RunProducer(draw);
  const size_t n = producer.u.size(), channels = static_cast<size_t>(draw.conv.output_channels());
  const std::vector<int32_t>& b = draw.operands(spec.pattern, StageKind::mul).codes;
  const std::vector<int32_t>& r = draw.operands(spec.pattern, StageKind::add).codes;
  const Stage& mul = *mul_stage;
  const bool per_channel = mul.mul_operand == MulOperand::per_channel;
  if (r.size() != n || b.size() != (per_channel ? channels : n)) {
    throw InputError("PatternKernel::Run: the mul's or the add's input does not match the conv output");
  }
  const QuantParams& u = spec.convention.intermediate.q;
  const Stage& add = *add_stage;
  for (size_t i = 0; i < n; ++i) {
    const double product = double(u.scale) * (producer.u[i] - u.zero_point) * double(mul.mul_input.scale) *
                           (b[per_channel ? i % channels : i] - mul.mul_input.zero_point);
    const double real = product + double(add.residual.scale) * (r[i] - add.residual.zero_point);
    y[i] = activation->ApplyTable(RoundToType(real / add.out.scale, add.out.zero_point, add.out.type));
  }
  return true;
}

const StageOperands& PatternKernel::Impl::LayerNormOperands(const PatternDraw& draw) const {
  const StageOperands& ops = draw.operands(spec.pattern, StageKind::layernorm);
  const size_t features = static_cast<size_t>(draw.conv.output_channels());
  if (ops.gamma.size() != features || ops.beta.size() != features) {
    throw InputError("PatternKernel::Run: layernorm's gamma and beta do not hold one value per feature");
  }
  return ops;
}

// fc+add+layernorm as a fused SkipLayerNorm over dequantized inputs (Fusion::skip_add_f32): x = fl32(fl32(su (u -
// zu)) + fl32(sr (r - zr))), the norm in the declared order, QuantizeLinear into the norm's boundary. s is skipped.
bool PatternKernel::Impl::RunSkipAddF32(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  const ProducerOut producer = RunProducer(draw);
  const std::vector<int32_t>& r = draw.operands(spec.pattern, StageKind::add).codes;
  if (r.size() != producer.u.size()) throw InputError("PatternKernel::Run: residual size does not match the FC output");
  const StageOperands& ln = LayerNormOperands(draw);
  const QuantParams& u = spec.convention.intermediate.q;
  const QuantParams& qr = add_stage->residual;
  std::vector<float> x(r.size()), normed(r.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = u.scale * static_cast<float>(producer.u[i] - u.zero_point) + qr.scale * static_cast<float>(r[i] - qr.zero_point);
  }
  ln_rows->Run(x, static_cast<size_t>(draw.conv.output_channels()), ln.gamma, ln.beta, normed);
  for (size_t i = 0; i < normed.size(); ++i) y[i] = QuantizeLinear(normed[i], ln_stage->out);
  return true;
}

// fc+layernorm+act with the norm's output kept in binary32 (Fusion::norm_f32_into_act): the activation in double on
// LayerNorm(x) gamma + beta, rounded once into the output boundary half away from zero.
bool PatternKernel::Impl::RunNormF32IntoAct(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  const ProducerOut producer = RunProducer(draw);
  const StageOperands& ln = LayerNormOperands(draw);
  const QuantParams& u = spec.convention.intermediate.q;
  std::vector<float> x(producer.u.size()), normed(producer.u.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = u.scale * static_cast<float>(producer.u[i] - u.zero_point);
  ln_rows->Run(x, static_cast<size_t>(draw.conv.output_channels()), ln.gamma, ln.beta, normed);
  const QuantParams& out = spec.convention.output.q;
  for (size_t i = 0; i < normed.size(); ++i) {
    y[i] = RoundToType(EvaluateActivationDouble(spec.convention.activation, normed[i]) / out.scale, out.zero_point,
                       out.type);
  }
  return true;
}

// Mutant ln-skip-after-norm: LayerNorm(u) into the norm's boundary, then + r by the add rule into that boundary.
bool PatternKernel::Impl::RunSkipAfterNorm(const PatternDraw& draw, std::span<int32_t> y, std::string*) const {
  const ProducerOut producer = RunProducer(draw);
  const std::vector<int32_t>& r = draw.operands(spec.pattern, StageKind::add).codes;
  if (r.size() != producer.u.size()) throw InputError("PatternKernel::Run: residual size does not match the FC output");
  const StageOperands& ln = LayerNormOperands(draw);
  const QuantParams& u = spec.convention.intermediate.q;
  std::vector<float> x(producer.u.size()), normed(producer.u.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = u.scale * static_cast<float>(producer.u[i] - u.zero_point);
  ln_rows->Run(x, static_cast<size_t>(draw.conv.output_channels()), ln.gamma, ln.beta, normed);
  const QuantizedAddKernel add(add_stage->add_rule, ln_stage->out, add_stage->residual, ln_stage->out);
  for (size_t i = 0; i < normed.size(); ++i) y[i] = add(QuantizeLinear(normed[i], ln_stage->out), r[i]);
  return true;
}

// One kernel per stage, each reading the boundary the previous one writes.
std::string PatternKernel::Impl::CreateStageKernels() {
  QuantParams in = spec.convention.intermediate.q;
  for (const Stage& s : spec.pattern.stages) {
    const FusedStage* fused = find_fused_stage(s.kind);
    if (!fused) {
      return "pattern " + pattern_name(spec.pattern) + ": stage " + std::string(to_string(s.kind)) +
             " has no built-in fused kernel";
    }
    std::string why;
    std::unique_ptr<StageKernel> kernel = fused->Create(spec, s, in, &why);
    if (!kernel) return "pattern " + pattern_name(spec.pattern) + ": " + why;
    stages.push_back(std::move(kernel));
    in = stage_module(s.kind).output_boundary(s, in, spec.convention);
  }
  return {};
}

// The plan of this case, and what it needs; the reason when the built-in path cannot run it. A pattern mutant
// selects its variant here, once.
std::string PatternKernel::Impl::SelectPlan() {
  const Convention& c = spec.convention;
  const Mutant m = spec.mutant;
  if (bn_stage && bn_stage->bn_reads_codes && (spec.fusion == Fusion::fold || m == Mutant::bn_fold_across_activation)) {
    plan = &Impl::RunBatchNormFoldAcrossActivation;
    return {};
  }
  if (ln_stage && (spec.fusion == Fusion::skip_add_f32 || spec.fusion == Fusion::norm_f32_into_act ||
                   m == Mutant::ln_skip_after_norm)) {
    if (ln_stage->ln_arithmetic != LayerNormArithmetic::f32) {
      return "pattern " + pattern_name(spec.pattern) + ": the layernorm fusions in binary32 need the f32 arithmetic";
    }
    if (ln_stage->ln_in_float || ln_stage->ln_out_float) {  // they run the norm on their own binary32 rows
      return "pattern " + pattern_name(spec.pattern) + ": the layernorm fusions in binary32 declare no float "
             "boundary around the norm (the case declares ln_in_float / ln_out_float)";
    }
    ln_rows.emplace(ln_stage->ln_order, ln_stage->ln_eps);
    if (m == Mutant::ln_skip_after_norm || spec.fusion == Fusion::skip_add_f32) {
      if (!add_stage) return "pattern " + pattern_name(spec.pattern) + ": the skip fusions need an add stage";
      plan = m == Mutant::ln_skip_after_norm ? &Impl::RunSkipAfterNorm : &Impl::RunSkipAddF32;
      return {};
    }
    if (!activation) return "pattern " + pattern_name(spec.pattern) + ": norm_f32_into_act needs an activation";
    plan = &Impl::RunNormF32IntoAct;
    return {};
  }
  if (mul_stage && add_stage && (spec.fusion == Fusion::mul_add_affine || m == Mutant::mul_skip_output_rounding)) {
    plan = &Impl::RunMulAddAffine;
    return {};
  }
  if (bn_stage && !bn_stage->bn_reads_codes) {
    plan = m == Mutant::bn_after_activation ? &Impl::RunBatchNormAfterActivation : &Impl::RunBatchNormFold;
    bn_fold_steps = FoldStepsOf(m);
    return {};
  }
  if (spec.fusion == Fusion::fold || m == Mutant::fold_across_activation || m == Mutant::fc_fold_first_layer_scale) {
    if (!fc_stage) return "pattern " + pattern_name(spec.pattern) + ": the fold fuses a second fully connected layer";
    if (m == Mutant::fc_fold_first_layer_scale) fold_scale = FoldScaleFirstLayer;
    Convention folded = c;
    folded.intermediate.q = fc_stage->out;
    std::string why;
    layer = FusedKernel::Create(folded, TableKind::lut, Mutant::none, &why);
    plan = &Impl::RunFolded;
    return layer ? std::string() : "pattern " + pattern_name(spec.pattern) + ": " + why;
  }
  if (add_stage && m == Mutant::residual_after_activation) {
    add_after_activation.emplace(add_stage->add_rule, c.output.q, add_stage->residual, c.output.q);
    plan = &Impl::RunResidualAfterActivation;
    return {};
  }
  if (add_stage && (spec.fusion == Fusion::add_in_accumulator || m == Mutant::add_skip_intermediate_rounding)) {
    plan = &Impl::RunAddInAccumulator;
    return {};
  }
  const Stage* pool_stage = find_stage(spec.pattern, StageKind::max_pool);
  if (!pool_stage) pool_stage = find_stage(spec.pattern, StageKind::avg_pool);
  if (pool_stage && (spec.fusion == Fusion::pool_first || m == Mutant::maxpool_before_activation)) {
    if (pool_stage->kind == StageKind::avg_pool && !(pool_stage->out == c.output.q)) {
      return "pool_first: the average pool's output quantization must equal the activation's to move it";
    }
    // Pooled before the activation, the average reads and writes u's quantization.
    Stage moved = *pool_stage;
    moved.out = c.intermediate.q;
    std::string why;
    pool = find_fused_stage(moved.kind)->Create(spec, moved, c.intermediate.q, &why);
    pool_kind = moved.kind;
    plan = &Impl::RunPoolFirst;
    return pool ? std::string() : "pattern " + pattern_name(spec.pattern) + ": " + why;
  }
  plan = &Impl::RunKept;
  return CreateStageKernels();
}

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
    if (info.name == pattern_name(p))
      offered = std::find(info.fusions.begin(), info.fusions.end(), spec.fusion) != info.fusions.end();
  }
  if (!offered)
    return reject("pattern " + pattern_name(p) + " has no " + std::string(to_string(spec.fusion)) + " fusion");

  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  Impl& k = *impl;
  k.add_stage = find_stage(k.spec.pattern, StageKind::add);
  k.fc_stage = find_stage(k.spec.pattern, StageKind::fully_connected);
  k.bn_stage = find_stage(k.spec.pattern, StageKind::batchnorm);
  k.mul_stage = find_stage(k.spec.pattern, StageKind::mul);
  k.ln_stage = find_stage(k.spec.pattern, StageKind::layernorm);
  std::string why;
  k.producer = FusedKernel::Create(c, TableKind::lut, Mutant::none, &why);
  if (!k.producer) return reject("pattern " + pattern_name(p) + ": " + why);
  if (has_stage(p, StageKind::activation)) {
    k.activation = FusedKernel::Create(activation_convention(p, c), TableKind::lut, Mutant::none, &why);
    if (!k.activation) return reject("pattern " + pattern_name(p) + ": " + why);
  }
  if (std::string reason = k.SelectPlan(); !reason.empty()) return reject(std::move(reason));
  if (unsupported_reason) unsupported_reason->clear();
  return std::unique_ptr<PatternKernel>(new PatternKernel(std::move(impl)));
}

void PatternKernel::Run(const PatternDraw& draw, std::span<int32_t> y) const {
  std::string rejected;
  if (!TryRun(draw, y, &rejected)) throw std::runtime_error("PatternKernel::Run: the draw is refused: " + rejected);
}

bool PatternKernel::TryRun(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) const {
  const Impl& k = *impl_;
  const PatternGeometry geometry = pattern_output_geometry(k.spec.pattern, draw.conv);
  if (y.size() != geometry.elements()) {
    throw std::invalid_argument("PatternKernel::Run: y has " + std::to_string(y.size()) + " slots, the pattern has " +
                                std::to_string(geometry.elements()) + " outputs");
  }
  return (k.*k.plan)(draw, y, rejected);
}

}  // namespace fusediff::fused
