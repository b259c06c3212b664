// run -> report -> compare -> merge through the CLI, the results reader, JUnit, sharding variables and SIGINT.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "fusediff/model/backend.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"
#include "shard_env.h"

namespace fusediff::cli {
namespace {

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "fusediff");
  std::ostringstream out, err;
  const int code = Main(args, out, err);
  return {code, out.str(), err.str()};
}

class ReportsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    test_support::ClearShardVariables();
    dir_ = std::filesystem::temp_directory_path() /
           ("fusediff_reports_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    test_support::ClearShardVariables();
    std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static nlohmann::json Json(const std::string& path) { return nlohmann::json::parse(Read(path)); }
  // Everything but when and how the file was made (a merge's shard comes from "merge").
  static nlohmann::json Comparable(nlohmann::json j) {
    j.erase("created");
    j.erase("command_line");
    j["shard"].erase("source");
    return j;
  }
  std::filesystem::path dir_;
};

// A small suite with failures, so worst lists, replay lines and verdicts all take part.
const std::vector<std::string> kSuite = {"--activation", "silu", "--samples", "2500", "--mutant", "use-output-scale",
                                         "--seed", "7"};
std::vector<std::string> With(std::vector<std::string> head, const std::vector<std::string>& tail = kSuite) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

TEST_F(ReportsCli, ResultsReadBackToTheSameJson) {
  ASSERT_EQ(Cli(With({"run", "--json", Path("a.json")})).code, kExitFail);
  const nlohmann::json written = Json(Path("a.json"));
  const RunResult read = reports::ReadResultsFile(Path("a.json"));
  EXPECT_EQ(nlohmann::json::parse(reports::ToJson(read).dump()), written);
  EXPECT_EQ(written["sample_set"].get<std::string>().size(), 64u);
  EXPECT_TRUE(written["complete"].get<bool>());
  EXPECT_EQ(written["shard"]["count"], 1);
  EXPECT_EQ(written["shard"]["source"], "none");
}

// Every case kind of the default suite (float boundaries, float convolutions, oneDNN chains, BatchNorm folds) reads
// back to the same JSON, so `report`, `compare` and `merge` take the main job's own file.
TEST_F(ReportsCli, TheDefaultSuiteReadsBackToTheSameJson) {
  ASSERT_NE(Cli({"run", "--samples", "300", "--json", Path("default.json")}).code, 2);
  const nlohmann::json written = Json(Path("default.json"));
  const RunResult read = reports::ReadResultsFile(Path("default.json"));
  EXPECT_EQ(nlohmann::json::parse(reports::ToJson(read).dump()), written);
  EXPECT_GT(written["cases"].size(), 150u);
}

