#include "fusediff/model/pattern.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "named_enum.h"

namespace fusediff {

namespace {
using detail::NameOf;
using detail::ParseNamed;

constexpr std::array<std::pair<std::string_view, AddRule>, 9> kAddRules{{{"tflite", AddRule::tflite},
                                                                          {"onnx_spec", AddRule::onnx_spec},
                                                                          {"ort_mlas", AddRule::ort_mlas},
                                                                          {"ort_mlas_fma", AddRule::ort_mlas_fma},
                                                                          {"ort_raw", AddRule::ort_raw},
                                                                          {"binary32_unfused", AddRule::binary32_unfused},
                                                                          {"f32_one_rounding", AddRule::f32_one_rounding},
                                                                          {"f32_two_roundings", AddRule::f32_two_roundings},
                                                                          {"fixed_point_half_up", AddRule::fixed_point_half_up}}};
// Backends' names for rules (RegisterAddRuleName). Function-local: a backend may register from a static initializer.
std::vector<std::pair<std::string, AddRule>>& DeclaredAddRuleNames() {
  static std::vector<std::pair<std::string, AddRule>> names;
  return names;
}
constexpr std::array<std::pair<std::string_view, AvgPoolRule>, 4> kPoolRules{
    {{"tflite", AvgPoolRule::tflite},
     {"ort_qlinear", AvgPoolRule::ort_qlinear},
     {"ort_global", AvgPoolRule::ort_global},
     {"fixed_point_half_away", AvgPoolRule::fixed_point_half_away}}};
constexpr std::array<std::pair<std::string_view, MultiplierRule>, 2> kMultiplierRules{
    {{"double_product", MultiplierRule::double_product}, {"float_product", MultiplierRule::float_product}}};
constexpr std::array<std::pair<std::string_view, FcReference>, 2> kFcReferences{
    {{"graph", FcReference::graph}, {"declared_fold", FcReference::declared_fold}}};
constexpr std::array<std::pair<std::string_view, Fusion>, 9> kFusions{{{"keep_all", Fusion::keep_all},
                                                                        {"add_in_accumulator", Fusion::add_in_accumulator},
                                                                        {"pool_first", Fusion::pool_first},
                                                                        {"fold", Fusion::fold},
                                                                        {"mul_add_affine", Fusion::mul_add_affine},
                                                                        {"skip_add_f32", Fusion::skip_add_f32},
                                                                        {"norm_f32_into_act", Fusion::norm_f32_into_act},
                                                                        {"norm_other_order", Fusion::norm_other_order},
                                                                        {"norm_other_arithmetic", Fusion::norm_other_arithmetic}}};
constexpr detail::Names<LayerNormArithmetic, 2> kLnArithmetics{
    {{"f32", LayerNormArithmetic::f32}, {"tflite_int16", LayerNormArithmetic::tflite_int16}}};
constexpr detail::Names<LnRegime, 6> kLnRegimes{{{"mixed", LnRegime::mixed},
                                                 {"benign", LnRegime::benign},
                                                 {"cancellation", LnRegime::cancellation},
                                                 {"tiny_variance", LnRegime::tiny_variance},
                                                 {"outlier", LnRegime::outlier},
                                                 {"exact_rows", LnRegime::exact_rows}}};
constexpr std::array<std::pair<std::string_view, MulRule>, 2> kMulRules{
    {{"tflite", MulRule::tflite}, {"onnx_spec", MulRule::onnx_spec}}};
constexpr std::array<std::pair<std::string_view, MulOperand>, 2> kMulOperands{
    {{"tensor", MulOperand::tensor}, {"per_channel", MulOperand::per_channel}}};

constexpr detail::Names<Producer, 2> kProducers{{{"conv2d", Producer::conv2d}, {"fc", Producer::fully_connected}}};

constexpr Fusion kKeepAll[] = {Fusion::keep_all};
constexpr Fusion kAddFusions[] = {Fusion::keep_all, Fusion::add_in_accumulator};
constexpr Fusion kPoolFusions[] = {Fusion::keep_all, Fusion::pool_first};
constexpr Fusion kFoldFusions[] = {Fusion::keep_all, Fusion::fold};
constexpr Fusion kBatchNormFusions[] = {Fusion::fold};
constexpr Fusion kMulAddFusions[] = {Fusion::keep_all, Fusion::mul_add_affine};
constexpr Fusion kLayerNormActFusions[] = {Fusion::keep_all, Fusion::norm_f32_into_act, Fusion::norm_other_order,
                                           Fusion::norm_other_arithmetic};
constexpr Fusion kSkipLayerNormFusions[] = {Fusion::keep_all, Fusion::skip_add_f32, Fusion::norm_other_order,
                                            Fusion::norm_other_arithmetic};

constexpr PatternInfo kPatterns[] = {
    {"conv2d+act", "Act(Conv(x)): u rounded at its own scale, then the activation table", kKeepAll},
    {"conv2d+add+act",
     "Act(Conv(x) + r): u rounded, the sum s = u + r rounded at its own scale by the add rule, then the activation",
     kAddFusions},
    {"conv2d+act+maxpool", "MaxPool(Act(Conv(x))): max over windows of activation outputs", kPoolFusions},
    {"conv2d+act+avgpool", "AvgPool(Act(Conv(x))): average over windows of activation outputs, by the pool rule",
     kPoolFusions},
    {"fc+act", "Act(FC(x)): a fully connected layer with its own multiplier rule, then the activation", kKeepAll},
    {"fc+fc", "FC2(FC1(x)): the first layer's output rounded at its own scale, then the second layer", kFoldFusions},
    {"fc+act+fc", "FC2(Act(FC1(x))): a nonlinearity between the layers (folding is illegal)", kFoldFusions},
    {"conv2d+batchnorm+act",
     "Act(BN(Conv(x))): BatchNorm applied exactly to the conv's real output, quantized into u, then the activation; "
     "the fused path folds BN into the conv by its declared fold (precision, formula, weight quantization)",
     kBatchNormFusions},
    {"conv2d+act+batchnorm",
     "BN(Act(Conv(x))): BatchNorm on the activation's dequantized output codes, quantized into its own boundary; "
     "folding it into the conv across the activation is illegal (offered so that its cost is measured)",
     kFoldFusions},
    {"conv2d+mul+add+act",
     "Act(Conv(x) * b + r): u rounded, the product rounded at its own scale by the mul rule, the sum by the add rule, "
     "then the activation",
     kMulAddFusions},
    {"fc+layernorm+act",
     "Act(LayerNorm(FC(x))): u rounded, each row of features normalized in the declared arithmetic and order, "
     "rounded into its own boundary, then the activation",
     kLayerNormActFusions},
    {"fc+add+layernorm",
     "LayerNorm(FC(x) + r): SkipLayerNorm's graph over rows of a [B, S, H] tensor: u rounded, the sum by the add rule, "
     "then each row normalized and rounded into its own boundary",
     kSkipLayerNormFusions},
};

}  // namespace

std::string_view to_string(Producer p) { return NameOf(p, kProducers); }

std::string_view to_string(StageKind k) { return k.token(); }

std::string_view to_string(AddRule r) {
  for (const auto& [name, rule] : DeclaredAddRuleNames()) {
    if (rule == r) return name;
  }
  return NameOf(r, kAddRules);
}
bool is_f32_add_rule(AddRule r) { return r == AddRule::f32_one_rounding || r == AddRule::f32_two_roundings; }
void RegisterAddRuleName(std::string name, AddRule rule) {
  for (const auto& [n, r] : DeclaredAddRuleNames()) {
    if (n == name || r == rule) throw std::logic_error("add rule name '" + name + "': the name or its rule is taken");
  }
  for (const auto& [n, r] : kAddRules) {
    if (n == name) throw std::logic_error("add rule name '" + name + "' is the model's own");
  }
  DeclaredAddRuleNames().emplace_back(std::move(name), rule);
}
std::string_view to_string(AvgPoolRule r) { return NameOf(r, kPoolRules); }
std::string_view to_string(MultiplierRule r) { return NameOf(r, kMultiplierRules); }
std::string_view to_string(MulRule r) { return NameOf(r, kMulRules); }
std::string_view to_string(MulOperand o) { return NameOf(o, kMulOperands); }
MulRule parse_mul_rule(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "mul rule", kMulRules);
}
MulOperand parse_mul_operand(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "mul operand", kMulOperands);
}
std::string_view to_string(Fusion f) { return NameOf(f, kFusions); }
std::string_view to_string(LayerNormArithmetic a) { return NameOf(a, kLnArithmetics); }
std::string_view to_string(LnRegime r) { return NameOf(r, kLnRegimes); }
LayerNormArithmetic parse_layer_norm_arithmetic(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "layer norm arithmetic", kLnArithmetics);
}
LnRegime parse_ln_regime(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "layer norm regime", kLnRegimes);
}
std::string_view to_string(FcReference r) { return NameOf(r, kFcReferences); }
FcReference parse_fc_reference(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "FC fold reference", kFcReferences);
}
AddRule parse_add_rule(std::string_view text, std::string_view field) {
  std::string expected;
  for (const auto& [name, rule] : DeclaredAddRuleNames()) {
    if (text == name) return rule;
    expected += name + ", ";
  }
  for (const auto& [name, rule] : kAddRules) {
    if (text == name) return rule;
  }
  for (const auto& [name, rule] : kAddRules) expected += std::string(name) + (name == kAddRules.back().first ? "" : ", ");
  throw InputError(std::string(field) + ": unknown add rule '" + std::string(text) + "' (expected " + expected + ")");
}
AvgPoolRule parse_avg_pool_rule(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "average-pool rule", kPoolRules);
}
MultiplierRule parse_multiplier_rule(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "multiplier rule", kMultiplierRules);
}
Fusion parse_fusion(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "fusion", kFusions);
}

