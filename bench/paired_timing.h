#pragma once
// Two paths timed over the same cases, end to end through driver::RunCase: per case the best time of each side over
// the rounds, the two sides alternating case by case (and which goes first, round by round), so that a change in
// the machine's load between rounds touches both alike. Used by plugin_abi_cost and subprocess_cost.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "fusediff/driver/driver.h"

namespace fusediff::bench {

struct PairedRate {
  double a = 0, b = 0;  // samples/s: the samples of every case over the sum of its best times
  double overhead() const { return a / b - 1; }  // b's cost over a's
};

// One case on one side: the case's spec (its draws) and the options that pick the side's path.
using SideCase = std::function<std::pair<CaseSpec, driver::RunOptions>(size_t index, bool a_side)>;

inline PairedRate TimePaired(size_t cases, int rounds, const SideCase& side_case, const char* tool) {
  driver::ReferenceCache cache;
  const auto time_case = [&](size_t i, bool a_side) {
    const auto [spec, options] = side_case(i, a_side);
    const auto start = std::chrono::steady_clock::now();
    const CaseResult r = driver::RunCase(spec, options, cache);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r.verdict != Verdict::pass) {
      std::fprintf(stderr, "%s: case %s did not pass (%s)\n", tool, spec.name.c_str(), r.reason.c_str());
      std::exit(1);
    }
    return std::pair{seconds, compared_samples(r)};
  };
  for (size_t i = 0; i < cases; ++i) {  // the reference tables (and a child, if any) built outside the timings
    (void)time_case(i, true);
    (void)time_case(i, false);
  }
  std::vector<double> best_a(cases, 1e300), best_b(cases, 1e300);
  uint64_t samples = 0;
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < cases; ++i) {
      for (int side = 0; side < 2; ++side) {
        const bool a_side = (side + r) % 2 == 0;
        const auto [seconds, compared] = time_case(i, a_side);
        double& best = a_side ? best_a[i] : best_b[i];
        best = std::min(best, seconds);
        if (r == 0 && a_side) samples += compared;
      }
    }
  }
  double seconds_a = 0, seconds_b = 0;
  for (size_t i = 0; i < cases; ++i) {
    seconds_a += best_a[i];
    seconds_b += best_b[i];
  }
  return {double(samples) / seconds_a, double(samples) / seconds_b};
}

}  // namespace fusediff::bench
