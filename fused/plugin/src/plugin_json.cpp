// The case's JSON encoding (the subprocess protocol's `prepare`): the C field names, fusediff's names for enums.
#include <string>

#include "fusediff/fused/plugin_case.h"
#include "fusediff/model/activation.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {

namespace {
using nlohmann::json;

json BoundaryJson(const PluginBoundary& b) {
  return json{{"type", std::string(to_string(b.type))},
              {"narrow", b.narrow},
              {"qmin", b.qmin},
              {"qmax", b.qmax},
              {"scale", b.scale},
              {"zero_point", b.zero_point},
              {"rounding", std::string(to_string(b.rounding))},
              {"zero_point_order", std::string(to_string(b.zero_point_order))}};
}

const json& Field(const json& j, const char* key, const std::string& field) {
  if (!j.is_object() || !j.contains(key)) throw InputError(field + "." + key + ": missing");
  return j.at(key);
}

template <typename T>
T Get(const json& j, const char* key, const std::string& field) {
  const json& v = Field(j, key, field);
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw InputError(field + "." + key + ": " + v.dump() + " has the wrong type");
  }
}

std::string Text(const json& j, const char* key, const std::string& field) { return Get<std::string>(j, key, field); }

ScalarType ParseScalar(const std::string& text, const std::string& field) { return parse_scalar_type(text, field); }

PluginBoundary BoundaryFromJson(const json& j, const std::string& field) {
  PluginBoundary b;
  b.type = ParseScalar(Text(j, "type", field), field + ".type");
  b.narrow = Get<bool>(j, "narrow", field);
  b.qmin = Get<int32_t>(j, "qmin", field);
  b.qmax = Get<int32_t>(j, "qmax", field);
  b.scale = Get<float>(j, "scale", field);
  b.zero_point = Get<int32_t>(j, "zero_point", field);
  b.rounding = parse_rounding_mode(Text(j, "rounding", field), field + ".rounding");
  b.zero_point_order = parse_zero_point_order(Text(j, "zero_point_order", field), field + ".zero_point_order");
  return b;
}

// IntermediateKind and PostOpArithmetic have no parse function in the model: their names, matched here.
IntermediateKind ParseIntermediateKind(const std::string& text, const std::string& field) {
  for (IntermediateKind k : {IntermediateKind::quantized, IntermediateKind::f32}) {
    if (to_string(k) == text) return k;
  }
  throw InputError(field + ": '" + text + "' (expected quantized or f32)");
}
PostOpArithmetic ParsePostOps(const std::string& text, const std::string& field) {
  for (PostOpArithmetic a : {PostOpArithmetic::exact, PostOpArithmetic::binary32, PostOpArithmetic::binary32_libm}) {
    if (to_string(a) == text) return a;
  }
  throw InputError(field + ": '" + text + "' (expected exact, binary32 or binary32_libm)");
}
Producer ParseProducer(const std::string& text, const std::string& field) {
  for (Producer p : {Producer::conv2d, Producer::fully_connected}) {
    if (to_string(p) == text) return p;
  }
  throw InputError(field + ": '" + text + "' (expected conv2d or fully_connected)");
}
std::string_view WeightRangeName(WeightRange r) { return r == WeightRange::full ? "full" : "symmetric"; }
WeightRange ParseWeightRange(const std::string& text, const std::string& field) {
  if (text == "full") return WeightRange::full;
  if (text == "symmetric") return WeightRange::symmetric;
  throw InputError(field + ": '" + text + "' (expected symmetric or full)");
}
}  // namespace

