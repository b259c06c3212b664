// LayerNorm rows under a declared NormalizationOrder, the reordering bounds, and the exact-in-every-order test.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "fusediff/reference/summation.h"

namespace fusediff::reference {

namespace {

// S / n in the accumulator's precision, then stored in binary32: binary32 (and bf16, whose kernels divide in
// binary32): fl32(S / n); binary64: fl32(fl64(S / n)). n <= 2^24 converts to binary32 exactly.
float DivideByCount(double sum, size_t n, AccumulatorPrecision acc) {
  if (acc == AccumulatorPrecision::binary64) return static_cast<float>(sum / static_cast<double>(n));
  return static_cast<float>(sum) / static_cast<float>(n);
}

// mu = fl32(fl64(S64 / n)), S64 the sequential binary64 sum of x (every x exact in double).
float MeanInDouble(std::span<const float> x) {
  double sum = 0;
  for (const float v : x) sum += v;
  return static_cast<float>(sum / static_cast<double>(x.size()));
}

struct Stats {
  float mean = 0;
  float variance = 0;
};

// Sequential binary32 Welford (model/summation_order.h): one binary32 rounding per operation, no contraction.
Stats Welford(std::span<const float> x) {
  float m = 0, m2 = 0;
  for (size_t k = 1; k <= x.size(); ++k) {
    const float d = x[k - 1] - m;
    m = m + d / static_cast<float>(k);
    m2 = m2 + d * (x[k - 1] - m);
  }
  return {m, m2 / static_cast<float>(x.size())};
}

// var = S(d^2) / n with d_j = fl32(x_j - mu) summed by the variance order.
float CenteredVariance(const SummationOrder& order, std::span<const float> x, float mean) {
  std::vector<float> d(x.size());
  for (size_t j = 0; j < x.size(); ++j) d[j] = x[j] - mean;  // fl32
  return DivideByCount(DotInOrder(order, d, d), x.size(), order.accumulator);
}

Stats RowStats(const NormalizationOrder& order, std::span<const float> x) {
  switch (order.stats) {
    case NormalizationStats::welford: return Welford(x);
    case NormalizationStats::mean_in_double: {
      const float mean = MeanInDouble(x);
      return {mean, CenteredVariance(order.variance, x, mean)};
    }
    case NormalizationStats::two_pass: {
      const float mean = DivideByCount(SumInOrder(order.mean, x), x.size(), order.mean.accumulator);
      return {mean, CenteredVariance(order.variance, x, mean)};
    }
    case NormalizationStats::one_pass: {
      const float mean = DivideByCount(SumInOrder(order.mean, x), x.size(), order.mean.accumulator);
      const float mean_square = DivideByCount(DotInOrder(order.variance, x, x), x.size(), order.variance.accumulator);
      return {mean, mean_square - mean * mean};  // fl32(fl32(E[x^2]) - fl32(mu mu))
    }
  }
  throw std::logic_error("unknown normalization statistics");
}

// p g + b: one rounding under fma, else fl32(fl32(p g) + b). An absent g (nullptr) multiplies by nothing; an absent
// b adds nothing (the product stays as rounded, -0 included).
float MulAdd(float p, const float* g, const float* b, Contraction c) {
  if (g != nullptr && b != nullptr) return c == Contraction::fma ? std::fma(p, *g, *b) : p * *g + *b;
  if (g != nullptr) return p * *g;
  return b != nullptr ? p + *b : p;
}

}  // namespace

LayerNormRow LayerNormInOrder(const NormalizationOrder& declared, std::span<const float> x,
                              std::span<const float> gamma, std::span<const float> beta, float eps) {
  const NormalizationOrder& order = order_for_length(declared, x.size());  // a length selector's choice
  const auto absent_or_of_x = [&](std::span<const float> v) { return v.empty() || v.size() == x.size(); };
  if (x.empty() || !absent_or_of_x(gamma) || !absent_or_of_x(beta)) {
    throw std::invalid_argument("LayerNormInOrder: x empty, or gamma / beta neither absent nor of x's length");
  }
  const Stats stats = RowStats(order, x);
  const float s = std::sqrt(stats.variance + eps);  // fl32(sqrt(fl32(var + eps)))
  const float r = 1.0f / s;                         // fl32(1 / s)
  LayerNormRow row{std::vector<float>(x.size()), stats.mean, stats.variance};
  for (size_t j = 0; j < x.size(); ++j) {
    const float centered = x[j] - stats.mean;  // fl32
    const float* g = gamma.empty() ? nullptr : &gamma[j];
    const float* b = beta.empty() ? nullptr : &beta[j];
    const float scale = g != nullptr ? *g : 1.0f;  // no gamma: sm = 1 r = r (exact), or 1 / s
    switch (order.output) {
      case NormalizationOutput::centered_times_inv:
        row.y[j] = MulAdd(centered * r, g, b, order.output_contraction);
        break;
      case NormalizationOutput::scale_times_inv:
        row.y[j] = MulAdd(scale * r, &centered, b, order.output_contraction);
        break;
      case NormalizationOutput::scale_over_sqrt:
        row.y[j] = MulAdd(scale / s, &centered, b, order.output_contraction);
        break;
      case NormalizationOutput::centered_over_sqrt:
        row.y[j] = MulAdd(centered / s, g, b, order.output_contraction);
        break;
    }
  }
  return row;
}

double GammaUpper(size_t k) {
  if (k == 0) return 0;
  if (k >= (size_t{1} << 23)) throw std::invalid_argument("GammaUpper: k u must stay below 1/2");
  const double ku = static_cast<double>(k) * 0x1p-24;  // exact: k < 2^23
  return std::nextafter(ku / (1 - ku), std::numeric_limits<double>::infinity());  // 1 - ku exact; one rounding
}

namespace {
// gamma sum_i t_i (t_i >= 0, each exact in double) bounded above: the binary64 sum has relative error below
// gamma^(53)_{n-1}, the product and the factor one rounding each; (1 + (2n + 4) 2^-52) covers all three for
// n < 2^40 (docs/summation-orders.md, "Evaluating the bound"), and two steps up cover the last roundings.
double UpperProduct(double gamma, double abs_sum, size_t n) {
  const double factor = 1 + static_cast<double>(2 * n + 4) * 0x1p-52;
  const double inf = std::numeric_limits<double>::infinity();
  return std::nextafter(std::nextafter(gamma * abs_sum * factor, inf), inf);
}
}  // namespace

double SumReorderingBound(std::span<const float> x) {
  if (x.size() < 2) return 0;
  double abs_sum = 0;
  for (const float v : x) abs_sum += std::fabs(static_cast<double>(v));
  return UpperProduct(GammaUpper(x.size() - 1), abs_sum, x.size());
}

double DotReorderingBound(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) throw std::invalid_argument("DotReorderingBound: a and b differ in length");
  double abs_sum = 0;
  for (size_t i = 0; i < a.size(); ++i) abs_sum += std::fabs(static_cast<double>(a[i]) * b[i]);  // exact product
  // gamma_{n+1}: one product rounding per term, n - 1 additions, and one step more for fl32(fl64(s + t)) (a
  // binary64 product into a binary32 accumulator rounds twice: u + 2^-53 per step, within one more gamma step).
  const double underflow = static_cast<double>(a.size()) * 0x1p-149;
  return UpperProduct(GammaUpper(a.size() + 1), abs_sum, a.size()) + underflow;
}

