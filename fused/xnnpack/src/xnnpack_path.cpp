// XNNPACK's fused and unfused graphs of its patterns (xnnpack_path.h): the producer, then one node per operator.
#include "xnnpack_path.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <utility>
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

// One operator after the producer, created once per case: it reads `a` (NHWC, *shape) and writes `b`, updating
// *shape where it pools. One implementation per stage kind.
class Node {
 public:
  virtual ~Node() = default;
  virtual bool Run(const PatternDraw& draw, const Code8& a, Shape4* shape, Code8& b, std::string* why) = 0;
  virtual const std::string& name() const = 0;
  // What a node needs once every node exists (an add's operator takes the clamp a later relu gives it).
  virtual bool Finish(std::string* /*why*/) { return true; }
  // The table operator, for a node that is one (FusedPath::ReadTable), and the quantization it reads.
  virtual const ElementwiseOp* table() const { return nullptr; }
  virtual QuantParams table_input() const { return {}; }
};

// activation: a table operator (sigmoid, tanh, elu, leaky_relu) or, unfused, the clamp of relu / relu6.
class ElementwiseNode final : public Node {
 public:
  ElementwiseNode(std::unique_ptr<ElementwiseOp> op, bool table, const QuantParams& in)
      : op_(std::move(op)), table_(table), in_(in) {}
  bool Run(const PatternDraw&, const Code8& a, Shape4*, Code8& b, std::string* why) override {
    return op_->Run(a, b, why);
  }
  const std::string& name() const override { return op_->name(); }
  const ElementwiseOp* table() const override { return table_ ? op_.get() : nullptr; }
  QuantParams table_input() const override { return in_; }

 private:
  std::unique_ptr<ElementwiseOp> op_;
  bool table_;
  QuantParams in_;
};

// add: add_nd of u and the stage's residual operand, into s, clamped to [lo, hi] (a fused relu / relu6 narrows it).
class AddNode final : public Node {
 public:
  int32_t lo, hi;  // the output clamp, until Finish

  AddNode(size_t stage, const QuantParams& in, const QuantParams& residual, const QuantParams& out)
      : lo(out.type.qmin()), hi(out.type.qmax()), stage_(stage), in_(in), residual_q_(residual), out_(out) {}
  bool Finish(std::string* why) override {
    op_ = ElementwiseOp::Add(in_, residual_q_, out_, lo, hi, why);
    return op_ != nullptr;
  }
  bool Run(const PatternDraw& draw, const Code8& a, Shape4*, Code8& b, std::string* why) override {
    const std::vector<int32_t>& r = draw.operands(stage_).codes;
    residual_.is_signed = a.is_signed;
    residual_.resize(r.size());
    for (size_t i = 0; i < r.size(); ++i) residual_.set(i, r[i]);
    return op_->Run(a, residual_, b, why);
  }
  const std::string& name() const override { return op_->name(); }

 private:
  size_t stage_;
  QuantParams in_, residual_q_, out_;
  std::unique_ptr<ElementwiseOp> op_;
  Code8 residual_;
};

// max_pool: max_pooling2d_nhwc_s8 / u8 (created per draw: the channel count is a creation parameter).
class MaxPoolNode final : public Node {
 public:
  MaxPoolNode(const PoolWindow& window, const QuantParams& in)
      : window_(window), lo_(in.type.qmin()), hi_(in.type.qmax()),
        name_(in.type.scalar == ScalarType::int8 ? "max_pooling2d_nhwc_s8" : "max_pooling2d_nhwc_u8") {}
  bool Run(const PatternDraw&, const Code8& a, Shape4* shape, Code8& b, std::string* why) override {
    Shape4 pooled;
    if (!RunMaxPool(a, *shape, window_.kernel, window_.stride, window_.padding, lo_, hi_, b, &pooled, why)) return false;
    *shape = pooled;
    return true;
  }
  const std::string& name() const override { return name_; }

 private:
  PoolWindow window_;
  int32_t lo_, hi_;
  std::string name_;
};

