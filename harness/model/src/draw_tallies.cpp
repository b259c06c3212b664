#include "fusediff/model/draw_tallies.h"

#include <algorithm>
#include <cstdlib>

namespace fusediff {

uint64_t DrawTally::count() const {
  uint64_t n = 0;
  for (uint64_t b : bins) n += b;
  return n;
}

void DrawTally::add(int64_t error) {
  ++bins[draw_bin(error)];
  sum += error;
  max_abs = std::max<int64_t>(max_abs, std::llabs(error));
}

void DrawTally::merge(const DrawTally& other) {
  for (size_t i = 0; i < kDrawBins; ++i) bins[i] += other.bins[i];
  sum += other.sum;
  max_abs = std::max(max_abs, other.max_abs);
}

DrawTally& DrawTallies::at(uint64_t draw) {
  // A worker compares its draws in ascending order: the last one is nearly always the one asked for.
  if (draws_.empty() || draws_.back().draw < draw) {
    draws_.push_back(DrawTally{draw, {}, 0, 0});
    return draws_.back();
  }
  auto it = std::lower_bound(draws_.begin(), draws_.end(), draw,
                             [](const DrawTally& t, uint64_t d) { return t.draw < d; });
  if (it == draws_.end() || it->draw != draw) it = draws_.insert(it, DrawTally{draw, {}, 0, 0});
  return *it;
}

void DrawTallies::add(uint64_t draw, int64_t error) { at(draw).add(error); }

void DrawTallies::merge(const DrawTallies& other) {
  for (const DrawTally& t : other.draws_) at(t.draw).merge(t);
}

bool DrawTallies::append(const DrawTally& tally) {
  if (!draws_.empty() && draws_.back().draw >= tally.draw) return false;
  draws_.push_back(tally);
  return true;
}

}  // namespace fusediff
