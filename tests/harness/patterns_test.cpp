// Patterns end to end through the driver: every legal same-convention fusion of the default suite passes at
// tolerance 0; every boundary-skipping fusion is a labelled cross-convention measurement; a worst sample replays
// bit for bit; results are identical for any thread count; a pattern case survives the results JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff {
namespace {

std::vector<CaseSpec> SmallPatternSuite() {
  driver::SuiteOptions options;
  options.samples = 3000;
  return driver::PatternCases(options, std::nullopt);
}

TEST(Patterns, DefaultSuiteCoversEveryPatternAndFusion) {
  std::set<std::string> names;
  std::set<std::string> fusions;
  for (const CaseSpec& spec : SmallPatternSuite()) {
    names.insert(pattern_name(spec.pattern));
    fusions.insert(pattern_name(spec.pattern) + "/" + std::string(to_string(spec.fusion)));
  }
  for (const char* p : {"conv2d+add+act", "conv2d+act+maxpool", "conv2d+act+avgpool", "fc+act", "fc+fc", "fc+act+fc",
                        "conv2d+act+batchnorm", "conv2d+mul+add+act", "fc+layernorm+act", "fc+add+layernorm"}) {
    EXPECT_TRUE(names.count(p)) << p;
  }
  for (const char* f : {"conv2d+add+act/add_in_accumulator", "conv2d+act+maxpool/pool_first",
                        "conv2d+act+avgpool/pool_first", "fc+fc/fold", "conv2d+act+batchnorm/fold",
                        "conv2d+mul+add+act/mul_add_affine", "fc+layernorm+act/norm_other_order"}) {
    EXPECT_TRUE(fusions.count(f)) << f;
  }
  // The built suite includes them beside conv2d+act.
  driver::SuiteOptions options;
  std::set<std::string> all;
  for (const CaseSpec& spec : driver::BuildSuite(options)) all.insert(pattern_name(spec.pattern));
  EXPECT_EQ(all.size(), 12u);  // conv2d+act, the ten of PatternCases, conv2d+batchnorm+act
}

TEST(Patterns, LegalFusionsPassExactlyAndSkippingOnesAreMeasuredWithoutVerdict) {
  driver::ReferenceCache cache;
  size_t verdicts = 0, measurements = 0;
  for (const CaseSpec& spec : SmallPatternSuite()) {
    const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
    SCOPED_TRACE(spec.name);
    ASSERT_NE(r.verdict, Verdict::unsupported) << r.reason;
    ASSERT_GT(r.stats.overall.count(), 0u);
    if (spec.comparison == Comparison::same_convention) {
      EXPECT_EQ(r.tolerance.max_abs_lsb, 0);
      EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
      EXPECT_EQ(r.stats.overall.max_abs(), 0);
      ++verdicts;
    } else {
      EXPECT_EQ(r.verdict, Verdict::cross_convention);
      EXPECT_NE(r.fused_convention, r.reference_convention);
      EXPECT_NE(r.fused_convention.find("fusion " + std::string(to_string(spec.fusion))), std::string::npos);
      ++measurements;
    }
  }
  EXPECT_GE(verdicts, 30u);
  EXPECT_GE(measurements, 8u);
}

TEST(Patterns, MaxPoolBeforeANonMonotoneActivationMovesTheAnswerAndItsWorstSampleReplays) {
  driver::SuiteOptions options;
  options.samples = 5000;
  options.activation = ActivationKind::gelu_erf;
  driver::ReferenceCache cache;
  bool seen = false;
  for (const CaseSpec& spec : driver::PatternCases(options, std::string("conv2d+act+maxpool"))) {
    if (spec.fusion != Fusion::pool_first) continue;
    seen = true;
    EXPECT_EQ(spec.comparison, Comparison::cross_convention);  // illegal: gelu dips below its value at -inf
    const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
    ASSERT_GT(r.stats.overall.max_abs(), 0);
    ASSERT_FALSE(r.worst.empty());
    const ReplayTrace t = driver::Replay(parse_replay(r.worst.front().replay));
    EXPECT_EQ(t.y_reference, r.worst.front().sample.y_ref);
    EXPECT_EQ(t.y_fused, r.worst.front().sample.y_fused);
    EXPECT_EQ(t.error, r.worst.front().sample.error);
  }
  EXPECT_TRUE(seen);
}

TEST(Patterns, ThreadsDoNotChangeResultsAndJsonRoundTrips) {
  driver::SuiteOptions options;
  options.samples = 4000;
  options.activation = ActivationKind::sigmoid;
  for (const char* pattern : {"conv2d+add+act", "conv2d+act+avgpool", "fc+act"}) {
    for (const CaseSpec& spec : driver::PatternCases(options, std::string(pattern))) {
      driver::ReferenceCache cache;
      driver::RunOptions one;
      const CaseResult base = driver::RunCase(spec, one, cache);
      driver::RunOptions two = one;
      two.threads = 2;
      const CaseResult other = driver::RunCase(spec, two, cache);
      EXPECT_EQ(other.stats.overall, base.stats.overall) << spec.name;
      EXPECT_EQ(other.per_code, base.per_code) << spec.name;
      RunResult run;
      run.cases.push_back(base);
      const RunResult back = reports::FromJson(nlohmann::json::parse(reports::ToJson(run).dump()), "test.json");
      ASSERT_EQ(back.cases.size(), 1u);
      EXPECT_EQ(back.cases[0].spec.pattern, spec.pattern) << spec.name;
      EXPECT_EQ(back.cases[0].spec.fusion, spec.fusion) << spec.name;
      EXPECT_EQ(back.cases[0].per_code, base.per_code) << spec.name;
    }
  }
}

TEST(Patterns, UnknownPatternIsBadInput) {
  driver::SuiteOptions options;
  options.pattern = "conv2d+gelu";
  EXPECT_THROW(driver::BuildSuite(options), InputError);
}

}  // namespace
}  // namespace fusediff
