#include "fusediff/fused/plugin_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

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

// A ragged tensor of the batch: every draw's values end to end, and "NAME.offsets" (<i8, N + 1): draw i's values
// are values[offsets[i]:offsets[i + 1]] (numpy slicing). Left out when no draw has any (`always`: never).
template <typename T, typename Get>
void AddRagged(Frame& f, const std::string& name, size_t n, const Get& get, bool always = false) {
  std::vector<int64_t> offsets(n + 1, 0);
  for (size_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + static_cast<int64_t>(get(i).size());
  if (!always && offsets[n] == 0) return;
  std::vector<T> values;
  values.reserve(static_cast<size_t>(offsets[n]));
  for (size_t i = 0; i < n; ++i) values.insert(values.end(), get(i).begin(), get(i).end());
  f.add<T>(name, values);
  f.add<int64_t>(name + ".offsets", offsets);
}

// Draw i's values of a ragged tensor into put(i, span) (nothing when the message lacks it); ProtocolError for
// offsets that are not N + 1 non-decreasing positions from 0 to the values' end.
template <typename T, typename Put>
void GetRagged(const Frame& f, const std::string& name, size_t n, const Put& put) {
  if (!f.find(name)) return;
  std::span<const T> values;
  std::span<const int64_t> offsets;
  try {
    values = f.get<T>(name);
    offsets = f.get<int64_t>(name + ".offsets");
  } catch (const FrameError& e) {
    throw ProtocolError(std::string("run: ") + e.what());
  }
  if (offsets.size() != n + 1 || offsets[0] != 0 || offsets[n] != static_cast<int64_t>(values.size())) {
    throw ProtocolError(fmt::format("run: {}.offsets: expected {} offsets from 0 to {}", name, n + 1, values.size()));
  }
  for (size_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i]) throw ProtocolError(fmt::format("run: {}.offsets[{}]: decreasing", name, i + 1));
    put(i, values.subspan(static_cast<size_t>(offsets[i]), static_cast<size_t>(offsets[i + 1] - offsets[i])));
  }
}

// Calls f(name, field) for each operand tensor of a stage: field(operands) is the vector, const or not.
template <typename F>
void ForEachOperandTensor(const F& f) {
  f("codes", [](auto& o) -> auto& { return o.codes; });
  f("weight_scales", [](auto& o) -> auto& { return o.weight_scales; });
  f("weights", [](auto& o) -> auto& { return o.weights; });
  f("bias", [](auto& o) -> auto& { return o.bias; });
  f("bn_gamma", [](auto& o) -> auto& { return o.bn.gamma; });
  f("bn_beta", [](auto& o) -> auto& { return o.bn.beta; });
  f("bn_mean", [](auto& o) -> auto& { return o.bn.mean; });
  f("bn_var", [](auto& o) -> auto& { return o.bn.var; });
}

// The int32 columns of the "scalars" table after the producer's (kConvFields), in order. The header's "columns"
// names every column, so a reader looks them up by name and a later protocol may append some.
constexpr const char* kDrawColumns[] = {"op",         "input_type",       "input_narrow",  "input_qmin",
                                        "input_qmax", "input_zero_point", "operand_count", "y_count"};

std::vector<std::string> ScalarColumns() {
  std::vector<std::string> names;
  names.emplace_back(kDrawColumns[0]);
  for (const ConvField& field : kConvFields) names.emplace_back(field.name);
  names.insert(names.end(), std::begin(kDrawColumns) + 1, std::end(kDrawColumns));
  return names;
}

// One draw's row of the "scalars" table, in ScalarColumns()'s order.
std::vector<int32_t> ScalarRow(const PatternDraw& d, size_t y_count) {
  const ConvCase& conv = d.conv;
  const QuantParams& q = conv.input_quant();
  std::vector<int32_t> row = {static_cast<int32_t>(conv.op())};  // fusediff_conv_op (abi.cpp checks the values)
  for (const ConvField& field : kConvFields) row.push_back((conv.*field.get)());
  row.insert(row.end(), {static_cast<int32_t>(q.type.scalar), q.type.narrow ? 1 : 0, q.type.qmin(), q.type.qmax(),
                         q.zero_point, static_cast<int32_t>(d.stages.size()), static_cast<int32_t>(y_count)});
  return row;
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

// The run message's "scalars" table read back: column(name)[i] is draw i's value.
class ScalarTable {
 public:
  ScalarTable(const Frame& run, size_t n) : n_(n) {
    const auto names = Value<std::vector<std::string>>(run.header, "columns", "run");
    try {
      values_ = run.get<int32_t>("scalars");
    } catch (const FrameError& e) {
      throw ProtocolError(std::string("run: ") + e.what());
    }
    if (values_.size() != n * names.size()) {
      throw ProtocolError(fmt::format("run: scalars: expected {} draws x {} columns", n, names.size()));
    }
    for (size_t c = 0; c < names.size(); ++c) index_.emplace(names[c], c);
    width_ = names.size();
  }
  int32_t at(size_t i, const char* name) const {
    const auto it = index_.find(name);
    if (it == index_.end()) throw ProtocolError(fmt::format("run.columns: no column '{}'", name));
    return values_[i * width_ + it->second];
  }
  size_t size() const { return n_; }

 private:
  size_t n_, width_ = 0;
  std::span<const int32_t> values_;
  std::map<std::string, size_t, std::less<>> index_;
};

ConvOp OpOf(int32_t value, size_t i) {
  if (value != static_cast<int32_t>(ConvOp::conv2d) && value != static_cast<int32_t>(ConvOp::conv_transpose2d)) {
    throw ProtocolError(fmt::format("run: draw {}: op {} is no fusediff_conv_op", i, value));
  }
  return static_cast<ConvOp>(value);
}
ScalarType TypeOf(int32_t value, size_t i) {
  for (ScalarType t : {ScalarType::int8, ScalarType::uint8, ScalarType::int16}) {
    if (value == static_cast<int32_t>(t)) return t;
  }
  throw ProtocolError(fmt::format("run: draw {}: input_type {} is no fusediff_scalar_type", i, value));
}

}  // namespace

