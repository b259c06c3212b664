#pragma once
// The tests `fusediff compare` runs where two results hold different samples (docs/reports.md, "Nightly
// regression"). Samples within a draw are correlated, draws are independent: every statistic is a ratio over draws,
// sum(y_d) / sum(n_d), with the cluster-robust (CR1) variance
//   V = D / (D - 1) * sum_d (y_d - r n_d)^2 / (sum_d n_d)^2,
// and two runs are compared by Welch's t statistic with Satterthwaite's degrees of freedom. Every p-value of a
// comparison then goes through Holm's step-down procedure at the family-wise level.
#include <cstdint>
#include <functional>
#include <vector>

#include "fusediff/model/draw_tallies.h"

namespace fusediff::reports {

struct DrawEstimate {
  double value = 0;     // sum(y_d) / sum(n_d)
  double variance = 0;  // CR1
  uint64_t draws = 0;
};
DrawEstimate EstimateOverDraws(const std::vector<DrawTally>& draws, const std::function<double(const DrawTally&)>& y);

enum class Tail { lower, upper, both };  // H1: current < baseline, current > baseline, either
// p-value of current against baseline; 1 when both are equal and without variance, 0 when they differ without any.
double WelchPValue(const DrawEstimate& baseline, const DrawEstimate& current, Tail tail);

// The chance that `baseline_draws` draws would all stay at or below the baseline's max |e| if each exceeded it as
// often as the current draws do (`exceeding` of `current_draws`): small only where the baseline had enough draws
// to have seen a larger error.
double UnseenProbability(uint64_t exceeding, uint64_t current_draws, uint64_t baseline_draws);

// Holm's step-down procedure: which of `p` are rejected at family-wise level `alpha`.
std::vector<bool> HolmReject(const std::vector<double>& p, double alpha);

}  // namespace fusediff::reports
