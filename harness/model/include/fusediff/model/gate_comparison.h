#pragma once
// What `fusediff gate` found comparing a candidate table with the canonical table of its kind at the same
// quantization (docs/tolerances.md, "Relative mode"). std only.
#include <cstdint>
#include <string>
#include <vector>

#include "fusediff/model/code_errors.h"
#include "fusediff/model/error_stats.h"

namespace fusediff {

// Consecutive intermediate codes [u_lo, u_hi] where the candidate differs from the canonical table the same way
// (worse by more than the slack, or better), and the table rows that feed them: knots (lut_interp), segments
// (pwl) or entries (lut), [row_lo, row_hi]. delta = |e_candidate| - |e_canonical|: the largest over the run for
// a worse run, the most negative for a better one.
struct CodeRun {
  int32_t u_lo = 0;
  int32_t u_hi = 0;
  uint64_t codes = 0;  // codes of the run that qualify (a run may bridge a few codes that do not)
  int64_t delta = 0;
  int32_t row_lo = 0;
  int32_t row_hi = 0;
  friend bool operator==(const CodeRun&, const CodeRun&) = default;
};

// A table row (knot, segment or entry) that differs from the canonical table's and feeds codes where the candidate
// is worse by more than the slack: what a reviewer fixes.
struct WorseRow {
  int32_t index = 0;            // knot 0..512, segment index, or entry (its code)
  std::string value;            // the candidate's row: a knot's or entry's value, a segment's "slope S offset O shift K"
  std::string canonical_value;  // the canonical table's row, the same way
  int32_t u_lo = 0;             // the codes the row feeds
  int32_t u_hi = 0;
  uint64_t worse_codes = 0;     // of those, the codes worse than canonical by more than the slack
  int32_t worst_u = 0;          // the worst of them (largest |e| - |e_canonical|, then the lowest code)
  int64_t error = 0;            // the signed error there, y_table - y_ref
  int64_t canonical_error = 0;  // the canonical table's signed error there
  friend bool operator==(const WorseRow&, const WorseRow&) = default;
};

inline constexpr const char* kGateModeRelative = "relative";
inline constexpr const char* kGateModeAbsolute = "absolute";

struct CanonicalComparison {
  std::string mode;          // kGateModeRelative (the verdict) or kGateModeAbsolute (shown, not judged)
  std::string construction;  // how the canonical table was built
  std::string rows;          // "knot", "segment" or "entry"
  int64_t slack = 1;         // k: a code may be |e_canonical| + k off
  std::string slack_source;  // "default", "default: the canonical table is exact" or "--slack"
  ErrorStats canonical;      // the canonical table's errors over every intermediate code
  CodeErrors canonical_per_code;
  uint64_t worse_codes = 0;  // codes with |e| > |e_canonical| + k
  uint64_t better_codes = 0; // codes with |e| < |e_canonical|
  std::vector<CodeRun> worse;   // runs of those codes (at most kMaxCodeRuns each)
  std::vector<CodeRun> better;
  std::vector<WorseRow> worse_rows;  // by index (at most kMaxCodeRuns)
  friend bool operator==(const CanonicalComparison&, const CanonicalComparison&) = default;
};
inline constexpr size_t kMaxCodeRuns = 256;

}  // namespace fusediff