Frame EncodeRun(std::span<const PatternDraw> draws, std::span<const size_t> y_counts) {
  const size_t n = draws.size();
  Frame f("run");
  f.header["draw_count"] = n;
  const std::vector<std::string> columns = ScalarColumns();
  f.header["columns"] = columns;
  std::vector<int32_t> scalars;
  std::vector<float> input_scale;
  size_t operand_count = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int32_t> row = ScalarRow(draws[i], y_counts[i]);
    scalars.insert(scalars.end(), row.begin(), row.end());
    input_scale.push_back(draws[i].conv.input_quant().scale);
    operand_count = std::max(operand_count, draws[i].stages.size());
  }
  f.add<int32_t>("scalars", std::span<const int32_t>(scalars),
                 {static_cast<int64_t>(n), static_cast<int64_t>(columns.size())});
  f.add<float>("input_scale", input_scale);
  AddRagged<int32_t>(f, "input_codes", n, [&](size_t i) -> const auto& { return draws[i].input; }, true);
  AddRagged<int8_t>(f, "weights", n, [&](size_t i) -> const auto& { return draws[i].conv.weights(); }, true);
  AddRagged<float>(f, "weight_scales", n, [&](size_t i) -> const auto& { return draws[i].conv.weight_scales(); }, true);
  AddRagged<int32_t>(f, "bias", n, [&](size_t i) -> const auto& { return draws[i].conv.bias(); }, true);
  static const StageOperands kNone;
  for (size_t s = 0; s < operand_count; ++s) {
    ForEachOperandTensor([&](const char* name, const auto& field) {
      using T = typename std::remove_cvref_t<decltype(field(kNone))>::value_type;
      AddRagged<T>(f, fmt::format("operands.{}.{}", s, name), n, [&](size_t i) -> const auto& {
        return s < draws[i].stages.size() ? field(draws[i].stages[s]) : field(kNone);
      });
    });
  }
  return f;
}

std::vector<PatternDraw> DecodeRun(const Frame& run, std::vector<size_t>* y_counts) {
  ExpectReply(run, "run", "a request");
  const auto n = Value<size_t>(run.header, "draw_count", "run");
  const ScalarTable table(run, n);
  std::span<const float> input_scale;
  try {
    input_scale = run.get<float>("input_scale");
  } catch (const FrameError& e) {
    throw ProtocolError(std::string("run: ") + e.what());
  }
  if (input_scale.size() != n) throw ProtocolError(fmt::format("run: input_scale: expected {} values", n));
  std::vector<PatternDraw> draws(n);
  y_counts->assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto at = [&](const char* name) { return table.at(i, name); };
    ConvCase& conv = draws[i].conv;
    conv.op(OpOf(at("op"), i))
        .batch(at("batch"))
        .input_size(at("input_height"), at("input_width"))
        .input_channels(at("input_channels"))
        .output_channels(at("output_channels"))
        .kernel_size(at("kernel_height"), at("kernel_width"))
        .stride(at("stride_height"), at("stride_width"))
        .dilation(at("dilation_height"), at("dilation_width"))
        .padding(at("padding_top"), at("padding_left"), at("padding_bottom"), at("padding_right"))
        .output_padding(at("output_padding_height"), at("output_padding_width"));
    conv.input_quant(QuantParams{QuantType{TypeOf(at("input_type"), i), at("input_narrow") != 0}, input_scale[i],
                                 at("input_zero_point")});
    if (at("operand_count") < 0 || at("y_count") < 0) {
      throw ProtocolError(fmt::format("run: draw {}: a negative operand_count or y_count", i));
    }
    draws[i].stages.resize(static_cast<size_t>(at("operand_count")));
    (*y_counts)[i] = static_cast<size_t>(at("y_count"));
  }
  const auto to_vector = [](const auto& values) { return std::vector(values.begin(), values.end()); };
  GetRagged<int32_t>(run, "input_codes", n, [&](size_t i, auto v) { draws[i].input = to_vector(v); });
  GetRagged<int8_t>(run, "weights", n, [&](size_t i, auto v) { draws[i].conv.weights(to_vector(v)); });
  GetRagged<float>(run, "weight_scales", n, [&](size_t i, auto v) { draws[i].conv.weight_scales(to_vector(v)); });
  GetRagged<int32_t>(run, "bias", n, [&](size_t i, auto v) { draws[i].conv.bias(to_vector(v)); });
  size_t operand_count = 0;
  for (const PatternDraw& d : draws) operand_count = std::max(operand_count, d.stages.size());
  for (size_t s = 0; s < operand_count; ++s) {
    ForEachOperandTensor([&](const char* name, const auto& field) {
      using T = typename std::remove_cvref_t<decltype(field(draws[0].stages[s]))>::value_type;
      GetRagged<T>(run, fmt::format("operands.{}.{}", s, name), n, [&](size_t i, auto v) {
        if (v.empty()) return;
        if (s >= draws[i].stages.size()) {
          throw ProtocolError(fmt::format("run: draw {} has {} operand sets, yet operands.{}.{} values", i,
                                          draws[i].stages.size(), s, name));
        }
        field(draws[i].stages[s]) = to_vector(v);
      });
    });
  }
  return draws;
}