TEST_F(ReportsCli, ShardedAndMergedEqualsUnsharded) {
  ASSERT_EQ(Cli(With({"run", "--json", Path("whole.json")})).code, kExitFail);
  std::vector<std::string> merge = {"merge"};
  for (int i = 0; i < 3; ++i) {
    const std::string part = Path("part" + std::to_string(i) + ".json");
    ASSERT_EQ(Cli(With({"run", "--shard", std::to_string(i) + "/3", "--json", part})).code, kExitFail);
    EXPECT_EQ(Json(part)["shard"]["index"], i);
    EXPECT_LT(Json(part)["cases"][0]["samples"].get<uint64_t>(), Json(Path("whole.json"))["cases"][0]["samples"].get<uint64_t>());
    merge.push_back(part);
  }
  merge.insert(merge.end(), {"--out", Path("merged.json"), "--junit", Path("merged.xml")});
  const Outcome merged = Cli(merge);
  EXPECT_EQ(merged.code, kExitFail) << merged.err;
  EXPECT_EQ(Comparable(Json(Path("merged.json"))), Comparable(Json(Path("whole.json"))));
  EXPECT_EQ(Json(Path("merged.json"))["shard"], (nlohmann::json{{"index", 0}, {"count", 1}, {"source", "merge"}}));
  EXPECT_TRUE(Json(Path("merged.json"))["complete"].get<bool>());
  EXPECT_NE(Read(Path("merged.xml")).find("<failure"), std::string::npos);

  // Every missing shard is named; a doubled one is refused even with --allow-partial (it would count twice).
  const Outcome two_missing = Cli({"merge", Path("part1.json"), "--out", Path("x.json")});
  EXPECT_EQ(two_missing.code, kExitBadInput);
  EXPECT_NE(two_missing.err.find("shards 0/3, 2/3 are missing"), std::string::npos) << two_missing.err;
  std::filesystem::copy_file(Path("part1.json"), Path("again.json"));
  for (const bool partial : {false, true}) {
    std::vector<std::string> doubled = {"merge", Path("part0.json"), Path("part1.json"), Path("again.json"), "--out",
                                        Path("x.json")};
    if (partial) doubled.push_back("--allow-partial");
    const Outcome o = Cli(doubled);
    EXPECT_EQ(o.code, kExitBadInput);
    EXPECT_NE(o.err.find("again.json: shard.index: shard 1/3 appears twice (also in " + Path("part1.json") + ")"),
              std::string::npos)
        << o.err;
  }
  // --allow-partial merges what is there and says so: complete is false, the samples are those of the parts.
  const Outcome partial =
      Cli({"merge", Path("part0.json"), Path("part2.json"), "--allow-partial", "--out", Path("partial.json")});
  EXPECT_EQ(partial.code, kExitFail) << partial.err;
  EXPECT_NE(partial.err.find("partial: 1 of 3 shards missing (1)"), std::string::npos) << partial.err;
  const nlohmann::json partial_json = Json(Path("partial.json"));
  EXPECT_FALSE(partial_json["complete"].get<bool>());
  EXPECT_EQ(partial_json["cases"][0]["samples"].get<uint64_t>(),
            Json(Path("part0.json"))["cases"][0]["samples"].get<uint64_t>() +
                Json(Path("part2.json"))["cases"][0]["samples"].get<uint64_t>());
  EXPECT_EQ(reports::ReadResultsFile(Path("partial.json")).complete, false);

  // Shards that do not make up one run are refused with the file and field named.
  const Outcome missing = Cli({"merge", Path("part0.json"), Path("part2.json"), "--out", Path("x.json")});
  EXPECT_EQ(missing.code, kExitBadInput);
  EXPECT_NE(missing.err.find("shard 1/3 is missing"), std::string::npos) << missing.err;
  ASSERT_EQ(Cli({"run", "--activation", "silu", "--samples", "2500", "--mutant", "use-output-scale", "--seed", "8",
                 "--shard", "1/3", "--json", Path("other_seed.json")}).code,
            kExitFail);
  const Outcome seeds = Cli({"merge", Path("part0.json"), Path("other_seed.json"), Path("part2.json"), "--out", Path("x.json")});
  EXPECT_EQ(seeds.code, kExitBadInput);
  EXPECT_NE(seeds.err.find("other_seed.json: seed"), std::string::npos) << seeds.err;
  EXPECT_FALSE(std::filesystem::exists(Path("x.json")));
}

