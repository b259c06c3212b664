// The bisect's float verdicts on ONNX Runtime itself: legal reorderings (ConvBNFusion, NchwcTransformer,
// LayerNormFusion) stay within the rounding-error bound and are kept; the negative controls (GeluApproximation, a
// transformer's result nudged a few ulps beyond the bound, a fused kernel that drops one term) exceed it and are
// blacklisted; every step that moves the outputs names its first divergent boundary; a step with the baseline's
// graph is never a latency change. Models: tests/bisect/bound_models.py (python3-onnx) and the exported demos.
#include <gtest/gtest.h>
#include <stdio.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fusediff/bisect/bisect.h"
#include "fusediff/bisect/bounds.h"
#include "fusediff/bisect/export.h"
#include "fusediff/cli/cli.h"
#include "test_util.h"

namespace fusediff::bisect {
namespace {

using test::Runtime;
using test::Scratch;

// bound_models.py's models in `dir`/NAME/model.onnx.
std::string BoundModel(const std::filesystem::path& dir, const std::string& name) {
  const std::string command = "/usr/bin/python3 " FUSEDIFF_SOURCE_DIR "/tests/bisect/bound_models.py " + dir.string();
  EXPECT_EQ(std::system(command.c_str()), 0);
  return (dir / name / "model.onnx").string();
}

const Step& StepNamed(const BisectResult& r, const std::string& kind, const std::string& subject) {
  for (const Step& s : r.steps) {
    if (s.kind == kind && s.subject == subject) return s;
  }
  throw std::runtime_error("no step " + kind + " " + subject);
}

bool Blacklisted(const BisectResult& r, const std::string& name) {
  return std::find(r.blacklist.begin(), r.blacklist.end(), name) != r.blacklist.end();
}

// Every step that fired and moved a float output shows r (its outputs are judged by their bound), and names where
// its difference starts.
void ExpectEveryMovingStepShowsRAndItsBoundary(const BisectResult& r) {
  for (const Step& s : r.steps) {
    if (s.kind != "one_on" || s.verdict == "refused" || s.verdict == "not_fired" || s.max_units == 0) continue;
    for (const OutputDelta& d : s.deltas) EXPECT_EQ(d.criterion, "bound") << s.subject << " " << d.output << d.uncovered;
    ASSERT_TRUE(s.divergence.has_value()) << s.subject;
    EXPECT_FALSE(s.divergence->tensor.empty()) << s.subject;
    ASSERT_TRUE(s.divergence->delta.has_value()) << s.subject;
    EXPECT_GT(s.divergence->delta->differing, 0u) << s.subject;
    EXPECT_FALSE(s.divergence->paths.empty()) << s.subject;
  }
}

TEST(OrtBounds, LegalReorderingsAreKeptWithTheirR) {
  const std::filesystem::path dir = Scratch("bounds_legal");
  const ModelExport m = BuildResNet(false, {});
  for (const std::string& model : {test::Write(dir / "resnet_block_float.onnx", m.model_bytes),
                                   BoundModel(dir, "conv_bn_relu")}) {
    const BisectResult r = Bisect(Runtime(), model, test::Quick(dir));
    EXPECT_TRUE(r.blacklist.empty()) << model;
    for (const char* name : {"ConvBNFusion", "NchwcTransformer"}) {
      const Step& s = StepNamed(r, "one_on", name);
      EXPECT_GT(s.max_units, 0) << name;  // it moves the outputs, by a few ulps
      EXPECT_GT(s.r, 0) << name;
      EXPECT_LE(s.r, 1) << name;
      EXPECT_EQ(s.verdict, "keep") << name;
    }
    ExpectEveryMovingStepShowsRAndItsBoundary(r);
    // ConvBNFusion's difference starts at the normalization's output, which the folded conv now produces.
    EXPECT_EQ(StepNamed(r, "one_on", "ConvBNFusion").divergence->producer, "BatchNormalization") << model;
  }
}

TEST(OrtBounds, TheLayerNormPatternFusedAtALargeMeanIsLegal) {
  const std::filesystem::path dir = Scratch("bounds_layernorm");
  const BisectResult r = Bisect(Runtime(), BoundModel(dir, "layernorm"), test::Quick(dir));
  const Step& s = StepNamed(r, "one_on", "LayerNormFusionL1");
  EXPECT_EQ(s.node_delta.at("LayerNormalization"), 1);
  EXPECT_GT(s.max_units, 100);  // thousands of ulps: a fixed tolerance would call it a defect
  EXPECT_LE(s.r, 1);
  EXPECT_FALSE(Blacklisted(r, "LayerNormFusionL1"));
}

// Negative control: GeluApproximation (enabled by its session config entry) replaces Gelu by FastGelu.
TEST(OrtBounds, GeluApproximationIsBeyondTheBound) {
  const std::filesystem::path dir = Scratch("bounds_gelu");
  BisectOptions o = test::Quick(dir);
  o.session_config = {{"optimization.enable_gelu_approximation", "1"}};
  const BisectResult r = Bisect(Runtime(), BoundModel(dir, "gelu"), o);
  const Step& s = StepNamed(r, "one_on", "GeluApproximation");
  EXPECT_EQ(s.node_delta.at("com.microsoft.FastGelu"), 1);
  EXPECT_GT(s.r, 1);
  EXPECT_EQ(s.verdict, "blacklist");
  EXPECT_TRUE(Blacklisted(r, "GeluApproximation"));
  ASSERT_TRUE(s.divergence.has_value());
  EXPECT_EQ(s.divergence->tensor, "y");
  // Waived by a tolerance it passes (Polygraphy: within atol or rtol), and labelled so.
  o.atol = 1e-2;
  const BisectResult waived = Bisect(Runtime(), BoundModel(dir, "gelu"), o);
  EXPECT_EQ(StepNamed(waived, "one_on", "GeluApproximation").verdict, "waived_by_tolerance");
  EXPECT_FALSE(Blacklisted(waived, "GeluApproximation"));
}

// A runtime that hands one transformer's sessions a perturbed result: its model swapped for another, or one output
// element replaced.
class PerturbingRuntime final : public fused::ort::Runtime {
 public:
  PerturbingRuntime(fused::ort::Runtime& inner, std::string transformer) : inner_(inner), name_(std::move(transformer)) {}
  std::string version() const override { return inner_.version(); }
  fused::ort::SessionHandle Create(const fused::ort::SessionSpec& spec) override { return inner_.Create(spec); }
  std::vector<onnx_io::Tensor> Run(const fused::ort::SessionHandle& s, const std::vector<onnx_io::Tensor>& f) override {
    return inner_.Run(s, f);
  }
  void Release(const fused::ort::SessionHandle& s) override { inner_.Release(s); }
  void Close() override {}
  double ort_seconds() const override { return inner_.ort_seconds(); }
  double TimedRun(const fused::ort::SessionHandle& s, const std::vector<onnx_io::Tensor>& f) override {
    return inner_.TimedRun(s, f);
  }
  void Evaluate(const fused::ort::SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& sets, int t,
                int w, int r, Evaluation& e) override {
    const bool on = spec.level == "all" && std::find(spec.disabled.begin(), spec.disabled.end(), name_) == spec.disabled.end();
    fused::ort::SessionSpec s = spec;
    if (on && !swap_model.empty() && spec.model == original) s.model = swap_model;
    inner_.Evaluate(s, sets, t, w, r, e);
    if (on && nudge) {
      onnx_io::Tensor& y = e.results.at(0).at(0);
      const float v = static_cast<float>(*nudge);
      std::memcpy(y.bytes.data(), &v, sizeof v);
    }
  }
  std::string original, swap_model;  // the model swapped, for the bisect's own sessions (not the extended ones)
  std::optional<double> nudge;  // element 0 of output 0 of set 0

