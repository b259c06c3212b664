// The bisect on ONNX Runtime itself (installed by scripts/setup.sh; its absence fails these tests, it never skips
// them): the exported patterns' baseline against the reference, the two-independent-causes trap, the stale-list
// refusal, and that ORT takes the blacklist only in its ';' form.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "fusediff/bisect/bisect.h"
#include "fusediff/bisect/export.h"
#include "fusediff/cli/cli.h"
#include "fusediff/model/errors.h"
#include "test_util.h"

namespace fusediff::bisect {
namespace {

using test::Quick;
using test::Runtime;
using test::Scratch;
using test::Write;

TEST(OrtBaseline, ExportedPatternsEqualTheReference) {
  const std::filesystem::path dir = Scratch("baseline");
  struct Want {
    const char* pattern;
    ActivationKind kind;
  };
  // Tolerance 0: relu, clip, add, max and average pool, a second FC layer with power-of-two scales are exact in
  // ORT's f32 graph; an average pool or a second layer after sigmoid gets no tie allowance (tolerance 0).
  for (const Want& w : {Want{"conv2d+act", ActivationKind::relu}, Want{"conv2d+act", ActivationKind::relu6},
                        Want{"conv2d+add+act", ActivationKind::relu}, Want{"conv2d+act+maxpool", ActivationKind::relu},
                        Want{"fc+act", ActivationKind::relu}, Want{"conv2d+act+avgpool", ActivationKind::relu},
                        Want{"conv2d+act+avgpool", ActivationKind::sigmoid}, Want{"fc+fc", ActivationKind::relu},
                        Want{"fc+act+fc", ActivationKind::relu6}, Want{"fc+act+fc", ActivationKind::sigmoid}}) {
    const PatternExport e = BuildPatternExport(w.pattern, w.kind, {});
    const BaselineCheck c = VerifyBaseline(Runtime(), Write(dir / (e.stem + ".onnx"), e.model_bytes), e);
    EXPECT_EQ(c.differing, 0u) << e.name;
    EXPECT_TRUE(c.pass) << e.name;
    EXPECT_GT(c.elements, 0u);
  }
  // MLAS's gelu: +-1 only within the f32 error bound of a tie, each case listed.
  const PatternExport g = BuildPatternExport("fc+act", ActivationKind::gelu_erf, {});
  const BaselineCheck c = VerifyBaseline(Runtime(), Write(dir / "gelu.onnx", g.model_bytes), g);
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(c.listed.size(), c.differing);
  EXPECT_EQ(c.allowed_near_tie, c.differing);
}

// int16 boundaries (u and y int16 through com.microsoft QuantizeLinear/DequantizeLinear): tolerance 0 for relu and
// relu6, and ORT's outputs really are int16 codes beyond the int8 range.
TEST(OrtBaseline, Int16ExportsEqualTheReference) {
  const std::filesystem::path dir = Scratch("int16");
  ExportOptions o;
  o.int16 = true;
  for (ActivationKind k : {ActivationKind::relu, ActivationKind::relu6, ActivationKind::sigmoid}) {
    const PatternExport e = BuildPatternExport("conv2d+act", k, o);
    EXPECT_EQ(e.name, "conv2d+act." + std::string(to_string(k)) + ".int16");
    const std::string model = Write(dir / (e.stem + ".onnx"), e.model_bytes);
    const onnx_io::ModelInfo info = onnx_io::ReadModel(model);
    EXPECT_EQ(info.node_counts.at("com.microsoft.QuantizeLinear"), 2);  // u and y
    ASSERT_TRUE(info.output_quant[0].has_value());
    EXPECT_EQ(info.output_quant[0]->type, onnx_io::DType::int16);
    const BaselineCheck c = VerifyBaseline(Runtime(), model, e);
    EXPECT_TRUE(c.pass) << e.name;
    if (k != ActivationKind::sigmoid) {
      EXPECT_EQ(c.differing, 0u) << e.name;
    }
    fused::ort::SessionSpec spec;
    spec.model = model;
    spec.level = "disabled";
    const auto h = Runtime().Create(spec);
    const std::vector<onnx_io::Tensor> out = Runtime().Run(h, e.inputs);
    Runtime().Release(h);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].type, onnx_io::DType::int16);
    double widest = 0;
    for (size_t i = 0; i < out[0].elements(); ++i) widest = std::max(widest, std::fabs(out[0].value(i)));
    EXPECT_GT(widest, 127) << e.name;
  }
  EXPECT_THROW(BuildPatternExport("fc+act", ActivationKind::relu, o), InputError);
}