TEST_F(ReportsCli, CompareFlagsRegressionsAndToleratesIdenticalRuns) {
  // conv2d+act only: the mutant run below has no pattern cases (a conv2d+act mutant keeps to conv2d+act).
  const std::vector<std::string> clean = {"--activation", "silu", "--samples", "2500", "--seed", "7", "--pattern",
                                          "conv2d+act"};
  ASSERT_EQ(Cli(With({"run", "--json", Path("base.json")}, clean)).code, kExitPass);
  ASSERT_EQ(Cli(With({"run", "--json", Path("same.json")}, clean)).code, kExitPass);
  const Outcome same = Cli({"compare", Path("base.json"), Path("same.json")});
  EXPECT_EQ(same.code, kExitPass) << same.out << same.err;
  EXPECT_NE(same.out.find("0 regressions"), std::string::npos) << same.out;

  // The mutant is what the cases test, not their convention: its effect is compared and named, a regression.
  ASSERT_EQ(Cli(With({"run", "--json", Path("mutant.json")})).code, kExitFail);
  const Outcome worse = Cli({"compare", Path("base.json"), Path("mutant.json")});
  EXPECT_EQ(worse.code, kExitFail) << worse.out;
  EXPECT_TRUE(std::regex_search(worse.out, std::regex(R"(silu.int8.lut.sweep: REGRESSION \(mutant: none -> use-output-scale\): verdict pass -> fail: .*max \|e\| 0 -> [0-9]+ LSB)")))
      << worse.out;
  const Outcome only = Cli({"compare", Path("base.json"), Path("mutant.json"), "--only-regressions"});
  EXPECT_EQ(only.code, kExitFail);
  for (size_t at = 0; at < only.out.size(); at = only.out.find('\n', at) + 1) {
    EXPECT_NE(only.out.find(": REGRESSION", at), std::string::npos) << only.out;  // nothing but regression lines
    EXPECT_LT(only.out.find(": REGRESSION", at), only.out.find('\n', at)) << only.out;
  }

  // Another output quantization is another convention: flagged naming the field; with convention changes allowed by
  // the rules, noted and not compared.
  ASSERT_EQ(Cli(With({"run", "--json", Path("other.json"), "--output", "int8:0.05:0"}, clean)).code, kExitPass);
  const Outcome changed = Cli({"compare", Path("base.json"), Path("other.json")});
  EXPECT_EQ(changed.code, kExitFail) << changed.out;
  EXPECT_NE(changed.out.find("convention changed: convention.output.scale: "), std::string::npos) << changed.out;
  std::ofstream(Path("rules.json")) << R"({"convention_change_is_regression": false})";
  const Outcome relaxed = Cli({"compare", Path("base.json"), Path("other.json"), "--rules", Path("rules.json")});
  EXPECT_EQ(relaxed.code, kExitPass) << relaxed.out;
  EXPECT_NE(relaxed.out.find("convention changed"), std::string::npos) << relaxed.out;

  // A baseline that was exact everywhere: the current max |e|, exact fraction and |bias| are all worse. For a judged
  // case that is a regression; for a cross-convention measurement (no verdict) it has moved.
  const auto made_exact = [&](bool crossed, const std::string& name) {
    RunResult exact = reports::ReadResultsFile(Path("base.json"));
    size_t inexact_case = exact.cases.size();
    for (size_t i = 0; i < exact.cases.size(); ++i) {
      const bool is_crossed = exact.cases[i].verdict == Verdict::cross_convention;
      if (exact.cases[i].stats.overall.max_abs() > 0 && is_crossed == crossed) inexact_case = i;
    }
    EXPECT_LT(inexact_case, exact.cases.size()) << "the suite needs one inexact case of each kind";
    ErrorStats all_exact;
    all_exact.add(0, exact.cases[inexact_case].stats.overall.count());
    exact.cases[inexact_case].stats.overall = all_exact;
    exact.cases[inexact_case].stats.draws = DrawTallies{};  // its draws no longer add up to it: leave them out
    reports::WriteFileAtomically(Path(name), reports::ToJson(exact).dump(2));
    return exact.cases[inexact_case].spec.name;
  };
  const std::string judged = made_exact(false, "exact.json");
  const Outcome grew = Cli({"compare", Path("exact.json"), Path("same.json")});
  EXPECT_EQ(grew.code, kExitFail) << grew.out;
  EXPECT_NE(grew.out.find(judged + ": REGRESSION: max |e| 0 -> "), std::string::npos) << grew.out;
  EXPECT_NE(grew.out.find("exact 100.0000% -> "), std::string::npos) << grew.out;
  const std::string crossed = made_exact(true, "exact_crossed.json");
  const Outcome moved = Cli({"compare", Path("exact_crossed.json"), Path("same.json")});
  EXPECT_EQ(moved.code, kExitPass) << moved.out;
  EXPECT_NE(moved.out.find(crossed + ": moved, not a regression: max |e| 0 -> "), std::string::npos) << moved.out;
  std::ofstream(Path("loose.json")) << R"({"max_abs_growth_lsb": 10, "exact_fraction_drop": 1, "abs_bias_growth_lsb": 10})";
  EXPECT_EQ(Cli({"compare", Path("exact.json"), Path("same.json"), "--rules", Path("loose.json")}).code, kExitPass);

  // A case that disappears is a regression; an unknown rule is bad input.
  RunResult fewer = reports::ReadResultsFile(Path("same.json"));
  fewer.cases.pop_back();
  reports::WriteFileAtomically(Path("fewer.json"), reports::ToJson(fewer).dump(2));
  const Outcome gone = Cli({"compare", Path("base.json"), Path("fewer.json")});
  EXPECT_EQ(gone.code, kExitFail);
  EXPECT_NE(gone.out.find(": 1 case missing from CURRENT: REGRESSION ("), std::string::npos) << gone.out;
  std::ofstream(Path("bad_rules.json")) << R"({"max_abs_growth": 1})";
  const Outcome bad_rules = Cli({"compare", Path("base.json"), Path("same.json"), "--rules", Path("bad_rules.json")});
  EXPECT_EQ(bad_rules.code, kExitBadInput);
  EXPECT_NE(bad_rules.err.find("max_abs_growth: unknown rule"), std::string::npos) << bad_rules.err;
  std::ofstream(Path("twice_rules.json")) << "{\"max_abs_growth_lsb\": 0,\n \"max_abs_growth_lsb\": 100}";
  const Outcome twice = Cli({"compare", Path("exact.json"), Path("same.json"), "--rules", Path("twice_rules.json")});
  EXPECT_EQ(twice.code, kExitBadInput);
  EXPECT_NE(twice.err.find("twice_rules.json line 2: max_abs_growth_lsb: duplicate key (first on line 1;"),
            std::string::npos)
      << twice.err;
  std::ofstream(Path("overflow_rules.json")) << R"({"max_abs_growth_lsb": 1e999})";
  const Outcome overflow = Cli({"compare", Path("exact.json"), Path("same.json"), "--rules", Path("overflow_rules.json")});
  EXPECT_EQ(overflow.code, kExitBadInput) << overflow.err;
  EXPECT_NE(overflow.err.find("overflow_rules.json: not valid JSON: "), std::string::npos) << overflow.err;

  // Another seed is a changed sample set, told apart from a regression: judged over draws, the rule printed.
  ASSERT_EQ(Cli(With({"run", "--json", Path("seed8.json"), "--seed", "8"}, {"--activation", "silu", "--samples", "2500",
                                                                           "--pattern", "conv2d+act"})).code,
            kExitPass);
  const Outcome resampled = Cli({"compare", Path("base.json"), Path("seed8.json"), "--all"});
  EXPECT_EQ(resampled.code, kExitPass) << resampled.out;
  EXPECT_NE(resampled.out.find("sample set changed: judged over draws"), std::string::npos) << resampled.out;
  EXPECT_TRUE(std::regex_search(resampled.out, std::regex(R"(rule: [0-9]+ cases on different samples: .* [0-9]+ tests, Holm at family-wise level 0.01: 0 significant)")))
      << resampled.out;
  EXPECT_NE(resampled.out.find("0 regressions"), std::string::npos) << resampled.out;
  // The mutant at another seed: different samples, and its effect is still found over the draws.
  ASSERT_EQ(Cli({"run", "--activation", "silu", "--samples", "2500", "--pattern", "conv2d+act", "--mutant",
                 "use-output-scale", "--seed", "8", "--json", Path("mutant8.json")}).code,
            kExitFail);
  const Outcome drawn = Cli({"compare", Path("base.json"), Path("mutant8.json")});
  EXPECT_EQ(drawn.code, kExitFail) << drawn.out;
  EXPECT_TRUE(std::regex_search(drawn.out, std::regex(R"(silu.int8.lut.conv: REGRESSION \(mutant: none -> use-output-scale\): .*exact 100.000% -> [0-9.]+% over [0-9]+ / [0-9]+ draws \(p = )")))
      << drawn.out;
}

