#include "fusediff/fused/plugin_wire.h"

#include <fmt/format.h>

#include <cstring>

namespace fusediff::fused::plugin {

namespace {

// The producer's scalar fields, in fusediff_draw's order and names.
struct ConvField {
  const char* name;
  int32_t (ConvCase::*get)() const;
};
constexpr ConvField kConvFields[] = {{"batch", &ConvCase::batch},
                                     {"input_height", &ConvCase::input_height},
                                     {"input_width", &ConvCase::input_width},
                                     {"input_channels", &ConvCase::input_channels},
                                     {"output_channels", &ConvCase::output_channels},
                                     {"kernel_height", &ConvCase::kernel_height},
                                     {"kernel_width", &ConvCase::kernel_width},
                                     {"stride_height", &ConvCase::stride_height},
                                     {"stride_width", &ConvCase::stride_width},
                                     {"dilation_height", &ConvCase::dilation_height},
                                     {"dilation_width", &ConvCase::dilation_width},
                                     {"padding_top", &ConvCase::padding_top},
                                     {"padding_left", &ConvCase::padding_left},
                                     {"padding_bottom", &ConvCase::padding_bottom},
                                     {"padding_right", &ConvCase::padding_right},
                                     {"output_padding_height", &ConvCase::output_padding_height},
                                     {"output_padding_width", &ConvCase::output_padding_width},
                                     {"output_height", &ConvCase::output_height},
                                     {"output_width", &ConvCase::output_width}};

std::string Name(const char* field, size_t i) { return fmt::format("{}.{}", field, i); }
std::string Name(const char* field, size_t i, size_t s) { return fmt::format("operands.{}.{}.{}", i, s, field); }

template <typename T>
void AddIfAny(Frame& f, const std::string& name, const std::vector<T>& v) {
  if (!v.empty()) f.add<T>(name, v);
}
template <typename T>
std::vector<T> GetIfAny(const Frame& f, const std::string& name) {
  if (!f.find(name)) return {};
  const std::span<const T> s = f.get<T>(name);
  return {s.begin(), s.end()};
}

const nlohmann::json& Field(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) throw ProtocolError(fmt::format("{}.{}: missing", where, key));
  return *it;
}
template <typename T>
T Value(const nlohmann::json& j, const char* key, const std::string& where) {
  try {
    return Field(j, key, where).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ProtocolError(fmt::format("{}.{}: of the wrong type ({})", where, key, Field(j, key, where).dump()));
  }
}

}  // namespace

Frame EncodeRun(std::span<const PatternDraw> draws, std::span<const size_t> y_counts) {
  Frame f("run");
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < draws.size(); ++i) {
    const PatternDraw& d = draws[i];
    const ConvCase& conv = d.conv;
    nlohmann::json j;
    j["op"] = std::string(to_string(conv.op()));
    for (const ConvField& field : kConvFields) j[field.name] = (conv.*field.get)();
    const QuantParams& q = conv.input_quant();
    j["input"] = {{"type", std::string(to_string(q.type.scalar))}, {"narrow", q.type.narrow},
                  {"qmin", q.type.qmin()},                         {"qmax", q.type.qmax()},
                  {"scale", q.scale},                              {"zero_point", q.zero_point}};
    j["operand_count"] = d.stages.size();
    j["y_count"] = y_counts[i];
    list.push_back(std::move(j));
    f.add<int32_t>(Name("input_codes", i), d.input);
    f.add<float>(Name("weight_scales", i), conv.weight_scales());
    f.add<int8_t>(Name("weights", i), conv.weights());
    f.add<int32_t>(Name("bias", i), conv.bias());
    for (size_t s = 0; s < d.stages.size(); ++s) {
      const StageOperands& o = d.stages[s];
      AddIfAny(f, Name("codes", i, s), o.codes);
      AddIfAny(f, Name("weight_scales", i, s), o.weight_scales);
      AddIfAny(f, Name("weights", i, s), o.weights);
      AddIfAny(f, Name("bias", i, s), o.bias);
      AddIfAny(f, Name("bn_gamma", i, s), o.bn.gamma);
      AddIfAny(f, Name("bn_beta", i, s), o.bn.beta);
      AddIfAny(f, Name("bn_mean", i, s), o.bn.mean);
      AddIfAny(f, Name("bn_var", i, s), o.bn.var);
    }
  }
  f.header["draws"] = std::move(list);
  return f;
}

