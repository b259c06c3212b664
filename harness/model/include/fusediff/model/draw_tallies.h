#pragma once
// Per draw of a conv-source case, what its judged samples' errors add up to. Samples within one draw (one conv,
// one set of weights, one quantization) are correlated; draws are independent. `fusediff compare` judges exact %,
// the histogram and the bias over draws (reports/src/compare_stats.cpp), so a case keeps this summary of each
// draw. Exact to merge: shards hold disjoint draws, and a draw's tallies add. std only.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fusediff {

// The signed-error bins a draw counts: e <= -2, e = -1, e = 0, e = +1, e >= +2.
inline constexpr size_t kDrawBins = 5;
inline constexpr size_t draw_bin(int64_t error) {
  return error <= -2 ? 0 : error >= 2 ? 4 : static_cast<size_t>(error + 2);
}

struct DrawTally {
  uint64_t draw = 0;                     // the draw's index within its case (the unsharded run's)
  std::array<uint64_t, kDrawBins> bins{};  // samples per bin (draw_bin)
  int64_t sum = 0;                       // sum of e
  int64_t max_abs = 0;                   // largest |e|
  uint64_t count() const;
  void add(int64_t error);
  void merge(const DrawTally& other);
  friend bool operator==(const DrawTally&, const DrawTally&) = default;
};

// A case's draws, ascending by index.
class DrawTallies {
 public:
  void add(uint64_t draw, int64_t error);
  void merge(const DrawTallies& other);
  // Restores a stored draw (reading results back); draws must come in ascending order.
  bool append(const DrawTally& tally);
  const std::vector<DrawTally>& draws() const { return draws_; }
  bool empty() const { return draws_.empty(); }
  friend bool operator==(const DrawTallies&, const DrawTallies&) = default;

 private:
  DrawTally& at(uint64_t draw);
  std::vector<DrawTally> draws_;
};

}  // namespace fusediff
