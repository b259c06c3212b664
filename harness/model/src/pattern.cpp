#include "fusediff/model/pattern.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
using detail::NameOf;
using detail::ParseNamed;

constexpr std::array<std::pair<std::string_view, AddRule>, 8> kAddRules{{{"tflite", AddRule::tflite},
                                                                          {"onnx_spec", AddRule::onnx_spec},
                                                                          {"ort_mlas", AddRule::ort_mlas},
                                                                          {"ort_mlas_fma", AddRule::ort_mlas_fma},
                                                                          {"ort_raw", AddRule::ort_raw},
                                                                          {"onednn_unfused", AddRule::onednn_unfused},
                                                                          {"onednn_sum", AddRule::onednn_sum},
                                                                          {"onednn_binary", AddRule::onednn_binary}}};
constexpr std::array<std::pair<std::string_view, AvgPoolRule>, 3> kPoolRules{
    {{"tflite", AvgPoolRule::tflite}, {"ort_qlinear", AvgPoolRule::ort_qlinear}, {"ort_global", AvgPoolRule::ort_global}}};
constexpr std::array<std::pair<std::string_view, MultiplierRule>, 2> kMultiplierRules{
    {{"double_product", MultiplierRule::double_product}, {"float_product", MultiplierRule::float_product}}};
constexpr std::array<std::pair<std::string_view, Fusion>, 4> kFusions{{{"keep_all", Fusion::keep_all},
                                                                        {"add_in_accumulator", Fusion::add_in_accumulator},
                                                                        {"pool_first", Fusion::pool_first},
                                                                        {"fold", Fusion::fold}}};

constexpr Fusion kKeepAll[] = {Fusion::keep_all};
constexpr Fusion kAddFusions[] = {Fusion::keep_all, Fusion::add_in_accumulator};
constexpr Fusion kPoolFusions[] = {Fusion::keep_all, Fusion::pool_first};
constexpr Fusion kFoldFusions[] = {Fusion::keep_all, Fusion::fold};
constexpr Fusion kBatchNormFusions[] = {Fusion::fold};

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
};

}  // namespace

std::string_view to_string(Producer p) { return p == Producer::conv2d ? "conv2d" : "fc"; }

std::string_view to_string(StageKind k) {
  switch (k) {
    case StageKind::activation: return "act";
    case StageKind::add: return "add";
    case StageKind::max_pool: return "maxpool";
    case StageKind::avg_pool: return "avgpool";
    case StageKind::fully_connected: return "fc";
    case StageKind::batchnorm: return "batchnorm";
  }
  return "?";
}

std::string_view to_string(AddRule r) { return NameOf(r, kAddRules); }
bool is_f32_add_rule(AddRule r) { return r == AddRule::onednn_sum || r == AddRule::onednn_binary; }
std::string_view to_string(AvgPoolRule r) { return NameOf(r, kPoolRules); }
std::string_view to_string(MultiplierRule r) { return NameOf(r, kMultiplierRules); }
std::string_view to_string(Fusion f) { return NameOf(f, kFusions); }
AddRule parse_add_rule(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "add rule", kAddRules);
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

Pattern parse_pattern_name(std::string_view text, std::string_view field) {
  for (const PatternInfo& info : kPatterns) {
    if (text != info.name) continue;
    Pattern p;
    p.stages.clear();
    size_t begin = 0;
    bool producer = true;
    for (;;) {
      const size_t plus = text.find('+', begin);
      const std::string_view part = text.substr(begin, plus == std::string_view::npos ? std::string_view::npos : plus - begin);
      if (producer) {
        p.producer = part == "fc" ? Producer::fully_connected : Producer::conv2d;
        producer = false;
      } else {
        Stage s;
        if (part == "act") s.kind = StageKind::activation;
        else if (part == "add") s.kind = StageKind::add;
        else if (part == "maxpool") s.kind = StageKind::max_pool;
        else if (part == "avgpool") s.kind = StageKind::avg_pool;
        else if (part == "batchnorm") s.kind = StageKind::batchnorm;
        else s.kind = StageKind::fully_connected;
        p.stages.push_back(s);
      }
      if (plus == std::string_view::npos) break;
      begin = plus + 1;
    }
    return p;
  }
  std::string expected;
  for (const PatternInfo& info : kPatterns) expected += (expected.empty() ? "" : ", ") + std::string(info.name);
  throw InputError(std::string(field) + ": unknown pattern '" + std::string(text) + "' (expected " + expected + ")");
}

