// A backend defined in this file alone, registered with one call, run through the CLI's own entry (`run`, `replay`,
// `mutants`, `report`): what a new backend needs of fusediff, and a check that nothing else must change for it
// (docs/architecture.md, "Adding a backend"). It puts the built-in kernels behind a backend of its own, twice:
//   test_ref:    the kernels as they are (and the catalog's mutants, injected where the built-in path injects them);
//   test_defect: one deliberate defect, every output code that is 5 modulo 16 comes out one higher;
//   test_table:  the kernels as they are, reading back a library-built table (FusedPath::ReadTable): the declared
//                table with input code 0's entry one higher.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/fused/fused_path.h"
#include "fusediff/model/backend.h"
#include "fusediff/reference/reference.h"
#include "fusediff/reports/reports.h"
#include "shard_env.h"
#include "wrapping_backend.h"

namespace fusediff {
namespace {

class WrappedPath final : public FusedPath {
 public:
  WrappedPath(std::unique_ptr<FusedPath> inner, bool defect, std::optional<std::vector<int32_t>> table)
      : inner_(std::move(inner)), defect_(defect), table_(std::move(table)) {}
  std::optional<std::vector<int32_t>> ReadTable() override { return table_; }
  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    if (!inner_->Run(draw, y, rejected)) return false;
    if (defect_) {
      for (int32_t& code : y) code += code % 16 == 5 ? 1 : 0;
    }
    return true;
  }
  bool concurrent() const override { return inner_->concurrent(); }

 private:
  std::unique_ptr<FusedPath> inner_;
  bool defect_;
  std::optional<std::vector<int32_t>> table_;
};

// test_table's table: the declared one (the reference's, at the activation's input codes) with code 0's entry + 1.
std::vector<int32_t> WrongTable(const CaseSpec& spec) {
  const Convention act = activation_convention(spec.pattern, declared_convention(spec));
  const reference::ActivationTable table(act);
  const QuantType type = act.intermediate.q.type;
  std::vector<int32_t> codes;
  for (int32_t u = type.qmin(); u <= type.qmax(); ++u) codes.push_back(table.at(u).y + (u == 0 ? 1 : 0));
  return codes;
}

class TestBackend final : public test_support::WrappingBackend {
 public:
  std::string_view name() const override { return "test"; }
  std::vector<std::string> paths() const override { return {"test_ref", "test_defect", "test_table"}; }
  KeyValues provenance() const override { return {{"wraps", "builtin"}, {"defect", "test_defect: codes 5 mod 16 + 1"}}; }

 protected:
  std::unique_ptr<FusedPath> Wrap(std::unique_ptr<FusedPath> inner, const CaseSpec& spec) const override {
    std::optional<std::vector<int32_t>> table;
    if (spec.backend == "test_table") table = WrongTable(spec);
    return std::make_unique<WrappedPath>(std::move(inner), spec.backend == "test_defect", std::move(table));
  }
};

const TestBackend kTestBackend;
const bool kRegistered = (RegisterBackend(kTestBackend), true);  // the one registration

struct CliRun {
  int code = 0;
  std::string out, err;
};

CliRun RunCli(std::vector<std::string> args) {
  test_support::ClearShardVariables();
  args.insert(args.begin(), "fusediff");
  std::ostringstream out, err;
  CliRun r;
  r.code = cli::Main(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// The first replay line a text output names ("fusediff replay '...'").
std::string FirstReplayLine(const std::string& text) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("fusediff replay '([^']+)'"))) return "";
  return m[1];
}

// "y           reference A  fused B  error +E LSB": {A, B}.
std::pair<int, int> ReplayedOutputs(const std::string& text) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex(R"(y +reference (-?\d+) +fused (-?\d+) +error)"))) << text;
  return m.empty() ? std::pair<int, int>{0, 0} : std::pair<int, int>{std::stoi(m[1]), std::stoi(m[2])};
}

TEST(TestBackend, IsRegisteredAndItsWordsParse) {
  ASSERT_TRUE(kRegistered);
  CaseSpec spec;
  parse_fused_path("test_defect", "--fused", spec);
  EXPECT_EQ(&BackendOf(spec), &kTestBackend);
  EXPECT_EQ(fused_path_name(spec), "test_defect");
  const CliRun r = RunCli({"run", "--fused", "test_nope"});
  EXPECT_EQ(r.code, cli::kExitBadInput);
  EXPECT_NE(r.err.find("--fused: unknown fused path 'test_nope' (expected "), std::string::npos) << r.err;
  for (const char* word : {"test_ref", "test_defect", "lut_interp"}) EXPECT_NE(r.err.find(word), std::string::npos) << r.err;
}