 private:
  fused::ort::Runtime& inner_;
  std::string name_;
};

// Negative controls: ConvBNFusion's result with one element nudged 4 ulps beyond the bound, and computed by a kernel
// that drops one term of the conv (a weight of 0).
TEST(OrtBounds, APerturbedTransformerResultIsBeyondTheBound) {
  const std::filesystem::path dir = Scratch("bounds_perturbed");
  const std::string model = BoundModel(dir, "conv_bn_relu");
  const BisectOptions o = test::Quick(dir);
  // The baseline's value and the two bounds at element 0 of the first input set.
  const onnx_io::ModelInfo info = onnx_io::ReadModel(model);
  const std::vector<InputSet> sets = GenerateInputs(info, o.generate, o.seed);
  const BoundEvaluator ev(onnx_io::ParseGraph(onnx_io::ReadModelBytes(model), model));
  const BoundedTensor b = ev.Evaluate(sets.front().feeds, {"y"}).front();
  fused::ort::SessionSpec spec;
  spec.model = model;
  spec.level = "disabled";
  fused::ort::Runtime::Evaluation base;
  Runtime().Evaluate(spec, {sets.front().feeds}, 0, 0, 0, base);
  const double y0 = base.results[0][0].value(0), bound = b.base[0] + b.legal[0];
  ASSERT_GT(bound, 0);
  const double ulp = std::ldexp(1.0, std::ilogb(std::fabs(y0) + bound) - 23);

  PerturbingRuntime nudged(Runtime(), "ConvBNFusion");
  nudged.nudge = y0 + bound + 4 * ulp;
  const BisectResult r1 = Bisect(nudged, model, o);
  const Step& s1 = StepNamed(r1, "one_on", "ConvBNFusion");
  EXPECT_GT(s1.r, 1);
  EXPECT_LT(s1.r, 1.01);  // a few ulps beyond: the bound is what separates
  std::printf("negative control, ConvBNFusion nudged 4 ulps beyond B: r %.9g\n", s1.r);
  EXPECT_TRUE(Blacklisted(r1, "ConvBNFusion"));

  PerturbingRuntime dropped(Runtime(), "ConvBNFusion");
  dropped.original = model;
  dropped.swap_model = (dir / "conv_bn_relu_dropped" / "model.onnx").string();
  const BisectResult r2 = Bisect(dropped, model, o);
  const Step& s2 = StepNamed(r2, "one_on", "ConvBNFusion");
  EXPECT_GT(s2.r, 1);
  EXPECT_TRUE(Blacklisted(r2, "ConvBNFusion"));
  std::printf("negative control, ConvBNFusion dropping one conv term: r %.4g\n", s2.r);
  EXPECT_FALSE(Blacklisted(r2, "NchwcTransformer"));
}

// A step whose saved graph is the baseline's is noise by construction: the completeness step (the timing control)
// says so, with its interval beside it.
TEST(OrtBounds, TheBaselinesGraphIsNeverALatencyChange) {
  const std::filesystem::path dir = Scratch("bounds_timing");
  const BisectResult r = Bisect(Runtime(), BoundModel(dir, "conv_bn_relu"), test::Quick(dir));
  const Step& c = StepNamed(r, "completeness", "");
  ASSERT_TRUE(c.perf.has_value());
  ASSERT_TRUE(c.baseline_perf.has_value());
  EXPECT_TRUE(c.same_graph);
  EXPECT_TRUE(c.within_noise);
  EXPECT_EQ(c.noise_reason, "same graph as the baseline");
  EXPECT_EQ(c.time_saved, 0);
  EXPECT_LE(c.time_saved_lo, c.time_saved_hi);
  for (const Step& s : r.steps) {
    if (s.perf && s.same_graph) {
      EXPECT_TRUE(s.within_noise) << s.kind << " " << s.subject;
    }
  }
}

using test::Cli;

// --shapes on a model with a symbolic batch: one bisect per value, each step's decision per shape, JSON and JUnit
// per shape; bad --shapes and --session-config values exit 2 before anything runs.
TEST(OrtBoundsCli, ShapesBisectsOncePerSymbolicBatchSize) {
  const std::filesystem::path dir = Scratch("bounds_shapes");
  const std::string model = BoundModel(dir, "batch_n"), json = (dir / "s.json").string(), xml = (dir / "s.xml").string();
  std::string out, err;
  const int rc = Cli({"bisect", model, "--shapes", "N=1,4", "--generate", "1", "--repeats", "2", "--warmup", "0",
                      "--json", json, "--junit", xml}, out, err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("== shape N=1"), std::string::npos);
  EXPECT_NE(out.find("== shape N=4"), std::string::npos);
  EXPECT_NE(out.find("decision changes with shape: "), std::string::npos);
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("format"), "fusediff-bisect-shapes/1");
  ASSERT_EQ(j.at("shapes").size(), 2u);
  EXPECT_EQ(j.at("shapes")[1].at("shape"), "N=4");
  const auto& per = j.at("per_transformer").at("ConvBNFusion");
  ASSERT_EQ(per.size(), 2u);
  EXPECT_EQ(per[0].at("verdict"), "keep");
  std::ifstream x(xml);
  const std::string junit((std::istreambuf_iterator<char>(x)), std::istreambuf_iterator<char>());
  EXPECT_NE(junit.find("name=\"fusediff.bisect[N=4]\""), std::string::npos);
  EXPECT_EQ(Cli({"bisect", BoundModel(dir, "conv_bn_relu"), "--shapes", "N=1"}, out, err), cli::kExitBadInput);
  EXPECT_NE(err.find("not a symbolic dimension"), std::string::npos) << err;
  EXPECT_EQ(Cli({"bisect", model, "--shapes", "N=0"}, out, err), cli::kExitBadInput);
  EXPECT_EQ(Cli({"bisect", model, "--session-config", "novalue"}, out, err), cli::kExitBadInput);
  EXPECT_EQ(Cli({"bisect", model, "--atol", "-1"}, out, err), cli::kExitBadInput);
}

}  // namespace
}  // namespace fusediff::bisect