// avg_pool: average_pooling2d_nhwc_qu8 from `in` to `out` (created per draw).
class AvgPoolNode final : public Node {
 public:
  AvgPoolNode(const PoolWindow& window, const QuantParams& in, const QuantParams& out)
      : window_(window), in_(in), out_(out) {}
  bool Run(const PatternDraw&, const Code8& a, Shape4* shape, Code8& b, std::string* why) override {
    Shape4 pooled;
    if (!RunAveragePool(a, *shape, window_.kernel, window_.stride, window_.padding, in_, out_, b, &pooled, why)) {
      return false;
    }
    *shape = pooled;
    return true;
  }
  const std::string& name() const override { return name_; }

 private:
  PoolWindow window_;
  QuantParams in_, out_;
  std::string name_ = "average_pooling2d_nhwc_qu8";
};

class XnnpackPath final : public FusedPath {
 public:
  XnnpackPath(bool fc, ProducerOutput producer, std::vector<std::unique_ptr<Node>> nodes)
      : fc_(fc), producer_(producer), nodes_(std::move(nodes)) {}

  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    std::string implementation;
    if (!RunProducer(draw.conv, fc_, draw.input, producer_, a_, &implementation, rejected)) return false;
    const ConvCase& conv = draw.conv;
    Shape4 shape{static_cast<size_t>(conv.batch()), static_cast<size_t>(conv.output_height()),
                 static_cast<size_t>(conv.output_width()), static_cast<size_t>(conv.output_channels())};
    for (const std::unique_ptr<Node>& node : nodes_) {
      if (!node->Run(draw, a_, &shape, b_, rejected)) return false;
      std::swap(a_, b_);
      implementation += " + " + node->name();
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
    const auto node = std::find_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->table() != nullptr; });
    if (node == nodes_.end()) return std::nullopt;
    const QuantType type = (*node)->table_input().type;
    Code8 x, y;
    x.is_signed = type.scalar == ScalarType::int8;
    x.resize(type.code_count());
    for (int32_t u = type.qmin(); u <= type.qmax(); ++u) x.set(static_cast<size_t>(u - type.qmin()), u);
    std::string why;
    const ElementwiseOp& op = *(*node)->table();
    if (!op.Run(x, y, &why)) throw std::runtime_error("reading back " + op.name() + ": " + why);
    std::vector<int32_t> codes(x.size);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = y.get(i);
    return codes;
  }

 private:
  bool fc_;
  ProducerOutput producer_;
  std::vector<std::unique_ptr<Node>> nodes_;
  Code8 a_, b_;
  RunInfo last_;
  std::vector<std::string> seen_;
};

// The nodes of a case's pattern, built stage by stage. A fused relu / relu6 becomes the clamp of the operator before
// it (`clamp_lo`, `clamp_hi`: the producer's, or the add's), so it adds no node.
struct NodeBuilder {
  const Convention& c;
  bool unfused, same;
  QuantParams current;
  int32_t* clamp_lo;
  int32_t* clamp_hi;
  std::vector<std::unique_ptr<Node>> nodes;

  bool OnActivation(const Stage& stage, size_t i, std::string* why);
  bool OnAdd(const Stage& stage, size_t i, std::string* why);
  bool OnMaxPool(const Stage& stage, size_t i, std::string* why);
  bool OnAvgPool(const Stage& stage, size_t i, std::string* why);
  // Stage i's node(s), by its kind.
  bool OnStage(const Stage& stage, size_t i, std::string* why) {
    using Build = bool (NodeBuilder::*)(const Stage&, size_t, std::string*);
    static const std::pair<StageKind, Build> kBuilders[] = {{StageKind::activation, &NodeBuilder::OnActivation},
                                                            {StageKind::add, &NodeBuilder::OnAdd},
                                                            {StageKind::max_pool, &NodeBuilder::OnMaxPool},
                                                            {StageKind::avg_pool, &NodeBuilder::OnAvgPool}};
    for (const auto& [kind, build] : kBuilders) {
      if (kind == stage.kind) return (this->*build)(stage, i, why);
    }
    return Refuse(why, "XNNPACK's paths have no operator for stage " + std::string(to_string(stage.kind)));
  }
};

