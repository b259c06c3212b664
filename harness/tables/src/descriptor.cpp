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

}  // namespace

FusedOpDescriptor ParseDescriptor(std::string_view json_text, const std::string& file) {
  const json root = detail::ParseJson(json_text, file);
  const Fields top(file, "");
  top.CheckObject(root, "a fused-op descriptor",
                  {"format", "op", "group", "activation", "intermediate", "output", "requant", "table"});
  try {
    FusedOpDescriptor d;
    if (const std::string format = top.String(root, "format"); format != kFusedOpFormat) {
      top.Fail("format", "'" + format + "' (expected " + kFusedOpFormat + ")");
    }
    const std::string op = top.String(root, "op");
    if (op == "conv2d") {
      d.op = ConvOp::conv2d;
    } else if (op == "conv_transpose2d") {
      d.op = ConvOp::conv_transpose2d;
    } else {
      top.Fail("op", "unknown op '" + op + "' (expected conv2d or conv_transpose2d)");
    }
    d.group = top.Integer(top.Required(root, "group"), "group");
    if (d.group != 1) {
      top.Fail("group", std::to_string(d.group) + ": grouped convolution is not fused by this path (expected 1)");
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
    d.table_kind = parse_fused_kind(ft.String(table, "kind"), ft.Name("kind"));
    d.table_file = ft.String(table, "file");
    if (d.table_file.empty()) ft.Fail("file", "empty (expected a path relative to the descriptor)");

    validate(c);  // requant vs intermediate rounding, alpha, quantization
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
  j["op"] = std::string(to_string(d.op));
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
  return j.dump(2) + "\n";
}

}  // namespace fusediff::tables