std::string pattern_name(const Pattern& p) {
  std::string name(to_string(p.producer));
  for (const Stage& s : p.stages) {
    name += '+';
    name += to_string(s.kind);
  }
  return name;
}

namespace {
// The stages of a name: the producer, then one registered token per stage.
Pattern ParseStages(std::string_view text, std::string_view field) {
  Pattern p;
  p.stages.clear();
  size_t begin = 0;
  bool producer = true;
  for (;;) {
    const size_t plus = text.find('+', begin);
    const std::string_view part = text.substr(begin, plus == std::string_view::npos ? std::string_view::npos : plus - begin);
    if (producer) {
      p.producer = ParseNamed(part, field, "producer", kProducers);
      producer = false;
    } else {
      Stage s;
      s.kind = parse_stage_kind(part, field);
      s.bn_reads_codes = s.kind == StageKind::batchnorm && !p.stages.empty();  // after another stage: its codes
      p.stages.push_back(s);
    }
    if (plus == std::string_view::npos) break;
    begin = plus + 1;
  }
  return p;
}

std::vector<PatternInfo>& PatternRegistry() {
  static std::vector<PatternInfo> patterns(std::begin(kPatterns), std::end(kPatterns));
  return patterns;
}
}  // namespace

Pattern parse_pattern_name(std::string_view text, std::string_view field) {
  for (const PatternInfo& info : known_patterns()) {
    if (text == info.name) return ParseStages(text, field);
  }
  std::string expected;
  for (const PatternInfo& info : known_patterns()) expected += (expected.empty() ? "" : ", ") + std::string(info.name);
  std::string message = std::string(field) + ": unknown pattern '" + std::string(text) + "' (expected " + expected + ")";
  try {
    ParseStages(text, field);
  } catch (const InputError& e) {
    message += "; " + std::string(e.what()).substr(field.size() + 2);  // the token no module claims
  }
  throw InputError(message);
}

