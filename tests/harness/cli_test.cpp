#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include "fusediff/model/backend.h"
#include "fusediff/cli/cli.h"
#include "fusediff/fused/fused_path.h"
#include "fusediff/driver/suite.h"
#include "fusediff/reports/reports.h"
#include "shard_env.h"

namespace fusediff::cli {
namespace {

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome RunCli(std::vector<std::string> args) {
  test_support::ClearShardVariables();
  args.insert(args.begin(), "fusediff");
  std::ostringstream out, err;
  const int code = Main(args, out, err);
  return {code, out.str(), err.str()};
}

std::filesystem::path TempDir() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("fusediff_cli_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                     "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  return dir;
}

struct BadInput {
  std::vector<std::string> args;
  std::string message_fragment;
};

TEST(Cli, BadInputExitsTwoWithOneClearLine) {
  const std::vector<BadInput> cases = {
      {{"run", "--activation", "gelu_xx"}, "unknown activation 'gelu_xx'"},
      {{"run", "--samples", "0"}, "--samples"},
      {{"run", "--intermediate", "int8:0:0"}, "intermediate.scale"},
      {{"run", "--intermediate", "int8:0.1:300"}, "intermediate.zero_point"},
      {{"run", "--intermediate", "int32"}, "unknown type 'int32'"},
      {{"run", "--output", "uint8:nan:0"}, "output.scale"},
      {{"run", "--requant", "double_rounding", "--intermediate-rounding", "half_to_even"}, "contradicts requant"},
      {{"run", "--requant", "triple"}, "unknown requant variant"},
      {{"run", "--mutant", "use_output_scale"}, "unknown mutant"},
      {{"run", "--activation", "relu", "--alpha", "0.2"}, "takes no alpha"},
      {{"run", "--json", "/nonexistent-folder/x.json"}, "does not exist"},
      {{"run", "--bogus"}, "bogus"},
      {{"replay", "not-a-replay-string"}, "does not start with"},
      {{}, "subcommand"},
  };
  for (const BadInput& c : cases) {
    const Outcome o = RunCli(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(o.code, kExitBadInput) << joined << "\n" << o.err;
    EXPECT_NE(o.err.find(c.message_fragment), std::string::npos) << joined << "\nstderr: " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << joined << "\nstderr: " << o.err;
  }
}

TEST(Cli, RunWritesJsonAndCsvAndIsDeterministic) {
  const auto dir = TempDir();
  const std::string json1 = (dir / "a.json").string(), json2 = (dir / "b.json").string(), csv = (dir / "a.csv").string();
  const Outcome a = RunCli({"run", "--activation", "hard_swish", "--samples", "3000", "--seed", "9", "--json", json1,
                            "--csv", csv, "--all"});
  ASSERT_EQ(a.code, kExitPass) << a.out << a.err;
  EXPECT_NE(a.out.find("hard_swish.int8.lut.conv"), std::string::npos) << a.out;  // --all: a row per case
  EXPECT_NE(a.out.find("hard_swish.int16.lut_interp.sweep"), std::string::npos) << a.out;
  const Outcome b = RunCli({"run", "--activation", "hard_swish", "--samples", "3000", "--seed", "9", "--json", json2});
  ASSERT_EQ(b.code, kExitPass);
  // By default every passing case is summed up in its pattern x fused path line, and the closing line ends it all.
  EXPECT_EQ(b.out.find("hard_swish.int8.lut.conv"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("conv2d+act lut: 2 passed; "), std::string::npos) << b.out;
  EXPECT_TRUE(std::regex_search(b.out, std::regex(R"(\n[0-9]+ passed, 0 failed, [^\n]*; [0-9]+ cases, seed 9\n$)"))) << b.out;
  auto load = [](const std::string& path) {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in);
    j.erase("created");
    j.erase("command_line");
    return j;
  };
  const nlohmann::json ja = load(json1), jb = load(json2);
  EXPECT_EQ(ja, jb);
  EXPECT_EQ(ja["format"], reports::kResultsFormat);
  // Its conv2d+act cases (4) and the patterns that use hard_swish (max pool: kept, pooled first); a registered
  // library with a suite of its own adds its cases after them.
  const std::vector<std::string> builtin = fused::BuiltInBackend().words();
  const auto is_builtin = [&](const nlohmann::json& c) {
    return std::find(builtin.begin(), builtin.end(), c["fused"].get<std::string>()) != builtin.end();
  };
  ASSERT_EQ(std::count_if(ja["cases"].begin(), ja["cases"].end(), is_builtin), 6);
  const auto& c0 = ja["cases"][0];
  EXPECT_EQ(c0["name"], "hard_swish.int8.lut.conv");
  EXPECT_EQ(c0["samples"], 3000);
  EXPECT_EQ(c0["convention"]["requant"], "double_rounding");
  EXPECT_EQ(c0["verdict"], "pass");
  EXPECT_TRUE(c0["mutant"].is_null());
  EXPECT_EQ(ja["cases"][1]["samples"], 256);  // the sweep covers every int8 code once
  EXPECT_EQ(ja["cases"][3]["samples"], 65536);
  std::ifstream csv_in(csv);
  std::string header;
  std::getline(csv_in, header);
  EXPECT_EQ(header.rfind("name,source,activation,requant", 0), 0u);
  std::filesystem::remove_all(dir);
}

TEST(Cli, MutantUseOutputScaleFailsWithReplayableWorstCase) {
  const Outcome o = RunCli({"run", "--activation", "sigmoid", "--fused", "lut", "--samples", "2000",
                            "--mutant", "use-output-scale"});
  EXPECT_EQ(o.code, kExitFail) << o.out << o.err;
  EXPECT_NE(o.out.find("FAIL"), std::string::npos) << o.out;
  const size_t at = o.out.find("fusediff replay '");
  ASSERT_NE(at, std::string::npos) << o.out;
  const size_t begin = at + std::string("fusediff replay '").size();
  const std::string replay = o.out.substr(begin, o.out.find('\'', begin) - begin);
  const Outcome r = RunCli({"replay", replay});
  ASSERT_EQ(r.code, kExitPass) << r.err;
  EXPECT_NE(r.out.find("error"), std::string::npos);
  EXPECT_EQ(r.out.find("error +0 LSB"), std::string::npos) << r.out;  // the replayed sample still differs
}

}  // namespace
}  // namespace fusediff::cli

namespace fusediff::cli {
namespace {

TEST(CliMutants, ListNamesEveryMutantWithItsSpace) {
  std::ostringstream out, err;
  ASSERT_EQ(Main({"fusediff", "mutants", "--list"}, out, err), kExitPass) << err.str();
  for (const char* name : {"use-output-scale", "gelu-tanh-for-erf", "requant-truncate", "requant-double-for-single",
                           "no-intermediate-saturation", "lut-index-off-by-one", "knee-entry-off-by-one",
                           "ignore-intermediate-zero-point", "zero-point-before-rounding",
                           "skip-intermediate-quantization", "output-half-even-for-half-away", "interp-truncate"}) {
    EXPECT_NE(out.str().find(name), std::string::npos) << name;
  }
  EXPECT_NE(out.str().find("differs:"), std::string::npos);
}

TEST(CliRun, MixAndExhaustive) {
  std::ostringstream out, err;
  EXPECT_EQ(Main({"fusediff", "run", "--mix", "knee=1,bogus=2"}, out, err), kExitBadInput);
  EXPECT_NE(err.str().find("unknown region 'bogus'"), std::string::npos) << err.str();
  std::ostringstream out2, err2;
  ASSERT_EQ(Main({"fusediff", "run", "--activation", "relu6", "--fused", "lut", "--samples", "500", "--exhaustive",
                  "--mix", "bulk=1", "--all"},
                 out2, err2),
            kExitPass)
      << out2.str() << err2.str();
  EXPECT_NE(out2.str().find("relu6.int8.lut.thresholds"), std::string::npos) << out2.str();
}

}  // namespace
}  // namespace fusediff::cli
