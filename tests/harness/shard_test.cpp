#include <gtest/gtest.h>

#include <atomic>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"

namespace fusediff {
namespace {

TEST(Sharding, MergedShardsEqualTheUnshardedRun) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::silu;
  suite.samples = 3000;
  suite.mutant = Mutant::use_output_scale;  // non-empty worst lists, so their merge is checked too
  for (const CaseSpec& spec : driver::BuildSuite(suite)) {
    if (spec.backend != kBuiltInPath) continue;  // mutants do not apply to a library, tested with its backend
    driver::ReferenceCache cache;
    driver::RunOptions whole_options;
    const CaseResult whole = driver::RunCase(spec, whole_options, cache);
    for (uint32_t count : {2u, 3u}) {
      CaseStats merged;
      merged.worst = WorstCases(whole_options.worst_count);
      for (uint32_t index = 0; index < count; ++index) {
        driver::RunOptions options;
        options.shard_index = index;
        options.shard_count = count;
        const CaseResult part = driver::RunCase(spec, options, cache);
        EXPECT_LT(part.stats.overall.count(), whole.stats.overall.count()) << spec.name;
        merged.merge(part.stats);
      }
      EXPECT_EQ(merged.overall, whole.stats.overall) << spec.name << " in " << count << " shards";
      for (size_t r = 0; r < merged.by_region.size(); ++r) EXPECT_EQ(merged.by_region[r], whole.stats.by_region[r]);
      EXPECT_EQ(merged.worst.sorted(), whole.stats.worst.sorted()) << spec.name;
    }
  }
}

TEST(Sharding, BadShardIsInputError) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::relu;
  const CaseSpec spec = driver::BuildSuite(suite).front();
  driver::ReferenceCache cache;
  driver::RunOptions options;
  options.shard_index = 2;
  options.shard_count = 2;
  EXPECT_THROW(driver::RunCase(spec, options, cache), InputError);
}

TEST(Stop, AStopRequestEndsTheCaseIncomplete) {
  driver::SuiteOptions suite;
  suite.activation = ActivationKind::gelu_erf;
  suite.samples = 100000;
  const CaseSpec spec = driver::BuildSuite(suite).front();
  std::atomic<bool> stop{false};
  driver::RunOptions options;
  options.stop = &stop;
  uint64_t calls = 0;
  options.progress = [&](uint64_t done) {
    if (++calls == 3) stop = true;
  };
  driver::ReferenceCache cache;
  const CaseResult r = driver::RunCase(spec, options, cache);
  EXPECT_FALSE(r.complete);
  EXPECT_GT(r.stats.overall.count(), 0u);
  EXPECT_LT(r.stats.overall.count(), 100000u);
}

}  // namespace
}  // namespace fusediff