std::vector<PatternDraw> DecodeRun(const Frame& run, std::vector<size_t>* y_counts) {
  ExpectReply(run, "run", "a request");
  const nlohmann::json& list = Field(run.header, "draws", "run");
  if (!list.is_array()) throw ProtocolError("run.draws: expected a list");
  std::vector<PatternDraw> draws(list.size());
  y_counts->assign(list.size(), 0);
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& j = list[i];
    const std::string where = fmt::format("run.draws[{}]", i);
    ConvCase& conv = draws[i].conv;
    conv.op(parse_conv_op(Value<std::string>(j, "op", where), where + ".op"))
        .batch(Value<int32_t>(j, "batch", where))
        .input_size(Value<int32_t>(j, "input_height", where), Value<int32_t>(j, "input_width", where))
        .input_channels(Value<int32_t>(j, "input_channels", where))
        .output_channels(Value<int32_t>(j, "output_channels", where))
        .kernel_size(Value<int32_t>(j, "kernel_height", where), Value<int32_t>(j, "kernel_width", where))
        .stride(Value<int32_t>(j, "stride_height", where), Value<int32_t>(j, "stride_width", where))
        .dilation(Value<int32_t>(j, "dilation_height", where), Value<int32_t>(j, "dilation_width", where))
        .padding(Value<int32_t>(j, "padding_top", where), Value<int32_t>(j, "padding_left", where),
                 Value<int32_t>(j, "padding_bottom", where), Value<int32_t>(j, "padding_right", where))
        .output_padding(Value<int32_t>(j, "output_padding_height", where),
                        Value<int32_t>(j, "output_padding_width", where));
    const nlohmann::json& in = Field(j, "input", where);
    QuantParams q;
    q.type.scalar = parse_scalar_type(Value<std::string>(in, "type", where + ".input"), where + ".input.type");
    q.type.narrow = Value<bool>(in, "narrow", where + ".input");
    q.scale = Value<float>(in, "scale", where + ".input");
    q.zero_point = Value<int32_t>(in, "zero_point", where + ".input");
    conv.input_quant(q);
    conv.weight_scales(GetIfAny<float>(run, Name("weight_scales", i)));
    conv.weights(GetIfAny<int8_t>(run, Name("weights", i)));
    conv.bias(GetIfAny<int32_t>(run, Name("bias", i)));
    draws[i].input = GetIfAny<int32_t>(run, Name("input_codes", i));
    draws[i].stages.resize(Value<size_t>(j, "operand_count", where));
    for (size_t s = 0; s < draws[i].stages.size(); ++s) {
      StageOperands& o = draws[i].stages[s];
      o.codes = GetIfAny<int32_t>(run, Name("codes", i, s));
      o.weight_scales = GetIfAny<float>(run, Name("weight_scales", i, s));
      o.weights = GetIfAny<int8_t>(run, Name("weights", i, s));
      o.bias = GetIfAny<int32_t>(run, Name("bias", i, s));
      o.bn.gamma = GetIfAny<float>(run, Name("bn_gamma", i, s));
      o.bn.beta = GetIfAny<float>(run, Name("bn_beta", i, s));
      o.bn.mean = GetIfAny<float>(run, Name("bn_mean", i, s));
      o.bn.var = GetIfAny<float>(run, Name("bn_var", i, s));
    }
    (*y_counts)[i] = Value<size_t>(j, "y_count", where);
  }
  return draws;
}

Frame EncodeResult(std::span<const std::span<int32_t>> y, std::span<const DrawOutcome> outcomes) {
  Frame f("result");
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const DrawOutcome& o = outcomes[i];
    nlohmann::json j = {{"status", std::string(to_string(o.status))}};
    if (!o.reason.empty()) j["reason"] = o.reason;
    if (!o.implementation.empty()) j["implementation"] = o.implementation;
    list.push_back(std::move(j));
    if (o.status == DrawOutcome::Status::ok) {
      f.add<int32_t>(Name("y", i), std::span<const int32_t>(y[i]), {static_cast<int64_t>(y[i].size())});
    }
  }
  f.header["outcomes"] = std::move(list);
  return f;
}

void DecodeResult(const Frame& result, std::span<const std::span<int32_t>> y, std::span<DrawOutcome> outcomes) {
  ExpectReply(result, "result", "run");
  const nlohmann::json& list = Field(result.header, "outcomes", "result");
  if (!list.is_array() || list.size() != outcomes.size()) {
    throw ProtocolError(fmt::format("result.outcomes: expected a list of {} outcomes, one per draw of the batch, got {}",
                                    outcomes.size(), list.dump().substr(0, 80)));
  }
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const std::string where = fmt::format("result.outcomes[{}]", i);
    const std::string status = Value<std::string>(list[i], "status", where);
    DrawOutcome& o = outcomes[i];
    o = DrawOutcome{};
    if (list[i].contains("reason")) o.reason = Value<std::string>(list[i], "reason", where);
    if (list[i].contains("implementation")) o.implementation = Value<std::string>(list[i], "implementation", where);
    if (status == "rejected") {
      o.status = DrawOutcome::Status::rejected;
      if (o.reason.empty()) o.reason = "rejected by the plugin (no reason given)";
      continue;
    }
    if (status != "ok") throw ProtocolError(where + ".status: \"" + status + "\", expected \"ok\" or \"rejected\"");
    std::span<const int32_t> values;
    try {
      values = result.get<int32_t>(Name("y", i));
    } catch (const FrameError& e) {
      throw ProtocolError(where + ": an ok draw needs its outputs: " + e.what());
    }
    if (values.size() != y[i].size()) {
      throw ProtocolError(fmt::format("result: array y.{} has {} values, the draw has {} outputs", i, values.size(),
                                      y[i].size()));
    }
    std::memcpy(y[i].data(), values.data(), values.size_bytes());
  }
}

void ExpectReply(const Frame& reply, const std::string& type, const std::string& request) {
  if (reply.type() == type) return;
  if (reply.type() == "error") {
    const auto it = reply.header.find("message");
    throw ProtocolError("the plugin answered " + request + " with an error: " +
                        (it != reply.header.end() && it->is_string() ? it->get<std::string>() : reply.header.dump()));
  }
  throw ProtocolError("expected a '" + type + "' message in answer to " + request + ", got '" + reply.type() + "'");
}

std::string DrawDigest(const PatternDraw& draw) {
  const std::vector<std::byte> bytes = EncodeRun(std::span<const PatternDraw>(&draw, 1), std::vector<size_t>{0}).Encode();
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (std::byte b : bytes) {
    h ^= static_cast<uint64_t>(b);
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace fusediff::fused::plugin
