// The best table of a kind for given reference codes (fused/canonical.h): the exact minimax line of a pwl segment
// in its fixed-point format, and the minimax knots of TFLite's 513-knot lookup. Integer arithmetic only; the
// algorithms are explained in docs/tolerances.md. No I/O.
#include "fusediff/fused/canonical.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fusediff/fused/fixedpoint.h"
#include "fusediff/fused/lut.h"

namespace fusediff::fused {
namespace {

constexpr int64_t kSlopeMin = std::numeric_limits<int32_t>::min();
constexpr int64_t kSlopeMax = std::numeric_limits<int32_t>::max();
constexpr int64_t kPlusInf = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinusInf = std::numeric_limits<int64_t>::min();
constexpr int kSteps = 512;  // lut_interp: knots 0..512
constexpr int64_t kLo = std::numeric_limits<int16_t>::min(), kHi = std::numeric_limits<int16_t>::max();

// Ceiling of t / x for x > 0 (C++ division truncates toward zero: that is the ceiling for t < 0).
int64_t CeilDiv(int64_t t, int64_t x) { return t / x + ((t % x != 0 && t > 0) ? 1 : 0); }

// Smallest integer c minimising |a + n c| (n > 0), ties to the smaller c.
int64_t NearestCentring(int64_t a, int64_t n) {
  const int64_t down = -CeilDiv(a, n);  // floor(-a / n)
  return std::abs(a + n * down) <= std::abs(a + n * (down + 1)) ? down : down + 1;
}

// One segment's minimax problem: codes x = 0..n-1, reference y[x], lookup
//   out(m, c, x) = sat(RoundingDivideByPOT64(m x, shift) + c).
// Under a bound B, code x constrains r_x + c (r_x = RoundingDivideByPOT64(m x, shift)) from below by y_x - B
// unless that is at or under qmin (saturation then lifts any value there), and from above by y_x + B unless that
// is at or over qmax. Each r_x is non-decreasing in m.
class SegmentProblem {
 public:
  SegmentProblem(std::span<const int32_t> y, int32_t shift, const QuantType& output)
      : y_(y), shift_(shift), qmin_(output.qmin()), qmax_(output.qmax()) {
    for (int32_t v : y) sum_y_ += v;
  }

  int64_t n() const { return static_cast<int64_t>(y_.size()); }
  int64_t Rounded(int64_t m, int64_t x) const { return RoundingDivideByPOT64(m * x, shift_); }

  // max_x |out(m, c, x) - y_x|, exactly as PwlLookup evaluates it.
  int64_t Error(int64_t m, int64_t c) const {
    int64_t worst = 0;
    for (int64_t x = 0; x < n(); ++x) {
      const int64_t out = std::clamp<int64_t>(Rounded(m, x) + c, qmin_, qmax_);
      worst = std::max(worst, std::abs(out - y_[x]));
    }
    return worst;
  }

