// XNNPACK's fused and unfused graphs of conv2d+act and fc+act (xnnpack_path.h).
#include "xnnpack_path.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fusediff/model/pattern.h"
#include "xnnpack_ops.h"

namespace fusediff::fused::xnnpack {

bool IsTableActivation(ActivationKind kind) {
  return kind == ActivationKind::sigmoid || kind == ActivationKind::tanh || kind == ActivationKind::elu ||
         kind == ActivationKind::leaky_relu;
}

Convention XnnpackConvention(const Convention& graph) {
  Convention c = graph;
  c.requant = RequantVariant::f32_half_even;
  c.intermediate.rounding = RoundingMode::half_to_even;
  c.output.rounding = RoundingMode::half_to_even;
  c.output.zero_point_order = ZeroPointOrder::after_rounding;
  if (IsTableActivation(graph.activation.kind)) c.post_ops = PostOpArithmetic::binary32_libm;
  return c;
}

namespace {
bool Refuse(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

constexpr std::string_view kPatterns[] = {"conv2d+act", "fc+act", "conv2d+add+act", "conv2d+act+maxpool",
                                          "conv2d+act+avgpool"};

// What XNNPACK can express of a case, checked before any operator is created.
bool Expressible(const CaseSpec& spec, std::string* why) {
  if (spec.mutant != Mutant::none) return Refuse(why, "mutants are injected into the built-in fused paths only");
  if (spec.fusion != Fusion::keep_all) {
    return Refuse(why,
                  "XNNPACK's graphs keep every boundary (fusion keep_all), not " + std::string(to_string(spec.fusion)));
  }
  const std::string name = pattern_name(spec.pattern);
  if (std::find(std::begin(kPatterns), std::end(kPatterns), name) == std::end(kPatterns)) {
    return Refuse(why,
                  "XNNPACK's paths run conv2d+act, fc+act, conv2d+add+act, conv2d+act+maxpool and "
                  "conv2d+act+avgpool, not " +
                      name);
  }
  const Convention& c = spec.convention;
  if (c.intermediate.kind != IntermediateKind::quantized || c.float_conv.enabled || c.output.float_value) {
    return Refuse(why, "XNNPACK's quantized operators read and write 8-bit codes (no float intermediate or output)");
  }
  const QuantType& u = c.intermediate.q.type;
  if (u.bits() != 8 || c.output.q.type.scalar != u.scalar) {
    return Refuse(why, "XNNPACK's operators keep one 8-bit type from input to output (" + to_string(u) + " -> " +
                           to_string(c.output.q.type) + ")");
  }
  return true;
}

// One operator after the producer.
struct Node {
  StageKind kind = StageKind::activation;
  bool table = false;                 // activation: a table operator (else a clamp)
  size_t stage = 0;                   // the pattern stage (add: its residual operand)
  std::unique_ptr<ElementwiseOp> op;  // clamp, table, add
  QuantParams residual, in, out;      // add: r, u, s; avg_pool: in, out
  PoolWindow window;                  // pools
  int32_t lo = 0, hi = 0;             // add, max_pool: the output clamp
};

class XnnpackPath final : public FusedPath {
 public:
  XnnpackPath(bool fc, ProducerOutput producer, std::vector<Node> nodes)
      : fc_(fc), producer_(producer), nodes_(std::move(nodes)) {}

  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    std::string implementation;
    if (!RunProducer(draw.conv, fc_, draw.input, producer_, a_, &implementation, rejected)) return false;
    const ConvCase& conv = draw.conv;
    Shape4 shape{static_cast<size_t>(conv.batch()), static_cast<size_t>(conv.output_height()),
                 static_cast<size_t>(conv.output_width()), static_cast<size_t>(conv.output_channels())};
    for (const Node& node : nodes_) {
      bool ok = true;
      std::string name;
      if (node.kind == StageKind::add) {
        const std::vector<int32_t>& r = draw.operands(node.stage).codes;
        residual_.is_signed = a_.is_signed;
        residual_.resize(r.size());
        for (size_t i = 0; i < r.size(); ++i) residual_.set(i, r[i]);
        ok = node.op->Run(a_, residual_, b_, rejected);
        name = node.op->name();
      } else if (node.kind == StageKind::max_pool) {
        Shape4 pooled;
        ok = RunMaxPool(a_, shape, node.window.kernel, node.window.stride, node.window.padding, node.lo, node.hi, b_,
                        &pooled, rejected);
        shape = pooled;
        name = a_.is_signed ? "max_pooling2d_nhwc_s8" : "max_pooling2d_nhwc_u8";
      } else if (node.kind == StageKind::avg_pool) {
        Shape4 pooled;
        ok = RunAveragePool(a_, shape, node.window.kernel, node.window.stride, node.window.padding, node.in, node.out,
                            b_, &pooled, rejected);
        shape = pooled;
        name = "average_pooling2d_nhwc_qu8";
      } else {
        ok = node.op->Run(a_, b_, rejected);
        name = node.op->name();
      }
      if (!ok) return false;
      std::swap(a_, b_);
      implementation += " + " + name;
    }
    for (size_t i = 0; i < y.size(); ++i) y[i] = a_.get(i);
    last_.implementation = implementation;
    if (std::find(seen_.begin(), seen_.end(), implementation) == seen_.end()) seen_.push_back(implementation);
    return true;
  }
  std::vector<std::string> implementations() const override { return seen_; }
  WeightRange weight_range() const override { return WeightRange::full; }  // qs8 / qc8 take the whole s8 range
  // Operators are created and their weights packed once per draw: more images per draw, fewer creations.
  int32_t max_batch() const override { return 16; }
  RunInfo last_run() const override { return last_; }
  bool concurrent() const override { return false; }  // the operators after the producer are the path's own
  // The table operator run on every code of its input type, qmin..qmax.
  std::optional<std::vector<int32_t>> ReadTable() override {
    const auto table = std::find_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.table; });
    if (table == nodes_.end()) return std::nullopt;
    const QuantType type = table->in.type;
    Code8 x, y;
    x.is_signed = type.scalar == ScalarType::int8;
    x.resize(type.code_count());
    for (int32_t u = type.qmin(); u <= type.qmax(); ++u) x.set(static_cast<size_t>(u - type.qmin()), u);
    std::string why;
    if (!table->op->Run(x, y, &why)) throw std::runtime_error("reading back " + table->op->name() + ": " + why);
    std::vector<int32_t> codes(x.size);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = y.get(i);
    return codes;
  }

