// The fused-op descriptor: parse (strict) and format.
#include <nlohmann/json.hpp>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/quant.h"
#include "fusediff/tables/tables.h"
#include "json_fields.h"

namespace fusediff::tables {

using detail::Fields;
using nlohmann::json;

namespace {

QuantType ParseType(const Fields& f, const json& object) {
  const std::string type = f.String(object, "type");
  QuantType t{parse_scalar_type(type, f.Name("type")), false};
  if (auto it = object.find("narrow"); it != object.end()) t.narrow = f.Bool(*it, "narrow");
  if (t.narrow && t.scalar == ScalarType::uint8) f.Fail("narrow", "narrow range applies to signed types only");
  return t;
}

// scale: a finite number > 0 that stays > 0 and finite as float32 (the scale's type in every toolchain).
float ParseScale(const Fields& f, const json& object) {
  const double scale = f.Number(f.Required(object, "scale"), "scale");
  const float as_float = static_cast<float>(scale);
  if (!(scale > 0.0) || !std::isfinite(as_float) || !(as_float > 0.0f)) {
    f.Fail("scale", format_double(scale) + " is not a finite value > 0 in float32");
  }
  return as_float;
}

int32_t ParseZeroPoint(const Fields& f, const json& object, const QuantType& type) {
  const int64_t zp = f.Integer(f.Required(object, "zero_point"), "zero_point");
  if (!type.contains(zp)) {
    f.Fail("zero_point", std::to_string(zp) + " is outside " + to_string(type) + " [" + std::to_string(type.qmin()) +
                             ", " + std::to_string(type.qmax()) + "]");
  }
  return static_cast<int32_t>(zp);
}

QuantParams ParseQuant(const Fields& f, const json& object) {
  QuantParams q;
  q.type = ParseType(f, object);
  q.scale = ParseScale(f, object);
  q.zero_point = ParseZeroPoint(f, object, q.type);
  return q;
}

nlohmann::ordered_json QuantToJson(const QuantParams& q) {
  nlohmann::ordered_json j;
  j["type"] = std::string(to_string(q.type.scalar));
  // The shortest decimal that parses back to the same float32.
  j["scale"] = json::parse(format_float32(q.scale));
  j["zero_point"] = q.zero_point;
  return j;
}

// A stage's quantized tensor `field` of `object` (type, scale, zero point, optional narrow).
QuantParams ParseStageTensor(const Fields& f, const json& object, std::string_view field, std::string_view what) {
  const Fields ft = f.Child(field);
  ft.CheckObject(f.Required(object, field), what, {"type", "scale", "zero_point", "narrow"});
  return ParseQuant(ft, object.at(std::string(field)));
}

// An optional two-valued string field: true for `yes`, false for `no` or when absent.
bool ParseChoice(const Fields& f, const json& object, std::string_view field, std::string_view no, std::string_view yes) {
  if (!object.contains(std::string(field))) return false;
  const std::string value = f.String(object, field);
  if (value != no && value != yes) {
    f.Fail(field, "'" + value + "' (expected " + std::string(no) + " or " + std::string(yes) + ")");
  }
  return value == yes;
}

// The `pattern` object of a /2 descriptor: its name, fusion, the stages' parameters and the graph facts legality
// reads. Every stage the name lists needs its object (an activation needs none), and only those.
void ParsePattern(const Fields& f, const json& object, FusedOpDescriptor& d) {
  f.CheckObject(object, "the fusion pattern",
                {"name", "fusion", "multiplier", "intermediate_consumers", "add", "maxpool", "avgpool", "fc",
                 "batchnorm"});
  d.pattern = parse_pattern_name(f.String(object, "name"), f.Name("name"));
  if (object.contains("fusion")) d.fusion = parse_fusion(f.String(object, "fusion"), f.Name("fusion"));
  if (object.contains("multiplier")) {
    if (d.pattern.producer != Producer::fully_connected) f.Fail("multiplier", "applies to a fully connected producer only");
    d.pattern.multiplier = parse_multiplier_rule(f.String(object, "multiplier"), f.Name("multiplier"));
  }
  if (object.contains("intermediate_consumers")) {
    const int64_t consumers = f.Integer(object.at("intermediate_consumers"), "intermediate_consumers");
    if (consumers < 1 || consumers > 1 << 20) f.Fail("intermediate_consumers", std::to_string(consumers) + " (expected >= 1)");
    d.facts.intermediate_consumers = static_cast<int32_t>(consumers);
  }
  for (const char* stage_name : {"add", "maxpool", "avgpool", "fc", "batchnorm"}) {
    bool listed = false;
    for (const Stage& st : d.pattern.stages) listed = listed || to_string(st.kind) == stage_name;
    if (object.contains(stage_name) && !listed) {
      f.Fail(stage_name, "pattern " + pattern_name(d.pattern) + " has no " + stage_name + " stage");
    }
  }
  for (Stage& st : d.pattern.stages) {
    if (st.kind == StageKind::activation) continue;
    const std::string name(to_string(st.kind));
    const json& o = f.Required(object, name);
    const Fields fs = f.Child(name);
    if (st.kind == StageKind::add) {
      // The sum is the tensor the table reads: the descriptor's `intermediate` (set by the caller).
      fs.CheckObject(o, "the add stage", {"rule", "residual", "residual_shape"});
      st.add_rule = parse_add_rule(fs.String(o, "rule"), fs.Name("rule"));
      st.residual = ParseStageTensor(fs, o, "residual", "the residual tensor");
      d.facts.residual_broadcast = ParseChoice(fs, o, "residual_shape", "same", "broadcast");
    } else if (st.kind == StageKind::max_pool || st.kind == StageKind::avg_pool) {
      const bool avg = st.kind == StageKind::avg_pool;
      if (avg) fs.CheckObject(o, "the average pool", {"kernel", "stride", "padding", "rule", "out"});
      else fs.CheckObject(o, "the max pool", {"kernel", "stride", "padding"});
      st.window.kernel = static_cast<int32_t>(fs.Integer(fs.Required(o, "kernel"), "kernel"));
      st.window.stride = static_cast<int32_t>(fs.Integer(fs.Required(o, "stride"), "stride"));
      st.window.padding = o.contains("padding") ? static_cast<int32_t>(fs.Integer(o.at("padding"), "padding")) : 0;
      if (avg) {
        st.pool_rule = parse_avg_pool_rule(fs.String(o, "rule"), fs.Name("rule"));
        st.out = ParseStageTensor(fs, o, "out", "the pool's output tensor");
      }
    } else if (st.kind == StageKind::fully_connected) {
      fs.CheckObject(o, "the second fully connected layer", {"outputs", "out", "input"});
      st.fc_outputs = static_cast<int32_t>(fs.Integer(fs.Required(o, "outputs"), "outputs"));
      st.out = ParseStageTensor(fs, o, "out", "the layer's output tensor");
      d.facts.fc_input_flattened = !ParseChoice(fs, o, "input", "flattened", "strided");
    } else if (st.kind == StageKind::batchnorm && st.bn_reads_codes) {
      // After the activation (conv2d+act+batchnorm): its eps and output boundary; its fold is what the gate refuses.
      fs.CheckObject(o, "the BatchNorm after the activation", {"eps", "out"});
      if (o.contains("eps")) st.bn_eps = static_cast<float>(fs.Number(o.at("eps"), "eps"));
      st.out = ParseStageTensor(fs, o, "out", "the BatchNorm's output tensor");
    } else if (st.kind == StageKind::batchnorm) {
      fs.Fail("batchnorm", "no batchnorm stage: a fused-op descriptor cannot state a fold (measure it with "
              "`fusediff run --pattern conv2d+batchnorm+act`)");
    } else {
      fs.Fail(name, "a fused-op descriptor states the stages act, add, maxpool, avgpool, fc and a batchnorm after the "
                          "activation only");
    }
  }
}

}  // namespace

FusedOpDescriptor ParseDescriptor(std::string_view json_text, const std::string& file) {
  const json root = detail::ParseJson(json_text, file);
  const Fields top(file, "");
  const bool v2 = root.is_object() && root.contains("format") && root.at("format") == kFusedOpFormat;
  if (v2) {
    top.CheckObject(root, "a fused-op descriptor",
                    {"format", "op", "group", "pattern", "activation", "intermediate", "output", "requant", "table"});
  } else {
    top.CheckObject(root, "a fused-op descriptor",
                    {"format", "op", "group", "activation", "intermediate", "output", "requant", "table"});
  }
  try {
    FusedOpDescriptor d;
    if (const std::string format = top.String(root, "format"); format != kFusedOpFormat && format != kFusedOpFormatV1) {
      top.Fail("format", "'" + format + "' (expected " + kFusedOpFormat + " or " + kFusedOpFormatV1 + ")");
    }
    const std::string op = top.String(root, "op");
    if (op == "conv2d") {
      d.op = ConvOp::conv2d;
    } else if (op == "conv_transpose2d") {
      d.op = ConvOp::conv_transpose2d;
    } else if (op == "fully_connected" && v2) {
      d.pattern = parse_pattern_name("fc+act", "op");
    } else {
      top.Fail("op", "unknown op '" + op + "' (expected conv2d, conv_transpose2d" + (v2 ? ", fully_connected)" : ")"));
    }
    // A group other than 1 is a legal descriptor of an illegal fusion: the gate refuses it by rule (group-1).
    d.group = top.Integer(top.Required(root, "group"), "group");
    if (d.group < 1) top.Fail("group", std::to_string(d.group) + " (expected >= 1)");
    d.facts.group = d.group;
    if (v2 && root.contains("pattern")) {
      ParsePattern(top.Child("pattern"), root.at("pattern"), d);
      if ((d.pattern.producer == Producer::fully_connected) != (op == "fully_connected")) {
        top.Fail("pattern.name", pattern_name(d.pattern) + " does not start with the descriptor's op " + op);
      }
    }
    if (!has_stage(d.pattern, StageKind::activation)) {
      top.Fail("pattern.name", pattern_name(d.pattern) + " has no activation: there is no table to gate");
    }

    Convention& c = d.convention;
    const json& activation = top.Required(root, "activation");
    const Fields fa = top.Child("activation");
    fa.CheckObject(activation, "the activation", {"kind", "alpha"});
    c.activation.kind = parse_activation_kind(fa.String(activation, "kind"), fa.Name("kind"));
    c.activation.alpha = default_alpha(c.activation.kind);
    if (auto it = activation.find("alpha"); it != activation.end()) {
      if (!takes_alpha(c.activation.kind)) {
        fa.Fail("alpha", std::string(to_string(c.activation.kind)) + " takes no alpha (remove the field)");
      }
      const double alpha = fa.Number(*it, "alpha");
      c.activation.alpha = static_cast<float>(alpha);
      if (!std::isfinite(c.activation.alpha)) fa.Fail("alpha", "must be finite in float32");
    }

    const json& output = top.Required(root, "output");
    const Fields fo = top.Child("output");
    fo.CheckObject(output, "the output tensor", {"type", "scale", "zero_point", "rounding", "zero_point_order", "narrow"});
    c.output.q = ParseQuant(fo, output);
    c.output.rounding = parse_rounding_mode(fo.String(output, "rounding"), fo.Name("rounding"));
    if (output.contains("zero_point_order")) {
      c.output.zero_point_order = parse_zero_point_order(fo.String(output, "zero_point_order"), fo.Name("zero_point_order"));
    }

    c.requant = parse_requant_variant(top.String(root, "requant"), "requant");

    const bool has_intermediate = root.contains("intermediate");
    const bool has_table = root.contains("table");
    if (has_table && !has_intermediate) {
      top.Fail("intermediate", "missing: a table without an intermediate tensor is an incomplete fusion (the table "
                               "reads u with the intermediate's scale and zero point)");
    }
    if (has_intermediate && !has_table) {
      top.Fail("table", "missing: an intermediate tensor without a table is an incomplete fusion");
    }
    if (!has_table) top.Fail("table", "missing: nothing to gate (expected `intermediate` and `table`)");

    const json& intermediate = root.at("intermediate");
    const Fields fi = top.Child("intermediate");
    fi.CheckObject(intermediate, "the intermediate tensor", {"type", "scale", "zero_point", "rounding", "narrow"});
    c.intermediate.q = ParseQuant(fi, intermediate);
    c.intermediate.rounding = parse_rounding_mode(fi.String(intermediate, "rounding"), fi.Name("rounding"));

    const json& table = root.at("table");
    const Fields ft = top.Child("table");
    ft.CheckObject(table, "the table", {"kind", "file"});
    d.table_kind = parse_table_kind(ft.String(table, "kind"), ft.Name("kind"));
    d.table_file = ft.String(table, "file");
    if (d.table_file.empty()) ft.Fail("file", "empty (expected a path relative to the descriptor)");

    validate(c);  // requant vs intermediate rounding, alpha, quantization
    for (Stage& st : d.pattern.stages) {
      if (st.kind == StageKind::add) st.out = c.intermediate.q;  // the table reads the sum
    }
    validate(d.pattern, c);  // stage boundaries and windows
    if (const std::string mismatch = table_kind_mismatch(d.table_kind, c); !mismatch.empty()) {
      ft.Fail("kind", mismatch);
    }
    return d;
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.rfind(file + ": ", 0) == 0) throw;
    throw InputError(file + ": " + what);  // model parsers name the field but not the file
  }
}