nlohmann::json ToJson(const PluginCase& c) {
  json stages = json::array();
  for (const PluginStage& s : c.stages) {
    stages.push_back(json{{"kind", s.kind},
                          {"rule", s.rule},
                          {"out", BoundaryJson(s.out)},
                          {"residual", BoundaryJson(s.residual)},
                          {"window_kernel", s.window_kernel},
                          {"window_stride", s.window_stride},
                          {"window_padding", s.window_padding},
                          {"fc_outputs", s.fc_outputs}});
  }
  json segments = json::array();
  for (const PwlSegment& g : c.table_segments) {
    segments.push_back(json{{"u_lo", g.u_lo}, {"u_hi", g.u_hi}, {"slope", g.slope}, {"offset", g.offset}, {"shift", g.shift}});
  }
  return json{{"name", c.name},
              {"producer", std::string(to_string(c.producer))},
              {"max_batch", c.limits.max_batch},
              {"max_spatial", c.limits.max_spatial},
              {"max_channels", c.limits.max_channels},
              {"max_kernel", c.limits.max_kernel},
              {"max_stride", c.limits.max_stride},
              {"max_dilation", c.limits.max_dilation},
              {"transposed", c.limits.transposed},
              {"weight_range", std::string(WeightRangeName(c.limits.weights))},
              {"requant", std::string(to_string(c.requant))},
              {"intermediate_kind", std::string(to_string(c.intermediate_kind))},
              {"intermediate", BoundaryJson(c.intermediate)},
              {"output", BoundaryJson(c.output)},
              {"post_ops", std::string(to_string(c.post_ops))},
              {"activation", std::string(to_string(c.activation))},
              {"alpha", c.alpha},
              {"table_kind", c.table_kind ? json(std::string(to_string(*c.table_kind))) : json(nullptr)},
              {"table_lut", c.table_lut},
              {"table_knots", c.table_knots},
              {"table_segments", segments},
              {"stages", stages},
              {"features", c.features}};
}

PluginCase PluginCaseFromJson(const nlohmann::json& j, const std::string& field) {
  PluginCase c;
  c.name = Text(j, "name", field);
  c.producer = ParseProducer(Text(j, "producer", field), field + ".producer");
  c.limits.max_batch = Get<int32_t>(j, "max_batch", field);
  c.limits.max_spatial = Get<int32_t>(j, "max_spatial", field);
  c.limits.max_channels = Get<int32_t>(j, "max_channels", field);
  c.limits.max_kernel = Get<int32_t>(j, "max_kernel", field);
  c.limits.max_stride = Get<int32_t>(j, "max_stride", field);
  c.limits.max_dilation = Get<int32_t>(j, "max_dilation", field);
  c.limits.transposed = Get<bool>(j, "transposed", field);
  c.limits.weights = ParseWeightRange(Text(j, "weight_range", field), field + ".weight_range");
  c.requant = parse_requant_variant(Text(j, "requant", field), field + ".requant");
  c.intermediate_kind = ParseIntermediateKind(Text(j, "intermediate_kind", field), field + ".intermediate_kind");
  c.intermediate = BoundaryFromJson(Field(j, "intermediate", field), field + ".intermediate");
  c.output = BoundaryFromJson(Field(j, "output", field), field + ".output");
  c.post_ops = ParsePostOps(Text(j, "post_ops", field), field + ".post_ops");
  c.activation = parse_activation_kind(Text(j, "activation", field), field + ".activation");
  c.alpha = Get<float>(j, "alpha", field);
  if (const json& kind = Field(j, "table_kind", field); !kind.is_null()) {
    c.table_kind = parse_table_kind(Get<std::string>(j, "table_kind", field), field + ".table_kind");
  }
  c.table_lut = Get<std::vector<int32_t>>(j, "table_lut", field);
  c.table_knots = Get<std::vector<int32_t>>(j, "table_knots", field);
  const json& segments = Field(j, "table_segments", field);
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string f = field + ".table_segments[" + std::to_string(i) + "]";
    c.table_segments.push_back(PwlSegment{Get<int32_t>(segments[i], "u_lo", f), Get<int32_t>(segments[i], "u_hi", f),
                                          Get<int32_t>(segments[i], "slope", f), Get<int32_t>(segments[i], "offset", f),
                                          Get<int32_t>(segments[i], "shift", f)});
  }
  const json& stages = Field(j, "stages", field);
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string f = field + ".stages[" + std::to_string(i) + "]";
    const json& s = stages[i];
    PluginStage st;
    st.kind = Text(s, "kind", f);
    st.rule = Text(s, "rule", f);
    st.out = BoundaryFromJson(Field(s, "out", f), f + ".out");
    st.residual = BoundaryFromJson(Field(s, "residual", f), f + ".residual");
    st.window_kernel = Get<int32_t>(s, "window_kernel", f);
    st.window_stride = Get<int32_t>(s, "window_stride", f);
    st.window_padding = Get<int32_t>(s, "window_padding", f);
    st.fc_outputs = Get<int32_t>(s, "fc_outputs", f);
    c.stages.push_back(std::move(st));
  }
  c.features = Get<std::vector<std::string>>(j, "features", field);
  return c;
}

}  // namespace fusediff::fused::plugin