TEST_F(ReportsCli, BrokenResultsFilesAreBadInputNamingFileAndField) {
  ASSERT_EQ(Cli(With({"run", "--json", Path("a.json")})).code, kExitFail);
  nlohmann::json j = Json(Path("a.json"));
  j["cases"][1]["error_lsb"]["histogram"]["0"] = "many";
  std::ofstream(Path("typed.json")) << j.dump();
  std::string text = Read(Path("a.json"));
  std::ofstream(Path("truncated.json")) << text.substr(0, text.size() / 2);
  nlohmann::json edited = Json(Path("a.json"));
  edited["seed"] = 99;
  std::ofstream(Path("edited.json")) << edited.dump();
  // The seed said twice: a reader keeping the last one would see another run than a reviewer.
  std::ofstream(Path("duplicated.json")) << "{\n  \"seed\": 99," << text.substr(text.find('{') + 1);
  std::ofstream(Path("overflow.json")) << "{\"seed\": 1e999}";  // nlohmann's out_of_range, not a parse error
  struct Bad {
    std::string file, fragment;
  };
  for (const Bad& bad : {Bad{"typed.json", "cases[1].error_lsb.histogram.0: expected a non-negative integer"},
                         Bad{"truncated.json", "not valid JSON"}, Bad{"edited.json", "sample_set"},
                         Bad{"duplicated.json", ": seed: duplicate key (first on line 2;"},
                         Bad{"overflow.json", "not valid JSON: [json.exception.out_of_range.406] number overflow"},
                         Bad{"missing.json", "cannot open"}}) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"report", Path(bad.file)}, {"compare", Path("a.json"), Path(bad.file)},
          {"merge", Path(bad.file), "--out", Path("m.json")}}) {
      const Outcome o = Cli(args);
      EXPECT_EQ(o.code, kExitBadInput) << args[0] << " " << bad.file;
      EXPECT_NE(o.err.find(bad.file), std::string::npos) << o.err;
      EXPECT_NE(o.err.find(bad.fragment), std::string::npos) << o.err;
      EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
  }
}

