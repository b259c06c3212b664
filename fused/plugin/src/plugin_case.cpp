#include "fusediff/fused/plugin_case.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "fusediff/fused/lut.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {

namespace {
PluginBoundary BoundaryOf(const QuantParams& q, RoundingMode rounding,
                          ZeroPointOrder order = ZeroPointOrder::after_rounding) {
  return PluginBoundary{q.type.scalar, q.type.narrow, q.type.qmin(), q.type.qmax(), q.scale, q.zero_point, rounding, order};
}

QuantParams QuantOf(const PluginBoundary& b) {
  return QuantParams{QuantType{b.type, b.narrow}, b.scale, b.zero_point};
}

// The stage's arithmetic rule by fusediff's name, where its kind has several.
std::string RuleOf(const Stage& st, const Pattern& p) {
  if (st.kind == StageKind::add) return std::string(to_string(st.add_rule));
  if (st.kind == StageKind::avg_pool) return std::string(to_string(st.pool_rule));
  if (st.kind == StageKind::fully_connected) return std::string(to_string(p.multiplier));
  return {};
}

fusediff_boundary BoundaryToC(const PluginBoundary& b) {
  fusediff_boundary c{};
  c.struct_size = sizeof(fusediff_boundary);
  c.type = ToC(b.type);
  c.narrow = b.narrow ? 1 : 0;
  c.qmin = b.qmin;
  c.qmax = b.qmax;
  c.scale = b.scale;
  c.zero_point = b.zero_point;
  c.rounding = ToC(b.rounding);
  c.zero_point_order = ToC(b.zero_point_order);
  return c;
}

PluginBoundary BoundaryFromC(const fusediff_boundary& c, const std::string& field) {
  if (c.struct_size < sizeof(fusediff_boundary)) {
    throw InputError(field + ".struct_size: " + std::to_string(c.struct_size) + " (at least " +
                     std::to_string(sizeof(fusediff_boundary)) + ")");
  }
  PluginBoundary b;
  b.type = ScalarTypeFromC(c.type, field + ".type");
  b.narrow = c.narrow != 0;
  b.qmin = c.qmin;
  b.qmax = c.qmax;
  b.scale = c.scale;
  b.zero_point = c.zero_point;
  b.rounding = RoundingFromC(c.rounding, field + ".rounding");
  b.zero_point_order = ZeroPointOrderFromC(c.zero_point_order, field + ".zero_point_order");
  return b;
}

const char* OrEmpty(const char* s) { return s ? s : ""; }
}  // namespace

std::vector<std::string> CaseFeatures(const CaseSpec& spec) {
  std::vector<std::string> features;
  features.push_back("producer:" + std::string(to_string(spec.pattern.producer)));
  for (const Stage& st : spec.pattern.stages) {
    std::string name = "stage:" + std::string(st.kind.token());
    if (std::find(features.begin(), features.end(), name) == features.end()) features.push_back(std::move(name));
  }
  const Convention& c = spec.convention;
  if (c.intermediate.kind == IntermediateKind::f32) {
    features.emplace_back("intermediate:f32");
    if (!(c.intermediate.stored == FloatBoundary{})) features.emplace_back("intermediate:stored");
  }
  if (c.output.float_value) features.emplace_back("output:float");
  if (c.float_conv.enabled) features.emplace_back("conv:float");
  if (spec.fusion != Fusion::keep_all) features.push_back("fusion:" + std::string(to_string(spec.fusion)));
  return features;
}