std::string FormatDescriptor(const FusedOpDescriptor& d) {
  const Convention& c = d.convention;
  nlohmann::ordered_json j;
  j["format"] = kFusedOpFormat;
  j["op"] = d.pattern.producer == Producer::fully_connected ? std::string("fully_connected") : std::string(to_string(d.op));
  j["group"] = d.group;
  nlohmann::ordered_json activation;
  activation["kind"] = std::string(to_string(c.activation.kind));
  if (takes_alpha(c.activation.kind)) activation["alpha"] = json::parse(format_float32(c.activation.alpha));
  j["activation"] = activation;
  nlohmann::ordered_json intermediate = QuantToJson(c.intermediate.q);
  intermediate["rounding"] = std::string(to_string(c.intermediate.rounding));
  if (c.intermediate.q.type.narrow) intermediate["narrow"] = true;
  j["intermediate"] = intermediate;
  nlohmann::ordered_json output = QuantToJson(c.output.q);
  output["rounding"] = std::string(to_string(c.output.rounding));
  output["zero_point_order"] = std::string(to_string(c.output.zero_point_order));
  if (c.output.q.type.narrow) output["narrow"] = true;
  j["output"] = output;
  j["requant"] = std::string(to_string(c.requant));
  j["table"] = {{"kind", std::string(to_string(d.table_kind))}, {"file", d.table_file}};
  if (!is_conv_act(d.pattern) || d.fusion != Fusion::keep_all || !(d.facts == FusionFacts{d.group})) {
    nlohmann::ordered_json pattern;
    pattern["name"] = pattern_name(d.pattern);
    pattern["fusion"] = std::string(to_string(d.fusion));
    if (d.pattern.producer == Producer::fully_connected) pattern["multiplier"] = std::string(to_string(d.pattern.multiplier));
    if (d.facts.intermediate_consumers != 1) pattern["intermediate_consumers"] = d.facts.intermediate_consumers;
    for (const Stage& st : d.pattern.stages) {
      nlohmann::ordered_json o;
      if (st.kind == StageKind::activation || (st.kind == StageKind::batchnorm && !st.bn_reads_codes)) continue;
      if (st.kind == StageKind::batchnorm) {  // after the activation
        o["eps"] = st.bn_eps;
        o["out"] = QuantToJson(st.out);
      } else if (st.kind == StageKind::add) {
        o["rule"] = std::string(to_string(st.add_rule));
        o["residual"] = QuantToJson(st.residual);
        o["residual_shape"] = d.facts.residual_broadcast ? "broadcast" : "same";
      } else if (st.kind == StageKind::max_pool || st.kind == StageKind::avg_pool) {
        o["kernel"] = st.window.kernel;
        o["stride"] = st.window.stride;
        o["padding"] = st.window.padding;
        if (st.kind == StageKind::avg_pool) {
          o["rule"] = std::string(to_string(st.pool_rule));
          o["out"] = QuantToJson(st.out);
        }
      } else if (st.kind == StageKind::fully_connected) {
        o["outputs"] = st.fc_outputs;
        o["out"] = QuantToJson(st.out);
        o["input"] = d.facts.fc_input_flattened ? "flattened" : "strided";
      }
      pattern[std::string(to_string(st.kind))] = o;
    }
    j["pattern"] = pattern;
  }
  return j.dump(2) + "\n";
}

}  // namespace fusediff::tables
