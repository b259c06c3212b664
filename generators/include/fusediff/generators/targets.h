#pragma once
// Aim: hard cases computed from the convention (a list, not a hope), and draws whose accumulators hit them.
//   knee:           intermediate codes within 2 codes of each knee point of the activation
//   saturation:     accumulators at and +-1 around the edges of the intermediate range, and beyond it; codes
//                   where the output starts or stops saturating; the flat ends of the intermediate range
//   quant_boundary: accumulators at and +-1 around requantization rounding ties next to a target code; codes
//                   whose f(v)/sy lies nearest an output rounding tie (the hardest first)
//   bulk:           uniform (no aiming)
// The real multiplier M = sx*sw/su is used in double to map codes to accumulators: the aim only has to land
// within a code or two; exactness is the reference's job, not the generator's.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/generators/conv_generator.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/error_stats.h"
#include "fusediff/model/pattern.h"
#include "fusediff/model/region_mix.h"

namespace fusediff::generators {


// The activation in plain double precision, for aiming only (ranking codes by distance to a tie, finding where
// the output saturates). Never used to decide anything.
double ApproximateActivation(const Activation& a, double x);

// Hard intermediate codes of a convention, sorted and unique, inside the intermediate type.
std::vector<int32_t> KneeCodes(const Convention& c);
std::vector<int32_t> SaturationCodes(const Convention& c);
// The `count` codes whose output pre-rounding value (f(v)/sy, + zy when the zero point goes first) lies nearest
// a tie k + 1/2, nearest first (exact ties, where scales make them, come first).
std::vector<int32_t> OutputTieCodes(const Convention& c, size_t count);
// Union of the three lists: the hard cases a case's coverage is reported against.
std::vector<int32_t> HardCodes(const Convention& c);

// Accumulators for one output channel (multiplier sx*sw/su).
// An accumulator inside code u's requantization interval: `position` 0 at the tie below, 1 at the tie above.
int64_t AccumulatorForCode(const Convention& c, float sx, float sw, int32_t u, double position = 0.5);
// Accumulators at and +-1 around the two requantization ties that bound code u (u-1|u and u|u+1).
std::vector<int64_t> TieAccumulators(const Convention& c, float sx, float sw, int32_t u);
// The four accumulators at and +-1 around the one tie between codes u-1 and u.
std::vector<int64_t> BoundaryAccumulators(const Convention& c, float sx, float sw, int64_t u);

// A draw whose channel biases are set so that each channel's first output element (n = 0, oy = 0, ox = 0,
// which are samples 0..K-1 of the draw) has an accumulator chosen by the mix; channel 0 is always left unaimed
// (stratified bulk). The accumulator bound stays
// inside int32 (validate() passes).
struct TargetedDraw {
  ConvCase conv;
  std::vector<int32_t> input;
  std::vector<Region> aimed;  // per output channel, the region its pivot was aimed at
};
TargetedDraw GenerateTargetedDraw(uint64_t seed, uint64_t case_stream, uint32_t draw, const Convention& convention,
                                  const RegionMix& mix, const ConvShapeLimits& limits = {});

// The draw limits of a pattern's producer: a fully connected producer is a 1x1 conv over a 1x1 input (up to 16
// features), with one weight scale for all outputs under the float_product multiplier rule.
ConvShapeLimits PatternDrawLimits(const Pattern& pattern, const ConvShapeLimits& base = {});

// A pattern draw: the producer's targeted draw (GenerateTargetedDraw, over the convention's u boundary), then the
// tensors of the stages. An add's residual is uniform, except at an aimed pivot (a channel's first output element),
// where r is chosen, from the approximate real sum, to put s on what the channel was aimed at: nearest a rounding
// tie of s (quant_boundary), at or beyond an end of s's type (saturation), on a knee code of the activation
// (knee). A second FC layer's weights and scales are sized like the producer's (its output spans its boundary).
PatternDraw GeneratePatternDraw(uint64_t seed, uint64_t case_stream, uint32_t draw, const Pattern& pattern,
                                const Convention& convention, const RegionMix& mix, const ConvShapeLimits& limits = {});

// A case in a mutant's non-equivalent space (model/mutants.h), drawn from (seed, stream, index). `targeted`
// also aims in convention space: scale ratios and zero points that create exact ties (dyadic su/sy with a
// piecewise-rational activation, dyadic multipliers) where the mutant shows only at ties.
CaseSpec GenerateMutantCase(Mutant mutant, bool targeted, uint64_t seed, uint64_t case_stream, uint32_t index);

}  // namespace fusediff::generators
