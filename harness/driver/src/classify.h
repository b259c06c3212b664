#pragma once
// Internal to the driver: the regions of docs/regions.md for one sample, shared by every comparison.
#include <cmath>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/reference/reference.h"

namespace fusediff::driver::detail {

// `su` sets the knee half-width (kKneeHalfWidthLsb intermediate LSBs): the graph's su, also when the reference's
// intermediate is f32, so that every comparison of one graph classifies a sample alike. `requant` is null where
// no requantization step exists (sweep samples, an f32 intermediate).
inline RegionSet ClassifySample(const std::vector<double>& knees, double su, const reference::ActivationPoint& point,
                                const reference::RequantTrace* requant) {
  RegionSet regions = 0;
  for (double p : knees) {
    if (std::abs(point.v - p) <= kKneeHalfWidthLsb * su) {
      regions |= region_bit(Region::knee);
      break;
    }
  }
  if (point.saturated || (requant && requant->saturated)) regions |= region_bit(Region::saturation);
  if (point.tie_distance <= kBoundaryTieDistance || (requant && requant->tie_distance <= kBoundaryTieDistance)) {
    regions |= region_bit(Region::quant_boundary);
  }
  return regions;
}

}  // namespace fusediff::driver::detail
