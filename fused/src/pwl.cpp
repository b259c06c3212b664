// Piecewise-linear activation tables: the fixed-point lookup a post-processing unit performs, and a fitter that
// builds segments the way a toolchain would. Pure functions, no I/O.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/fused/fixedpoint.h"
#include "fusediff/fused/lut.h"

namespace fusediff::fused {

int32_t PwlLookup(const std::vector<PwlSegment>& segments, int32_t u, const QuantType& output) {
  // The first segment whose u_hi >= u; contiguity makes it the one holding u.
  const auto it = std::lower_bound(segments.begin(), segments.end(), u,
                                   [](const PwlSegment& s, int32_t code) { return s.u_hi < code; });
  if (it == segments.end() || it->u_lo > u) {
    throw std::out_of_range("PwlLookup: no segment holds code " + std::to_string(u));
  }
  const int64_t product = int64_t{it->slope} * (int64_t{u} - int64_t{it->u_lo});
  const int64_t y = RoundingDivideByPOT64(product, it->shift) + int64_t{it->offset};
  return static_cast<int32_t>(std::clamp<int64_t>(y, output.qmin(), output.qmax()));
}

namespace {

struct SegmentFit {
  PwlSegment segment;
  int64_t max_abs_error = 0;
};

class Fitter {
 public:
  explicit Fitter(const Convention& c)
      : qmin_(c.intermediate.q.type.qmin()), output_(c.output.q.type),
        reference_(LUTPopulateInt8(c.activation, c.intermediate.q, c.output)) {
    // The real-valued target in output codes, clamped like the rounded reference is.
    const double su = c.intermediate.q.scale, sy = c.output.q.scale;
    target_.reserve(reference_.size());
    for (size_t i = 0; i < reference_.size(); ++i) {
      const double x = su * static_cast<double>(qmin_ + static_cast<int32_t>(i) - c.intermediate.q.zero_point);
      const double t = EvaluateActivationDouble(c.activation, x) / sy + static_cast<double>(c.output.q.zero_point);
      target_.push_back(std::clamp(std::isfinite(t) ? t : 0.0, double(output_.qmin()), double(output_.qmax())));
    }
  }

  int32_t code_count() const { return static_cast<int32_t>(reference_.size()); }

  // Segment over code indices [a, b] (index = u - qmin).
  SegmentFit Fit(int32_t a, int32_t b) const {
    const double slope_real = b > a ? (target_[b] - target_[a]) / static_cast<double>(b - a) : 0.0;
    // The largest shift whose quantized slope still fits int32 keeps the most slope precision.
    int shift = kPwlMaxShift;
    while (shift > 0 && std::abs(std::ldexp(slope_real, shift)) > 2147483647.0) --shift;
    const double scaled = std::round(std::ldexp(slope_real, shift));
    const int32_t slope = static_cast<int32_t>(std::clamp(scaled, -2147483648.0, 2147483647.0));
    // Errors with offset 0, then the offset that centres them.
    int64_t lowest = std::numeric_limits<int64_t>::max(), highest = std::numeric_limits<int64_t>::min();
    for (int32_t i = a; i <= b; ++i) {
      const int64_t d = RoundingDivideByPOT64(int64_t{slope} * (i - a), shift) - reference_[i];
      lowest = std::min(lowest, d);
      highest = std::max(highest, d);
    }
    const int64_t centre = -((highest + lowest) >> 1);  // floor of the midpoint, negated
    const int32_t offset = static_cast<int32_t>(std::clamp<int64_t>(centre, INT32_MIN, INT32_MAX));
    SegmentFit fit{PwlSegment{qmin_ + a, qmin_ + b, slope, offset, shift}, 0};
    for (int32_t i = a; i <= b; ++i) {  // the exact lookup, saturation included
      const int64_t y = PwlLookup({fit.segment}, qmin_ + i, output_);
      fit.max_abs_error = std::max<int64_t>(fit.max_abs_error, std::abs(y - reference_[i]));
    }
    return fit;
  }

  // The longest segment starting at a with error <= bound: gallop, then bisect (assumes error grows with length,
  // which holds closely enough for a fitter; the result is verified exactly anyway).
  int32_t LongestFrom(int32_t a, int64_t bound) const {
    const int32_t last = code_count() - 1;
    int32_t good = a, length = 1;
    int32_t bad = -1;
    while (true) {
      const int32_t b = std::min(last, a + length);
      if (Fit(a, b).max_abs_error > bound) {
        bad = b;
        break;
      }
      good = b;
      if (b == last) return last;
      length *= 2;
    }
    while (bad - good > 1) {
      const int32_t mid = good + (bad - good) / 2;
      (Fit(a, mid).max_abs_error <= bound ? good : bad) = mid;
    }
    return good;
  }

  // Greedy segmentation under `bound`: the end indices, or empty when it needs more than `limit` segments.
  std::vector<int32_t> Greedy(int64_t bound, int32_t limit) const {
    std::vector<int32_t> ends;
    for (int32_t a = 0; a < code_count();) {
      if (static_cast<int32_t>(ends.size()) == limit) return {};
      const int32_t b = LongestFrom(a, bound);
      ends.push_back(b);
      a = b + 1;
    }
    return ends;
  }

 private:
  int32_t qmin_;
  QuantType output_;
  std::vector<int32_t> reference_;
  std::vector<double> target_;
};

}  // namespace

PwlFit FitPwl(const Convention& convention, int32_t segment_count) {
  const Fitter fitter(convention);
  if (segment_count < 1 || segment_count > fitter.code_count()) {
    throw std::invalid_argument("FitPwl: segment count " + std::to_string(segment_count) + " outside [1, " +
                                std::to_string(fitter.code_count()) + "]");
  }
  // Single-code segments are exact, so a bound of 0 is always reachable with enough segments; the largest
  // possible error is the output range.
  int64_t lo = 0, hi = int64_t{convention.output.q.type.qmax()} - convention.output.q.type.qmin();
  std::vector<int32_t> best = fitter.Greedy(hi, segment_count);
  if (best.empty()) best = {fitter.code_count() - 1};  // cannot happen for segment_count >= 1; defensive
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::vector<int32_t> ends = fitter.Greedy(mid, segment_count);
    if (ends.empty()) {
      lo = mid + 1;
    } else {
      hi = mid;
      best = std::move(ends);
    }
  }
  // Exactly segment_count segments: halve the longest until there are enough.
  std::vector<std::pair<int32_t, int32_t>> ranges;
  for (size_t i = 0, a = 0; i < best.size(); a = best[i] + 1, ++i) ranges.emplace_back(a, best[i]);
  while (static_cast<int32_t>(ranges.size()) < segment_count) {
    auto longest = std::max_element(ranges.begin(), ranges.end(), [](const auto& x, const auto& y) {
      return x.second - x.first < y.second - y.first;
    });
    const auto [a, b] = *longest;
    const int32_t mid = a + (b - a) / 2;
    *longest = {a, mid};
    ranges.insert(longest + 1, {mid + 1, b});
  }
  PwlFit fit;
  for (const auto& [a, b] : ranges) {
    const SegmentFit s = fitter.Fit(a, b);
    fit.segments.push_back(s.segment);
    fit.segment_max_abs_error.push_back(s.max_abs_error);
    fit.max_abs_error = std::max(fit.max_abs_error, s.max_abs_error);
  }
  return fit;
}

}  // namespace fusediff::fused
