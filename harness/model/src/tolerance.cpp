#include "fusediff/model/tolerance.h"

#include "fusediff/model/backend.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace fusediff {

namespace {
struct ToleranceRow {
  TableKind table;
  ActivationKind activation;
  int64_t max_abs_lsb;
};

// lut_interp bounds, in output LSBs: the largest |e| that TFLite-generated 513-knot int16 tables show over every
// int16 code, maximised over intermediate domains D in {2, 4, 6, 8, 12, 16} and output ranges of 1, 1.25, 2 and 4
// times max|f| on [-D, D] (scripts/measure_lut_interp_tolerance.py; docs/tolerances.md). The error grows with
// su/sy because each 128-code step of the lookup spans 65535/512 codes of the table: tanh at su/sy = 16 is 13.
constexpr ToleranceRow kLutInterpRows[] = {
    {TableKind::lut_interp, ActivationKind::relu, 1},       {TableKind::lut_interp, ActivationKind::relu6, 2},
    {TableKind::lut_interp, ActivationKind::leaky_relu, 1}, {TableKind::lut_interp, ActivationKind::hard_sigmoid, 2},
    {TableKind::lut_interp, ActivationKind::hard_swish, 2}, {TableKind::lut_interp, ActivationKind::gelu_erf, 2},
    {TableKind::lut_interp, ActivationKind::gelu_tanh, 2},  {TableKind::lut_interp, ActivationKind::sigmoid, 3},
    {TableKind::lut_interp, ActivationKind::tanh, 13},      {TableKind::lut_interp, ActivationKind::silu, 2},
    {TableKind::lut_interp, ActivationKind::elu, 2},        {TableKind::lut_interp, ActivationKind::softplus, 2},
    {TableKind::lut_interp, ActivationKind::mish, 2},
};
}  // namespace

Tolerance default_tolerance(const CaseSpec& spec) { return BackendOf(spec).DefaultTolerance(spec); }

Tolerance builtin_table_tolerance(TableKind table, ActivationKind activation) {
  // An 8-bit table has one entry per code, so it can be exact: any wrong entry is a failure.
  if (table == TableKind::lut) return Tolerance{0, std::nullopt, std::nullopt};
  for (const ToleranceRow& row : kLutInterpRows) {
    if (row.table == table && row.activation == activation) return Tolerance{row.max_abs_lsb, std::nullopt, std::nullopt};
  }
  return Tolerance{0, std::nullopt, std::nullopt};
}

namespace {
// pwl bounds, in output LSBs, by intermediate width and segment count: the largest |e| against the exact reference
// that `fusediff table generate --kind pwl` tables show over every intermediate code, maximised over every
// activation at its default-suite quantization (scripts/measure_pwl_tolerance.sh; docs/tolerances.md).
struct PwlRow {
  int32_t bits;
  size_t segments;
  int64_t max_abs_lsb;
};
constexpr PwlRow kPwlRows[] = {
    // measured max |e| (worst activation): 8-bit 8 -> 2 (sigmoid), 16/32/64 -> 1 (relu6: an integer offset cannot
    // carry the fractional start of a linear piece); 16-bit 16 -> 90, 32 -> 22, 64 -> 6, 128 -> 2 (tanh each time)
    {8, 8, 2},   {8, 16, 1},  {8, 32, 1},  {8, 64, 1},
    {16, 16, 90}, {16, 32, 22}, {16, 64, 6}, {16, 128, 2},
};
}  // namespace

std::optional<Tolerance> default_pwl_tolerance(int32_t intermediate_bits, size_t segments) {
  const PwlRow* chosen = nullptr;
  for (const PwlRow& row : kPwlRows) {  // rows ascend by segment count within a width
    if (row.bits == intermediate_bits && row.segments <= segments) chosen = &row;
  }
  if (chosen == nullptr) return std::nullopt;
  return Tolerance{chosen->max_abs_lsb, std::nullopt, std::nullopt};
}

std::string check_tolerance(const ErrorStats& stats, const Tolerance& tol) {
  char buffer[160];
  if (stats.max_abs() > tol.max_abs_lsb) {
    std::snprintf(buffer, sizeof buffer, "max |e| %lld LSB > %lld", static_cast<long long>(stats.max_abs()),
                  static_cast<long long>(tol.max_abs_lsb));
    return buffer;
  }
  if (tol.min_exact_fraction && stats.exact_fraction() < *tol.min_exact_fraction) {
    std::snprintf(buffer, sizeof buffer, "exact fraction %.6f < %.6f", stats.exact_fraction(), *tol.min_exact_fraction);
    return buffer;
  }
  if (tol.max_abs_mean_lsb && std::abs(stats.mean()) > *tol.max_abs_mean_lsb) {
    std::snprintf(buffer, sizeof buffer, "|bias| %.6f LSB > %.6f", std::abs(stats.mean()), *tol.max_abs_mean_lsb);
    return buffer;
  }
  return {};
}

}  // namespace fusediff
