#pragma once
// The unfused graph of one pattern draw, exactly: the producer's accumulators in int64, every boundary rounded by
// its declared rule from the rule's definition (requant.cpp, stages.cpp), the activation through the exact per-code
// table (or, for an f32 intermediate, the exact evaluator at the binary32 value). The one entry point for the
// reference side of every comparison: no caller assembles acc -> u -> table itself. No I/O; never calls fused/.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "fusediff/model/error_stats.h"
#include "fusediff/model/pattern.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {

// What one element of the final tensor is, and where it went through (docs/regions.md):
//   knee:           the activation's input value within kKneeHalfWidthLsb LSBs of its input boundary of a knee point;
//   saturation:     some boundary on its path clamped;
//   quant_boundary: some rounding on its path rounded a value within kQuantBoundaryTieDistance of a tie.
// A max pool's element inherits the path of the first window element holding the maximum; an average pool's, its
// window's first tap's accumulator and code, the union of its taps' regions and its own rounding's.
struct GraphElement {
  int64_t acc = 0;        // the accumulator that fed it (a second FC layer's own)
  int32_t y = 0;          // the final output code
  int32_t key_code = 0;   // per-code statistics key (model/pattern.h keyed_boundary); 0 for an f32 intermediate
  RegionSet regions = 0;  // no bit: bulk
  // A float output (model/pattern.h float_output): how far two evaluations of the stage's bounded class (the
  // float layernorm: any two-pass normalization) may differ at this element, in its real value (+inf: no finite
  // bound here); whether that class covers a comparison is float_output's answer. 0 for a code output.
  double bound = 0;
};

class GraphReference {
 public:
  // `convention` is the one the reference runs (reference_convention of a case). `activation_table`: the exact
  // table of activation_convention(p, convention), not owned (the driver's cache); null where the pattern has no
  // activation or the intermediate is f32. `knee_scale`: the LSB that sets the knee half-width, the graph's own
  // activation input scale (also when this reference's intermediate is f32, so every comparison of one graph
  // classifies alike). Throws InputError for an invalid pattern or convention.
  GraphReference(const Pattern& p, const Convention& convention, const ActivationTable* activation_table,
                 double knee_scale);
  ~GraphReference();
  GraphReference(GraphReference&&) noexcept;

  // Every element of the final tensor (NHWC of pattern_output_geometry). Throws InputError when the draw does not
  // fit the pattern (residual or FC tensors of the wrong size, a producer output that is not 1x1 under an FC).
  // Not thread-safe for an f32 intermediate (its evaluator counts escalations); otherwise const and shareable.
  std::vector<GraphElement> operator()(const PatternDraw& draw) const;

  // Codes (table) or values (f32) the double filter could not decide and MPFR had to.
  uint64_t escalations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The region rule of docs/regions.md, in one place for every comparison:
//   RoundingRegions:        saturation when the step clamped, quant_boundary when it rounded a value within
//                           kQuantBoundaryTieDistance of a tie;
//   ActivationPointRegions: those of the activation's output rounding, plus knee when its input lies within
//                           kKneeHalfWidthLsb * knee_scale of a knee point.
RegionSet RoundingRegions(bool saturated, double tie_distance);
RegionSet ActivationPointRegions(const std::vector<double>& knees, double knee_scale, const ActivationPoint& point);

// The real multiplier's operands by the producer's rule: (sx, sw) for double_product, (fl32(sx sw), 1) for
// float_product, so that every requant variant forms M from them as it always does.
std::pair<float, float> MultiplierOperands(MultiplierRule rule, float input_scale, float weight_scale);

}  // namespace fusediff::reference