TEST_F(ReportsCli, ReportIsSelfContainedAndMarkdownCarriesTheTables) {
  ASSERT_EQ(Cli(With({"run", "--json", Path("a.json")})).code, kExitFail);
  const Outcome o = Cli({"report", Path("a.json"), "--html", Path("r.html"), "--md", Path("r.md")});
  ASSERT_EQ(o.code, kExitPass) << o.err;
  const std::string html = Read(Path("r.html"));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  EXPECT_EQ(html.find("https://"), std::string::npos);
  size_t plots = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++plots;
  EXPECT_EQ(plots, 3 * 4u);  // histogram, error by code, regions for each of 4 cases
  // A case's five worst samples, each with its replay line; the results file keeps all ten.
  const size_t worst = html.find("<h3>Worst cases (the 5 worst of the 10 in the results file)</h3>");
  ASSERT_NE(worst, std::string::npos);
  const std::string table = html.substr(worst, html.find("</table>", worst) - worst);
  size_t rows = 0;
  for (size_t at = table.find("fusediff replay '"); at != std::string::npos; at = table.find("fusediff replay '", at + 1)) ++rows;
  EXPECT_EQ(rows, 5u);
  for (const char* needed : {"sample set", "p99.9 |e|", "fusediff replay", "exhaustive", "95% upper bound", "requant variant"}) {
    EXPECT_NE(html.find(needed), std::string::npos) << needed;
  }
  const std::string md = Read(Path("r.md"));
  EXPECT_NE(md.find("| silu.int8.lut.conv | **fail** |"), std::string::npos) << md.substr(0, 2000);
  EXPECT_NE(md.find("`fusediff replay 'fusediff-replay/1;"), std::string::npos);
}

TEST_F(ReportsCli, JUnitHasOneTestcasePerCaseWithFailureAndReplay) {
  ASSERT_EQ(Cli(With({"run", "--junit", Path("j.xml"), "--json", Path("j.json")})).code, kExitFail);
  const std::string xml = Read(Path("j.xml"));
  size_t testcases = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos; at = xml.find("<testcase ", at + 1)) ++testcases;
  EXPECT_EQ(testcases, nlohmann::json::parse(Read(Path("j.json")))["cases"].size());
  EXPECT_GE(testcases, 4u);  // the built-in cases; a registered library adds its own
  EXPECT_NE(xml.find("classname=\"fusediff\" name=\"silu.int8.lut.conv\""), std::string::npos);
  EXPECT_NE(xml.find("<failure message=\""), std::string::npos);
  EXPECT_NE(xml.find("replay: fusediff replay &apos;fusediff-replay/1;"), std::string::npos) << xml.substr(0, 3000);
  ASSERT_EQ(Cli({"run", "--activation", "tanh", "--fused", "lut_interp", "--intermediate", "int8", "--samples", "300",
                 "--junit", Path("u.xml")}).code, kExitPass);
  EXPECT_NE(Read(Path("u.xml")).find("<skipped message=\"unsupported: "), std::string::npos);
}

