// --repeat: a fused path that reads memory it never wrote fails as nondeterministic, apart from value errors, with
// every repetition's output in its entry; a deterministic path passes; the results keep all of it through JSON
// and shard merges. Attribution fields stay absent for the built-in paths.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/fused_path.h"
#include "fusediff/reports/reports.h"

namespace fusediff {
namespace {

// A built-in path that claims to be a library's (repeatable). With `unwritten`, it leaves element 0 of every draw
// unwritten and returns what its destination held: the poison pattern of the repetition, as a kernel that reads
// uninitialised memory would.
class PoisonReadingPath final : public fused::FusedPath {
 public:
  PoisonReadingPath(std::unique_ptr<fused::FusedPath> inner, bool unwritten) : inner_(std::move(inner)), unwritten_(unwritten) {}
  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    if (!inner_->Run(draw, y, rejected)) return false;
    if (unwritten_) y[0] = -128 + static_cast<int32_t>((0xA5u + 0x4Bu * repetition_) % 256u);
    return true;
  }
  bool repeatable() const override { return true; }
  void set_repetition(uint32_t r) override { repetition_ = r; }
  fused::RunInfo last_run() const override {
    fused::RunInfo info;
    info.implementation = "fake: poison-reader";
    return info;
  }

 private:
  std::unique_ptr<fused::FusedPath> inner_;
  bool unwritten_;
  uint32_t repetition_ = 0;
};

driver::FusedPathFactory Factory(bool unwritten) {
  return [unwritten](const CaseSpec& spec, std::string* why) -> std::unique_ptr<fused::FusedPath> {
    std::unique_ptr<fused::FusedPath> inner = fused::CreateBuiltInPath(spec, why);
    if (!inner) return nullptr;
    return std::make_unique<PoisonReadingPath>(std::move(inner), unwritten);
  };
}

CaseSpec ReluInt8Conv(uint64_t samples) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::relu;
  suite.samples = samples;
  for (const CaseSpec& spec : driver::BuildSuite(suite)) {
    if (spec.source == SampleSource::conv && spec.table_kind == TableKind::lut && spec.backend == kBuiltInPath &&
        is_conv_act(spec.pattern)) {
      return spec;
    }
  }
  ADD_FAILURE() << "no relu int8 lut conv case";
  return {};
}

std::string RunJson(const CaseResult& result) {
  RunResult run;
  run.seed = 1;
  run.cases.push_back(result);
  run.cases.back().seconds = 0;
  return reports::ToJson(run).dump(2);
}

TEST(Determinism, APathReadingItsPoisonIsNondeterministicWithEveryRepetitionShown) {
  const CaseSpec spec = ReluInt8Conv(3000);
  driver::ReferenceCache cache;
  driver::RunOptions options;
  options.fused_path = Factory(/*unwritten=*/true);
  const CaseResult result = driver::RunCase(spec, options, cache);
  EXPECT_EQ(result.repeat, 2u);  // a repeatable path's default
  EXPECT_EQ(result.verdict, Verdict::nondeterministic) << result.reason;
  EXPECT_NE(result.reason.find("differ between 2 repetitions"), std::string::npos) << result.reason;
  EXPECT_GT(result.stats.nondeterministic, 0u);
  ASSERT_FALSE(result.nondeterministic.empty());
  for (const WorstCaseReport& w : result.nondeterministic) {
    ASSERT_EQ(w.sample.repetitions.size(), 2u);
    EXPECT_NE(w.sample.repetitions[0], w.sample.repetitions[1]);
    EXPECT_EQ(w.sample.repetitions[0], w.sample.y_fused);
    EXPECT_NE(w.replay.find(";repeat=2"), std::string::npos) << w.replay;
    EXPECT_EQ(w.sample.implementation, "fake: poison-reader");
  }
  EXPECT_TRUE([&] { RunResult r; r.cases.push_back(result); return r.any_failure(); }());

  // Three repetitions: three outputs per entry, all different (the poison differs at every byte).
  options.repeat = 3;
  const CaseResult three = driver::RunCase(spec, options, cache);
  ASSERT_FALSE(three.nondeterministic.empty());
  EXPECT_EQ(three.nondeterministic.front().sample.repetitions.size(), 3u);
  EXPECT_EQ(three.stats.nondeterministic, result.stats.nondeterministic);

  // One repetition cannot see it: the poison is then an ordinary (value) error, or none.
  options.repeat = 1;
  const CaseResult once = driver::RunCase(spec, options, cache);
  EXPECT_EQ(once.stats.nondeterministic, 0u);
  EXPECT_NE(once.verdict, Verdict::nondeterministic);
}