// result: "y", every draw's y_count outputs end to end (a rejected draw's slots included, their values ignored);
// "rejected": [{"draw": i, "reason": ...}]; "implementation": one name for every draw, or a list of one per draw.
Frame EncodeResult(std::span<const std::span<int32_t>> y, std::span<const DrawOutcome> outcomes) {
  Frame f("result");
  std::vector<int32_t> values;
  nlohmann::json rejected = nlohmann::json::array();
  std::vector<std::string> implementations;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    values.insert(values.end(), y[i].begin(), y[i].end());
    if (outcomes[i].status != DrawOutcome::Status::ok) {
      rejected.push_back({{"draw", i}, {"reason", outcomes[i].reason}});
    }
    implementations.push_back(outcomes[i].implementation);
  }
  f.add<int32_t>("y", values);
  if (!rejected.empty()) f.header["rejected"] = std::move(rejected);
  const bool one = std::all_of(implementations.begin(), implementations.end(),
                               [&](const std::string& s) { return s == implementations.front(); });
  if (!implementations.empty() && !(one && implementations.front().empty())) {
    f.header["implementation"] = one ? nlohmann::json(implementations.front()) : nlohmann::json(implementations);
  }
  return f;
}

void DecodeResult(const Frame& result, std::span<const std::span<int32_t>> y, std::span<DrawOutcome> outcomes) {
  ExpectReply(result, "result", "run");
  const size_t n = outcomes.size();
  std::vector<bool> rejected(n, false);
  for (DrawOutcome& o : outcomes) o = DrawOutcome{};
  if (const auto it = result.header.find("rejected"); it != result.header.end()) {
    if (!it->is_array()) throw ProtocolError("result.rejected: expected a list");
    for (size_t k = 0; k < it->size(); ++k) {
      const std::string where = fmt::format("result.rejected[{}]", k);
      const auto i = Value<size_t>((*it)[k], "draw", where);
      if (i >= n || rejected[i]) {
        throw ProtocolError(fmt::format("{}.draw: {} is not a draw of this batch of {}, or is given twice", where, i, n));
      }
      rejected[i] = true;
      outcomes[i].status = DrawOutcome::Status::rejected;
      if ((*it)[k].contains("reason")) outcomes[i].reason = Value<std::string>((*it)[k], "reason", where);
      if (outcomes[i].reason.empty()) outcomes[i].reason = "rejected by the plugin (no reason given)";
    }
  }
  if (const auto it = result.header.find("implementation"); it != result.header.end()) {
    if (it->is_string()) {
      for (DrawOutcome& o : outcomes) o.implementation = it->get<std::string>();
    } else if (it->is_array() && it->size() == n && std::all_of(it->begin(), it->end(), [](auto& s) { return s.is_string(); })) {
      for (size_t i = 0; i < n; ++i) outcomes[i].implementation = (*it)[i].get<std::string>();
    } else {
      throw ProtocolError(fmt::format("result.implementation: expected a name, or a list of {} names", n));
    }
  }
  size_t expected = 0;
  for (const std::span<int32_t>& out : y) expected += out.size();
  std::span<const int32_t> values;
  try {
    values = result.get<int32_t>("y");
  } catch (const FrameError& e) {
    throw ProtocolError(std::string("result: ") + e.what());
  }
  if (values.size() != expected) {
    throw ProtocolError(fmt::format("result: array y has {} values, the batch's {} draws have {} outputs", values.size(),
                                    n, expected));
  }
  for (size_t i = 0, at = 0; i < n; at += y[i].size(), ++i) {
    if (!rejected[i]) std::memcpy(y[i].data(), values.data() + at, y[i].size_bytes());
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