TEST(OrtBisect, TwoIndependentCausesEscapeLeaveOneOutAndOneOnFindsBoth) {
  const std::filesystem::path dir = Scratch("twin");
  const ModelExport m = BuildTwinCauses({});
  const std::string model = Write(dir / "twin.onnx", m.model_bytes);
  // Every float difference over half an ulp counts (--no-bounds): within the rounding-error bound ConvBNFusion and
  // NchwcTransformer are legal reorderings (OrtBounds tests that).
  BisectOptions o = Quick(dir);
  o.bounds = false;
  const BisectResult r = Bisect(Runtime(), model, o);
  // Baseline, completeness, all on; all on moves the outputs.
  ASSERT_GE(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0].kind, "baseline");
  EXPECT_EQ(r.steps[1].kind, "completeness");
  EXPECT_FALSE(r.steps[1].fired);
  EXPECT_EQ(r.steps[2].kind, "all_on");
  EXPECT_GT(r.steps[2].max_units, 0.5);
  for (const Step& s : r.steps) {
    if (s.kind == "leave_one_out") {
      EXPECT_NE(s.verdict, "restores") << s.subject;  // the trap: leaving any one out leaves the other cause
    }
  }
  auto in = [&](const std::string& name) {
    return std::find(r.blacklist.begin(), r.blacklist.end(), name) != r.blacklist.end();
  };
  EXPECT_TRUE(in("QDQSelectorActionTransformer"));
  EXPECT_TRUE(in("ConvBNFusion"));
  for (const Step& s : r.steps) {
    if (s.kind == "one_on" && s.subject == "QDQSelectorActionTransformer") {
      EXPECT_TRUE(s.fired);
      EXPECT_EQ(s.node_delta.at("com.microsoft.QLinearAveragePool"), 1);
      EXPECT_DOUBLE_EQ(s.deltas[0].max_units, 1);  // output a: one LSB at every exact tie
      EXPECT_EQ(s.deltas[1].differing, 0u);        // output b untouched
    }
    if (s.kind == "one_on" && s.subject == "ConvBNFusion") {
      EXPECT_EQ(s.node_delta.at("BatchNormalization"), -1);
      EXPECT_EQ(s.deltas[0].differing, 0u);
      EXPECT_GT(s.deltas[1].differing, 0u);
    }
  }
  // The re-run with the blacklist is back within tolerance, and every blacklisted name is one ORT acts on.
  EXPECT_TRUE(r.blacklist_within_tolerance);
  ASSERT_EQ(r.blacklist_name_effective.size(), r.blacklist.size());
  for (const auto& [name, effective] : r.blacklist_name_effective) EXPECT_TRUE(effective) << name;
  EXPECT_EQ(r.blacklist_config.rfind("optimization.disable_specified_optimizers=", 0), 0u);
}

TEST(OrtBisect, OnlyTheSemicolonFormDisablesAnything) {
  const std::filesystem::path dir = Scratch("separator");
  const std::string model = Write(dir / "twin.onnx", BuildTwinCauses({}).model_bytes);
  auto digest = [&](const std::vector<std::string>& disabled, const std::string& tag) {
    fused::ort::SessionSpec spec;
    spec.model = model;
    spec.disabled = disabled;
    spec.optimized_model = (dir / (tag + ".onnx")).string();
    Runtime().Release(Runtime().Create(spec));
    return onnx_io::ReadModel(spec.optimized_model).graph_digest;
  };
  const uint64_t all_on = digest({}, "all");
  EXPECT_NE(digest({"ConvBNFusion", "NchwcTransformer"}, "semicolon"), all_on);
  EXPECT_EQ(digest({"ConvBNFusion,NchwcTransformer"}, "comma"), all_on);  // one unknown name: silently ignored
}

TEST(OrtBisect, AStaleListIsRefused) {
  const std::filesystem::path dir = Scratch("stale");
  const std::string model = Write(dir / "twin.onnx", BuildTwinCauses({}).model_bytes);
  OptimizerList stale = PinnedOptimizers();
  stale.optimizers.erase(std::remove_if(stale.optimizers.begin(), stale.optimizers.end(),
                                        [](const Optimizer& o) { return o.name == "QDQSelectorActionTransformer"; }),
                         stale.optimizers.end());
  BisectOptions o = Quick(dir);
  o.optimizers = &stale;
  try {
    Bisect(Runtime(), model, o);
    FAIL() << "a list without QDQSelectorActionTransformer was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stale"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("QLinearAveragePool"), std::string::npos) << e.what();
  }
}

