// Bisects of models fusediff did not write (tests/bisect/outside_models.py, docs/repro, ONNX's backend test data):
// refused sessions as steps with what they need and a reproduction, the blacklist that builds, the expected-output
// check, the engine's own refusal and the memory budget. ONNX Runtime, python3-onnx, node and libonnx-testdata come
// from scripts/setup.sh: without them these tests fail, they never skip.
#include <gtest/gtest.h>
#include <stdio.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fusediff/bisect/bisect.h"
#include "fusediff/cli/cli.h"
#include "fusediff/model/errors.h"
#include "test_util.h"

namespace fusediff::bisect {
namespace {

using test::Runtime;
using test::Scratch;

// The command's exit status and what it printed.
std::pair<int, std::string> Shell(const std::string& command) {
  std::string text;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (p != nullptr && std::fgets(buffer, sizeof buffer, p) != nullptr) text += buffer;
  const int status = p != nullptr ? ::pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

// outside_models.py's models in `dir`/NAME/model.onnx.
std::string OutsideModel(const std::filesystem::path& dir, const std::string& name) {
  const auto [rc, text] = Shell("/usr/bin/python3 " FUSEDIFF_SOURCE_DIR "/tests/bisect/outside_models.py " + dir.string());
  EXPECT_EQ(rc, 0) << text;
  return (dir / name / "model.onnx").string();
}

BisectOptions Quick(const std::filesystem::path& dir) { return test::Quick(dir, 0, 2); }

const Step* Find(const BisectResult& r, const std::string& kind, const std::string& subject) {
  for (const Step& s : r.steps) {
    if (s.kind == kind && s.subject == subject) return &s;
  }
  return nullptr;
}

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string NodeCommand(const std::string& script) {
  return "NODE_PATH=" + fused::ort::RunnerDirectory() + "/node_modules ORT_DISABLE_TELEMETRY=1 node " + script;
}

// The outside-built QDQ chain with an RMS normalization: SimplifiedLayerNormFusion alone is refused, and builds with
// QDQPropagationTransformer (which leaves the pattern unmatched); the bisect goes on, finds the QDQ fusion that moves
// the outputs, and writes a reproduction that onnxruntime-node refuses the same way.
TEST(OutsideModels, ARefusedStepGetsItsDependencyAndAReproduction) {
  const std::filesystem::path dir = Scratch("qdq");
  const std::string model = OutsideModel(dir, "qdq_conv_add_relu_pool_rmsnorm");
  const BisectResult r = Bisect(Runtime(), model, Quick(dir));
  const Step* refused = Find(r, "one_on", "SimplifiedLayerNormFusion");
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->verdict, "refused");
  EXPECT_EQ(refused->refusal_phase, "create");
  EXPECT_NE(refused->refusal.find("Node input 'normalized' is not a graph input"), std::string::npos) << refused->refusal;
  EXPECT_EQ(refused->dependency, (std::vector<std::string>{"QDQPropagationTransformer"}));
  EXPECT_GT(refused->dependency_sessions, 1);
  const Step* with = Find(r, "with_dependency", "SimplifiedLayerNormFusion+QDQPropagationTransformer");
  ASSERT_NE(with, nullptr);
  EXPECT_TRUE(with->verdict == "keep" || with->verdict == "blacklist") << with->verdict;
  EXPECT_NE(r.steps[2].verdict, "refused");  // all on builds: QDQPropagationTransformer is on there
  EXPECT_EQ(Find(r, "leave_one_out", "QDQPropagationTransformer")->verdict, "refused");
  EXPECT_TRUE(Has(r.blacklist, "QDQSelectorActionTransformer"));
  EXPECT_TRUE(r.blacklist_builds);
  EXPECT_FALSE(Has(r.blacklist, "QDQPropagationTransformer"));
  ASSERT_EQ(r.dependency_notes.size(), 1u);
  EXPECT_EQ(r.dependency_notes[0], "SimplifiedLayerNormFusion needs QDQPropagationTransformer (alone it is refused)");
  ASSERT_FALSE(refused->reproduction.empty());
  for (const char* f : {"model.onnx", "options.txt", "repro.js"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::path(refused->reproduction) / f)) << f;
  }
  const auto [rc, text] = Shell(NodeCommand(refused->reproduction + "/repro.js"));
  EXPECT_EQ(rc, 1) << text;
  EXPECT_NE(text.find("refused: Invalid model. Node input 'normalized'"), std::string::npos) << text;
}

// All on refused: leaving SimplifiedLayerNormFusion out makes it build, so the blacklist disables it, and says why.
TEST(OutsideModels, WhereAllOnIsRefusedTheBlacklistMakesItBuild) {
  const std::filesystem::path dir = Scratch("allon");
  const auto [rc, text] = Shell("/usr/bin/python3 " FUSEDIFF_SOURCE_DIR "/docs/repro/ort_simplified_layernorm_scale.py " +
                                dir.string());
  ASSERT_EQ(rc, 0) << text;
  const BisectResult r = Bisect(Runtime(), (dir / "scale_first.onnx").string(), Quick(dir));
  EXPECT_EQ(r.steps[2].kind, "all_on");
  EXPECT_EQ(r.steps[2].verdict, "refused");
  EXPECT_EQ(Find(r, "leave_one_out", "SimplifiedLayerNormFusion")->verdict, "restores_build");
  EXPECT_EQ(r.blacklist, (std::vector<std::string>{"SimplifiedLayerNormFusion"}));
  EXPECT_EQ(r.blacklist_reasons.at("SimplifiedLayerNormFusion"), "all-on is refused with it");
  EXPECT_TRUE(r.blacklist_builds);
  EXPECT_TRUE(r.blacklist_name_effective.at("SimplifiedLayerNormFusion"));
  EXPECT_TRUE(Find(r, "one_on", "SimplifiedLayerNormFusion")->dependency.empty());
  // The documented reproduction agrees: the scale-first model refused, the others fused.
  const auto [node_rc, node_text] = Shell(NodeCommand(FUSEDIFF_SOURCE_DIR "/docs/repro/ort_simplified_layernorm_scale.js " + dir.string()));
  EXPECT_EQ(node_rc, 0) << node_text;
}

TEST(OutsideModels, EveryElementTypeAndTokenIdsBisect) {
  const std::filesystem::path dir = Scratch("types");
  const std::string every = OutsideModel(dir, "every_type");
  const BisectResult r = Bisect(Runtime(), every, Quick(dir));
  ASSERT_EQ(r.steps[0].deltas.size(), 8u);
  std::vector<std::string> units;
  for (const auto& d : r.steps[0].deltas) units.push_back(d.unit);
  EXPECT_EQ(units, (std::vector<std::string>{"f16_ulp_of_max", "f64_ulp_of_max", "int", "int", "int", "int",
                                             "bf16_ulp_of_max", "int"}));
  EXPECT_EQ(r.refused_steps, 0);
  const BisectResult t = Bisect(Runtime(), (dir / "token_ids" / "model.onnx").string(), Quick(dir));
  EXPECT_EQ(t.input_notes, (std::vector<std::string>{
                               "input 'input_ids' (int64): [0, 49], the model's: Gather(table 'embedding' of 50 rows)",
                               "input 'attention_mask' (int64): [0, 1], a mask (its name holds \"mask\")"}));
}

std::string Corpus(const std::string& model) { return "/usr/share/libonnx-testdata/data/" + model; }

// ONNX's own test data: unnamed tensors bound by position, the baseline checked against output_0.pb, and a changed
// expected output found.
TEST(OutsideModels, OnnxTestDataBindsByPositionAndIsChecked) {
  const std::filesystem::path dir = Scratch("testdata");
  BisectOptions o = Quick(dir);
  o.input_paths = {Corpus("pytorch-operator/test_operator_concat2/test_data_set_0")};
  const BisectResult r = Bisect(Runtime(), Corpus("pytorch-operator/test_operator_concat2/model.onnx"), o);
  ASSERT_TRUE(r.expected.checked);
  EXPECT_TRUE(r.expected.agree);
  EXPECT_EQ(r.expected.tolerance_source, "ONNX runner default");
  ASSERT_EQ(r.expected.outputs.size(), 1u);
  EXPECT_GT(r.expected.outputs[0].elements, 0u);
  // The same set with one expected value moved by 1: the check names the output and counts the element.
  std::filesystem::copy(Corpus("pytorch-operator/test_operator_concat2/test_data_set_0"), dir / "set");
  onnx_io::Tensor want = onnx_io::ReadTensorPb((dir / "set" / "output_0.pb").string());
  float v;
  std::memcpy(&v, want.bytes.data(), 4);
  v += 1;
  std::memcpy(want.bytes.data(), &v, 4);
  want.name = "";
  std::ofstream((dir / "set" / "output_0.pb").string(), std::ios::binary) << onnx_io::SerializeTensorPb(want);
  o.input_paths = {(dir / "set").string()};
  const BisectResult bad = Bisect(Runtime(), Corpus("pytorch-operator/test_operator_concat2/model.onnx"), o);
  EXPECT_FALSE(bad.expected.agree);
  EXPECT_EQ(bad.expected.outputs[0].mismatched, 1u);
  EXPECT_NEAR(bad.expected.outputs[0].max_abs, 1.0, 1e-6);
}

using test::Cli;

TEST(OutsideModels, TheEnginesOwnRefusalAndTheMemoryBudgetExit2) {
  const std::filesystem::path dir = Scratch("refusal");
  std::string out, err;
  // ONNX Runtime 1.30 has no Add kernel for opset 6 (the model's own import): level disabled is refused.
  EXPECT_EQ(Cli({"bisect", Corpus("pytorch-operator/test_operator_add_broadcast/model.onnx"), "--inputs",
                 Corpus("pytorch-operator/test_operator_add_broadcast/test_data_set_0")}, out, err), cli::kExitBadInput);
  EXPECT_NE(err.find("the engine refuses the model itself (level disabled, every transformer off; at create)"),
            std::string::npos) << err;
  // A declared input of 4e12 bytes is refused before anything is allocated, naming the input and its size.
  onnx_io::ModelBuilder b("huge", 17);
  b.AddInput("x", onnx_io::DType::float32, {1, 100000, 100000, 100});
  b.AddOutput("y", onnx_io::DType::float32, {1, 100000, 100000, 100});
  b.AddNode("Relu", {"x"}, {"y"});
  const std::string huge = (dir / "huge.onnx").string();
  std::ofstream(huge, std::ios::binary) << b.Serialize();
  EXPECT_EQ(Cli({"bisect", huge}, out, err), cli::kExitBadInput);
  EXPECT_NE(err.find("input 'x' (float32 [1,100000,100000,100]) needs 4000000000000 bytes per set, 32 sets: over "
                     "--max-bytes 4294967296 bytes"),
            std::string::npos) << err;
  // Outputs larger than the budget allows: named after the run that made them, before anything more is kept.
  onnx_io::ModelBuilder small("small", 17);
  small.AddInput("x", onnx_io::DType::float32, {64, 64});
  small.AddOutput("y", onnx_io::DType::float32, {64, 64});
  small.AddNode("Relu", {"x"}, {"y"});
  const std::string model = (dir / "small.onnx").string();
  std::ofstream(model, std::ios::binary) << small.Serialize();
  EXPECT_EQ(Cli({"bisect", model, "--generate", "1", "--max-bytes", "200000"}, out, err), cli::kExitBadInput);
  EXPECT_NE(err.find("output 'y' (float32 [64,64], 16384 bytes a set)"), std::string::npos) << err;
  EXPECT_NE(err.find("over --max-bytes 200000"), std::string::npos) << err;
}

}  // namespace
}  // namespace fusediff::bisect