namespace {
// gamma_k = k u / (1 - k u) (+inf from k u >= 1), in double: its rounding is within the bounds' 2^-30 raise.
double GammaK(double k, double u) {
  const double ku = k * u;
  return ku >= 1 ? std::numeric_limits<double>::infinity() : ku / (1 - ku);
}
// The bounds are computed in double: each is raised by 2^-30 relative, which covers the rounding of sums of up to
// 2^22 non-negative terms; the exact statistics' estimates carry 2^-40 and the inputs' 2^-28 (docs/bisect.md).
constexpr double kUp = 1 + 0x1p-30;
constexpr double kExactSlack = 0x1p-28;
}  // namespace

void TwoPassLayerNormBounds(const TwoPassLayerNormRow& row, std::span<double> bound) {
  const size_t n = row.x.size();
  if (n == 0 || row.gamma.empty() || row.magnitude.size() != n || row.y.size() != n || bound.size() != n ||
      (!row.error.empty() && row.error.size() != n)) {
    throw std::invalid_argument("TwoPassLayerNormBounds: the row's spans differ in length");
  }
  const auto error = [&](size_t j) { return row.error.empty() ? 0.0 : row.error[j]; };
  const double u = row.u, dn = static_cast<double>(n), mean = row.mean, var = row.var;
  double s1 = 0, e1 = 0, e2 = 0;
  for (size_t j = 0; j < n; ++j) {
    s1 += row.magnitude[j];
    e1 += error(j);
    e2 += error(j) * error(j);
  }
  const double dmu = GammaK(dn + 1, u) * s1 / dn + e1 / dn, rms = std::sqrt(e2 / dn);
  const double v_hi = var * (1 + 0x1p-40);
  const double eta = 2 * std::sqrt(v_hi) * rms + (rms + dmu) * (rms + dmu);
  const double dv = eta + GammaK(dn + 4, u) * (v_hi + eta), rho = dv / (var + row.eps);
  const double rho_s = rho + GammaK(2, u) * (1 + rho), kappa = (GammaK(5, u) + rho_s) / (1 - rho_s);
  const double sigma = std::sqrt(var + row.eps) * (1 - 0x1p-40);
  // The derivation assumes no overflow: a partial sum of x or of the centred squares, in any order, is at most the
  // sum of the magnitudes (1 + gamma_(n+4)); from row.overflow on the kernel's format may overflow (var = +inf,
  // y = beta, where the exact y is finite): no bound.
  double squares = 0;
  for (size_t j = 0; j < n; ++j) {
    const double a = std::fabs(row.x[j] - mean) * (1 + 0x1p-40) + error(j) + dmu;
    squares += a * a;
  }
  const double growth = (1 + GammaK(dn + 4, u)) * kUp;
  if (!(std::max(s1, squares) * growth < row.overflow)) {
    std::fill(bound.begin(), bound.end(), std::numeric_limits<double>::infinity());
    return;
  }
  for (size_t j = 0; j < n; ++j) {
    const double g = std::fabs(row.gamma[j % row.gamma.size()]);
    if (!(g / sigma * growth < row.overflow)) {  // gamma / sigma (the scale_* forms) may overflow
      bound[j] = std::numeric_limits<double>::infinity();
      continue;
    }
    const double d = std::fabs(row.x[j] - mean) * (1 + 0x1p-40) + kExactSlack * (error(j) + dmu);
    // Whatever the rounding: |x^_i - mu^| <= sqrt(n var^) and sigma^ >= sqrt(var^) (1 - gamma_(n+5)), so the
    // computed normalized value is at most sqrt(n) (1 + gamma_(n+8)) in magnitude: a finite bound always.
    const double capped = (1 + GammaK(2, u)) * g * (std::sqrt(dn) * (1 + GammaK(dn + 8, u)) + d / sigma) +
                          GammaK(2, u) * (std::fabs(row.y[j]) + 2 * g * std::sqrt(dn));
    double derived = std::numeric_limits<double>::infinity();
    if (rho < 0.5 && std::isfinite(kappa)) {
      const double part = (1 + u) * g / sigma * (d * kappa + (error(j) + dmu) * (1 + kappa));
      derived = part + u * (std::fabs(row.y[j]) + part);
    }
    bound[j] = (std::min(derived, capped) + 2 * row.tiny) * kUp;
  }
}