// The in-process runtime (the default) and the Node runner drive the same library: the same outputs, bit for bit, and
// the same saved optimized models, on every step kind's session.
TEST(OrtRuntime, InProcessAndNodeRunnerAgree) {
  ASSERT_TRUE(fused::ort::HaveInProcessRuntime()) << "built without the C API header: run scripts/setup.sh";
  const std::filesystem::path dir = Scratch("agree");
  const ModelExport m = BuildTwinCauses({});
  const std::string model = Write(dir / "twin.onnx", m.model_bytes);
  const onnx_io::ModelInfo info = onnx_io::ReadModel(model);
  const std::vector<InputSet> sets = GenerateInputs(info, 1, 7);
  std::vector<std::vector<onnx_io::Tensor>> feeds;
  for (const InputSet& s : sets) feeds.push_back(s.feeds);
  const std::unique_ptr<fused::ort::Runtime> in_process = fused::ort::StartInProcessRuntime();
  const std::unique_ptr<fused::ort::Runtime> node = fused::ort::StartNodeRuntime();
  EXPECT_NE(in_process->version().find("in process"), std::string::npos) << in_process->version();
  EXPECT_NE(node->version().find("onnxruntime-node"), std::string::npos) << node->version();
  fused::ort::Runtime::Evaluation a, b;  // reused from session to session, as a bisect does
  for (const auto& [level, disabled] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"disabled", {}}, {"all", {}}, {"all", {"QDQSelectorActionTransformer"}}, {"all", PinnedOptimizers().names()}}) {
    fused::ort::SessionSpec spec;
    spec.model = model;
    spec.level = level;
    spec.disabled = disabled;
    spec.optimized_model = (dir / "a.onnx").string();
    in_process->Evaluate(spec, feeds, 0, 1, 2, a);
    const uint64_t a_digest = onnx_io::ReadModel(spec.optimized_model).graph_digest;
    spec.optimized_model = (dir / "b.onnx").string();
    node->Evaluate(spec, feeds, 0, 1, 2, b);
    EXPECT_EQ(a_digest, onnx_io::ReadModel(spec.optimized_model).graph_digest) << level << " " << disabled.size();
    ASSERT_EQ(a.results.size(), sets.size());
    ASSERT_EQ(b.results.size(), sets.size());
    for (size_t k = 0; k < sets.size(); ++k) {
      ASSERT_EQ(a.results[k].size(), b.results[k].size());
      for (size_t o = 0; o < a.results[k].size(); ++o) {
        EXPECT_EQ(a.results[k][o].name, b.results[k][o].name);
        EXPECT_EQ(a.results[k][o].dims, b.results[k][o].dims);
        EXPECT_TRUE(a.results[k][o].bytes == b.results[k][o].bytes) << level << " set " << k << " output " << o;
      }
    }
    EXPECT_EQ(a.ms.size(), 2u);
    EXPECT_EQ(b.ms.size(), 2u);
  }
  EXPECT_GT(in_process->ort_seconds(), 0);
}

// Without a work folder to keep, every session overwrites one saved model; the results are those of one file per
// session.
// Scratch mode saves every optimized model into one memfd (no file system, nothing left behind) and reads the same
// graphs as one kept file per session.
TEST(OrtBisect, ScratchModeLeavesNoFileAndGivesTheSameResults) {
  const std::filesystem::path dir = Scratch("onefile");
  const std::string model = Write(dir / "fc.onnx", BuildPatternExport("fc+act", ActivationKind::relu, {}).model_bytes);
  BisectOptions kept = Quick(dir / "kept");
  BisectOptions one = Quick(dir / "one");
  one.keep_optimized_models = false;
  const BisectResult a = Bisect(Runtime(), model, kept);
  const BisectResult b = Bisect(Runtime(), model, one);
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(one.work_dir)) files += f.is_regular_file();
  EXPECT_EQ(files, 0u);
  EXPECT_GT(std::distance(std::filesystem::directory_iterator(kept.work_dir), std::filesystem::directory_iterator()),
            100);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].kind + a.steps[i].subject, b.steps[i].kind + b.steps[i].subject);
    EXPECT_EQ(a.steps[i].fired, b.steps[i].fired) << a.steps[i].kind << " " << a.steps[i].subject;
    EXPECT_EQ(a.steps[i].node_delta, b.steps[i].node_delta) << a.steps[i].kind << " " << a.steps[i].subject;
    EXPECT_EQ(a.steps[i].max_units, b.steps[i].max_units);
  }
  EXPECT_EQ(a.blacklist, b.blacklist);
}

