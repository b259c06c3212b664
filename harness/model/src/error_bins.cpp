#include "fusediff/model/error_bins.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>

namespace fusediff {

void ErrorBins::add(int32_t key, int64_t error) {
  ErrorBin& b = bins[key];
  const int64_t magnitude = error < 0 ? -error : error;
  ++b.count;
  b.sum_abs += static_cast<uint64_t>(magnitude);
  b.max_abs = std::max(b.max_abs, magnitude);
}

void ErrorBins::merge(const ErrorBins& other) {
  for (const auto& [key, o] : other.bins) {
    ErrorBin& b = bins[key];
    b.count += o.count;
    b.sum_abs += o.sum_abs;
    b.max_abs = std::max(b.max_abs, o.max_abs);
  }
}

void BatchNormErrorBins::merge(const BatchNormErrorBins& other) {
  by_u.merge(other.by_u);
  by_gain.merge(other.by_gain);
}

int32_t u_magnitude_bin(int32_t u, int32_t zero_point) {
  const int64_t d = int64_t{u} - zero_point;
  return static_cast<int32_t>(std::bit_width(static_cast<uint64_t>(d < 0 ? -d : d)));
}

int32_t gain_bin(float gamma, float var, float eps) {
  const double g = std::fabs(static_cast<double>(gamma)) / std::sqrt(static_cast<double>(var) + static_cast<double>(eps));
  if (!(g > 0) || !std::isfinite(g)) return g > 0 ? 64 : -64;
  return std::clamp(std::ilogb(g), -64, 64);
}

}  // namespace fusediff
