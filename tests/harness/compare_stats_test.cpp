// compare's tests over draws (reports/src/compare_stats.h): the cluster-robust estimate by hand, Welch's p-value,
// Holm's procedure, the chance a baseline missed a larger error, and on simulated clustered runs the false-alarm
// rate at the level and the power against a real shift.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "compare_stats.h"

namespace fusediff::reports {
namespace {

DrawTally Draw(uint64_t index, uint64_t exact, uint64_t inexact) {
  DrawTally d;
  d.draw = index;
  d.bins[2] = exact;
  d.bins[3] = inexact;
  d.sum = static_cast<int64_t>(inexact);
  d.max_abs = inexact > 0 ? 1 : 0;
  return d;
}

TEST(CompareStats, RatioOverDrawsWithItsClusterRobustVariance) {
  // y = exact samples: 2 of 10, 8 of 20, 0 of 10 -> r = 10/40; residuals -0.5, 3, -2.5 -> V = 3/2 * 15.5 / 40^2.
  const std::vector<DrawTally> draws = {Draw(0, 2, 8), Draw(1, 8, 12), Draw(2, 0, 10)};
  const DrawEstimate e = EstimateOverDraws(draws, [](const DrawTally& d) { return static_cast<double>(d.bins[2]); });
  EXPECT_DOUBLE_EQ(e.value, 0.25);
  EXPECT_DOUBLE_EQ(e.variance, 1.5 * 15.5 / 1600);
  EXPECT_EQ(e.draws, 3u);
}

TEST(CompareStats, WelchPValues) {
  const DrawEstimate b{0.5, 0.01, 11}, c{0.3, 0.01, 11};
  // t = -0.2 / sqrt(0.02), df = 0.02^2 / (2 * 0.01^2 / 10) = 20: P(T_20 <= -1.41421) = 0.08634.
  EXPECT_NEAR(WelchPValue(b, c, Tail::lower), 0.08634, 2e-4);
  EXPECT_NEAR(WelchPValue(b, c, Tail::upper), 1 - 0.08634, 2e-4);
  EXPECT_NEAR(WelchPValue(b, c, Tail::both), 2 * 0.08634, 4e-4);
  EXPECT_EQ(WelchPValue(b, b, Tail::both), WelchPValue(b, b, Tail::both));
  EXPECT_EQ(WelchPValue(DrawEstimate{1, 0, 20}, DrawEstimate{1, 0, 20}, Tail::lower), 1.0);  // identical, no variance
  EXPECT_EQ(WelchPValue(DrawEstimate{1, 0, 20}, DrawEstimate{0.9, 0, 20}, Tail::lower), 0.0);
  EXPECT_EQ(WelchPValue(DrawEstimate{1, 0, 20}, DrawEstimate{0.9, 0, 20}, Tail::upper), 1.0);
}

TEST(CompareStats, HolmStepsDown) {
  const std::vector<bool> r = HolmReject({0.001, 0.04, 0.03, 0.2}, 0.05);
  EXPECT_EQ(r, (std::vector<bool>{true, false, false, false}));  // 0.03 > 0.05 / 3 stops it
  EXPECT_EQ(HolmReject({0.01, 0.02}, 0.05), (std::vector<bool>{true, true}));  // 0.01 <= 0.025, 0.02 <= 0.05
  EXPECT_TRUE(HolmReject({}, 0.05).empty());
}

TEST(CompareStats, UnseenProbability) {
  EXPECT_DOUBLE_EQ(UnseenProbability(10, 100, 50), std::pow(0.9, 50));
  EXPECT_DOUBLE_EQ(UnseenProbability(0, 100, 50), 1.0);
  EXPECT_DOUBLE_EQ(UnseenProbability(100, 100, 1), 0.0);
}

// A run of `draws` draws, each of 20..200 samples sharing one exactness p_d = base + N(0, 0.1) clipped: the samples
// of a draw are correlated, as a conv's outputs are.
std::vector<DrawTally> SimulatedRun(std::mt19937_64& rng, double base, size_t draws) {
  std::uniform_int_distribution<uint64_t> size(20, 200);
  std::normal_distribution<double> spread(0, 0.1);
  std::vector<DrawTally> run;
  for (size_t d = 0; d < draws; ++d) {
    const uint64_t n = size(rng);
    const double p = std::clamp(base + spread(rng), 0.0, 1.0);
    std::binomial_distribution<uint64_t> exact(n, p);
    const uint64_t e = exact(rng);
    run.push_back(Draw(d, e, n - e));
  }
  return run;
}

TEST(CompareStats, FalseAlarmsStayNearTheLevelAndARealShiftIsFound) {
  std::mt19937_64 rng(24);  // fixed: the test is deterministic
  const auto exact = [](const DrawTally& d) { return static_cast<double>(d.bins[2]); };
  int false_alarms = 0, found = 0;
  const int pairs = 400;
  for (int i = 0; i < pairs; ++i) {
    const DrawEstimate b = EstimateOverDraws(SimulatedRun(rng, 0.7, 150), exact);
    const DrawEstimate same = EstimateOverDraws(SimulatedRun(rng, 0.7, 150), exact);
    const DrawEstimate shifted = EstimateOverDraws(SimulatedRun(rng, 0.66, 150), exact);
    false_alarms += WelchPValue(b, same, Tail::lower) <= 0.05;
    found += WelchPValue(b, shifted, Tail::lower) <= 0.05;
  }
  // One-sided at 0.05: about 20 of 400 by chance; a per-sample binomial test would flag far more (the draws'
  // spread of 0.1 dwarfs the binomial one).
  EXPECT_GE(false_alarms, 6);
  EXPECT_LE(false_alarms, 36);
  EXPECT_GE(found, pairs * 8 / 10);  // a 4-point drop in exact % over 150 draws
}

}  // namespace
}  // namespace fusediff::reports
