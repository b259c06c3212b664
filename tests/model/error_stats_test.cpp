#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fusediff/model/error_stats.h"

namespace fusediff {
namespace {

TEST(ErrorStats, KnownAnswers) {
  ErrorStats s;
  for (int64_t e : {0, 0, 0, 0, 0, 0, 1, -1, 2, -3}) s.add(e);
  EXPECT_EQ(s.count(), 10u);
  EXPECT_EQ(s.min(), -3);
  EXPECT_EQ(s.max(), 2);
  EXPECT_EQ(s.max_abs(), 3);
  EXPECT_DOUBLE_EQ(s.mean(), -0.1);
  // population variance: (1 + 1 + 4 + 9)/10 - 0.01 = 1.49
  EXPECT_NEAR(s.stddev(), std::sqrt(1.49), 1e-15);
  EXPECT_DOUBLE_EQ(s.exact_fraction(), 0.6);
  // |e| sorted: 0 0 0 0 0 0 1 1 2 3; nearest rank ceil(0.5*10)=5 -> 0; ceil(0.9*10)=9 -> 2; ceil(.99*10)=10 -> 3
  EXPECT_EQ(s.p50(), 0);
  EXPECT_EQ(s.p90(), 2);
  EXPECT_EQ(s.p99(), 3);
  EXPECT_EQ(s.p999(), 3);
  EXPECT_EQ(s.abs_percentile(70, 100), 1);
}

TEST(ErrorStats, EmptyIsWellDefined) {
  ErrorStats s;
  EXPECT_EQ(s.count(), 0u);
  EXPECT_EQ(s.max_abs(), 0);
  EXPECT_EQ(s.p99(), 0);
  EXPECT_EQ(s.mean(), 0.0);
  EXPECT_EQ(s.exact_fraction(), 1.0);
}

RC_GTEST_PROP(ErrorStats, MergingAnySplitEqualsTheWhole, (std::vector<int8_t> errors, size_t cut)) {
  ErrorStats whole, left, right;
  const size_t split = errors.empty() ? 0 : cut % (errors.size() + 1);
  for (size_t i = 0; i < errors.size(); ++i) {
    whole.add(errors[i]);
    (i < split ? left : right).add(errors[i]);
  }
  RC_CLASSIFY(split == 0 || split == errors.size(), "one side empty");
  left.merge(right);
  RC_ASSERT(left == whole);
  RC_ASSERT(left.p99() == whole.p99());
  RC_ASSERT(left.mean() == whole.mean());
  RC_ASSERT(left.stddev() == whole.stddev());
}

RC_GTEST_PROP(ErrorStats, MomentsMatchDirectComputation, (std::vector<int16_t> errors)) {
  RC_PRE(!errors.empty());
  ErrorStats s;
  long double sum = 0;
  for (int16_t e : errors) {
    s.add(e);
    sum += e;
  }
  const long double mean = sum / errors.size();
  long double sq = 0;
  for (int16_t e : errors) sq += (e - mean) * (e - mean);
  RC_ASSERT(std::abs(s.mean() - static_cast<double>(mean)) <= 1e-9 * (1 + std::abs(static_cast<double>(mean))));
  RC_ASSERT(std::abs(s.stddev() - std::sqrt(static_cast<double>(sq / errors.size()))) <= 1e-9 * (1 + s.stddev()));
  // Nearest-rank percentile: the ceil(n*p)-th smallest |e|.
  std::vector<int64_t> abs_errors;
  for (int16_t e : errors) abs_errors.push_back(std::abs(int64_t{e}));
  std::sort(abs_errors.begin(), abs_errors.end());
  const size_t rank = (errors.size() * 99 + 99) / 100;
  RC_ASSERT(s.p99() == abs_errors[rank - 1]);
}

TEST(WorstCases, KeepsLargestAbsErrorThenSmallestIndex) {
  WorstCases w(3);
  w.offer(WorstCase{5, 1});
  w.offer(WorstCase{2, -4});
  w.offer(WorstCase{9, 4});
  w.offer(WorstCase{1, 2});
  w.offer(WorstCase{0, -1});
  ASSERT_EQ(w.sorted().size(), 3u);
  EXPECT_EQ(w.sorted()[0].sample, 2u);  // |-4|, index 2 before index 9
  EXPECT_EQ(w.sorted()[1].sample, 9u);
  EXPECT_EQ(w.sorted()[2].sample, 1u);  // |2|
}

RC_GTEST_PROP(WorstCases, MergeEqualsOfferingEverything, (std::vector<int8_t> errors, size_t cut)) {
  WorstCases whole(5), left(5), right(5);
  const size_t split = errors.empty() ? 0 : cut % (errors.size() + 1);
  for (size_t i = 0; i < errors.size(); ++i) {
    const WorstCase c{i, errors[i]};
    whole.offer(c);
    (i < split ? left : right).offer(c);
  }
  left.merge(right);
  RC_ASSERT(left.sorted() == whole.sorted());
}

TEST(CaseStats, RegionsAndBulk) {
  CaseStats s;
  s.add(WorstCase{0, 1, 0, 0, 0, 1, region_bit(Region::knee) | region_bit(Region::saturation)});
  s.add(WorstCase{1, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(s.by_region[size_t(Region::knee)].count(), 1u);
  EXPECT_EQ(s.by_region[size_t(Region::saturation)].count(), 1u);
  EXPECT_EQ(s.by_region[size_t(Region::bulk)].count(), 1u);
  EXPECT_EQ(s.by_region[size_t(Region::quant_boundary)].count(), 0u);
  EXPECT_EQ(s.worst.sorted().size(), 1u);  // only non-zero errors are worst cases
}

}  // namespace
}  // namespace fusediff