// The honest path passes its suite, and the results and the sign-off report carry its word and its provenance.
TEST(TestBackend, RunsItsSuiteAndReportsIt) {
  const std::string json = ::testing::TempDir() + "test_backend_ref.json";
  const std::string md = ::testing::TempDir() + "test_backend_ref.md";
  const CliRun run = RunCli({"run", "--fused", "test_ref", "--activation", "relu", "--samples", "2000", "--json", json});
  ASSERT_EQ(run.code, cli::kExitPass) << run.out << run.err;
  const RunResult results = reports::ReadResultsFile(json);
  ASSERT_FALSE(results.cases.empty());
  for (const CaseResult& c : results.cases) {
    EXPECT_EQ(c.spec.backend, "test_ref") << c.spec.name;
    EXPECT_NE(c.spec.name.find("test_ref"), std::string::npos) << c.spec.name;
    EXPECT_EQ(c.verdict, Verdict::pass) << c.spec.name;
  }
  EXPECT_EQ(provenance_value(results.provenance, "test", "wraps"), "builtin");
  const CliRun report = RunCli({"report", json, "--md", md});
  ASSERT_EQ(report.code, cli::kExitPass) << report.err;
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("test_ref"), std::string::npos);
  EXPECT_NE(text.find("wraps builtin"), std::string::npos) << text;
}

// The defect fails the run, and the replay line it prints reproduces it through the same backend.
TEST(TestBackend, ItsDefectFailsAndReplays) {
  const CliRun run = RunCli({"run", "--fused", "test_defect", "--activation", "relu", "--samples", "2000"});
  EXPECT_EQ(run.code, cli::kExitFail) << run.out << run.err;
  const std::string line = FirstReplayLine(run.out);
  ASSERT_FALSE(line.empty()) << run.out;
  EXPECT_NE(line.find(";fused=test_defect;"), std::string::npos) << line;
  const CliRun replay = RunCli({"replay", line});
  ASSERT_EQ(replay.code, cli::kExitPass) << replay.err;
  const auto [y_reference, y_fused] = ReplayedOutputs(replay.out);
  EXPECT_EQ(y_reference % 16, 5) << replay.out;
  EXPECT_EQ(y_fused, y_reference + 1) << replay.out;
}

// A path whose own table differs from the declared one fails each case before any draw, naming the first differing
// input code, and the results say so; the honest path's cases read back no table.
TEST(TestBackend, AWrongTableFailsBeforeAnyDraw) {
  const std::string json = ::testing::TempDir() + "test_backend_table.json";
  const CliRun run =
      RunCli({"run", "--fused", "test_table", "--activation", "sigmoid", "--samples", "2000", "--json", json});
  EXPECT_EQ(run.code, cli::kExitFail) << run.out << run.err;
  const RunResult results = reports::ReadResultsFile(json);
  ASSERT_FALSE(results.cases.empty());
  for (const CaseResult& c : results.cases) {
    ASSERT_TRUE(c.table_readback) << c.spec.name;
    EXPECT_EQ(c.table_readback->codes, c.spec.convention.intermediate.q.type.code_count()) << c.spec.name;
    EXPECT_EQ(c.table_readback->mismatches, 1u) << c.spec.name;
    EXPECT_EQ(c.table_readback->first_code, 0) << c.spec.name;
    EXPECT_EQ(c.table_readback->first_library, c.table_readback->first_declared + 1) << c.spec.name;
    EXPECT_EQ(c.verdict, Verdict::fail) << c.spec.name;
    EXPECT_EQ(c.stats.overall.count(), 0u) << c.spec.name;  // no draw ran
    const std::string expected = "the library's table differs from the declared one on 1 of " +
                                 std::to_string(c.table_readback->codes) + " input codes (first: input code 0: library " +
                                 std::to_string(c.table_readback->first_library) + ", declared " +
                                 std::to_string(c.table_readback->first_declared) + "); no draw ran";
    EXPECT_EQ(c.reason, expected) << c.spec.name;
  }
  const CliRun honest = RunCli({"run", "--fused", "test_ref", "--activation", "sigmoid", "--samples", "500", "--json", json});
  ASSERT_EQ(honest.code, cli::kExitPass) << honest.out << honest.err;
  for (const CaseResult& c : reports::ReadResultsFile(json).cases) EXPECT_FALSE(c.table_readback) << c.spec.name;
}

// A catalog mutant injected into the backend's path is found and shrunk, and its replay line runs on that path.
TEST(TestBackend, FindsAMutantInItsPath) {
  const CliRun run = RunCli({"mutants", "--fused", "test_ref", "--mutant", "use-output-scale", "--seeds", "2", "--all"});
  ASSERT_EQ(run.code, cli::kExitPass) << run.out << run.err;
  EXPECT_NE(run.out.find("1 passed, 0 failed (mutants detected, missed)"), std::string::npos) << run.out;
  const std::string line = FirstReplayLine(run.out);
  ASSERT_FALSE(line.empty()) << run.out;
  EXPECT_NE(line.find(";fused=test_ref;"), std::string::npos) << line;
  const CliRun replay = RunCli({"replay", line});
  ASSERT_EQ(replay.code, cli::kExitPass) << replay.err;
  const auto [y_reference, y_fused] = ReplayedOutputs(replay.out);
  EXPECT_NE(y_fused, y_reference) << replay.out;
}

}  // namespace
}  // namespace fusediff