PluginCase MakePluginCase(const CaseSpec& spec, const DrawLimits& limits) {
  const Convention& c = spec.convention;
  PluginCase out;
  out.name = spec.name;
  out.producer = spec.pattern.producer;
  out.limits = limits;
  out.requant = c.requant;
  out.intermediate_kind = c.intermediate.kind;
  out.intermediate = BoundaryOf(c.intermediate.q, c.intermediate.rounding);
  out.output = BoundaryOf(c.output.q, c.output.rounding, c.output.zero_point_order);
  out.post_ops = c.post_ops;
  out.activation = c.activation.kind;
  out.alpha = c.activation.alpha;
  for (const Stage& st : spec.pattern.stages) {
    PluginStage s;
    s.kind = std::string(st.kind.token());
    s.rule = RuleOf(st, spec.pattern);
    s.out = st.kind == StageKind::activation ? out.output : BoundaryOf(st.out, c.intermediate.rounding);
    s.residual = BoundaryOf(st.residual, c.intermediate.rounding);
    if (st.kind == StageKind::max_pool || st.kind == StageKind::avg_pool) {
      s.window_kernel = st.window.kernel;
      s.window_stride = st.window.stride;
      s.window_padding = st.window.padding;
    }
    if (st.kind == StageKind::fully_connected) s.fc_outputs = st.fc_outputs;
    out.stages.push_back(std::move(s));
  }
  // The activation's table, for the boundary it reads.
  if (spec.table) {
    out.table_kind = spec.table->kind;
    out.table_lut = spec.table->lut;
    out.table_knots = spec.table->knots;
    out.table_segments = spec.table->segments;
  } else if (has_stage(spec.pattern, StageKind::activation) && c.intermediate.kind == IntermediateKind::quantized &&
             !c.output.float_value) {
    const Convention act = activation_convention(spec.pattern, c);
    if (act.intermediate.q.type.bits() == 8) {
      out.table_kind = TableKind::lut;
      out.table_lut = LUTPopulateInt8(act.activation, act.intermediate.q, act.output);
    } else if (table_kind_mismatch(TableKind::lut_interp, act).empty()) {
      out.table_kind = TableKind::lut_interp;
      const std::array<int16_t, 513> knots =
          LUTPopulateInt16(act.activation, act.intermediate.q.scale, 0, act.output.q.scale, 0);
      out.table_knots.assign(knots.begin(), knots.end());
    }
  }
  out.features = CaseFeatures(spec);
  if (out.table_kind) out.features.push_back("table:" + std::string(to_string(*out.table_kind)));
  return out;
}

Convention ConventionOf(const PluginCase& p) {
  Convention c;
  c.requant = p.requant;
  c.intermediate.kind = p.intermediate_kind;
  c.intermediate.q = QuantOf(p.intermediate);
  c.intermediate.rounding = p.intermediate.rounding;
  c.output.q = QuantOf(p.output);
  c.output.rounding = p.output.rounding;
  c.output.zero_point_order = p.output.zero_point_order;
  c.activation = Activation{p.activation, p.alpha};
  c.post_ops = p.post_ops;
  return c;
}

CCase::CCase(const PluginCase& c) : source_(c) {
  const PluginCase& s = source_;
  case_.struct_size = sizeof(fusediff_case);
  case_.name = s.name.c_str();
  case_.producer = ToC(s.producer);
  case_.max_batch = s.limits.max_batch;
  case_.max_spatial = s.limits.max_spatial;
  case_.max_channels = s.limits.max_channels;
  case_.max_kernel = s.limits.max_kernel;
  case_.max_stride = s.limits.max_stride;
  case_.max_dilation = s.limits.max_dilation;
  case_.transposed = s.limits.transposed ? 1 : 0;
  case_.weight_range = ToC(s.limits.weights);
  case_.requant = ToC(s.requant);
  case_.intermediate_kind = ToC(s.intermediate_kind);
  case_.intermediate = BoundaryToC(s.intermediate);
  case_.output = BoundaryToC(s.output);
  case_.post_ops = ToC(s.post_ops);
  case_.activation = ToC(s.activation);
  case_.alpha = s.alpha;
  case_.table_kind = s.table_kind ? ToC(*s.table_kind) : FUSEDIFF_TABLE_NONE;
  case_.table_lut = s.table_lut.data();
  case_.table_lut_count = static_cast<uint32_t>(s.table_lut.size());
  case_.table_knots = s.table_knots.data();
  case_.table_knot_count = static_cast<uint32_t>(s.table_knots.size());
  for (const PwlSegment& g : s.table_segments) {
    segments_.push_back(fusediff_pwl_segment{sizeof(fusediff_pwl_segment), g.u_lo, g.u_hi, g.slope, g.offset, g.shift});
  }
  case_.table_segments = segments_.data();
  case_.table_segment_count = static_cast<uint32_t>(segments_.size());
  for (const PluginStage& st : s.stages) {
    fusediff_stage c{};
    c.struct_size = sizeof(fusediff_stage);
    c.kind = st.kind.c_str();
    c.rule = st.rule.c_str();
    c.out = BoundaryToC(st.out);
    c.residual = BoundaryToC(st.residual);
    c.window_kernel = st.window_kernel;
    c.window_stride = st.window_stride;
    c.window_padding = st.window_padding;
    c.fc_outputs = st.fc_outputs;
    stages_.push_back(c);
  }
  case_.stages = stages_.data();
  case_.stage_count = static_cast<uint32_t>(stages_.size());
  for (const std::string& f : s.features) features_.push_back(f.c_str());
  case_.features = features_.data();
  case_.feature_count = static_cast<uint32_t>(features_.size());
}