 private:
  bool fc_;
  ProducerOutput producer_;
  std::vector<Node> nodes_;
  Code8 a_, b_, residual_;
  RunInfo last_;
  std::vector<std::string> seen_;
};

// The activation as XNNPACK runs it, reading boundary `in`: a table node, or relu / relu6 as the clamp [*lo, *hi]
// of the operator before it (fused: `fused_clamp`, the producer's or the add's) or a clamp node (unfused).
bool AddActivation(const Convention& c, const QuantParams& in, bool unfused, int32_t* fused_lo, int32_t* fused_hi,
                   std::vector<Node>& nodes, std::string* why) {
  const Activation& a = c.activation;
  const QuantParams& out = c.output.q;
  Node node;
  node.kind = StageKind::activation;
  if (IsTableActivation(a.kind)) {
    // No operator fuses a table: both graphs run it as its own operator.
    node.op = ElementwiseOp::Table(a, in, out, why);
    if (!node.op) return false;
    node.table = true;
    node.in = in;
    nodes.push_back(std::move(node));
    return true;
  }
  if (a.kind != ActivationKind::relu && a.kind != ActivationKind::relu6) {
    return Refuse(why, "XNNPACK has no 8-bit operator for " + std::string(to_string(a.kind)) +
                           " (an operator fuses only its output clamp; the q8 activations are sigmoid, tanh, elu, "
                           "leaky_relu)");
  }
  // The clamp on codes does not requantize: the activation's input and output boundaries must be one.
  if (!(in == out)) {
    return Refuse(why,
                  "XNNPACK's clamp keeps the quantization: relu / relu6 need their input's quantization on the "
                  "output (" +
                      format_quant_params(in) + " vs " + format_quant_params(out) + ")");
  }
  // relu: codes below zu; relu6: also above zu + rne(6 / sy) (the caller's bounds; XNNPACK has no activation enum).
  // 6 / sy in binary64 is never within a rounding of a tie unless it is one (sy a binary32).
  const int32_t lo = std::max(in.type.qmin(), in.zero_point);
  int32_t hi = in.type.qmax();
  if (a.kind == ActivationKind::relu6) {
    const double six = std::nearbyint(6.0 / static_cast<double>(out.scale));
    hi = static_cast<int32_t>(std::min<double>(hi, in.zero_point + six));
  }
  if (lo >= hi) {
    return Refuse(why, "XNNPACK refuses output_min >= output_max: the clamp [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "] is constant");
  }
  if (!unfused) {
    *fused_lo = lo;
    *fused_hi = hi;
    return true;
  }
  node.op = ElementwiseOp::Clamp(in.type.scalar == ScalarType::int8, lo, hi, why);
  if (!node.op) return false;
  nodes.push_back(std::move(node));
  return true;
}

