// A stage kind defined in this file alone, to show what a new stage touches: `neg`, the negation of the real value
// its codes stand for (code 2z - q in the boundary it reads, saturated), its exact reference, its built-in fused
// kernel, the pattern conv2d+neg+act and one mutant (neg-ignores-zero-point: the kernel negates the raw code). One
// call registers it all; then `run`, `replay`, `mutants` and `report` go through the CLI's entry function.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/driver/stage_kinds.h"

namespace fusediff {
namespace {

constexpr StageKind kNeg{"neg"};
constexpr std::string_view kPattern = "conv2d+neg+act";
constexpr std::string_view kMutant = "neg-ignores-zero-point";

int32_t Saturate(int64_t code, const QuantType& type) {
  return static_cast<int32_t>(std::clamp<int64_t>(code, type.qmin(), type.qmax()));
}

// Model side: elementwise, writes the boundary it reads, no parameters.
class NegStage final : public StageKindModule {
 public:
  StageKind kind() const override { return kNeg; }
  bool elementwise() const override { return true; }
  QuantParams output_boundary(const Stage&, const QuantParams& in, const Convention&) const override { return in; }
  void validate(const Stage&, const QuantParams&, const Convention&, const std::string&) const override {}
  std::string describe(const Stage&, Fusion, bool) const override { return "neg"; }
  std::vector<std::pair<std::string, std::string>> replay_fields(const Stage&, bool) const override { return {}; }
  void parse_replay_fields(Stage&, const ReplayFieldSource&) const override {}
  std::vector<StageField> results_fields(const Stage&) const override { return {}; }
  void read_results_fields(Stage&, const StageFieldReader&) const override {}
};

// Reference side: exact; a saturating element is marked as such (docs/regions.md).
class NegReference final : public reference::ReferenceStage {
 public:
  StageKind kind() const override { return kNeg; }
  void Apply(const Stage&, const reference::StageInputs& in, reference::GraphTensor& t) const override {
    for (reference::GraphElement& e : t.e) {
      const int64_t exact = 2 * int64_t{in.in.zero_point} - e.y;
      e.y = Saturate(exact, in.in.type);
      e.regions |= reference::RoundingRegions(e.y != exact, 0.5);
    }
  }
};

// Fused side: the production kernel, and the mutant's variant beside it, selected once by Create.
class NegKernel final : public fused::StageKernel {
 public:
  NegKernel(QuantParams in, bool ignore_zero_point) : in_(in), zero_point_(ignore_zero_point ? 0 : in.zero_point) {}
  void Run(const StageOperands&, fused::StageTensor& t) const override {
    for (int32_t& code : t.codes) code = Saturate(2 * int64_t{zero_point_} - code, in_.type);
  }