// Close releases the environment (timed inside ONNX Runtime); a second Close is harmless; a closed runtime refuses
// new sessions with an error instead of crashing.
TEST(OrtRuntime, AClosedRuntimeRefusesNewSessions) {
  const std::filesystem::path dir = Scratch("closed");
  const std::string model = Write(dir / "fc.onnx", BuildPatternExport("fc+act", ActivationKind::relu, {}).model_bytes);
  const std::unique_ptr<fused::ort::Runtime> rt = fused::ort::StartInProcessRuntime();
  fused::ort::SessionSpec spec;
  spec.model = model;
  const fused::ort::SessionHandle h = rt->Create(spec);
  const double before = rt->ort_seconds();
  rt->Close();  // with a session still open: Close releases it too
  EXPECT_GT(rt->ort_seconds(), before);
  rt->Close();
  EXPECT_THROW(rt->Create(spec), std::runtime_error);
  (void)h;
}

TEST(OrtRuntime, StartingTheRuntimeTurnsTelemetryOff) {
  Runtime();
  const char* v = std::getenv("ORT_DISABLE_TELEMETRY");
  ASSERT_NE(v, nullptr);  // "1" unless the environment set it before
}

int Cli(const std::vector<std::string>& args, std::string& err) {
  std::ostringstream out, e;
  std::vector<std::string> full = {"fusediff"};
  full.insert(full.end(), args.begin(), args.end());
  const int rc = cli::Main(full, out, e);
  err = e.str();
  return rc;
}

// The JSON's timing: every part accounted for (the runtime's start, the bisect, the runtime's close), ONNX Runtime's
// own calls within the calls to the runtime, the overhead a fraction.
TEST(OrtBisectCli, TheTimingAccountsForTheRuntimesStartAndClose) {
  const std::filesystem::path dir = Scratch("timing");
  const std::string model = Write(dir / "fc.onnx", BuildPatternExport("fc+act", ActivationKind::relu, {}).model_bytes);
  std::string err;
  const std::string json = (dir / "b.json").string();
  ASSERT_LE(Cli({"bisect", model, "--generate", "1", "--repeats", "2", "--warmup", "0", "--json", json}, err), 1) << err;
  std::ifstream in(json);
  const nlohmann::json t = nlohmann::json::parse(in).at("timing");
  const double total = t.at("total_s"), inside = t.at("inside_onnxruntime_s");
  EXPECT_DOUBLE_EQ(total, t.at("runtime_start_s").get<double>() + t.at("bisect_s").get<double>() +
                              t.at("runtime_close_s").get<double>());
  EXPECT_GT(t.at("runtime_close_inside_onnxruntime_s").get<double>(), 0);
  EXPECT_LE(t.at("runtime_close_inside_onnxruntime_s").get<double>(), t.at("runtime_close_s").get<double>());
  EXPECT_LE(t.at("runtime_calls_s").get<double>(), t.at("bisect_s").get<double>());
  EXPECT_GT(inside, 0);
  EXPECT_LT(inside, total);
  EXPECT_NEAR(t.at("fusediff_overhead").get<double>(), (total - inside) / total, 1e-12);
}

TEST(OrtBisectCli, MalformedModelsAndInputsExit2WithAMessage) {
  const std::filesystem::path dir = Scratch("cli");
  std::string err;
  EXPECT_EQ(Cli({"bisect", Write(dir / "bad.onnx", "not a model")}, err), cli::kExitBadInput);
  EXPECT_NE(err.find("not an ONNX model"), std::string::npos) << err;
  EXPECT_EQ(Cli({"bisect", (dir / "missing.onnx").string()}, err), cli::kExitBadInput);
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
  const std::string model = Write(dir / "twin.onnx", BuildTwinCauses({}).model_bytes);
  const std::string wrong = Write(dir / "wrong.pb", onnx_io::SerializeTensorPb(onnx_io::Tensor::FromFloats("q", {1}, {1})));
  EXPECT_EQ(Cli({"bisect", model, "--inputs", wrong}, err), cli::kExitBadInput);
  EXPECT_NE(err.find("names no model input"), std::string::npos) << err;
  EXPECT_EQ(Cli({"bisect", model, "--generate", "0"}, err), cli::kExitBadInput);
}

TEST(OrtBisectCli, AMissingRuntimeExits2NamingThePathAndTheSetupCommand) {
  const std::filesystem::path dir = Scratch("noruntime");
  const std::string model = Write(dir / "twin.onnx", BuildTwinCauses({}).model_bytes);
  ::setenv("FUSEDIFF_ORT_RUNNER_DIR", (dir / "nowhere").c_str(), 1);
  std::string err;
  const int rc = Cli({"bisect", model}, err);
  ::unsetenv("FUSEDIFF_ORT_RUNNER_DIR");
  EXPECT_EQ(rc, cli::kExitBadInput);
  EXPECT_NE(err.find("nowhere/node_modules/onnxruntime-node"), std::string::npos) << err;
  EXPECT_NE(err.find("bash scripts/setup.sh"), std::string::npos) << err;
}

}  // namespace
}  // namespace fusediff::bisect
