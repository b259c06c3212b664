// run -> report -> compare -> merge through the CLI, the results reader, JUnit, sharding variables and SIGINT.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {
namespace {

constexpr const char* kShardVariables[] = {"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "TEST_TOTAL_SHARDS",
                                           "TEST_SHARD_INDEX", "TEST_SHARD_STATUS_FILE"};

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
    for (const char* v : kShardVariables) ::unsetenv(v);
    dir_ = std::filesystem::temp_directory_path() /
           ("fusediff_reports_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (const char* v : kShardVariables) ::unsetenv(v);
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
  // Everything but when and how the file was made.
  static nlohmann::json Comparable(nlohmann::json j) {
    j.erase("created");
    j.erase("command_line");
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
  EXPECT_NE(Read(Path("merged.xml")).find("<failure"), std::string::npos);

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

  // The mutant's cases carry another definition: a convention change, flagged.
  ASSERT_EQ(Cli(With({"run", "--json", Path("mutant.json")})).code, kExitFail);
  const Outcome worse = Cli({"compare", Path("base.json"), Path("mutant.json")});
  EXPECT_EQ(worse.code, kExitFail) << worse.out;
  EXPECT_NE(worse.out.find("REGRESSION"), std::string::npos) << worse.out;

  // With convention changes allowed by the rules, differently defined cases are noted, not compared.
  std::ofstream(Path("rules.json")) << R"({"convention_change_is_regression": false})";
  const Outcome relaxed = Cli({"compare", Path("base.json"), Path("mutant.json"), "--rules", Path("rules.json")});
  EXPECT_EQ(relaxed.code, kExitPass) << relaxed.out;
  EXPECT_NE(relaxed.out.find("convention changed"), std::string::npos) << relaxed.out;

  // A baseline that was exact everywhere: the current max |e|, exact fraction and |bias| are all worse.
  RunResult exact = reports::ReadResultsFile(Path("base.json"));
  size_t inexact_case = exact.cases.size();
  for (size_t i = 0; i < exact.cases.size(); ++i) {
    if (exact.cases[i].stats.overall.max_abs() > 0) inexact_case = i;
  }
  ASSERT_LT(inexact_case, exact.cases.size()) << "the suite needs one inexact case";
  ErrorStats all_exact;
  all_exact.add(0, exact.cases[inexact_case].stats.overall.count());
  exact.cases[inexact_case].stats.overall = all_exact;
  reports::WriteFileAtomically(Path("exact.json"), reports::ToJson(exact).dump(2));
  const Outcome grew = Cli({"compare", Path("exact.json"), Path("same.json")});
  EXPECT_EQ(grew.code, kExitFail) << grew.out;
  EXPECT_NE(grew.out.find("max |e| 0 -> "), std::string::npos) << grew.out;
  EXPECT_NE(grew.out.find("exact 100.0000% -> "), std::string::npos) << grew.out;
  std::ofstream(Path("loose.json")) << R"({"max_abs_growth_lsb": 10, "exact_fraction_drop": 1, "abs_bias_growth_lsb": 10})";
  EXPECT_EQ(Cli({"compare", Path("exact.json"), Path("same.json"), "--rules", Path("loose.json")}).code, kExitPass);

  // A case that disappears is a regression; an unknown rule is bad input.
  RunResult fewer = reports::ReadResultsFile(Path("same.json"));
  fewer.cases.pop_back();
  reports::WriteFileAtomically(Path("fewer.json"), reports::ToJson(fewer).dump(2));
  const Outcome gone = Cli({"compare", Path("base.json"), Path("fewer.json")});
  EXPECT_EQ(gone.code, kExitFail);
  EXPECT_NE(gone.out.find("case disappeared"), std::string::npos) << gone.out;
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

  // Another seed is a changed sample set, told apart from a regression.
  ASSERT_EQ(Cli({"run", "--activation", "silu", "--samples", "2500", "--seed", "8", "--json", Path("seed8.json")}).code,
            kExitPass);
  const Outcome resampled = Cli({"compare", Path("base.json"), Path("seed8.json")});
  EXPECT_NE(resampled.out.find("sample set changed"), std::string::npos) << resampled.out;
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
  for (const char* needed : {"sample set", "p99.9 |e|", "fusediff replay", "exhaustive", "95% upper bound", "requant variant"}) {
    EXPECT_NE(html.find(needed), std::string::npos) << needed;
  }
  const std::string md = Read(Path("r.md"));
  EXPECT_NE(md.find("| silu.int8.lut.conv | **fail** |"), std::string::npos) << md.substr(0, 2000);
  EXPECT_NE(md.find("`fusediff replay 'fusediff-replay/1;"), std::string::npos);
}

TEST_F(ReportsCli, JUnitHasOneTestcasePerCaseWithFailureAndReplay) {
  ASSERT_EQ(Cli(With({"run", "--junit", Path("j.xml")})).code, kExitFail);
  const std::string xml = Read(Path("j.xml"));
  size_t testcases = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos; at = xml.find("<testcase ", at + 1)) ++testcases;
  EXPECT_EQ(testcases, driver::OneDnnBuiltIn() ? 7u : 4u);
  EXPECT_NE(xml.find("classname=\"fusediff\" name=\"silu.int8.lut.conv\""), std::string::npos);
  EXPECT_NE(xml.find("<failure message=\""), std::string::npos);
  EXPECT_NE(xml.find("replay: fusediff replay &apos;fusediff-replay/1;"), std::string::npos) << xml.substr(0, 3000);
  ASSERT_EQ(Cli({"run", "--activation", "tanh", "--fused", "lut_interp", "--intermediate", "int8", "--samples", "300",
                 "--junit", Path("u.xml")}).code, kExitPass);
  EXPECT_NE(Read(Path("u.xml")).find("<skipped message=\"unsupported: "), std::string::npos);
}

TEST_F(ReportsCli, ShardingVariablesAreHonouredAndTheFlagWins) {
  ::setenv("GTEST_TOTAL_SHARDS", "3", 1);
  ::setenv("GTEST_SHARD_INDEX", "2", 1);
  ::setenv("TEST_SHARD_STATUS_FILE", Path("status").c_str(), 1);
  ASSERT_EQ(Cli(With({"run", "--json", Path("g.json")})).code, kExitFail);
  EXPECT_EQ(Json(Path("g.json"))["shard"], (nlohmann::json{{"index", 2}, {"count", 3}}));
  EXPECT_TRUE(std::filesystem::exists(Path("status")));
  ::setenv("TEST_TOTAL_SHARDS", "2", 1);  // Bazel's pair is preferred over GoogleTest's
  ::setenv("TEST_SHARD_INDEX", "1", 1);
  ASSERT_EQ(Cli(With({"run", "--json", Path("b.json")})).code, kExitFail);
  EXPECT_EQ(Json(Path("b.json"))["shard"], (nlohmann::json{{"index", 1}, {"count", 2}}));
  ASSERT_EQ(Cli(With({"run", "--shard", "0/4", "--json", Path("f.json")})).code, kExitFail);
  EXPECT_EQ(Json(Path("f.json"))["shard"], (nlohmann::json{{"index", 0}, {"count", 4}}));
  ::setenv("TEST_SHARD_INDEX", "5", 1);
  const Outcome bad_env = Cli(With({"run"}));
  EXPECT_EQ(bad_env.code, kExitBadInput);
  EXPECT_NE(bad_env.err.find("TEST_SHARD_INDEX"), std::string::npos) << bad_env.err;
  for (const char* flag : {"3/3", "1", "a/2", "0/0"}) {
    const Outcome o = Cli(With({"run", "--shard", flag}));
    EXPECT_EQ(o.code, kExitBadInput) << flag;
    EXPECT_NE(o.err.find("--shard"), std::string::npos) << o.err;
  }
}

// Ctrl-C in a real process: the current batch finishes, valid JSON with "complete": false is written, exit 130.
TEST_F(ReportsCli, SigintLeavesValidPartialJson) {
  const std::string json = Path("partial.json");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (const char* v : kShardVariables) ::unsetenv(v);
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