std::span<const PatternInfo> known_patterns() { return PatternRegistry(); }

void register_pattern(const PatternInfo& info) {
  ParseStages(info.name, "pattern " + std::string(info.name));  // every stage token registered
  for (const PatternInfo& known : known_patterns()) {
    if (known.name == info.name) throw InputError("pattern " + std::string(info.name) + " is registered twice");
  }
  PatternRegistry().push_back(info);
}


std::string describe_pattern(const Pattern& p, Fusion fusion, bool f32_intermediate) {
  if (is_conv_act(p) && fusion == Fusion::keep_all) return {};
  std::string out = " pattern " + pattern_name(p);
  std::string params;
  if (p.producer == Producer::fully_connected) params += "multiplier " + std::string(to_string(p.multiplier));
  for (const Stage& s : p.stages) {
    const std::string part = stage_module(s.kind).describe(s, fusion, f32_intermediate);
    if (!part.empty()) params += (params.empty() ? "" : "; ") + part;
  }
  if (!params.empty()) out += " (" + params + ")";
  return out + ", fusion " + std::string(to_string(fusion));
}

bool is_conv_act(const Pattern& p) {
  return p.producer == Producer::conv2d && p.stages.size() == 1 && p.stages[0].kind == StageKind::activation;
}

bool has_stage(const Pattern& p, StageKind kind) { return find_stage(p, kind) != nullptr; }

