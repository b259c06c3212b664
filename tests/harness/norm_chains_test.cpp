// conv2d+act+batchnorm and conv2d+mul+add+act through the driver: the built-in path kept whole matches the reference
// exactly (tolerance 0) on the generators' draws for any seed; the BatchNorm fold across the activation and the
// mul+add affine are measurements; a shrunk counterexample of each new mutant replays with its stage operands.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/mutant_search.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/mutants.h"
#include "../support/any_seed_property.h"
#include "../support/pattern_cases.h"

namespace fusediff {
namespace {

std::vector<CaseSpec> NewPatternCases(size_t samples) {
  return test_support::CasesOfPatterns({"conv2d+act+batchnorm", "conv2d+mul+add+act"}, samples);
}

RC_GTEST_PROP(NormChains, KeptWholeMatchesTheReferenceExactlyForAnySeed, ()) {
  static const std::vector<CaseSpec> cases = NewPatternCases(300);
  static driver::ReferenceCache cache;
  test_support::CheckAnyCaseOnAnySeed(cases, cache);
}

TEST(NormChains, TheSuiteJudgesTheKeptPathsAndMeasuresTheSkippingFusions) {
  size_t kept = 0, measured = 0;
  for (const CaseSpec& spec : NewPatternCases(1000)) {
    SCOPED_TRACE(spec.name);
    if (spec.fusion == Fusion::keep_all) {
      EXPECT_EQ(spec.comparison, Comparison::same_convention);
      ++kept;
    } else {
      EXPECT_EQ(spec.comparison, Comparison::cross_convention);
      EXPECT_TRUE(spec.fusion == Fusion::fold || spec.fusion == Fusion::mul_add_affine);
      ++measured;
    }
  }
  EXPECT_EQ(kept, 12u);     // --pattern: batchnorm x 3 activations; mul (tflite, onnx_spec, tflite per channel) x 3
  EXPECT_EQ(measured, 6u);  // the fold x 3; the affine x 3
}

TEST(NormChains, EachNewMutantIsDetectedShrunkToOneElementAndReplays) {
  driver::MutantSearchOptions options;
  options.seeds = 3;
  for (Mutant m : {Mutant::bn_fold_across_activation, Mutant::mul_skip_output_rounding,
                   Mutant::mul_ignores_input_zero_point}) {
    SCOPED_TRACE(std::string(to_string(m)));
    const driver::MutantReport r = driver::EvaluateMutant(m, options);
    ASSERT_TRUE(r.detected);
    ASSERT_TRUE(r.shrunk.has_value());
    EXPECT_EQ(pattern_output_geometry(r.shrunk->spec.pattern, r.shrunk->sample.conv).elements(), 1u);
    EXPECT_NE(r.replay.find(m == Mutant::bn_fold_across_activation ? ";bng=" : ";mulc="), std::string::npos) << r.replay;
    const ReplayTrace t = driver::Replay(parse_replay(r.replay));
    EXPECT_EQ(t.y_reference, r.shrunk->y_reference);
    EXPECT_EQ(t.y_fused, r.shrunk->y_fused);
    EXPECT_NE(t.y_reference, t.y_fused);
  }
}

}  // namespace
}  // namespace fusediff