 private:
  QuantParams in_;
  int32_t zero_point_;
};

class NegFused final : public fused::FusedStage {
 public:
  StageKind kind() const override { return kNeg; }
  std::unique_ptr<fused::StageKernel> Create(const CaseSpec& spec, const Stage&, const QuantParams& in,
                                             std::string*) const override {
    return std::make_unique<NegKernel>(in, spec.mutant != Mutant::none && to_string(spec.mutant) == kMutant);
  }
};

void RegisterNeg() {
  static const bool registered = [] {
    static constexpr Fusion kFusions[] = {Fusion::keep_all};
    driver::StageKindModules m;
    m.model = std::make_unique<NegStage>();
    m.reference = std::make_unique<NegReference>();
    m.fused = std::make_unique<NegFused>();
    m.patterns.push_back({kPattern, "Act(-Conv(x)): u negated in its own boundary, then the activation", kFusions});
    m.mutants.push_back(RegisteredMutant{
        {Mutant::none, kMutant, "neg negates the raw code (-q) instead of the real value (2z - q)",
         "pattern conv2d+neg+act, zu != 0", false},
        [](const CaseSpec& spec) {
          return pattern_name(spec.pattern) == kPattern && spec.convention.intermediate.q.zero_point != 0;
        },
        [](CaseSpec& spec) {
          spec.pattern = parse_pattern_name(kPattern, "mutant");
          QuantParams& u = spec.convention.intermediate.q;
          if (u.zero_point == 0) u.zero_point = u.type.qmin() / 8;  // in the mutant's space
        }});
    driver::RegisterStageKind(std::move(m));
    return true;
  }();
  (void)registered;
}

struct Outcome {
  int code;
  std::string out, err;
};

Outcome Cli(std::vector<std::string> args) {
  RegisterNeg();
  args.insert(args.begin(), "fusediff");
  std::ostringstream out, err;
  const int code = cli::Main(args, out, err);
  return {code, out.str(), err.str()};
}

std::filesystem::path TempDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fusediff_test_stage_" + name);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(TestStage, RunPassesAndWritesAReportableResult) {
  const std::filesystem::path dir = TempDir("run");
  const Outcome run =
      Cli({"run", "--pattern", std::string(kPattern), "--samples", "2000", "--json", (dir / "neg.json").string()});
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("conv2d+neg+act lut: 3 passed; 6000 samples, exact 100.000..100.000%"), std::string::npos)
      << run.out;
  const Outcome report = Cli({"report", (dir / "neg.json").string(), "--md", (dir / "neg.md").string()});
  ASSERT_EQ(report.code, 0) << report.out << report.err;
  std::ifstream md(dir / "neg.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("| conv2d+neg+act lut (every other case) | 3 pass | 6000 |"), std::string::npos) << text;
}

TEST(TestStage, TheMutantFailsAndItsReplayLineReproducesIt) {
  const Outcome run = Cli({"run", "--pattern", std::string(kPattern), "--activation", "relu", "--samples", "2000",
                           "--mutant", std::string(kMutant)});
  ASSERT_EQ(run.code, 1) << run.out << run.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex("fusediff replay '([^']+)'"))) << run.out;
  const Outcome replay = Cli({"replay", m[1].str()});  // a trace, not a verdict: exit 0
  ASSERT_EQ(replay.code, 0) << replay.out << replay.err;
  EXPECT_TRUE(std::regex_search(replay.out, std::regex("fused -?[0-9]+  error [+-][1-9][0-9]* LSB"))) << replay.out;
  EXPECT_NE(replay.out.find("pattern conv2d+neg+act (neg), fusion keep_all"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("mutant neg-ignores-zero-point"), std::string::npos) << replay.out;
}

TEST(TestStage, MutantsFindsAndShrinksIt) {
  const Outcome list = Cli({"mutants", "--list"});
  ASSERT_EQ(list.code, 0);
  EXPECT_NE(list.out.find(kMutant), std::string::npos);
  const Outcome found = Cli({"mutants", "--mutant", std::string(kMutant), "--seeds", "3", "--all"});
  ASSERT_EQ(found.code, 0) << found.out << found.err;
  EXPECT_TRUE(std::regex_search(found.out, std::regex("neg-ignores-zero-point +yes .* C1 K1 1x1 e=[+-]"))) << found.out;
  EXPECT_NE(found.out.find("1 passed, 0 failed (mutants detected, missed); 1 mutants"), std::string::npos) << found.out;
  // The shrunk counterexample replays through the stage's own fields (a v2 line: the explicit case).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(found.out, m, std::regex("fusediff replay '(fusediff-replay/2;[^']+)'"))) << found.out;
  const Outcome replay = Cli({"replay", m[1].str()});
  ASSERT_EQ(replay.code, 0) << replay.out << replay.err;
  EXPECT_TRUE(std::regex_search(replay.out, std::regex("fused -?[0-9]+  error [+-]1 LSB"))) << replay.out;
}

TEST(TestStage, AnUnknownStageTokenExitsTwoNamingTheKnownOnes) {
  const Outcome run = Cli({"run", "--pattern", "conv2d+nope+act"});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("unknown pattern 'conv2d+nope+act'"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("conv2d+neg+act"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("unknown stage 'nope' (known: add, maxpool, avgpool, fc, act, batchnorm, mul, layernorm, neg)"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace fusediff