PluginCase PluginCaseFromC(const fusediff_case& c) {
  if (c.struct_size < sizeof(fusediff_case)) {
    throw InputError("case.struct_size: " + std::to_string(c.struct_size) + " (at least " +
                     std::to_string(sizeof(fusediff_case)) + ")");
  }
  PluginCase p;
  p.name = OrEmpty(c.name);
  p.producer = ProducerFromC(c.producer, "case.producer");
  p.limits = DrawLimits{c.max_batch, c.max_spatial, c.max_channels, c.max_kernel, c.max_stride, c.max_dilation,
                        c.transposed != 0, WeightRangeFromC(c.weight_range, "case.weight_range")};
  p.requant = RequantFromC(c.requant, "case.requant");
  p.intermediate_kind = IntermediateKindFromC(c.intermediate_kind, "case.intermediate_kind");
  p.intermediate = BoundaryFromC(c.intermediate, "case.intermediate");
  p.output = BoundaryFromC(c.output, "case.output");
  p.post_ops = PostOpsFromC(c.post_ops, "case.post_ops");
  p.activation = ActivationFromC(c.activation, "case.activation");
  p.alpha = c.alpha;
  if (c.table_kind != FUSEDIFF_TABLE_NONE) p.table_kind = TableKindFromC(c.table_kind, "case.table_kind");
  p.table_lut.assign(c.table_lut, c.table_lut + c.table_lut_count);
  p.table_knots.assign(c.table_knots, c.table_knots + c.table_knot_count);
  for (uint32_t i = 0; i < c.table_segment_count; ++i) {
    const fusediff_pwl_segment* g = FUSEDIFF_AT(fusediff_pwl_segment, c.table_segments, i);
    p.table_segments.push_back(PwlSegment{g->u_lo, g->u_hi, g->slope, g->offset, g->shift});
  }
  for (uint32_t i = 0; i < c.stage_count; ++i) {
    const fusediff_stage* st = FUSEDIFF_AT(fusediff_stage, c.stages, i);
    const std::string field = "case.stages[" + std::to_string(i) + "]";
    PluginStage s;
    s.kind = OrEmpty(st->kind);
    s.rule = OrEmpty(st->rule);
    s.out = BoundaryFromC(st->out, field + ".out");
    s.residual = BoundaryFromC(st->residual, field + ".residual");
    s.window_kernel = st->window_kernel;
    s.window_stride = st->window_stride;
    s.window_padding = st->window_padding;
    s.fc_outputs = st->fc_outputs;
    p.stages.push_back(std::move(s));
  }
  for (uint32_t i = 0; i < c.feature_count; ++i) p.features.emplace_back(OrEmpty(c.features[i]));
  return p;
}

