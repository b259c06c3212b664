#pragma once
// Tolerances are data: a verdict compares statistics against these bounds.
#include <cstdint>
#include <optional>
#include <string>

#include "fusediff/model/activation.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/error_stats.h"

namespace fusediff {

struct Tolerance {
  int64_t max_abs_lsb = 0;
  std::optional<double> min_exact_fraction;
  std::optional<double> max_abs_mean_lsb;
  friend bool operator==(const Tolerance&, const Tolerance&) = default;
};

// Default tolerance of a fused kind for an activation (table in tolerance.cpp, measurements in
// docs/tolerances.md).
Tolerance default_tolerance(FusedKind fused, ActivationKind activation);

// Empty string when `stats` meets `tol`; otherwise why not (first violated bound).
std::string check_tolerance(const ErrorStats& stats, const Tolerance& tol);

}  // namespace fusediff
