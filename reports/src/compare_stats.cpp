#include "compare_stats.h"

#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fusediff::reports {

DrawEstimate EstimateOverDraws(const std::vector<DrawTally>& draws, const std::function<double(const DrawTally&)>& y) {
  DrawEstimate e;
  e.draws = draws.size();
  double n = 0, sum = 0;
  for (const DrawTally& d : draws) {
    n += static_cast<double>(d.count());
    sum += y(d);
  }
  if (n == 0) return e;
  e.value = sum / n;
  if (draws.size() < 2) return e;
  double residuals = 0;
  for (const DrawTally& d : draws) {
    const double r = y(d) - e.value * static_cast<double>(d.count());
    residuals += r * r;
  }
  const double D = static_cast<double>(draws.size());
  e.variance = D / (D - 1) * residuals / (n * n);
  return e;
}

double WelchPValue(const DrawEstimate& baseline, const DrawEstimate& current, Tail tail) {
  const double diff = current.value - baseline.value;
  const double variance = baseline.variance + current.variance;
  if (variance <= 0) {
    if (diff == 0) return 1;
    const bool direction = tail == Tail::both || (tail == Tail::lower ? diff < 0 : diff > 0);
    return direction ? 0 : 1;
  }
  const auto df_part = [](const DrawEstimate& e) {
    return e.draws > 1 ? e.variance * e.variance / static_cast<double>(e.draws - 1) : 0.0;
  };
  const double df = std::max(1.0, variance * variance / std::max(df_part(baseline) + df_part(current), 1e-300));
  const boost::math::students_t t(df);
  const double stat = diff / std::sqrt(variance);
  switch (tail) {
    case Tail::lower: return boost::math::cdf(t, stat);
    case Tail::upper: return boost::math::cdf(boost::math::complement(t, stat));
    case Tail::both: return 2 * boost::math::cdf(boost::math::complement(t, std::abs(stat)));
  }
  return 1;
}

double UnseenProbability(uint64_t exceeding, uint64_t current_draws, uint64_t baseline_draws) {
  if (current_draws == 0) return 1;
  const double rate = static_cast<double>(exceeding) / static_cast<double>(current_draws);
  return std::pow(1 - rate, static_cast<double>(baseline_draws));
}

std::vector<bool> HolmReject(const std::vector<double>& p, double alpha) {
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<bool> reject(p.size(), false);
  for (size_t rank = 0; rank < order.size(); ++rank) {
    if (p[order[rank]] > alpha / static_cast<double>(order.size() - rank)) break;
    reject[order[rank]] = true;
  }
  return reject;
}

}  // namespace fusediff::reports