std::span<const PatternInfo> known_patterns() { return kPatterns; }

std::string describe_pattern(const Pattern& p, Fusion fusion, bool f32_intermediate) {
  if (is_conv_act(p) && fusion == Fusion::keep_all) return {};
  std::string out = " pattern " + pattern_name(p);
  std::string params;
  if (p.producer == Producer::fully_connected) params += "multiplier " + std::string(to_string(p.multiplier));
  for (const Stage& s : p.stages) {
    std::string part;
    switch (s.kind) {
      case StageKind::activation: break;
      case StageKind::add:
        part = f32_intermediate ? "add " + std::string(to_string(s.f32_add_rule)) + " r=" + format_quant_params(s.residual)
                                : "add " + std::string(to_string(s.add_rule)) + " r=" + format_quant_params(s.residual) +
                                      " s=" + format_quant_params(s.out);
        break;
      case StageKind::max_pool:
      case StageKind::avg_pool:
        part = std::string(to_string(s.kind)) + " " + std::to_string(s.window.kernel) + "x" +
               std::to_string(s.window.kernel) + "/" + std::to_string(s.window.stride) + " pad " +
               std::to_string(s.window.padding);
        if (s.kind == StageKind::avg_pool) part += " " + std::string(to_string(s.pool_rule)) + " p=" + format_quant_params(s.out);
        break;
      case StageKind::fully_connected:
        part = "fc " + std::to_string(s.fc_outputs) + " outputs y2=" + format_quant_params(s.out);
        break;
      case StageKind::batchnorm:
        part = "batchnorm eps=" + format_float32(s.bn_eps) + " regime " + std::string(to_string(s.bn_regime));
        if (fusion == Fusion::fold) {
          part += " fold " + format_batchnorm_fold(s.bn_fold) + " reference " + std::string(to_string(s.bn_reference));
        }
        break;
    }
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
  Convention a = c;
  if (const Stage* add = find_stage(p, StageKind::add)) {
    a.intermediate.q = add->out;
    a.intermediate.kind = IntermediateKind::quantized;
  }
  return a;
}

QuantParams final_output(const Pattern& p, const Convention& c) {
  QuantParams q = c.intermediate.q;  // the producer's boundary
  for (const Stage& s : p.stages) {
    switch (s.kind) {
      case StageKind::activation: q = c.output.q; break;
      case StageKind::max_pool:
      case StageKind::batchnorm: break;  // batchnorm writes the producer's boundary u
      case StageKind::add:
      case StageKind::avg_pool:
      case StageKind::fully_connected: q = s.out; break;
    }
  }
  return q;
}

void validate(const Pattern& p, const Convention& c) {
  bool known = false;
  for (const PatternInfo& info : kPatterns) known = known || pattern_name(p) == info.name;
  if (!known) {
    throw InputError("pattern: '" + pattern_name(p) + "' is not a known stage order (fusediff patterns --list)");
  }
  const bool f32 = c.intermediate.kind == IntermediateKind::f32;
  const std::string name = pattern_name(p);
  if (f32 && name != "conv2d+act" && name != "conv2d+add+act" && name != "fc+act") {
    throw InputError("pattern " + name + ": an f32 intermediate exists for conv2d+act, conv2d+add+act and fc+act only");
  }
  for (const Stage& s : p.stages) {
    const std::string field = "pattern." + std::string(to_string(s.kind));
    switch (s.kind) {
      case StageKind::activation: break;
      case StageKind::add:
        validate(s.residual, field + ".residual");
        validate(s.out, field + ".out");
        if (is_f32_add_rule(s.add_rule)) {
          throw InputError(field + ".rule: " + std::string(to_string(s.add_rule)) +
                           " adds to an f32 intermediate; the graph's add reads the code u (expected tflite, onnx_spec, "
                           "ort_mlas, ort_mlas_fma, ort_raw or onednn_unfused)");
        }
        if (!is_f32_add_rule(s.f32_add_rule)) {
          throw InputError(field + ".f32_rule: " + std::string(to_string(s.f32_add_rule)) +
                           " reads codes; an f32 intermediate is added to by onednn_sum or onednn_binary");
        }
        break;
      case StageKind::max_pool:
      case StageKind::avg_pool:
        if (s.window.kernel < 1 || s.window.kernel > 4 || s.window.stride < 1 || s.window.stride > 4 ||
            s.window.padding < 0 || s.window.padding >= s.window.kernel) {
          throw InputError(field + ".window: kernel " + std::to_string(s.window.kernel) + ", stride " +
                           std::to_string(s.window.stride) + ", padding " + std::to_string(s.window.padding) +
                           " (expected kernel and stride in [1, 4], 0 <= padding < kernel)");
        }
        if (s.kind == StageKind::avg_pool) {
          validate(s.out, field + ".out");
          // The pool reads the activation's output codes.
          if (s.pool_rule == AvgPoolRule::tflite && !(s.out == c.output.q)) {
            throw InputError(field + ".out: " + format_quant_params(s.out) + " differs from its input " +
                             format_quant_params(c.output.q) +
                             "; a TFLite average pool assumes equal input and output quantization");
          }
        }
        break;
      case StageKind::fully_connected:
        validate(s.out, field + ".out");
        if (s.fc_outputs < 1 || s.fc_outputs > 64) throw InputError(field + ".outputs: expected 1 to 64");
        break;
      case StageKind::batchnorm:
        if (!(s.bn_eps > 0.0f) || !std::isfinite(s.bn_eps)) throw InputError(field + ".eps: expected a finite value > 0");
        break;
    }
  }
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
  if (facts.residual_broadcast && has_stage(p, StageKind::add)) {
    return "residual-shape: the residual is broadcast; the fused add reads it element for element at the producer's "
           "output shape";
  }
  if (!facts.fc_input_flattened && has_stage(p, StageKind::fully_connected)) {
    return "fc-input-flattened: the fully connected stage does not read the producer's output flattened";
  }
  if (!facts.activation_supported && has_stage(p, StageKind::activation)) {
    return "activation-supported: the fused path does not implement " + std::string(to_string(c.activation.kind));
  }
  bool offered = false;
  for (const PatternInfo& info : kPatterns) {
    if (info.name != name) continue;
    offered = std::find(info.fusions.begin(), info.fusions.end(), fusion) != info.fusions.end();
  }
  if (!offered) {
    return "fusion-offered: pattern " + name + " has no " + std::string(to_string(fusion)) + " fusion";
  }
  if (fusion == Fusion::pool_first) {
    const Stage* avg = find_stage(p, StageKind::avg_pool);
    if (avg) return "pool-before-activation: an average pool commutes with no nonlinear activation";
    // Max pooling commutes with a table that is non-decreasing over the codes it can read.
    for (size_t i = 1; i < table.size(); ++i) {
      if (table[i] < table[i - 1]) {
        const int32_t qmin = c.intermediate.q.type.qmin();
        return "pool-before-activation: the applied table is not non-decreasing over the reachable codes (code " +
               std::to_string(qmin + static_cast<int32_t>(i) - 1) + " -> " + std::to_string(table[i - 1]) + ", code " +
               std::to_string(qmin + static_cast<int32_t>(i)) + " -> " + std::to_string(table[i]) + ")";
      }
    }
  }
  if (fusion == Fusion::fold && has_stage(p, StageKind::fully_connected) && has_stage(p, StageKind::activation)) {
    return "fold-linear-only: FC -> FC folds only without a nonlinearity between the layers";
  }
  return {};
}

bool keyed_by_activation_input(const Pattern& p) {
  return has_stage(p, StageKind::activation) && !has_stage(p, StageKind::max_pool) &&
         !has_stage(p, StageKind::avg_pool) && !has_stage(p, StageKind::fully_connected);
}

QuantParams keyed_boundary(const Pattern& p, const Convention& c) {
  return keyed_by_activation_input(p) ? activation_convention(p, c).intermediate.q : final_output(p, c);
}

int32_t pooled_extent(int32_t in, const PoolWindow& w) {
  const int32_t padded = in + 2 * w.padding;
  return padded < w.kernel ? 0 : (padded - w.kernel) / w.stride + 1;
}

PatternGeometry pattern_output_geometry(const Pattern& p, const ConvCase& producer) {
  PatternGeometry g{producer.batch(), producer.output_height(), producer.output_width(), producer.output_channels()};
  for (const Stage& s : p.stages) {
    if (s.kind == StageKind::max_pool || s.kind == StageKind::avg_pool) {
      g.height = pooled_extent(g.height, s.window);
      g.width = pooled_extent(g.width, s.window);
    } else if (s.kind == StageKind::fully_connected) {
      g.channels = s.fc_outputs;  // over a 1x1 producer output: [N, K] -> [N, fc_outputs]
    }
  }
  return g;
}

}  // namespace fusediff
