#pragma once
// Internal to the driver: the regions of docs/regions.md for one sample, shared by every comparison.
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/reference/graph.h"

namespace fusediff::driver::detail {

// `su` sets the knee half-width (kKneeHalfWidthLsb intermediate LSBs): the graph's su, also when the reference's
// intermediate is f32, so that every comparison of one graph classifies a sample alike. `requant` is null where
// no requantization step exists (sweep samples, an f32 intermediate).
inline RegionSet ClassifySample(const std::vector<double>& knees, double su, const reference::ActivationPoint& point,
                                const reference::RequantTrace* requant) {
  RegionSet regions = reference::ActivationPointRegions(knees, su, point);
  if (requant) regions |= reference::RoundingRegions(requant->saturated, requant->tie_distance);
  return regions;
}

}  // namespace fusediff::driver::detail