  // The line through the real-valued Chebyshev slope (rails ignored), offset centring its errors: an upper bound.
  std::pair<int64_t, int64_t> StartingLine() const {
    const Bound all{0, /*rails=*/false};
    const int64_t m = MinimizePhi(all, MakeEnvelope(all));
    int64_t lo = kPlusInf, hi = kMinusInf;
    for (int64_t x = 0; x < n(); ++x) {
      const int64_t d = Rounded(m, x) - y_[x];
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    const int64_t c = std::clamp<int64_t>(-((lo + hi) >> 1), kSlopeMin, kSlopeMax);
    return {m, c};
  }

  struct Line {
    int64_t m = 0, c = 0;
    uint64_t bias = 0;   // |sum over x of (r_x + c - y_x)|
    uint64_t distance = 0;  // |m - the real-valued optimum's slope|
  };

  // Whether the rounding-free relaxation admits a line within the bound: necessary for Feasible, and cheap (a
  // hull and a convex minimisation), so it gives the search its lower bound.
  bool RelaxationFeasible(int64_t bound) const {
    const Bound b{bound, true};
    const Envelope e = MakeEnvelope(b);
    if (e.upper.empty() || e.lower.empty()) return true;
    const int64_t steep = std::min(kSlopeMax, ((qmax_ - qmin_ + 1) << shift_) + 1);
    return Phi(b, e, std::clamp(MinimizePhi(b, e), -steep, steep)) <= (int64_t{1} << shift_);
  }

  // A line with max |e| <= bound, or nullopt when none exists (or the sweep hit the cap: *capped is then set).
  // first: return the first one found; otherwise the least biased, then nearest to the real-valued slope.
  std::optional<Line> Feasible(int64_t bound, bool first, bool* capped) const {
    const Bound b{bound, true};
    bool any_lo = false, any_hi = false;
    int64_t max_lo = kMinusInf, min_hi = kPlusInf;
    for (int64_t x = 0; x < n(); ++x) {
      if (b.has_lo(y_[x], qmin_)) any_lo = true, max_lo = std::max(max_lo, int64_t{y_[x]} - bound);
      if (b.has_hi(y_[x], qmax_)) any_hi = true, min_hi = std::min(min_hi, int64_t{y_[x]} + bound);
    }
    if (!any_lo || !any_hi) {  // one-sided: a flat line at the binding side meets every constraint
      const int64_t c = any_lo ? max_lo : any_hi ? min_hi : y_[0];
      return Line{0, c, 0, 0};
    }
    const Envelope e = MakeEnvelope(b);
    // A slope of (span + 1) 2^shift already jumps from one rail to the other within one code: steeper lines
    // produce no output pattern this one (with another offset) does not, so the search stops there.
    const int64_t steep = std::min(kSlopeMax, ((qmax_ - qmin_ + 1) << shift_) + 1);
    const int64_t m_star = std::clamp(MinimizePhi(b, e), -steep, steep);
    const int64_t limit = int64_t{1} << shift_;
    if (Phi(b, e, m_star) > limit) return std::nullopt;
    // The slopes where the real relaxation is feasible: an interval around m_star (Phi is convex).
    const int64_t m_lo = Edge(b, e, m_star, -steep, limit), m_hi = Edge(b, e, m_star, steep, limit);
    if (first) return Sweep(b, m_lo, m_hi, m_star, true, capped);
    // The tie-break (least bias) looks at the slopes near m_star only: about 4 rounding breakpoints per code
    // (a slope window w crosses w x / 2^s breakpoints at code x). When none of them meets the bound, the first
    // line over the whole interval does.
    const int64_t w = std::max<int64_t>(1, (int64_t{4} << shift_) / n());
    std::optional<Line> near = Sweep(b, std::max(m_lo, m_star - w), std::min(m_hi, m_star + w), m_star, false, capped);
    return near ? near : Sweep(b, m_lo, m_hi, m_star, true, capped);
  }

 private:
  struct Bound {
    int64_t bound;
    bool rails;  // false: every code constrains both sides (the starting line)
    bool has_lo(int64_t y, int64_t qmin) const { return !rails || y - bound > qmin; }
    bool has_hi(int64_t y, int64_t qmax) const { return !rails || y + bound < qmax; }
  };

  // The codes that bound r_x + c from below (lows) and above (highs), reduced to the hull vertices that can
  // attain max_x (L_x 2^s - m x) (upper hull of (x, y_x)) and min_x (H_x 2^s - m x) (lower hull): a linear
  // functional with positive weight on y peaks on the upper hull, bottoms out on the lower one.
  struct Envelope {
    std::vector<std::pair<int64_t, int64_t>> upper, lower;  // (x, y_x), x increasing
  };
  Envelope MakeEnvelope(const Bound& b) const {
    Envelope e;
    // Andrew's monotone chain; |dx| < 2^16 and |dy| < 2^17, so the cross products fit int64.
    const auto push = [](std::vector<std::pair<int64_t, int64_t>>& hull, std::pair<int64_t, int64_t> p, int sign) {
      while (hull.size() >= 2) {
        const auto& o = hull[hull.size() - 2];
        const auto& a = hull.back();
        const int64_t cross = (a.first - o.first) * (p.second - o.second) - (a.second - o.second) * (p.first - o.first);
        if (cross * sign < 0) break;
        hull.pop_back();
      }
      hull.push_back(p);
    };
    for (int64_t x = 0; x < n(); ++x) {
      if (b.has_lo(y_[x], qmin_)) push(e.upper, {x, y_[x]}, 1);
      if (b.has_hi(y_[x], qmax_)) push(e.lower, {x, y_[x]}, -1);
    }
    // A vertex equal in cross product is dropped on both hulls: the remaining ones still attain the extremes.
    return e;
  }

  // Phi(m) = max_lo (L_x 2^s - m x) - min_hi (H_x 2^s - m x): the rounding-free gap, times 2^shift. A line with
  // slope m can meet the bound only if Phi(m) <= 2^shift (each r_x is within 1/2 of m x / 2^s). Convex in m.
  // Along a hull the values are unimodal in the vertex index: binary search for the extreme.
  int64_t Phi(const Bound& b, const Envelope& e, int64_t m) const {
    const auto value = [&](const std::pair<int64_t, int64_t>& p, int64_t offset) {
      return ((p.second + offset) << shift_) - m * p.first;
    };
    // Upper hull: values rise then fall; first vertex not below its successor.
    size_t lo = 0, hi = e.upper.size() - 1;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (value(e.upper[mid + 1], 0) > value(e.upper[mid], 0)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t high_side = value(e.upper[lo], -b.bound);
    lo = 0;
    hi = e.lower.size() - 1;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (value(e.lower[mid + 1], 0) < value(e.lower[mid], 0)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t low_side = value(e.lower[lo], b.bound);
    return high_side - low_side;
  }

  // Integer ternary search for a minimiser of the convex Phi over the int32 slopes.
  int64_t MinimizePhi(const Bound& b, const Envelope& e) const {
    int64_t lo = kSlopeMin, hi = kSlopeMax;
    while (hi - lo > 2) {
      const int64_t m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
      const int64_t p1 = Phi(b, e, m1), p2 = Phi(b, e, m2);
      if (p1 < p2) {
        hi = m2 - 1;
      } else if (p1 > p2) {
        lo = m1 + 1;
      } else {
        lo = m1;
        hi = m2;
      }
    }
    int64_t best = lo;
    for (int64_t m = lo + 1; m <= hi; ++m) {
      if (Phi(b, e, m) < Phi(b, e, best)) best = m;
    }
    return best;
  }

  // The farthest slope from `inside` (Phi <= limit there) toward `end` with Phi <= limit (bisection; convexity
  // makes the feasible slopes an interval).
  int64_t Edge(const Bound& b, const Envelope& e, int64_t inside, int64_t end, int64_t limit) const {
    if (Phi(b, e, end) <= limit) return end;
    int64_t good = inside, bad = end;
    while (std::abs(bad - good) > 1) {
      const int64_t mid = good + (bad - good) / 2;
      (Phi(b, e, mid) <= limit ? good : bad) = mid;
    }
    return good;
  }

  // The smallest slope above m where r_x grows past r.
  int64_t NextBreak(int64_t m, int64_t x, int64_t r) const {
    // RoundingDivideByPOT64(p, s) > r  <=>  p > (2r + 1) 2^(s-1), or equal with r >= 0 (ties away from zero).
    int64_t t = r + 1;
    if (shift_ > 0) {
      const int64_t tie = (2 * r + 1) * (int64_t{1} << (shift_ - 1));
      t = r >= 0 ? tie : tie + 1;
    }
    int64_t next = std::max(CeilDiv(t, x), m + 1);
    while (next - 1 > m && Rounded(next - 1, x) > r) --next;  // guards only: the formula is exact
    while (Rounded(next, x) <= r) ++next;
    return next;
  }

  // Visits the slopes [m_lo, m_hi] cell by cell (a cell: slopes with the same r_x for every x), keeping per cell
  // the feasible offsets [max_x (L_x - r_x), min_x (H_x - r_x)].
  std::optional<Line> Sweep(const Bound& b, int64_t m_lo, int64_t m_hi, int64_t m_star, bool first,
                            bool* capped) const {
    std::vector<int64_t> r(y_.size());
    // As m grows every r_x grows, so every L_x - r_x and H_x - r_x only falls: the minimum of the highs is a
    // running minimum, the maximum of the lows a max-heap whose stale entries (x's value has fallen since) are
    // dropped when they reach the top.
    using Entry = std::pair<int64_t, int64_t>;  // (L_x - r_x, x)
    std::priority_queue<Entry> lows;
    int64_t min_high = kPlusInf;
    const auto max_low = [&]() {
      while (lows.top().first != y_[lows.top().second] - b.bound - r[lows.top().second]) lows.pop();
      return lows.top().first;
    };
    int64_t sum_r = 0;
    using Event = std::pair<int64_t, int64_t>;  // (slope where r_x grows, x)
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
    for (int64_t x = 0; x < n(); ++x) {
      r[x] = Rounded(m_lo, x);
      sum_r += r[x];
      if (b.has_lo(y_[x], qmin_)) lows.emplace(y_[x] - b.bound - r[x], x);
      if (b.has_hi(y_[x], qmax_)) min_high = std::min(min_high, y_[x] + b.bound - r[x]);
      if (x > 0 && m_lo < m_hi) {
        const int64_t next = NextBreak(m_lo, x, r[x]);
        if (next <= m_hi) events.emplace(next, x);
      }
    }
    std::optional<Line> best;
    uint64_t visited = 0;
    for (int64_t m = m_lo;;) {
      const int64_t cell_end = events.empty() ? m_hi : std::min(events.top().first - 1, m_hi);
      const int64_t c_lo = std::max(max_low(), kSlopeMin), c_hi = std::min(min_high, kSlopeMax);
      if (c_lo <= c_hi) {
        const int64_t c = std::clamp(NearestCentring(sum_r - sum_y_, n()), c_lo, c_hi);
        const int64_t pick = std::clamp(m_star, m, cell_end);
        const Line line{pick, c, static_cast<uint64_t>(std::abs(sum_r + n() * c - sum_y_)),
                        static_cast<uint64_t>(std::abs(pick - m_star))};
        if (first) return line;
        if (!best || std::tie(line.bias, line.distance) < std::tie(best->bias, best->distance)) best = line;
      }
      if (cell_end >= m_hi) break;
      m = cell_end + 1;
      while (!events.empty() && events.top().first == m) {
        const int64_t x = events.top().second;
        events.pop();
        const int64_t grown = Rounded(m, x);
        if (b.has_lo(y_[x], qmin_)) lows.emplace(y_[x] - b.bound - grown, x);
        if (b.has_hi(y_[x], qmax_)) min_high = std::min(min_high, y_[x] + b.bound - grown);
        sum_r += grown - r[x];
        r[x] = grown;
        const int64_t next = NextBreak(m, x, grown);
        if (next <= m_hi) events.emplace(next, x);
        if (++visited > kPwlSweepEventCap) {
          *capped = true;
          return best;
        }
      }
    }
    return best;
  }

  std::span<const int32_t> y_;
  int32_t shift_;
  int64_t qmin_, qmax_;
  int64_t sum_y_ = 0;
};

}  // namespace

PwlLine MinimaxPwlLine(std::span<const int32_t> y, int32_t u_lo, int32_t shift, const QuantType& output) {
  if (y.empty()) throw std::invalid_argument("MinimaxPwlLine: empty segment");
  if (shift < 0 || shift > kPwlMaxShift) throw std::invalid_argument("MinimaxPwlLine: shift outside [0, 31]");
  const int32_t u_hi = u_lo + static_cast<int32_t>(y.size()) - 1;
  if (y.size() == 1) return PwlLine{PwlSegment{u_lo, u_hi, 0, y[0], shift}, 0, true};
  const SegmentProblem problem(y, shift, output);
  const auto [m0, c0] = problem.StartingLine();
  // The smallest feasible bound (feasibility is monotone in it): the relaxation's smallest bound first (bisection
  // on the cheap test), then the exact test upward from there, where the optimum nearly always is.
  int64_t lo = 0, hi = problem.Error(m0, c0);
  bool capped = false;
  for (int64_t top = hi; lo < top;) {
    const int64_t mid = lo + (top - lo) / 2;
    if (problem.RelaxationFeasible(mid)) {
      top = mid;
    } else {
      lo = mid + 1;
    }
  }
  for (int tries = 0; tries < 2 && lo < hi; ++tries, ++lo) {
    if (problem.Feasible(lo, /*first=*/true, &capped)) hi = lo;
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (problem.Feasible(mid, /*first=*/true, &capped)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  std::optional<SegmentProblem::Line> line = problem.Feasible(hi, /*first=*/false, &capped);
  const int64_t m = line ? line->m : m0, c = line ? line->c : c0;
  PwlLine out{PwlSegment{u_lo, u_hi, static_cast<int32_t>(m), static_cast<int32_t>(c), shift}, problem.Error(m, c),
              !capped};
  return out;
}

std::optional<MinimaxKnots> BestLutInterpKnots(std::span<const int32_t> y, int64_t max_bound) {
  if (y.size() != 65536) throw std::invalid_argument("BestLutInterpKnots: expected 65536 reference codes");
  // Segment i holds the codes u = 128 (i - 256) + f, f = 0..127: y index 128 i + f. Sum of |e| over it, or -1
  // when some |e| exceeds the bound.
  const auto segment_error = [&y](int i, int64_t s, int64_t t, int64_t bound) -> int64_t {
    int64_t sum = 0;
    for (int f = 0; f < 128; ++f) {
      const int64_t e =
          std::abs(int64_t{LUTInterpolate(static_cast<int16_t>(s), static_cast<int16_t>(t), f)} - y[128 * i + f]);
      if (e > bound) return -1;
      sum += e;
    }
    return sum;
  };
  // Knot i < 512 is the lookup's output at its own code 128 (i - 256): within the bound of y there. The end knot
  // only enters code 32767 with weight 127/128 (docs/tolerances.md derives its window).
  const auto window = [&y](int i, int64_t bound) -> std::pair<int64_t, int64_t> {
    if (i < kSteps) return {std::max(kLo, y[128 * i] - bound), std::min(kHi, y[128 * i] + bound)};
    const int64_t y0 = y[128 * 511], y127 = y[65535];
    const int64_t reach = CeilDiv((bound + 1) * 128, 127) + 1;
    const int64_t lo = y127 - CeilDiv(-(y127 - y0 - bound), 127) - reach;  // floor((y127 - y0 - bound) / 127)
    const int64_t hi = y127 + CeilDiv(y127 - y0 + bound, 127) + reach;
    return {std::max(kLo, lo), std::min(kHi, hi)};
  };
  // Bottleneck pass: which knot values of each knot some chain with every |e| <= bound reaches.
  const auto feasible = [&](int64_t bound) {
    auto [lo, hi] = window(0, bound);
    std::vector<char> reach(static_cast<size_t>(hi - lo + 1), 1);
    for (int i = 0; i < kSteps; ++i) {
      const auto [next_lo, next_hi] = window(i + 1, bound);
      std::vector<char> next(static_cast<size_t>(std::max<int64_t>(next_hi - next_lo + 1, 0)), 0);
      bool any = false;
      for (int64_t t = next_lo; t <= next_hi; ++t) {
        for (int64_t s = lo; s <= hi && !next[t - next_lo]; ++s) {
          if (reach[s - lo] && segment_error(i, s, t, bound) >= 0) next[t - next_lo] = 1, any = true;
        }
      }
      if (!any) return false;
      reach = std::move(next);
      lo = next_lo;
      hi = next_hi;
    }
    return true;
  };
  int64_t lo = 0, hi = max_bound;
  if (!feasible(hi)) return std::nullopt;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (feasible(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  // Least total |e| among the chains within the optimal bound: shortest path over the same layers.
  const int64_t bound = hi;
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (int i = 0; i <= kSteps; ++i) windows.push_back(window(i, bound));
  std::vector<std::vector<int64_t>> parent(kSteps + 1);
  std::vector<int64_t> cost(static_cast<size_t>(windows[0].second - windows[0].first + 1), 0);
  for (int i = 0; i < kSteps; ++i) {
    const auto [s_lo, s_hi] = windows[i];
    const auto [t_lo, t_hi] = windows[i + 1];
    std::vector<int64_t> next(static_cast<size_t>(t_hi - t_lo + 1), kPlusInf);
    parent[i + 1].assign(next.size(), 0);
    for (int64_t t = t_lo; t <= t_hi; ++t) {
      for (int64_t s = s_lo; s <= s_hi; ++s) {
        if (cost[s - s_lo] == kPlusInf) continue;
        const int64_t e = segment_error(i, s, t, bound);
        if (e < 0 || cost[s - s_lo] + e >= next[t - t_lo]) continue;
        next[t - t_lo] = cost[s - s_lo] + e;
        parent[i + 1][t - t_lo] = s;
      }
    }
    cost = std::move(next);
  }
  MinimaxKnots out;
  out.max_abs_error = bound;
  int64_t t = windows[kSteps].first + (std::min_element(cost.begin(), cost.end()) - cost.begin());
  for (int i = kSteps; i >= 0; --i) {
    out.knots[static_cast<size_t>(i)] = static_cast<int16_t>(t);
    if (i > 0) t = parent[i][t - windows[i].first];
  }
  return out;
}

}  // namespace fusediff::fused