std::vector<double> LayerNormPairBounds(std::span<const float> x, std::span<const float> gamma,
                                        std::span<const float> beta, float eps, const std::optional<FloatBoundary>& out) {
  const size_t n = x.size();
  if (n == 0 || gamma.size() != n || beta.size() != n) {
    throw std::invalid_argument("LayerNormPairBounds: x empty, or gamma / beta not of x's length");
  }
  std::vector<double> xd(x.begin(), x.end()), magnitude(n), gd(gamma.begin(), gamma.end()), y(n), bound(n);
  double mean = 0, var = 0;
  for (const double v : xd) mean += v;
  mean /= static_cast<double>(n);
  for (const double v : xd) var += (v - mean) * (v - mean);
  var /= static_cast<double>(n);
  for (size_t j = 0; j < n; ++j) {
    magnitude[j] = std::fabs(xd[j]);
    y[j] = (xd[j] - mean) / std::sqrt(var + eps) * gd[j] + beta[j];
  }
  TwoPassLayerNormBounds({xd, magnitude, {}, gd, y, mean, var, static_cast<double>(eps)}, bound);
  const bool bf16 = out && out->format == FloatFormat::bf16;
  for (size_t j = 0; j < n; ++j) {
    double b = bound[j];
    if (bf16) b = (b + 0x1p-8 * (std::fabs(y[j]) + b) + 0x1p-126) * kUp;
    // A side near the format's largest finite value may overflow: from 2^127 on (below binary32's and bf16's
    // overflow thresholds) the element is left unbounded.
    const bool finite = std::isfinite(b) && std::isfinite(y[j]) && std::fabs(y[j]) + b < 0x1p127;
    bound[j] = finite ? 2 * b : std::numeric_limits<double>::infinity();
  }
  return bound;
}

bool SumIsExactInEveryOrder(std::span<const float> x) {
  int low = std::numeric_limits<int>::max();  // the exponent of the lowest set bit among all x_i
  for (const float v : x) {
    if (!std::isfinite(v)) return false;
    if (v == 0) continue;
    int e = 0;
    const double f = std::frexp(static_cast<double>(v), &e);            // |v| = |f| 2^e, |f| in [1/2, 1)
    const auto m = static_cast<uint32_t>(std::ldexp(std::fabs(f), 24));  // |v| = m 2^(e - 24), m < 2^24
    low = std::min(low, e - 24 + std::countr_zero(m));
  }
  uint64_t units = 0;  // sum |x_i| / 2^low, exact, stopped above 2^24
  for (const float v : x) {
    if (v == 0) continue;
    const double scaled = std::ldexp(std::fabs(static_cast<double>(v)), -low);  // an integer (exact)
    if (scaled > 0x1p24) return false;
    units += static_cast<uint64_t>(scaled);
    if (units > (uint64_t{1} << 24)) return false;
  }
  return true;
}

bool LayerNormStatsAreExactInEveryOrder(std::span<const float> x) {
  if (x.empty() || x.size() > (size_t{1} << 24) || !SumIsExactInEveryOrder(x)) return false;
  double sum = 0;  // exact: every partial sum is exact in binary32, hence in binary64
  for (const float v : x) sum += v;
  const float mean = static_cast<float>(sum) / static_cast<float>(x.size());  // S and n are binary32 values
  std::vector<float> squares(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    const float d = x[j] - mean;                   // fl32
    const float square = d * d;                    // fl32
    if (static_cast<double>(square) != static_cast<double>(d) * d) return false;  // d^2 exact in binary64
    squares[j] = square;
  }
  return SumIsExactInEveryOrder(squares);
}

}  // namespace fusediff::reference
