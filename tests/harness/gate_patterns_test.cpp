// `fusediff gate` on pattern descriptors (fusediff-fused-op/2): a legal fusion is judged as before; an illegal one
// is refused with the rule it breaks (exit 1) before any sample; a malformed pattern is bad input (exit 2). Each
// negative case breaks exactly one rule or one field of the shipped, accepted examples.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"

namespace fusediff::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

// The shipped example `stem` rewritten by `edit` into a scratch folder beside a copy of its table; gated there.
Outcome GateEdited(const std::string& stem, const std::function<void(json&)>& edit) {
  const fs::path examples = fs::path(FUSEDIFF_SOURCE_DIR) / "examples";
  const fs::path dir = fs::temp_directory_path() / ("fusediff_gate_patterns_" + std::to_string(::getpid()) + "_" +
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::create_directories(dir);
  json d = json::parse(std::ifstream(examples / (stem + ".json")));
  fs::copy_file(examples / d["table"]["file"].get<std::string>(), dir / d["table"]["file"].get<std::string>(),
                fs::copy_options::overwrite_existing);
  d["format"] = "fusediff-fused-op/2";
  edit(d);
  std::ofstream(dir / "d.json") << d.dump(2);
  std::ostringstream out, err;
  const int code = Main({"fusediff", "gate", (dir / "d.json").string(), "--samples", "500", "--threads", "1"}, out, err);
  fs::remove_all(dir);
  return {code, out.str(), err.str()};
}

json MaxPool(const char* fusion) {
  return {{"name", "conv2d+act+maxpool"}, {"fusion", fusion}, {"maxpool", {{"kernel", 2}, {"stride", 2}}}};
}

TEST(GatePatterns, LegalFusionsAreJudgedAsBefore) {
  // Max pooling commutes with sigmoid's non-decreasing table: pooled first is legal.
  const Outcome pooled = GateEdited("sigmoid_int8_lut", [](json& d) { d["pattern"] = MaxPool("pool_first"); });
  EXPECT_EQ(pooled.code, 0) << pooled.out << pooled.err;
  EXPECT_NE(pooled.out.find("verdict: ACCEPT"), std::string::npos) << pooled.out;
  const Outcome kept = GateEdited("gelu_erf_int8_lut", [](json& d) { d["pattern"] = MaxPool("keep_all"); });
  EXPECT_EQ(kept.code, 0) << kept.out << kept.err;
  const Outcome v1 = GateEdited("gelu_erf_int8_lut", [](json& d) { d["format"] = "fusediff-fused-op/1"; });
  EXPECT_EQ(v1.code, 0) << v1.out << v1.err;  // /1 files are still read
  // The BatchNorm after the activation kept as its own op: legal.
  const Outcome bn = GateEdited("sigmoid_int8_lut", [](json& d) {
    d["pattern"] = {{"name", "conv2d+act+batchnorm"}, {"fusion", "keep_all"},
                    {"batchnorm", {{"out", {{"type", "int8"}, {"scale", 0.05}, {"zero_point", 0}}}}}};
  });
  EXPECT_EQ(bn.code, 0) << bn.out << bn.err;
}

TEST(GatePatterns, IllegalFusionsAreRefusedWithTheRuleNamed) {
  struct Case {
    const char* stem;
    const char* rule;
    std::function<void(json&)> edit;
  };
  const std::vector<Case> cases = {
      // gelu dips below its value further left: its table decreases, so the max pool cannot move before it.
      {"gelu_erf_int8_lut", "pool-before-activation: the applied table is not non-decreasing",
       [](json& d) { d["pattern"] = MaxPool("pool_first"); }},
      {"sigmoid_int8_lut", "pool-before-activation: an average pool commutes with no nonlinear",
       [](json& d) {
         d["pattern"] = {{"name", "conv2d+act+avgpool"}, {"fusion", "pool_first"},
                         {"avgpool", {{"kernel", 2}, {"stride", 2}, {"rule", "tflite"}, {"out", d["output"]}}}};
         d["pattern"]["avgpool"]["out"].erase("rounding");
         d["pattern"]["avgpool"]["out"].erase("zero_point_order");
       }},
      {"sigmoid_int8_lut", "group-1:", [](json& d) { d["group"] = 2; }},
      {"sigmoid_int8_lut", "single-consumer:",
       [](json& d) { d["pattern"] = {{"name", "conv2d+act"}, {"intermediate_consumers", 2}}; }},
      {"sigmoid_int8_lut", "residual-shape:",
       [](json& d) {
         d["pattern"] = {{"name", "conv2d+add+act"},
                         {"add", {{"rule", "tflite"}, {"residual_shape", "broadcast"},
                                  {"residual", {{"type", "int8"}, {"scale", 0.05}, {"zero_point", 0}}}}}};
       }},
      {"sigmoid_int8_lut", "fold-linear-only:",
       [](json& d) {
         d["op"] = "fully_connected";
         d["pattern"] = {{"name", "fc+act+fc"}, {"fusion", "fold"},
                         {"fc", {{"outputs", 4}, {"out", {{"type", "int8"}, {"scale", 0.05}, {"zero_point", 0}}}}}};
       }},
      {"sigmoid_int8_lut", "fc-input-flattened:",
       [](json& d) {
         d["op"] = "fully_connected";
         d["pattern"] = {{"name", "fc+act+fc"},
                         {"fc", {{"outputs", 4}, {"input", "strided"},
                                 {"out", {{"type", "int8"}, {"scale", 0.05}, {"zero_point", 0}}}}}};
       }},
      {"sigmoid_int8_lut", "fusion-offered:",
       [](json& d) { d["pattern"] = {{"name", "conv2d+act"}, {"fusion", "fold"}}; }},
      // A BatchNorm after the activation cannot fold into the conv: it would move before the sigmoid.
      {"sigmoid_int8_lut", "bn-fold-before-activation: the BatchNorm follows the activation (sigmoid)",
       [](json& d) {
         d["pattern"] = {{"name", "conv2d+act+batchnorm"}, {"fusion", "fold"},
                         {"batchnorm", {{"eps", 1e-5}, {"out", {{"type", "int8"}, {"scale", 0.05}, {"zero_point", 0}}}}}};
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.rule);
    const Outcome o = GateEdited(c.stem, c.edit);
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find(std::string("fusion      ILLEGAL, rule ") + c.rule), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("verdict: REJECT"), std::string::npos) << o.out;
  }
}

TEST(GatePatterns, MalformedPatternsAreBadInput) {
  struct Case {
    const char* expected;
    std::function<void(json&)> edit;
  };
  const std::vector<Case> cases = {
      {"pattern.maxpool: missing", [](json& d) { d["pattern"] = {{"name", "conv2d+act+maxpool"}}; }},
      {"pattern.add: pattern conv2d+act+maxpool has no add stage",
       [](json& d) {
         d["pattern"] = MaxPool("keep_all");
         d["pattern"]["add"] = json::object();
       }},
      {"pattern.maxpool.window: unknown field",
       [](json& d) {
         d["pattern"] = MaxPool("keep_all");
         d["pattern"]["maxpool"]["window"] = 3;
       }},
      {"pattern.name: unknown pattern 'conv2d+gelu'", [](json& d) { d["pattern"] = {{"name", "conv2d+gelu"}}; }},
      {"pattern.name: fc+act does not start with the descriptor's op conv2d",
       [](json& d) { d["pattern"] = {{"name", "fc+act"}}; }},
      {"pattern.name: fc+fc has no activation", [](json& d) {
         d["op"] = "fully_connected";
         d["pattern"] = {{"name", "fc+fc"}, {"fc", {{"outputs", 4}, {"out", {{"type", "int8"}, {"scale", 0.05}, {"zero_point", 0}}}}}};
       }},
      {"pattern: unknown field", [](json& d) {
         d["format"] = "fusediff-fused-op/1";  // /1 has no pattern
         d["pattern"] = MaxPool("keep_all");
       }},
      {"group: 0 (expected >= 1)", [](json& d) { d["group"] = 0; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    const Outcome o = GateEdited("sigmoid_int8_lut", c.edit);
    EXPECT_EQ(o.code, 2) << o.out << o.err;
    EXPECT_NE(o.err.find(c.expected), std::string::npos) << o.err;
  }
}

}  // namespace
}  // namespace fusediff::cli