fusediff_batch* CBatch::Encode(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y) {
  draws_.assign(draws.size(), fusediff_draw{});
  messages_.assign(draws.size() * kMessageCapacity, '\0');
  size_t operand_total = 0;
  for (const PatternDraw& d : draws) operand_total += d.stages.size();
  operands_.assign(operand_total, fusediff_operands{});
  size_t next_operand = 0;
  for (size_t i = 0; i < draws.size(); ++i) {
    const ConvCase& conv = draws[i].conv;
    fusediff_draw& d = draws_[i];
    d.struct_size = sizeof(fusediff_draw);
    d.op = ToC(conv.op());
    d.batch = conv.batch();
    d.input_height = conv.input_height();
    d.input_width = conv.input_width();
    d.input_channels = conv.input_channels();
    d.output_channels = conv.output_channels();
    d.kernel_height = conv.kernel_height();
    d.kernel_width = conv.kernel_width();
    d.stride_height = conv.stride_height();
    d.stride_width = conv.stride_width();
    d.dilation_height = conv.dilation_height();
    d.dilation_width = conv.dilation_width();
    d.padding_top = conv.padding_top();
    d.padding_left = conv.padding_left();
    d.padding_bottom = conv.padding_bottom();
    d.padding_right = conv.padding_right();
    d.output_padding_height = conv.output_padding_height();
    d.output_padding_width = conv.output_padding_width();
    d.output_height = conv.output_height();
    d.output_width = conv.output_width();
    d.input = BoundaryToC(BoundaryOf(conv.input_quant(), RoundingMode::half_away_from_zero));
    d.input_codes = draws[i].input.data();
    d.input_count = draws[i].input.size();
    d.weight_scales = conv.weight_scales().data();
    d.weights = conv.weights().data();
    d.weight_count = conv.weights().size();
    d.bias = conv.bias().data();
    d.operands = operands_.data() + next_operand;
    d.operand_count = static_cast<uint32_t>(draws[i].stages.size());
    for (const StageOperands& s : draws[i].stages) {
      fusediff_operands& o = operands_[next_operand++];
      o.struct_size = sizeof(fusediff_operands);
      o.codes = s.codes.data();
      o.code_count = s.codes.size();
      o.weight_scales = s.weight_scales.data();
      o.weight_scale_count = static_cast<uint32_t>(s.weight_scales.size());
      o.weights = s.weights.data();
      o.weight_count = s.weights.size();
      o.bias = s.bias.data();
      o.bias_count = static_cast<uint32_t>(s.bias.size());
      o.bn_gamma = s.bn.gamma.data();
      o.bn_beta = s.bn.beta.data();
      o.bn_mean = s.bn.mean.data();
      o.bn_var = s.bn.var.data();
      o.bn_count = static_cast<uint32_t>(s.bn.gamma.size());
    }
    d.y = y[i].data();
    d.y_count = y[i].size();
    d.status = FUSEDIFF_ERROR;  // poison: a draw the plugin leaves alone is not taken for an answer
    d.message = fusediff_message{sizeof(fusediff_message), kMessageCapacity, messages_.data() + i * kMessageCapacity};
    d.implementation = nullptr;
  }
  batch_.struct_size = sizeof(fusediff_batch);
  batch_.draws = draws_.data();
  batch_.draw_count = static_cast<uint32_t>(draws_.size());
  return &batch_;
}

DrawOutcome CBatch::Outcome(size_t i) const {
  const fusediff_draw& d = draws_[i];
  DrawOutcome o;
  if (d.implementation) o.implementation = d.implementation;
  // The reason, up to its NUL or the buffer's end (a plugin that fills it without one is not read past it).
  const char* text = d.message.text;
  const std::string reason(text, strnlen(text, kMessageCapacity));
  if (d.status == FUSEDIFF_OK) return o;
  if (d.status != FUSEDIFF_REJECTED) {
    // Never a silent default: a draw without an answer or a rejection is the plugin's error, and fails the run.
    throw InputError("plugin: draw " + std::to_string(i) + " of the batch has status " + std::to_string(d.status) +
                     " (expected FUSEDIFF_OK or FUSEDIFF_REJECTED)" + (reason.empty() ? "" : ": " + reason));
  }
  o.status = DrawOutcome::Status::rejected;
  o.reason = reason.empty() ? "rejected by the plugin (no reason given)" : reason;
  return o;
}

}  // namespace fusediff::fused::plugin