const Stage* find_stage(const Pattern& p, StageKind kind) {
  for (const Stage& s : p.stages) {
    if (s.kind == kind) return &s;
  }
  return nullptr;
}

Convention activation_convention(const Pattern& p, const Convention& c) {
  // The boundary the activation reads: the producer's, through every stage before it.
  // A stage before it writes codes (add: the sum s), so the table reads a quantized boundary even where the
  // producer's intermediate is f32.
  QuantParams in = c.intermediate.q;
  bool after_a_stage = false;
  for (const Stage& s : p.stages) {
    if (s.kind == StageKind::activation) break;
    in = stage_module(s.kind).output_boundary(s, in, c);
    after_a_stage = true;
  }
  Convention a = c;
  if (after_a_stage) {
    a.intermediate.q = in;
    a.intermediate.kind = IntermediateKind::quantized;
  }
  return a;
}

QuantParams final_output(const Pattern& p, const Convention& c) {
  QuantParams q = c.intermediate.q;  // the producer's boundary
  for (const Stage& s : p.stages) q = stage_module(s.kind).output_boundary(s, q, c);
  return q;
}

void validate(const Pattern& p, const Convention& c) {
  bool known = false;
  for (const PatternInfo& info : known_patterns()) known = known || pattern_name(p) == info.name;
  if (!known) {
    throw InputError("pattern: '" + pattern_name(p) + "' is not a known stage order (fusediff patterns --list)");
  }
  const bool f32 = c.intermediate.kind == IntermediateKind::f32;
  const std::string name = pattern_name(p);
  if (f32 && name != "conv2d+act" && name != "conv2d+add+act" && name != "fc+act") {
    throw InputError("pattern " + name + ": an f32 intermediate exists for conv2d+act, conv2d+add+act and fc+act only");
  }
  QuantParams in = c.intermediate.q;  // the boundary each stage reads
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const Stage& s = p.stages[i];
    if (s.kind == StageKind::batchnorm && s.bn_reads_codes != (i > 0)) {
      throw InputError("pattern." + std::string(to_string(s.kind)) + ": a BatchNorm reads codes exactly where it "
                       "follows another stage (stage " + std::to_string(i) + ")");
    }
    const StageKindModule& module = stage_module(s.kind);
    module.validate(s, in, c, "pattern." + std::string(to_string(s.kind)));
    if (i + 1 < p.stages.size() && module.float_output(s, Fusion::keep_all)) {
      throw InputError("pattern." + std::string(to_string(s.kind)) + ": a stage that writes a float (stage " +
                       std::to_string(i) + ") must be the pattern's last: the stages after it read codes");
    }
    in = module.output_boundary(s, in, c);
  }
}

std::optional<FloatOutput> float_output(const Pattern& p, Fusion fusion) {
  if (p.stages.empty()) return std::nullopt;
  const Stage& last = p.stages.back();
  return stage_module(last.kind).float_output(last, fusion);
}

