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
  // Samples a documented-behaviour ledger entry explains fail the case (`run --strict`: for users who must ship on
  // the CPUs where the library computes that way); by default they are counted and listed, not failing.
  bool documented_behaviour_fails = false;
  friend bool operator==(const Tolerance&, const Tolerance&) = default;
};

// Default tolerance of a case: its backend's (model/backend.h); InputError where no registered backend offers its path.
Tolerance default_tolerance(const CaseSpec& spec);
// The built-in backend's tables' default tolerance for an activation (table in tolerance.cpp, measurements in
// docs/tolerances.md).
Tolerance builtin_table_tolerance(TableKind table, ActivationKind activation);

// Default tolerance of a piecewise-linear table with `segments` segments over an intermediate of
// `intermediate_bits` (8 or 16) bits: the bound `fusediff table generate` meets for every activation at that
// segment count (measurements in docs/tolerances.md). Counts between the measured ones take the bound of the
// next smaller measured count; fewer segments than the smallest measured count get no default (nullopt).
std::optional<Tolerance> default_pwl_tolerance(int32_t intermediate_bits, size_t segments);

// Empty string when `stats` meets `tol`; otherwise why not (first violated bound).
std::string check_tolerance(const ErrorStats& stats, const Tolerance& tol);

}  // namespace fusediff
