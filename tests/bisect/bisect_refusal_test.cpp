// The bisect's handling of refused sessions against a runtime whose refusals are known: three transformers A, B, C
// where A is refused unless B is on, and B moves the outputs. Blacklisting B must then take A along.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fusediff/bisect/bisect.h"
#include "fusediff/model/errors.h"
#include "test_util.h"

namespace fusediff::bisect {
namespace {

std::string ModelBytes(bool extra_node) {
  onnx_io::ModelBuilder b("m", 17);
  b.AddInput("x", onnx_io::DType::float32, {4});
  b.AddOutput("y", onnx_io::DType::float32, {4});
  b.AddNode("Relu", {"x"}, {extra_node ? "r" : "y"});
  if (extra_node) b.AddNode("Identity", {"r"}, {"y"});
  return b.Serialize();
}

class FakeRuntime final : public fused::ort::Runtime {
 public:
  std::string version() const override { return "fake"; }
  fused::ort::SessionHandle Create(const fused::ort::SessionSpec&) override { return {}; }
  std::vector<onnx_io::Tensor> Run(const fused::ort::SessionHandle&, const std::vector<onnx_io::Tensor>&) override {
    return {};
  }
  void Release(const fused::ort::SessionHandle&) override {}
  void Close() override {}
  double ort_seconds() const override { return 0; }

  void Evaluate(const fused::ort::SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& sets, int,
                int, int repeats, Evaluation& e) override {
    auto on = [&](const std::string& n) {
      return spec.level != "disabled" && std::find(spec.disabled.begin(), spec.disabled.end(), n) == spec.disabled.end();
    };
    ++sessions;
    if (on("A") && !on("B")) throw fused::ort::Refused("create", "ONNX Runtime: A without B");
    std::ofstream(spec.optimized_model, std::ios::binary | std::ios::trunc) << ModelBytes(on("B"));
    e.results.clear();
    for (const auto& set : sets) {
      std::vector<double> y;
      for (size_t i = 0; i < set[0].elements(); ++i) y.push_back(set[0].value(i) + (on("B") ? 1 : 0));
      e.results.push_back({onnx_io::Tensor::FromValues("y", onnx_io::DType::float32, {4}, y)});
    }
    e.ms.assign(static_cast<size_t>(repeats), 0.01);
  }

  int sessions = 0;
};

// A bisect of a one-node model over the names in `order` (of A, B and C) on the fake runtime.
BisectResult FakeBisect(const std::filesystem::path& dir, const std::string& order, int dependency_budget = 100) {
  const std::string model = test::Write(dir / "m.onnx", ModelBytes(false));
  std::string names;
  for (char n : order) names += std::string(names.empty() ? "" : ", ") + "{\"name\": \"" + n + "\"}";
  const OptimizerList list = ParseOptimizerList(
      R"({"format": "fusediff-ort-optimizers/1", "onnxruntime": "fake", "optimizers": [)" + names + "]}", "list");
  BisectOptions o = test::Quick(dir, 0, 1);
  o.optimizers = &list;
  o.dependency_budget = dependency_budget;
  FakeRuntime runtime;
  return Bisect(runtime, model, o);
}

TEST(Refusals, ANameWhoseDependencyIsBlacklistedIsBlacklistedToo) {
  const std::filesystem::path dir = test::Scratch("fake");
  const BisectResult r = FakeBisect(dir, "ABC");
  const auto step = [&](const std::string& kind, const std::string& subject) {
    return *std::find_if(r.steps.begin(), r.steps.end(),
                         [&](const Step& s) { return s.kind == kind && s.subject == subject; });
  };
  const Step a = step("one_on", "A");
  EXPECT_EQ(a.verdict, "refused");
  EXPECT_EQ(a.refusal, "ONNX Runtime: A without B");
  EXPECT_EQ(a.dependency, (std::vector<std::string>{"B"}));
  EXPECT_EQ(a.dependency_sessions, 1);  // B is the first other name
  EXPECT_EQ(step("with_dependency", "A+B").verdict, "keep");  // A adds nothing to what B moves
  EXPECT_EQ(step("one_on", "B").verdict, "blacklist");
  EXPECT_EQ(step("leave_one_out", "B").verdict, "refused");
  // The blacklist B alone is refused (A on without B): A goes on it, named after its dependency, and it builds.
  EXPECT_EQ(r.blacklist, (std::vector<std::string>{"B", "A"}));
  EXPECT_EQ(r.blacklist_reasons.at("A"), "needs B, which the blacklist disables");
  EXPECT_EQ(r.blacklist_reasons.at("B").rfind("moves the outputs beyond the rounding-error bound (r ", 0), 0u);
  EXPECT_TRUE(r.blacklist_builds);
  EXPECT_TRUE(r.blacklist_within_tolerance);
  EXPECT_TRUE(r.dependency_notes.empty());
  // Refused: one on A, leave one out B, the first blacklist session. Reproductions of one on A only.
  EXPECT_EQ(r.refused_steps, 2);
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::path(a.reproduction) / "repro.js"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir / "repro"), std::filesystem::directory_iterator()), 1);
}

TEST(Refusals, TheDependencySearchStopsAtItsBudget) {
  // B is the last name: with a budget of one session the search tries C only and finds nothing.
  const BisectResult r = FakeBisect(test::Scratch("budget"), "ACB", 1);
  const Step& a = *std::find_if(r.steps.begin(), r.steps.end(), [](const Step& s) { return s.kind == "one_on" && s.subject == "A"; });
  EXPECT_TRUE(a.dependency.empty());
  EXPECT_EQ(a.dependency_sessions, 1);
  // The blacklist B is refused; A has no known dependency, so the last stage disables it.
  EXPECT_EQ(r.blacklist_reasons.at("A"), "refused alone, no dependency found");
  EXPECT_TRUE(r.blacklist_builds);
}

}  // namespace
}  // namespace fusediff::bisect