// A pool window XNNPACK takes: no 1x1 window (max-pooling-nhwc.c:98, average-pooling-nhwc.c refuse pooling size 1).
bool CheckWindow(const PoolWindow& w, std::string* why) {
  if (w.kernel < 2) return Refuse(why, "XNNPACK's pooling operators refuse a 1x1 window");
  return true;
}
}  // namespace

std::unique_ptr<FusedPath> CreateXnnpackPath(const CaseSpec& spec, std::string* why) {
  if (!Expressible(spec, why) || !Initialize(why)) return nullptr;
  const Convention& c = spec.convention;
  const bool unfused = spec.backend == kUnfused;
  const bool same = spec.comparison == Comparison::same_convention;
  const QuantParams& u = c.intermediate.q;
  ProducerOutput producer{u, u.type.qmin(), u.type.qmax()};
  int32_t* clamp_lo = &producer.lo;  // the clamp of the operator a fused relu / relu6 goes into
  int32_t* clamp_hi = &producer.hi;
  std::vector<Node> nodes;
  nodes.reserve(spec.pattern.stages.size() + 1);  // the clamp pointers below stay valid
  QuantParams current = u;
  for (size_t i = 0; i < spec.pattern.stages.size(); ++i) {
    const Stage& stage = spec.pattern.stages[i];
    if (stage.kind == StageKind::activation) {
      if (!AddActivation(c, current, unfused, clamp_lo, clamp_hi, nodes, why)) return nullptr;
      current = c.output.q;
    } else if (stage.kind == StageKind::add) {
      if (same && stage.add_rule != AddRule::fixed_point_half_up) {
        Refuse(why, "XNNPACK's add_nd computes " + std::string(to_string(AddRule::fixed_point_half_up)) + ", not " +
                        std::string(to_string(stage.add_rule)));
        return nullptr;
      }
      Node node;
      node.kind = StageKind::add;
      node.stage = i;
      node.residual = stage.residual;
      node.in = current;
      node.out = stage.out;
      node.lo = stage.out.type.qmin();
      node.hi = stage.out.type.qmax();
      nodes.push_back(std::move(node));
      clamp_lo = &nodes.back().lo;
      clamp_hi = &nodes.back().hi;
      current = stage.out;
    } else if (stage.kind == StageKind::max_pool) {
      if (!CheckWindow(stage.window, why)) return nullptr;
      Node node;
      node.kind = StageKind::max_pool;
      node.window = stage.window;
      node.lo = current.type.qmin();
      node.hi = current.type.qmax();
      nodes.push_back(std::move(node));
    } else {  // avg_pool
      if (!CheckWindow(stage.window, why)) return nullptr;
      if (current.type.scalar != ScalarType::uint8 || stage.out.type.scalar != ScalarType::uint8) {
        Refuse(why, "XNNPACK has average_pooling2d_nhwc_qu8 only (no qs8 average pooling at ae108ef)");
        return nullptr;
      }
      if (same && stage.pool_rule != AvgPoolRule::fixed_point_half_away) {
        Refuse(why, "XNNPACK's average pooling computes " + std::string(to_string(AvgPoolRule::fixed_point_half_away)) +
                        ", not " + std::string(to_string(stage.pool_rule)));
        return nullptr;
      }
      Node node;
      node.kind = StageKind::avg_pool;
      node.window = stage.window;
      node.in = current;
      node.out = stage.out;
      nodes.push_back(std::move(node));
      current = stage.out;
    }
  }
  // The adds' operators, with their clamps now known.
  for (Node& node : nodes) {
    if (node.kind != StageKind::add) continue;
    node.op = ElementwiseOp::Add(node.in, node.residual, node.out, node.lo, node.hi, why);
    if (!node.op) return nullptr;
  }
  return std::make_unique<XnnpackPath>(spec.pattern.producer == Producer::fully_connected, producer, std::move(nodes));
}

}  // namespace fusediff::fused::xnnpack