std::string fusion_illegality(const Pattern& p, Fusion fusion, const Convention& c, std::span<const int32_t> table,
                              const FusionFacts& facts) {
  const std::string name = pattern_name(p);
  if (facts.intermediate_consumers != 1) {
    return "single-consumer: a removed intermediate has " + std::to_string(facts.intermediate_consumers) +
           " consumers; fusing it away leaves the others nothing to read";
  }
  if (facts.group != 1) {
    return "group-1: the LUT post-processing rule fuses group-1 producers only (group " + std::to_string(facts.group) + ")";
  }
  // Per-stage rules in registry order (a rule's name is the first thing a message says).
  for (StageKind kind : known_stage_kinds()) {
    const Stage* s = find_stage(p, kind);
    if (!s) continue;
    if (std::string why = stage_module(kind).facts_illegality(*s, c, facts); !why.empty()) return why;
  }
  bool offered = false;
  for (const PatternInfo& info : known_patterns()) {
    if (info.name != name) continue;
    offered = std::find(info.fusions.begin(), info.fusions.end(), fusion) != info.fusions.end();
  }
  if (!offered) {
    return "fusion-offered: pattern " + name + " has no " + std::string(to_string(fusion)) + " fusion";
  }
  for (StageKind kind : known_stage_kinds()) {
    const Stage* s = find_stage(p, kind);
    if (!s) continue;
    if (std::string why = stage_module(kind).fusion_illegality(*s, p, fusion, c, table); !why.empty()) return why;
  }
  return {};
}

std::string fusion_keeps_meaning(const Pattern& p, Fusion fusion, const Convention& c, std::span<const int32_t> table) {
  if (fusion == Fusion::keep_all) return {};
  for (StageKind kind : known_stage_kinds()) {
    const Stage* s = find_stage(p, kind);
    if (!s) continue;
    if (std::string why = stage_module(kind).fusion_keeps_meaning(*s, p, fusion, c, table); !why.empty()) return why;
  }
  return {};
}

bool keyed_by_activation_input(const Pattern& p) {
  return has_stage(p, StageKind::activation) && pattern_is_elementwise(p);
}

QuantParams keyed_boundary(const Pattern& p, const Convention& c) {
  if (keyed_by_activation_input(p)) return activation_convention(p, c).intermediate.q;
  if (!float_output(p, Fusion::keep_all)) return final_output(p, c);
  QuantParams q = c.intermediate.q;  // the last stage's input
  for (size_t i = 0; i + 1 < p.stages.size(); ++i) q = stage_module(p.stages[i].kind).output_boundary(p.stages[i], q, c);
  return q;
}

namespace {
size_t StageIndex(const Pattern& p, StageKind kind) {
  for (size_t i = 0; i < p.stages.size(); ++i) {
    if (p.stages[i].kind == kind) return i;
  }
  return p.stages.size();
}
}  // namespace

std::string stage_field_suffix(const Pattern& p, size_t i) {
  size_t earlier = 0;
  for (size_t j = 0; j < i && j < p.stages.size(); ++j) earlier += p.stages[j].kind == p.stages[i].kind ? 1 : 0;
  std::string suffix;
  if (earlier > 0) suffix.append(".").append(std::to_string(earlier));
  return suffix;
}

const StageOperands& PatternDraw::operands(size_t i) const {
  static const StageOperands kNone;
  return i < stages.size() ? stages[i] : kNone;
}

StageOperands& PatternDraw::operands_of(size_t i) {
  if (stages.size() <= i) stages.resize(i + 1);
  return stages[i];
}

const StageOperands& PatternDraw::operands(const Pattern& p, StageKind kind) const {
  return operands(StageIndex(p, kind));
}

StageOperands& PatternDraw::operands_of(const Pattern& p, StageKind kind) {
  const size_t i = StageIndex(p, kind);
  if (i == p.stages.size()) {
    throw InputError("pattern " + pattern_name(p) + " has no " + std::string(to_string(kind)) + " stage");
  }
  return operands_of(i);
}

int32_t pooled_extent(int32_t in, const PoolWindow& w) {
  const int32_t padded = in + 2 * w.padding;
  return padded < w.kernel ? 0 : (padded - w.kernel) / w.stride + 1;
}

PatternGeometry pattern_output_geometry(const Pattern& p, const ConvCase& producer) {
  PatternGeometry g{producer.batch(), producer.output_height(), producer.output_width(), producer.output_channels()};
  for (const Stage& s : p.stages) g = stage_module(s.kind).output_geometry(s, g);
  return g;
}

}  // namespace fusediff
