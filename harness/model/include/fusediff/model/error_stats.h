#pragma once
// Streaming, mergeable error statistics of e = y_fused - y_ref in output LSBs. Everything is derived from an
// exact histogram (signed error -> count), so merging shards is exact and memory is bounded by the number of
// distinct error values (at most 2*65536), never by the sample count.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/draw_tallies.h"

namespace fusediff {

// Where a sample landed (documented in docs/regions.md). A sample may carry several tags; `bulk` means none
// of the others.
enum class Region : uint8_t { knee = 0, saturation = 1, quant_boundary = 2, bulk = 3 };
inline constexpr std::array<Region, 4> kAllRegions = {Region::knee, Region::saturation, Region::quant_boundary,
                                                      Region::bulk};
std::string_view to_string(Region r);
Region parse_region(std::string_view text, std::string_view field);
// quant_boundary: a rounding step's exact value lies within this distance (in units of that step) of a tie.
inline constexpr double kQuantBoundaryTieDistance = 1.0 / 16.0;
// knee: the activation's input value lies within this many of its input boundary's LSBs of a knee point.
inline constexpr double kKneeHalfWidthLsb = 2.0;
using RegionSet = uint8_t;  // bit (1 << Region)
inline constexpr RegionSet region_bit(Region r) { return static_cast<RegionSet>(1u << static_cast<unsigned>(r)); }

class ErrorStats {
 public:
  void add(int64_t error) { ++histogram_[error]; ++count_; }
  void add(int64_t error, uint64_t times) { if (times) { histogram_[error] += times; count_ += times; } }
  void merge(const ErrorStats& other);

  uint64_t count() const { return count_; }
  const std::map<int64_t, uint64_t>& histogram() const { return histogram_; }
  int64_t min() const;      // 0 when empty
  int64_t max() const;      // 0 when empty
  int64_t max_abs() const;  // 0 when empty
  double mean() const;      // exact integer sums, one final division
  double stddev() const;    // population standard deviation, from exact integer sums
  double exact_fraction() const;  // count(e == 0) / count; 1 when empty
  // |e| percentile by nearest rank: the smallest v with count(|e| <= v) >= ceil(n * num / den).
  int64_t abs_percentile(uint64_t num, uint64_t den) const;
  int64_t p50() const { return abs_percentile(50, 100); }
  int64_t p90() const { return abs_percentile(90, 100); }
  int64_t p99() const { return abs_percentile(99, 100); }
  int64_t p999() const { return abs_percentile(999, 1000); }

  friend bool operator==(const ErrorStats&, const ErrorStats&) = default;

 private:
  std::map<int64_t, uint64_t> histogram_;
  uint64_t count_ = 0;
};

// One compared sample, with the stages a reader needs to see why it differs.
struct WorstCase {
  uint64_t sample = 0;  // sample index within its case
  int64_t error = 0;
  int64_t acc = 0;      // accumulator (sweep: 0)
  int32_t u = 0;        // reference intermediate code
  int32_t y_ref = 0;
  int32_t y_fused = 0;
  RegionSet regions = 0;
  // A library path's attribution (empty for the built-in paths): the implementation(s) and the formulation
  // (model/formulation.h, the choices that applied to the draw) that produced this sample.
  std::string implementation{};
  std::string formulation{};
  // Under --repeat: the fused output of every repetition, when they differ (empty when all agree).
  std::vector<int32_t> repetitions{};
  friend bool operator==(const WorstCase&, const WorstCase&) = default;
};

// The N worst samples: |error| descending, ties by sample index ascending. Bounded memory; mergeable.
class WorstCases {
 public:
  explicit WorstCases(size_t capacity = 10) : capacity_(capacity) {}
  void offer(const WorstCase& c);
  void merge(const WorstCases& other);
  const std::vector<WorstCase>& sorted() const { return cases_; }  // kept sorted
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::vector<WorstCase> cases_;
};

// One draw run under every value of one formulation dimension (oneDNN's output padding: negative_pad and
// extended_input), each compared with the reference and with the other.
struct PairedFormulations {
  std::string dimension;             // "opad"; empty: no such draw yet
  std::vector<std::string> values;   // in a fixed order
  std::vector<ErrorStats> errors;    // per value: its samples against the reference (where it ran)
  std::vector<uint64_t> rejected;    // per value: samples of draws the library rejected under it
  uint64_t draws = 0;                // draws of the dimension
  uint64_t both_samples = 0;         // samples where every value ran
  uint64_t differing_samples = 0;    // of those, where the outputs differ
  int64_t max_abs_difference = 0;    // largest |y_a - y_b| among them
  void merge(const PairedFormulations& other);  // InputError when the dimensions or values differ
  friend bool operator==(const PairedFormulations&, const PairedFormulations&) = default;
};

// Everything a case accumulates.
struct CaseStats {
  ErrorStats overall;
  std::array<ErrorStats, kAllRegions.size()> by_region;
  WorstCases worst{10};
  // A library path's samples per implementation and per formulation choice (DIMENSION:VALUE, formulation_items).
  std::map<std::string, ErrorStats> by_implementation;
  std::map<std::string, ErrorStats> by_formulation;
  // Samples whose repetitions (--repeat) differ, and the first of them (by |error|, then sample index).
  uint64_t nondeterministic = 0;
  WorstCases nondeterministic_worst{10};
  PairedFormulations paired;
  // Conv-source cases: the judged samples per draw (model/draw_tallies.h); empty for the sweep and thresholds
  // sources, whose samples are codes.
  DrawTallies draws;

  void add(const WorstCase& sample);  // error, regions, attribution, repetitions and worst lists in one place
  void merge(const CaseStats& other);
};

}  // namespace fusediff
