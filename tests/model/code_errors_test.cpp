#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "fusediff/model/code_errors.h"

namespace fusediff {
namespace {

TEST(CodeErrors, RangesIncludeExactSamplesSeenBeforeOrAfter) {
  CodeErrors codes(-128, 256);
  codes.add(-5, 0);
  codes.add(-5, 2);   // exact first, then +2: range [0, 2]
  codes.add(7, -1);
  codes.add(7, 0);    // -1 then exact: range [-1, 0]
  codes.add(9, 0);    // exact only: covered, no entry
  EXPECT_EQ(codes.covered_count(), 3u);
  EXPECT_TRUE(codes.covered(9));
  EXPECT_FALSE(codes.covered(10));
  EXPECT_EQ(codes.nonzero().at(-5), (CodeErrors::Range{0, 2}));
  EXPECT_EQ(codes.nonzero().at(7), (CodeErrors::Range{-1, 0}));
  EXPECT_EQ(codes.nonzero().count(9), 0u);
}

// Splitting a sample stream between two parts and merging gives what one part adding everything gives.
RC_GTEST_PROP(CodeErrors, MergeOfPartsEqualsTheWhole, (const std::vector<std::pair<int8_t, int8_t>>& samples)) {
  CodeErrors whole(-128, 256), even(-128, 256), odd(-128, 256);
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto [code, error] = samples[i];
    const int64_t e = error % 3;
    whole.add(code, e);
    (i % 2 ? odd : even).add(code, e);
  }
  even.merge(odd);
  RC_ASSERT(even == whole);
}

}  // namespace
}  // namespace fusediff
