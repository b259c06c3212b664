#include "fusediff/model/error_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "fusediff/model/errors.h"
#include "fusediff/model/formulation.h"
#include "named_enum.h"

namespace fusediff {

namespace {
constexpr detail::Names<Region, 4> kRegions{{{"knee", Region::knee},
                                             {"saturation", Region::saturation},
                                             {"quant_boundary", Region::quant_boundary},
                                             {"bulk", Region::bulk}}};
}  // namespace

std::string_view to_string(Region r) { return detail::NameOf(r, kRegions); }

Region parse_region(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "region", kRegions);
}

void ErrorStats::merge(const ErrorStats& other) {
  for (const auto& [error, n] : other.histogram_) histogram_[error] += n;
  count_ += other.count_;
}

int64_t ErrorStats::min() const { return histogram_.empty() ? 0 : histogram_.begin()->first; }
int64_t ErrorStats::max() const { return histogram_.empty() ? 0 : histogram_.rbegin()->first; }
int64_t ErrorStats::max_abs() const { return std::max(std::abs(min()), std::abs(max())); }

namespace {
// Exact sums over the histogram: S1 = sum e, S2 = sum e^2. |e| < 2^17 and count < 2^64 keep both inside
// 128 bits (S2 < 2^98).
struct Sums {
  __int128 s1 = 0;
  __int128 s2 = 0;
};
Sums ExactSums(const std::map<int64_t, uint64_t>& histogram) {
  Sums s;
  for (const auto& [e, n] : histogram) {
    s.s1 += static_cast<__int128>(e) * n;
    s.s2 += static_cast<__int128>(e) * e * n;
  }
  return s;
}
}  // namespace

double ErrorStats::mean() const {
  if (count_ == 0) return 0.0;
  const Sums s = ExactSums(histogram_);
  return static_cast<double>(static_cast<long double>(s.s1) / static_cast<long double>(count_));
}

double ErrorStats::stddev() const {
  if (count_ == 0) return 0.0;
  const Sums s = ExactSums(histogram_);
  // variance = (n*S2 - S1^2) / n^2; the numerator is exact whenever it fits in 128 bits (always for realistic
  // runs: n < 2^40 and |e| < 2^17), and falls back to long double otherwise.
  __int128 n_s2 = 0, s1_sq = 0;
  const __int128 n = count_;
  if (!__builtin_mul_overflow(n, s.s2, &n_s2) && !__builtin_mul_overflow(s.s1, s.s1, &s1_sq)) {
    const long double numerator = static_cast<long double>(n_s2 - s1_sq);
    return static_cast<double>(std::sqrt(numerator) / static_cast<long double>(count_));
  }
  const long double mean = static_cast<long double>(s.s1) / count_;
  const long double var = static_cast<long double>(s.s2) / count_ - mean * mean;
  return static_cast<double>(std::sqrt(std::max<long double>(var, 0)));
}

double ErrorStats::exact_fraction() const {
  if (count_ == 0) return 1.0;
  auto it = histogram_.find(0);
  const uint64_t exact = it == histogram_.end() ? 0 : it->second;
  return static_cast<double>(exact) / static_cast<double>(count_);
}

int64_t ErrorStats::abs_percentile(uint64_t num, uint64_t den) const {
  if (count_ == 0) return 0;
  // Nearest rank: rank = ceil(n * num / den), at least 1, computed exactly.
  const unsigned __int128 product = static_cast<unsigned __int128>(count_) * num;
  uint64_t rank = static_cast<uint64_t>((product + den - 1) / den);
  rank = std::max<uint64_t>(rank, 1);
  std::map<int64_t, uint64_t> by_abs;
  for (const auto& [e, n] : histogram_) by_abs[std::abs(e)] += n;
  uint64_t seen = 0;
  for (const auto& [abs_error, n] : by_abs) {
    seen += n;
    if (seen >= rank) return abs_error;
  }
  return by_abs.rbegin()->first;
}

namespace {
// Worse first: larger |error|, then smaller sample index.
bool Worse(const WorstCase& a, const WorstCase& b) {
  const int64_t abs_a = std::abs(a.error), abs_b = std::abs(b.error);
  if (abs_a != abs_b) return abs_a > abs_b;
  return a.sample < b.sample;
}
}  // namespace

void WorstCases::offer(const WorstCase& c) {
  if (capacity_ == 0) return;
  if (cases_.size() == capacity_ && !Worse(c, cases_.back())) return;
  auto pos = std::upper_bound(cases_.begin(), cases_.end(), c, Worse);
  cases_.insert(pos, c);
  if (cases_.size() > capacity_) cases_.pop_back();
}

void WorstCases::merge(const WorstCases& other) {
  for (const WorstCase& c : other.cases_) offer(c);
}

void CaseStats::add(const WorstCase& sample) {
  overall.add(sample.error);
  const RegionSet regions = sample.regions ? sample.regions : region_bit(Region::bulk);
  for (Region r : kAllRegions) {
    if (regions & region_bit(r)) by_region[static_cast<size_t>(r)].add(sample.error);
  }
  if (!sample.implementation.empty()) by_implementation[sample.implementation].add(sample.error);
  if (!sample.formulation.empty()) {
    for (const std::string& item : formulation_items(sample.formulation)) by_formulation[item].add(sample.error);
  }
  if (!sample.repetitions.empty()) {
    ++nondeterministic;
    nondeterministic_worst.offer(sample);
  }
  if (sample.error != 0) worst.offer(sample);
}

void PairedFormulations::merge(const PairedFormulations& other) {
  if (other.dimension.empty()) return;
  if (dimension.empty()) {
    *this = other;
    return;
  }
  if (dimension != other.dimension || values != other.values || errors.size() != other.errors.size() ||
      rejected.size() != other.rejected.size()) {
    throw InputError("paired formulations: the parts compare different formulations");
  }
  for (size_t i = 0; i < errors.size(); ++i) errors[i].merge(other.errors[i]);
  for (size_t i = 0; i < rejected.size(); ++i) rejected[i] += other.rejected[i];
  draws += other.draws;
  both_samples += other.both_samples;
  differing_samples += other.differing_samples;
  max_abs_difference = std::max(max_abs_difference, other.max_abs_difference);
}

void CaseStats::merge(const CaseStats& other) {
  overall.merge(other.overall);
  for (size_t i = 0; i < by_region.size(); ++i) by_region[i].merge(other.by_region[i]);
  worst.merge(other.worst);
  for (const auto& [name, stats] : other.by_implementation) by_implementation[name].merge(stats);
  for (const auto& [name, stats] : other.by_formulation) by_formulation[name].merge(stats);
  nondeterministic += other.nondeterministic;
  nondeterministic_worst.merge(other.nondeterministic_worst);
  paired.merge(other.paired);
  draws.merge(other.draws);
}

}  // namespace fusediff
