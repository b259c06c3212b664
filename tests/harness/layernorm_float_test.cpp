// The float layernorm (model/pattern.h Stage::ln_float_out; docs/summation-orders.md, "The float layernorm and r"):
// fc+add+layernorm whose output is y itself in binary32. Its same-convention cases pass at 0 ulps; another two-pass
// order is a measurement reported as r = |dy| / bound, within 1; a Welford order has no bound and says why; a wrong
// kernel leaves the bound; the r figures survive the results file and a shard merge; bad declarations are refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/mutants.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reports/reports.h"
#include "../support/pattern_cases.h"

namespace fusediff {
namespace {

std::vector<CaseSpec> FloatCases(size_t samples) {
  std::vector<CaseSpec> cases;
  for (CaseSpec& spec : test_support::CasesOfPatterns({"fc+add+layernorm"}, samples)) {
    if (find_stage(spec.pattern, StageKind::layernorm)->ln_float_out) cases.push_back(spec);
  }
  return cases;
}

const CaseSpec& Named(const std::vector<CaseSpec>& cases, const std::string& suffix) {
  for (const CaseSpec& spec : cases) {
    if (spec.name.size() >= suffix.size() && spec.name.compare(spec.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return spec;
    }
  }
  throw std::logic_error("no float layernorm case ending in " + suffix);
}

TEST(LayerNormFloat, SameConventionPassesAtZeroUlpsAndOtherOrdersStayWithinTheBound) {
  const std::vector<CaseSpec> cases = FloatCases(20000);
  ASSERT_EQ(cases.size(), 6u);
  driver::ReferenceCache cache;
  size_t judged = 0, bounded = 0;
  for (const CaseSpec& spec : cases) {
    SCOPED_TRACE(spec.name);
    const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
    ASSERT_GT(r.stats.overall.count(), 0u);
    ASSERT_TRUE(r.bound_ratio);
    const BoundRatio& b = *r.bound_ratio;
    EXPECT_EQ(b.samples + b.unbounded, r.stats.overall.count());
    const Stage& ln = *find_stage(spec.pattern, StageKind::layernorm);
    if (spec.fusion == Fusion::keep_all) {
      EXPECT_EQ(spec.comparison, Comparison::same_convention);
      EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
      EXPECT_EQ(r.stats.overall.max_abs(), 0);
      EXPECT_EQ(b.max_r, 0.0);
      EXPECT_GT(b.samples, 0u);
      ++judged;
      continue;
    }
    EXPECT_EQ(r.verdict, Verdict::cross_convention);
    if (ln.ln_fused_order.stats == NormalizationStats::welford) {  // ort_short: outside the bound's class
      EXPECT_EQ(b.samples, 0u);
      EXPECT_NE(b.unbounded_reason.find("is welford"), std::string::npos) << b.unbounded_reason;
      continue;
    }
    EXPECT_GT(b.samples, 0u);
    EXPECT_EQ(b.over, 0u);
    EXPECT_LE(b.max_r, 1.0);
    EXPECT_GT(b.max_r, 0.0);  // the orders differ somewhere: r measures something
    EXPECT_GT(r.stats.overall.max_abs(), 0);
    ++bounded;
  }
  EXPECT_EQ(judged, 2u);   // ort, onednn_jit kept whole
  EXPECT_EQ(bounded, 3u);  // ort against onednn_jit, onednn_cpp, sequential
}

// A kernel that is not a two-pass evaluation of the declared arithmetic leaves the bound: each layernorm mutant (the
// one-pass variance, eps dropped or added after the square root, the mean over the wrong axis, the variance summed
// in bf16); each also fails the same-convention case.
TEST(LayerNormFloat, AWrongKernelLeavesTheBound) {
  const CaseSpec base = Named(FloatCases(20000), ".float.ort.keep_all");
  driver::ReferenceCache cache;
  for (Mutant m : {Mutant::ln_one_pass_variance, Mutant::ln_drop_eps, Mutant::ln_mean_wrong_axis,
                   Mutant::ln_eps_after_sqrt, Mutant::ln_bf16_variance}) {
    CaseSpec spec = base;
    spec.mutant = m;
    SCOPED_TRACE(std::string(to_string(m)));
    const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
    EXPECT_EQ(r.verdict, Verdict::fail);
    ASSERT_TRUE(r.bound_ratio);
    EXPECT_GT(r.bound_ratio->over, 0u);
    EXPECT_GT(r.bound_ratio->max_r, 1.0);
  }
}

// r is part of the results: written, read back equal, and merged across shards to the unsharded figures.
TEST(LayerNormFloat, RatioSurvivesTheResultsFileAndShardMerge) {
  const CaseSpec spec = Named(FloatCases(6000), ".float.ort.onednn_jit.norm_other_order");
  driver::ReferenceCache cache;
  const CaseResult whole = driver::RunCase(spec, driver::RunOptions{}, cache);
  ASSERT_TRUE(whole.bound_ratio);
  RunResult run;
  run.cases.push_back(whole);
  const RunResult back = reports::FromJson(nlohmann::json::parse(reports::ToJson(run).dump()), "test.json");
  ASSERT_EQ(back.cases.size(), 1u);
  ASSERT_TRUE(back.cases[0].bound_ratio);
  EXPECT_EQ(*back.cases[0].bound_ratio, *whole.bound_ratio);

  driver::RunOptions first, second;
  first.shard_count = second.shard_count = 2;
  second.shard_index = 1;
  CaseResult merged = driver::RunCase(spec, first, cache);
  merge_case_result(merged, driver::RunCase(spec, second, cache), 1);
  ASSERT_TRUE(merged.bound_ratio);
  EXPECT_EQ(*merged.bound_ratio, *whole.bound_ratio);

  // The stage's results field reads back, and a value other than "true" is refused naming it.
  std::string text = reports::ToJson(run).dump();
  EXPECT_TRUE(find_stage(back.cases[0].spec.pattern, StageKind::layernorm)->ln_float_out);
  const size_t at = text.find("\"float_out\":\"true\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "\"float_out\":\"yes\"");
  try {
    reports::FromJson(nlohmann::json::parse(text), "bad.json");
    ADD_FAILURE() << "float_out \"yes\" was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("float_out"), std::string::npos) << e.what();
  }
}

// The declaration is checked: a float output needs f32 arithmetic and binary32 or bf16, and must be the last stage.
TEST(LayerNormFloat, BadDeclarationsAreRefused) {
  CaseSpec spec = FloatCases(100).front();
  Stage& ln = spec.pattern.stages[1];  // fc+add+layernorm
  ASSERT_EQ(ln.kind, StageKind::layernorm);
  ln.ln_arithmetic = LayerNormArithmetic::tflite_int16;
  EXPECT_THROW(validate(spec.pattern, spec.convention), InputError);
  ln.ln_arithmetic = LayerNormArithmetic::f32;
  ln.ln_out_float = parse_float_boundary("f16", "test");
  EXPECT_THROW(validate(spec.pattern, spec.convention), InputError);
  ln.ln_out_float.reset();
  EXPECT_NO_THROW(validate(spec.pattern, spec.convention));

  Pattern chain = parse_pattern_name("fc+layernorm+act", "test");
  chain.stages[0].ln_float_out = true;
  try {
    validate(chain, spec.convention);
    ADD_FAILURE() << "a float layernorm before an activation was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("must be the pattern's last"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fusediff
