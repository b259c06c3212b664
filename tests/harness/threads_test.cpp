// Worker threads must not change results: every thread count gives the same statistics, worst lists, per-code
// ranges and JSON, byte for byte.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"
#include "shard_env.h"

namespace fusediff {
namespace {

// The results of one case as the JSON a run writes (fixed provenance, so only the case itself can differ).
std::string CaseJson(const CaseResult& result) {
  RunResult run;
  run.seed = 1;
  run.complete = true;
  run.cases.push_back(result);
  run.cases.back().seconds = 0;
  return reports::ToJson(run).dump(2);
}

TEST(Threads, RunCaseIsIdenticalForOneTwoAndThreeThreads) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::gelu_erf;
  suite.samples = 30000;
  suite.exhaustive = true;                    // conv, sweep and thresholds sources
  suite.mutant = Mutant::use_output_scale;    // non-empty worst lists and per-code ranges
  size_t compared_cases = 0;
  for (const CaseSpec& spec : driver::BuildSuite(suite)) {
    driver::ReferenceCache cache;
    driver::RunOptions one;
    one.worst_count = 25;
    const CaseResult base = driver::RunCase(spec, one, cache);
    if (base.verdict == Verdict::unsupported) continue;
    ASSERT_TRUE(base.complete);
    ASSERT_FALSE(base.stats.worst.sorted().empty()) << spec.name;
    const std::string expected = CaseJson(base);
    for (unsigned threads : {2u, 3u}) {
      driver::RunOptions options = one;
      options.threads = threads;
      const CaseResult result = driver::RunCase(spec, options, cache);
      EXPECT_EQ(result.stats.overall, base.stats.overall) << spec.name << " threads=" << threads;
      EXPECT_EQ(result.stats.worst.sorted(), base.stats.worst.sorted()) << spec.name << " threads=" << threads;
      EXPECT_EQ(result.per_code, base.per_code) << spec.name << " threads=" << threads;
      EXPECT_EQ(CaseJson(result), expected) << spec.name << " threads=" << threads;
    }
    ++compared_cases;
  }
  EXPECT_GE(compared_cases, 5u);  // int8 lut: conv, sweep, thresholds; int16 lut_interp: conv, sweep (+ thresholds)
}

TEST(Threads, ShardsWithThreadsStillPartitionTheSamples) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::sigmoid;
  suite.samples = 5000;
  suite.table_kind = TableKind::lut;
  for (const CaseSpec& spec : driver::BuildSuite(suite)) {
    driver::ReferenceCache cache;
    const CaseResult whole = driver::RunCase(spec, driver::RunOptions{}, cache);
    CaseStats merged;
    for (uint32_t index = 0; index < 2; ++index) {
      driver::RunOptions options;
      options.shard_index = index;
      options.shard_count = 2;
      options.threads = 3;
      merged.merge(driver::RunCase(spec, options, cache).stats);
    }
    EXPECT_EQ(merged.overall, whole.stats.overall) << spec.name;
    if (whole.verdict != Verdict::unsupported) {
      EXPECT_GT(whole.stats.overall.count(), 0u) << spec.name;
    }
  }
}

TEST(Threads, ZeroThreadsIsBadInput) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::relu;
  const CaseSpec spec = driver::BuildSuite(suite).front();
  driver::ReferenceCache cache;
  driver::RunOptions options;
  options.threads = 0;
  EXPECT_THROW(driver::RunCase(spec, options, cache), InputError);
}

TEST(Threads, StopEndsEveryWorkerAndMarksTheCaseIncomplete) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::tanh;
  suite.table_kind = TableKind::lut;
  suite.samples = 2000000;
  const CaseSpec spec = driver::BuildSuite(suite).front();
  ASSERT_EQ(spec.source, SampleSource::conv);
  driver::ReferenceCache cache;
  std::atomic<bool> stop{false};
  uint64_t last_progress = 0;
  driver::RunOptions options;
  options.threads = 3;
  options.stop = &stop;
  options.progress = [&](uint64_t done) {
    last_progress = done;  // never called concurrently: a plain variable is enough
    if (done >= 20000) stop.store(true);
  };
  const CaseResult result = driver::RunCase(spec, options, cache);
  EXPECT_FALSE(result.complete);
  EXPECT_GE(last_progress, 20000u);
  EXPECT_LT(result.stats.overall.count(), 1000000u);
}

std::string RunJson(const std::string& threads, const std::filesystem::path& dir) {
  test_support::ClearShardVariables();
  const std::string path = (dir / ("threads-" + threads + ".json")).string();
  std::ostringstream out, err;
  const int code = cli::Main({"fusediff", "run", "--activation", "silu", "--samples", "20000", "--mutant",
                              "use-output-scale", "--threads", threads, "--json", path},
                             out, err);
  EXPECT_EQ(code, cli::kExitFail) << err.str();
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  j.erase("created");
  j.erase("command_line");
  return j.dump(2);
}

TEST(Threads, CliRunJsonIsByteIdenticalForAnyThreadCount) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("fusediff_threads_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const std::string one = RunJson("1", dir);
  EXPECT_NE(one.find("\"worst\""), std::string::npos);
  EXPECT_EQ(RunJson("2", dir), one);
  EXPECT_EQ(RunJson("3", dir), one);
  std::filesystem::remove_all(dir);
}

TEST(Threads, CliRejectsBadThreadCounts) {
  for (const char* bad : {"0", "-2", "two", "1.5"}) {
    for (const char* command : {"run", "gate"}) {
      std::ostringstream out, err;
      std::vector<std::string> args{"fusediff", command};
      if (std::string(command) == "gate") args.push_back(FUSEDIFF_SOURCE_DIR "/examples/gelu_erf_int8_lut.json");
      args.insert(args.end(), {"--threads", bad});
      EXPECT_EQ(cli::Main(args, out, err), cli::kExitBadInput) << command << " --threads " << bad;
      EXPECT_NE(err.str().find("--threads"), std::string::npos) << err.str();
    }
  }
}

}  // namespace
}  // namespace fusediff