TEST_F(ReportsCli, ShardingVariablesAreHonouredAndSourcesThatAgreeCombine) {
  ::setenv("GTEST_TOTAL_SHARDS", "3", 1);
  ::setenv("GTEST_SHARD_INDEX", "2", 1);
  ::setenv("TEST_SHARD_STATUS_FILE", Path("status").c_str(), 1);
  const Outcome g = Cli(With({"run", "--json", Path("g.json")}));
  ASSERT_EQ(g.code, kExitFail) << g.err;
  EXPECT_EQ(Json(Path("g.json"))["shard"], (nlohmann::json{{"index", 2}, {"count", 3}, {"source", "googletest"}}));
  EXPECT_NE(g.err.find("fusediff: shard 2/3 from googletest (GTEST_SHARD_INDEX=2, GTEST_TOTAL_SHARDS=3)\n"),
            std::string::npos)
      << g.err;
  EXPECT_TRUE(std::filesystem::exists(Path("status")));
  // Bazel exports its pair and GoogleTest's with the same values: they agree, and Bazel's comes first.
  ::setenv("TEST_TOTAL_SHARDS", "3", 1);
  ::setenv("TEST_SHARD_INDEX", "2", 1);
  ASSERT_EQ(Cli(With({"run", "--json", Path("b.json")})).code, kExitFail);
  EXPECT_EQ(Json(Path("b.json"))["shard"]["source"], "bazel");
  // A flag, a Kubernetes index and a Slurm task that all name shard 2/3: the flag comes first.
  ::setenv("JOB_COMPLETION_INDEX", "2", 1);
  ::setenv("SLURM_ARRAY_TASK_ID", "7", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "5", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
  ASSERT_EQ(Cli(With({"run", "--shard", "2/3", "--json", Path("f.json")})).code, kExitFail);
  EXPECT_EQ(Json(Path("f.json"))["shard"], (nlohmann::json{{"index", 2}, {"count", 3}, {"source", "flag"}}));
  test_support::ClearShardVariables();
  const Outcome none = Cli(With({"run", "--json", Path("n.json")}));
  EXPECT_EQ(Json(Path("n.json"))["shard"]["source"], "none");
  EXPECT_EQ(none.err.find("shard"), std::string::npos) << none.err;
}

// Each scheduler's variables, through the CLI: the parts merge to the unsharded run byte for byte, apart from
// when and how each file was made (created, command_line, shard.source).
TEST_F(ReportsCli, EverySchedulersPartsMergeToTheUnshardedRunByteForByte) {
  ASSERT_EQ(Cli(With({"run", "--json", Path("whole.json")})).code, kExitFail);
  using Env = std::vector<std::pair<std::string, std::string>>;
  struct Scheduler {
    std::string name, source;
    std::function<Env(int)> env;  // the variables of part i of 3
    std::vector<std::string> flags;
  };
  const std::vector<Scheduler> schedulers = {
      {"googletest", "googletest",
       [](int i) { return Env{{"GTEST_SHARD_INDEX", std::to_string(i)}, {"GTEST_TOTAL_SHARDS", "3"}}; }, {}},
      {"bazel", "bazel",
       [](int i) {
         return Env{{"TEST_SHARD_INDEX", std::to_string(i)}, {"TEST_TOTAL_SHARDS", "3"},
                    {"GTEST_SHARD_INDEX", std::to_string(i)}, {"GTEST_TOTAL_SHARDS", "3"}};
       },
       {}},
      {"kubernetes", "kubernetes",
       [](int i) { return Env{{"JOB_COMPLETION_INDEX", std::to_string(i)}, {"FUSEDIFF_SHARD_COUNT", "3"}}; }, {}},
      {"kubernetes_flag", "kubernetes", [](int i) { return Env{{"JOB_COMPLETION_INDEX", std::to_string(i)}}; },
       {"--shard-count", "3"}},
      // sbatch --array=4-10:3: task ids 4, 7, 10
      {"slurm", "slurm",
       [](int i) {
         return Env{{"SLURM_ARRAY_TASK_ID", std::to_string(4 + 3 * i)}, {"SLURM_ARRAY_TASK_MIN", "4"},
                    {"SLURM_ARRAY_TASK_STEP", "3"}, {"SLURM_ARRAY_TASK_COUNT", "3"}};
       },
       {}},
  };
  // The file as written, less the three fields; first proven to be the writer's canonical form, so comparing
  // the re-dumped text compares the bytes.
  auto without_provenance = [](const std::string& path) {
    const std::string text = Read(path);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    EXPECT_EQ(reports::DumpJson(j), text) << path;
    j.erase("created");
    j.erase("command_line");
    j["shard"].erase("source");
    return j.dump(2);
  };
  const std::string whole = without_provenance(Path("whole.json"));
  for (const Scheduler& s : schedulers) {
    std::vector<std::string> merge = {"merge"};
    for (int i = 0; i < 3; ++i) {
      const std::string part = Path(s.name + std::to_string(i) + ".json");
      for (const auto& [name, value] : s.env(i)) ::setenv(name.c_str(), value.c_str(), 1);
      std::vector<std::string> run = {"run", "--json", part};
      run.insert(run.end(), s.flags.begin(), s.flags.end());
      const Outcome o = Cli(With(run));
      test_support::ClearShardVariables();
      ASSERT_EQ(o.code, kExitFail) << s.name << ": " << o.err;
      EXPECT_NE(o.err.find("fusediff: shard " + std::to_string(i) + "/3 from " + s.source + " ("), std::string::npos)
          << o.err;
      EXPECT_EQ(Json(part)["shard"], (nlohmann::json{{"index", i}, {"count", 3}, {"source", s.source}}));
      merge.push_back(part);
    }
    merge.insert(merge.end(), {"--out", Path(s.name + ".json")});
    const Outcome merged = Cli(merge);
    ASSERT_EQ(merged.code, kExitFail) << s.name << ": " << merged.err;
    EXPECT_EQ(without_provenance(Path(s.name + ".json")), whole) << s.name;
  }
}

// Every inconsistent shard value exits 2 before any work, with one line that starts with the flag or variable.
TEST_F(ReportsCli, InconsistentShardValuesExit2NamingTheVariable) {
  using Env = std::vector<std::pair<const char*, const char*>>;
  struct Bad {
    Env env;
    std::vector<std::string> flags;
    std::string named;
  };
  const Env slurm_base = {{"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  auto slurm = [&](Env more) {
    more.insert(more.end(), slurm_base.begin(), slurm_base.end());
    return more;
  };
  const std::vector<Bad> bads = {
      // index outside the count, count 0, not a number, half set
      {{}, {"--shard", "3/3"}, "--shard"},
      {{}, {"--shard", "0/0"}, "--shard"},
      {{}, {"--shard", "a/2"}, "--shard"},
      {{}, {"--shard", "1"}, "--shard"},
      {{{"TEST_SHARD_INDEX", "5"}, {"TEST_TOTAL_SHARDS", "2"}}, {}, "TEST_SHARD_INDEX"},
      {{{"TEST_SHARD_INDEX", "0"}, {"TEST_TOTAL_SHARDS", "0"}}, {}, "TEST_TOTAL_SHARDS"},
      {{{"GTEST_SHARD_INDEX", "1"}}, {}, "GTEST_TOTAL_SHARDS"},
      {{{"GTEST_SHARD_INDEX", "x"}, {"GTEST_TOTAL_SHARDS", "3"}}, {}, "GTEST_SHARD_INDEX"},
      {{{"JOB_COMPLETION_INDEX", "3"}, {"FUSEDIFF_SHARD_COUNT", "3"}}, {}, "JOB_COMPLETION_INDEX"},
      {{{"JOB_COMPLETION_INDEX", "0"}, {"FUSEDIFF_SHARD_COUNT", "0"}}, {}, "FUSEDIFF_SHARD_COUNT"},
      {{{"JOB_COMPLETION_INDEX", "0"}}, {"--shard-count", "0"}, "--shard-count"},
      {{{"JOB_COMPLETION_INDEX", "-1"}, {"FUSEDIFF_SHARD_COUNT", "3"}}, {}, "JOB_COMPLETION_INDEX"},
      {{{"JOB_COMPLETION_INDEX", "1"}, {"FUSEDIFF_SHARD_COUNT", "three"}}, {}, "FUSEDIFF_SHARD_COUNT"},
      {{{"JOB_COMPLETION_INDEX", "1"}}, {}, "JOB_COMPLETION_INDEX"},  // Kubernetes gives no count
      {{{"FUSEDIFF_SHARD_COUNT", "3"}}, {}, "FUSEDIFF_SHARD_COUNT"},  // a count without an index
      {{}, {"--shard-count", "3"}, "--shard-count"},
      {slurm({{"SLURM_ARRAY_TASK_ID", "5"}}), {}, "SLURM_ARRAY_TASK_ID"},  // 5 - 1 = 4, not below 4
      {slurm({{"SLURM_ARRAY_TASK_ID", "0"}}), {}, "SLURM_ARRAY_TASK_ID"},  // below SLURM_ARRAY_TASK_MIN
      {slurm({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_STEP", "2"}}), {}, "SLURM_ARRAY_TASK_ID"},  // off the step
      {slurm({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_STEP", "0"}}), {}, "SLURM_ARRAY_TASK_STEP"},
      {{{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "0"}}, {},
       "SLURM_ARRAY_TASK_COUNT"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "two"}}, {},
       "SLURM_ARRAY_TASK_COUNT"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}, {}, "SLURM_ARRAY_TASK_MIN"},
      {slurm({{"SLURM_ARRAY_TASK_ID", "99999999999"}}), {}, "SLURM_ARRAY_TASK_ID"},
      // two sources that disagree
      {{{"GTEST_SHARD_INDEX", "1"}, {"GTEST_TOTAL_SHARDS", "2"}}, {"--shard", "0/2"}, "GTEST_SHARD_INDEX"},
      {{{"TEST_SHARD_INDEX", "1"}, {"TEST_TOTAL_SHARDS", "2"}, {"GTEST_SHARD_INDEX", "1"}, {"GTEST_TOTAL_SHARDS", "3"}},
       {},
       "GTEST_TOTAL_SHARDS"},
      {{{"JOB_COMPLETION_INDEX", "2"}}, {"--shard", "1/4"}, "JOB_COMPLETION_INDEX"},
      {{{"FUSEDIFF_SHARD_COUNT", "3"}}, {"--shard", "1/4"}, "FUSEDIFF_SHARD_COUNT"},
      {{{"JOB_COMPLETION_INDEX", "0"}, {"FUSEDIFF_SHARD_COUNT", "3"}}, {"--shard-count", "4"}, "FUSEDIFF_SHARD_COUNT"},
      {slurm({{"JOB_COMPLETION_INDEX", "1"}, {"FUSEDIFF_SHARD_COUNT", "3"}, {"SLURM_ARRAY_TASK_ID", "2"}}), {},
       "SLURM_ARRAY_TASK_COUNT"},  // Kubernetes says 1/3, Slurm 1/4
  };
  for (const Bad& bad : bads) {
    test_support::ClearShardVariables();
    for (const auto& [name, value] : bad.env) ::setenv(name, value, 1);
    std::vector<std::string> run = {"run", "--json", Path("x.json")};
    run.insert(run.end(), bad.flags.begin(), bad.flags.end());
    const Outcome o = Cli(With(run));
    std::string what;
    for (const auto& [name, value] : bad.env) what += std::string(name) + "=" + value + " ";
    for (const std::string& f : bad.flags) what += f + " ";
    EXPECT_EQ(o.code, kExitBadInput) << what;
    EXPECT_EQ(o.err.rfind("fusediff: " + bad.named + ": ", 0), 0u) << what << "-> " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_FALSE(std::filesystem::exists(Path("x.json"))) << what;
  }
}

// Results written before shard.source existed read with a default; an unknown source is bad input.
TEST_F(ReportsCli, ResultsWithoutAShardSourceStillRead) {
  ASSERT_EQ(Cli(With({"run", "--json", Path("a.json")})).code, kExitFail);
  nlohmann::ordered_json old = nlohmann::ordered_json::parse(Read(Path("a.json")));
  old["shard"].erase("source");
  std::ofstream(Path("old.json")) << old.dump(2);
  EXPECT_EQ(reports::ReadResultsFile(Path("old.json")).shard_source, "unrecorded");
  EXPECT_EQ(Cli({"report", Path("old.json"), "--md", Path("old.md")}).code, kExitPass);
  EXPECT_NE(Read(Path("old.md")).find("0/1 (from unrecorded)"), std::string::npos);
  EXPECT_EQ(Cli({"compare", Path("old.json"), Path("a.json")}).code, kExitPass);
  ASSERT_EQ(Cli({"merge", Path("old.json"), "--out", Path("m.json")}).code, kExitFail);
  EXPECT_EQ(Json(Path("m.json"))["shard"]["source"], "merge");
  old["shard"]["source"] = "cron";
  std::ofstream(Path("odd.json")) << old.dump(2);
  const Outcome odd = Cli({"report", Path("odd.json")});
  EXPECT_EQ(odd.code, kExitBadInput);
  EXPECT_NE(odd.err.find("odd.json: shard.source: expected one of none, flag, bazel, googletest, kubernetes, slurm"),
            std::string::npos)
      << odd.err;
}

// Ctrl-C in a real process: the current batch finishes, valid JSON with "complete": false is written, exit 130.
TEST_F(ReportsCli, SigintLeavesValidPartialJson) {
  const std::string json = Path("partial.json");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    test_support::ClearShardVariables();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    if (!std::freopen("/dev/null", "w", stdout)) ::_exit(126);
    ::execl(FUSEDIFF_BINARY, FUSEDIFF_BINARY, "run", "--activation", "gelu_erf", "--fused", "lut", "--samples",
            "2000000000", "--json", json.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  ASSERT_EQ(::kill(child, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), kExitInterrupted);
  const nlohmann::json j = Json(json);
  EXPECT_FALSE(j["complete"].get<bool>());
  ASSERT_FALSE(j["cases"].empty());
  EXPECT_FALSE(j["cases"][0]["complete"].get<bool>());
  EXPECT_GT(j["cases"][0]["samples"].get<uint64_t>(), 0u);
  EXPECT_NO_THROW(reports::ReadResultsFile(json));  // the strict reader accepts the partial result
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace fusediff::cli