TEST(Determinism, ADeterministicRepeatablePathPassesAndBuiltInsRunOnce) {
  const CaseSpec spec = ReluInt8Conv(3000);
  driver::ReferenceCache cache;
  driver::RunOptions options;
  options.fused_path = Factory(/*unwritten=*/false);
  const CaseResult repeated = driver::RunCase(spec, options, cache);
  EXPECT_EQ(repeated.repeat, 2u);
  EXPECT_EQ(repeated.verdict, Verdict::pass) << repeated.reason;
  EXPECT_EQ(repeated.stats.nondeterministic, 0u);
  EXPECT_EQ(repeated.stats.by_implementation.at("fake: poison-reader").count(), repeated.stats.overall.count());

  // The built-in kernels always run once (nothing to see twice), whatever --repeat says, and their results carry
  // none of the library fields.
  driver::RunOptions plain;
  plain.repeat = 4;
  const CaseResult builtin = driver::RunCase(spec, plain, cache);
  EXPECT_EQ(builtin.repeat, 1u);
  EXPECT_TRUE(builtin.stats.by_implementation.empty());
  const std::string json = RunJson(builtin);
  for (const char* field : {"\"repeat\"", "nondeterministic", "by_implementation", "by_formulation", "paired_formulations"}) {
    EXPECT_EQ(json.find(field), std::string::npos) << field;
  }
}

TEST(Determinism, NondeterministicResultsSurviveJsonAndShardMerges) {
  const CaseSpec spec = ReluInt8Conv(4000);
  driver::ReferenceCache cache;
  driver::RunOptions whole;
  whole.fused_path = Factory(/*unwritten=*/true);
  const CaseResult expected = driver::RunCase(spec, whole, cache);
  ASSERT_EQ(expected.verdict, Verdict::nondeterministic);

  // Through JSON and back: the same file again.
  const std::string json = RunJson(expected);
  const RunResult read = reports::FromJson(nlohmann::json::parse(json), "test.json");
  ASSERT_EQ(read.cases.size(), 1u);
  EXPECT_EQ(read.cases[0].verdict, Verdict::nondeterministic);
  EXPECT_EQ(read.cases[0].stats.nondeterministic, expected.stats.nondeterministic);
  EXPECT_EQ(read.cases[0].stats.by_implementation, expected.stats.by_implementation);
  EXPECT_EQ(RunJson(read.cases[0]), json);
  // /8 writes no replay lines in the entries: the reader derives them, repetitions included, as the run did.
  ASSERT_EQ(read.cases[0].nondeterministic.size(), expected.nondeterministic.size());
  ASSERT_FALSE(expected.nondeterministic.empty());
  for (size_t i = 0; i < expected.nondeterministic.size(); ++i) {
    EXPECT_EQ(read.cases[0].nondeterministic[i].replay, expected.nondeterministic[i].replay);
    EXPECT_NE(expected.nondeterministic[i].replay.find(";repeat="), std::string::npos) << expected.nondeterministic[i].replay;
  }

  // Shards merged out of order give the whole run's counts, entries and verdict.
  driver::RunOptions part = whole;
  part.shard_count = 3;
  part.shard_index = 1;
  CaseResult merged = driver::RunCase(spec, part, cache);
  for (uint32_t index : {2u, 0u}) {
    part.shard_index = index;
    merge_case_result(merged, driver::RunCase(spec, part, cache), whole.seed);
  }
  EXPECT_EQ(merged.stats.nondeterministic, expected.stats.nondeterministic);
  EXPECT_EQ(merged.stats.nondeterministic_worst.sorted(), expected.stats.nondeterministic_worst.sorted());
  EXPECT_EQ(merged.stats.by_implementation, expected.stats.by_implementation);
  EXPECT_EQ(merged.verdict, expected.verdict);
  EXPECT_EQ(merged.reason, expected.reason);
}

}  // namespace
}  // namespace fusediff
