#pragma once
// The canonical table of a descriptor (the best table of the candidate's kind at its exact quantization, built
// against the exact reference) and the gate's code-by-code comparison with it (docs/tolerances.md).
#include <cstdint>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/model/gate_comparison.h"
#include "fusediff/model/results.h"
#include "fusediff/model/table.h"

namespace fusediff::driver {

// y_ref for every intermediate code (index u - qmin), from the exact reference.
std::vector<int32_t> ReferenceCodes(const Convention& convention, ReferenceCache& cache);

struct CanonicalTable {
  TableData table;
  std::string construction;
  std::vector<int32_t> errors;  // e_canonical(u) = y_canonical(u) - y_ref(u), index u - qmin
  std::vector<int32_t> reference;  // y_ref(u), index u - qmin
  bool exhaustive = true;       // pwl: every segment's minimax search ran to the end (fused::PwlLine)
};

// The canonical table for a candidate:
//   lut:        the correctly rounded table (y_ref itself; every error 0)
//   lut_interp: TFLite LUTPopulateInt16 at the descriptor's scales
//   pwl:        the candidate's own segment boundaries and shifts, per segment the exact minimax line
//               (fused::MinimaxPwlLine) against y_ref
CanonicalTable BuildCanonicalTable(const FusedOpDescriptor& descriptor, const TableData& candidate,
                                   ReferenceCache& cache);

// `table generate --kind pwl`: boundaries and shifts as fused::FitPwl places them, then per segment the minimax
// line against the exact reference; per segment its max |e| (exact, against y_ref).
struct MinimaxPwlTable {
  std::vector<PwlSegment> segments;
  std::vector<int64_t> segment_max_abs_error;
};
MinimaxPwlTable GenerateMinimaxPwl(const Convention& convention, int32_t segment_count, ReferenceCache& cache);

// The candidate's errors (cases[0]: the sweep over every code; a conv case after it) against the canonical
// table's, code by code: the runs where the candidate is worse by more than `slack` or better, and the rows
// (knots, segments, entries) that differ from the canonical table's and feed the worse codes. Each case's worst
// samples are then spread over those rows (SpreadWorst). With `judge` (relative mode) a case breaking a rule fails,
// its reason naming the rule:
//   sweep: every code |e| <= |e_canonical| + slack, and |bias| <= |bias_canonical| + kBiasSlackLsb
//          (max |e| <= canonical max + slack is the case's tolerance, checked by the run itself)
//   conv:  every code a sample landed on, by the same per-code rule.
inline constexpr double kBiasSlackLsb = 0.1;
CanonicalComparison CompareWithCanonical(std::vector<CaseResult>& cases, const CanonicalTable& canonical,
                                         const TableData& candidate, int64_t slack, const std::string& slack_source,
                                         bool judge, uint64_t seed);

// The gate keeps its cases' kGateWorstPool worst samples while it runs and shows kGateWorstShown of them, spread
// over the table's rows: first the worst sample of each worse row, then the next of each, and so on, so that three
// bad knots all appear rather than the top samples of the worst one.
inline constexpr size_t kGateWorstPool = 1024;
inline constexpr size_t kGateWorstShown = 64;

}  // namespace fusediff::driver