// The activation as XNNPACK runs it, reading boundary `current`: a table node, or relu / relu6 as the clamp of the
// operator before it (fused) or a clamp node (unfused).
bool NodeBuilder::OnActivation(const Stage&, size_t, std::string* why) {
  const Activation& a = c.activation;
  const QuantParams in = current, &out = c.output.q;
  current = out;
  if (IsTableActivation(a.kind)) {
    // No operator fuses a table: both graphs run it as its own operator.
    std::unique_ptr<ElementwiseOp> op = ElementwiseOp::Table(a, in, out, why);
    if (!op) return false;
    nodes.push_back(std::make_unique<ElementwiseNode>(std::move(op), true, in));
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
    *clamp_lo = lo;
    *clamp_hi = hi;
    return true;
  }
  std::unique_ptr<ElementwiseOp> op = ElementwiseOp::Clamp(in.type.scalar == ScalarType::int8, lo, hi, why);
  if (!op) return false;
  nodes.push_back(std::make_unique<ElementwiseNode>(std::move(op), false, in));
  return true;
}

bool NodeBuilder::OnAdd(const Stage& stage, size_t i, std::string* why) {
  if (same && stage.add_rule != AddRule::fixed_point_half_up) {
    return Refuse(why, "XNNPACK's add_nd computes " + std::string(to_string(AddRule::fixed_point_half_up)) + ", not " +
                           std::string(to_string(stage.add_rule)));
  }
  auto node = std::make_unique<AddNode>(i, current, stage.residual, stage.out);
  clamp_lo = &node->lo;  // a node's address outlives the vector's growth
  clamp_hi = &node->hi;
  nodes.push_back(std::move(node));
  current = stage.out;
  return true;
}

// A pool window XNNPACK takes: no 1x1 window (max-pooling-nhwc.c:98, average-pooling-nhwc.c refuse pooling size 1).
bool CheckWindow(const PoolWindow& w, std::string* why) {
  if (w.kernel < 2) return Refuse(why, "XNNPACK's pooling operators refuse a 1x1 window");
  return true;
}

bool NodeBuilder::OnMaxPool(const Stage& stage, size_t, std::string* why) {
  if (!CheckWindow(stage.window, why)) return false;
  nodes.push_back(std::make_unique<MaxPoolNode>(stage.window, current));
  return true;
}

bool NodeBuilder::OnAvgPool(const Stage& stage, size_t, std::string* why) {
  if (!CheckWindow(stage.window, why)) return false;
  if (current.type.scalar != ScalarType::uint8 || stage.out.type.scalar != ScalarType::uint8) {
    return Refuse(why, "XNNPACK has average_pooling2d_nhwc_qu8 only (no qs8 average pooling at ae108ef)");
  }
  if (same && stage.pool_rule != AvgPoolRule::fixed_point_half_away) {
    return Refuse(why, "XNNPACK's average pooling computes " +
                           std::string(to_string(AvgPoolRule::fixed_point_half_away)) + ", not " +
                           std::string(to_string(stage.pool_rule)));
  }
  nodes.push_back(std::make_unique<AvgPoolNode>(stage.window, current, stage.out));
  current = stage.out;
  return true;
}
}  // namespace

std::unique_ptr<FusedPath> CreateXnnpackPath(const CaseSpec& spec, std::string* why) {
  if (!Expressible(spec, why) || !Initialize(why)) return nullptr;
  const Convention& c = spec.convention;
  const QuantParams& u = c.intermediate.q;
  ProducerOutput producer{u, u.type.qmin(), u.type.qmax()};
  NodeBuilder build{c, spec.backend == kUnfused, spec.comparison == Comparison::same_convention, u, &producer.lo,
                    &producer.hi, {}};
  for (size_t i = 0; i < spec.pattern.stages.size(); ++i) {
    if (!build.OnStage(spec.pattern.stages[i], i, why)) return nullptr;
  }
  for (const std::unique_ptr<Node>& node : build.nodes) {  // the adds' operators, with their clamps now known
    if (!node->Finish(why)) return nullptr;
  }
  return std::make_unique<XnnpackPath>(spec.pattern.producer == Producer::fully_connected, producer,
                                       std::move(build.nodes));
}

}  // namespace fusediff::fused::xnnpack
