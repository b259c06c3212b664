#pragma once
// Relative weights of the regions a targeted conv draw aims its accumulators at (generators/targets.h says
// how each region is aimed). `--mix knee=W,saturation=W,quant_boundary=W,bulk=W`; bulk alone is uniform.
namespace fusediff {

// The default was measured with `fusediff mutants --seeds 20 --budget 50000` over candidate mixes
// (docs/generators.md): the lightest mix whose targeted search needs >= 10x fewer samples than uniform sampling
// for every edge-only mutant, while no other mutant needs more than 2x as many.
struct RegionMix {
  double knee = 2;
  double saturation = 4;
  double quant_boundary = 2;
  double bulk = 1;
  friend bool operator==(const RegionMix&, const RegionMix&) = default;
};

}  // namespace fusediff
