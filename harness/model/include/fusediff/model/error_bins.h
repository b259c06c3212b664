#pragma once
// |e| of a case's judged samples in bins of a magnitude, for plotting error against it (docs/batchnorm.md: BatchNorm
// error against |u| and against the channel gain gamma / sqrt(var + eps)). Integer counts, sums and maxima only, so
// results stay deterministic and shards merge exactly. std only.
#include <cstdint>
#include <map>

namespace fusediff {

struct ErrorBin {
  uint64_t count = 0;
  uint64_t sum_abs = 0;  // sum of |e| (LSB); mean = sum_abs / count
  int64_t max_abs = 0;
  friend bool operator==(const ErrorBin&, const ErrorBin&) = default;
};

// Bins by an integer key, ascending; a key's meaning is its table's (BatchNormErrorBins).
struct ErrorBins {
  std::map<int32_t, ErrorBin> bins;
  void add(int32_t key, int64_t error);
  void merge(const ErrorBins& other);
  friend bool operator==(const ErrorBins&, const ErrorBins&) = default;
};

// A conv2d+batchnorm+act case's two tables:
//   by_u:    key bit_width(|u - zu|) of the sample's intermediate code u (0: u = zu; b >= 1: 2^(b-1) <= |u - zu| < 2^b);
//   by_gain: key floor(log2 g) of its channel's gain g = |gamma| / sqrt(var + eps) (binary64, from the draw's binary32
//            parameters; correctly rounded sqrt and division, so the same on every machine), clamped to [-64, 64].
struct BatchNormErrorBins {
  ErrorBins by_u;
  ErrorBins by_gain;
  void merge(const BatchNormErrorBins& other);
  friend bool operator==(const BatchNormErrorBins&, const BatchNormErrorBins&) = default;
};

int32_t u_magnitude_bin(int32_t u, int32_t zero_point);
int32_t gain_bin(float gamma, float var, float eps);

}  // namespace fusediff
