#pragma once
// The best table of a kind for a given set of reference output codes: what `fusediff gate` measures a candidate
// table against (docs/tolerances.md, "Relative mode"). Pure integer algorithms, no I/O; the caller supplies the
// exact reference's y_ref per intermediate code (fused/ never computes one).
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "fusediff/model/quant.h"
#include "fusediff/model/table.h"

namespace fusediff::fused {

// The best line of one pwl segment in the lookup's own fixed-point format: over the codes x = 0 .. y.size()-1
// (u = u_lo + x) the integer slope and offset minimizing
//   max_x |sat(RoundingDivideByPOT64(slope * x, shift) + offset) - y[x]|
// (saturation to `output` included), computed exactly (docs/tolerances.md, "The minimax pwl line"). Among the
// lines reaching that minimum whose slope lies near the real-valued optimum: the smallest |sum of unsaturated
// errors| (least bias), then the slope nearest that optimum. `exhaustive` is false only when a bound's slope interval held more rounding breakpoints
// than the search visits (kPwlSweepEventCap); the line is then the best found, still exact in its error figure.
struct PwlLine {
  PwlSegment segment;
  int64_t max_abs_error = 0;
  bool exhaustive = true;
};
inline constexpr uint64_t kPwlSweepEventCap = uint64_t{1} << 24;
PwlLine MinimaxPwlLine(std::span<const int32_t> y, int32_t u_lo, int32_t shift, const QuantType& output);

// Knots minimizing the max |e| of the 513-knot lookup (LUTLookup) over every int16 code against y (65,536
// reference codes, y[u + 32768]), then the sum of |e| among those: a bottleneck path over the knot chain, each
// knot searched in the window of values its own code allows (docs/tolerances.md, "The best knots"). Knots whose
// bound would exceed `max_bound` are not searched: nullopt then.
struct MinimaxKnots {
  std::array<int16_t, 513> knots{};
  int64_t max_abs_error = 0;
};
std::optional<MinimaxKnots> BestLutInterpKnots(std::span<const int32_t> y, int64_t max_bound);

}  // namespace fusediff::fused
