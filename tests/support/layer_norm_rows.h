#pragma once
// Rows for the layer norm order tests (tests/onednn: layer_norm_order_test.cpp, f32; layer_norm_bf16_test.cpp,
// bf16; tests/bisect/ort_layer_norm_order_test.cpp, ONNX Runtime), aimed at what a normalization gets wrong: a large
// mean against a small spread, a variance near or below eps, one outlier, and rows whose sums overflow binary32 (bf16
// has binary32's range, so the same rows are bf16 rows). Every value is a bf16 value (at most 8 significant bits)
// where the regime says so, so that the bf16 test rounds nothing that matters.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

namespace fusediff::test_support {

// What a row holds (n values):
//   normal:            N(0, 1);
//   large_mean:        1000 + 4 N(0, 1) (bf16's step at 1000 is 4: a spread of a few steps on a large mean);
//   tiny_variance:     all 1 but one value a bf16 step above (1 + 2^-7) and one below (1 - 2^-8): var about
//                      2^-14 / n, near eps = 1e-5 at small n and below it for long rows;
//   outlier:           0.01 N(0, 1), one value +-2^U(8, 40) at a random place;
//   wide:              +-2^U(-20, 20);
//   subnormal:         +-k 2^-133, k in [1, 127]: bf16 (and binary32) subnormals only;
//   squares_overflow:  +-2^U(64, 100): the mean is finite, each (x - mu)^2 overflows binary32 (>= 2^128);
//   sum_of_squares_overflow: a, -a, a, -a, ... with a = 1.5 2^63 (a 0 last at odd n): the mean is 0 exactly in any
//                      order, each d^2 = 1.125 2^127 is finite, their sum overflows from two terms on (n >= 2);
//   mean_overflow:     U(1, 1.9) 2^127, all positive: the sum of x overflows from two terms on: mu = +inf;
//   near_max_mixed:    +-U(1, 1.9) 2^127: whether a partial sum overflows depends on the order of the sum.
enum class LnRowRegime {
  normal,
  large_mean,
  tiny_variance,
  outlier,
  wide,
  subnormal,
  squares_overflow,
  sum_of_squares_overflow,
  mean_overflow,
  near_max_mixed
};
inline constexpr LnRowRegime kLnRowRegimes[] = {LnRowRegime::normal,
                                                LnRowRegime::large_mean,
                                                LnRowRegime::tiny_variance,
                                                LnRowRegime::outlier,
                                                LnRowRegime::wide,
                                                LnRowRegime::subnormal,
                                                LnRowRegime::squares_overflow,
                                                LnRowRegime::sum_of_squares_overflow,
                                                LnRowRegime::mean_overflow,
                                                LnRowRegime::near_max_mixed};
// The regimes whose rows overflow binary32 somewhere in the statistics.
inline constexpr LnRowRegime kLnOverflowRegimes[] = {LnRowRegime::squares_overflow,
                                                     LnRowRegime::sum_of_squares_overflow, LnRowRegime::mean_overflow,
                                                     LnRowRegime::near_max_mixed};

inline std::string_view to_string(LnRowRegime r) {
  switch (r) {
    case LnRowRegime::normal: return "normal";
    case LnRowRegime::large_mean: return "large_mean";
    case LnRowRegime::tiny_variance: return "tiny_variance";
    case LnRowRegime::outlier: return "outlier";
    case LnRowRegime::wide: return "wide";
    case LnRowRegime::subnormal: return "subnormal";
    case LnRowRegime::squares_overflow: return "squares_overflow";
    case LnRowRegime::sum_of_squares_overflow: return "sum_of_squares_overflow";
    case LnRowRegime::mean_overflow: return "mean_overflow";
    case LnRowRegime::near_max_mixed: return "near_max_mixed";
  }
  return "?";
}

// x truncated to bf16's 8 significant bits (toward zero: the regimes' values stay in their ranges; the bf16 test
// converts the rows with the reference's rounding, which then is exact).
inline float TruncateToBf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  bits &= 0xFFFF0000u;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// One row of n values in `regime`, every value a bf16 value.
inline std::vector<float> LayerNormRegimeRow(std::mt19937_64& rng, LnRowRegime regime, size_t n) {
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> unit(0, 1);
  const auto sign = [&] { return (rng() & 1u) != 0 ? -1.0f : 1.0f; };
  const auto near_max = [&] { return std::ldexp(1.0f + 0.9f * unit(rng), 127); };
  std::vector<float> x(n);
  for (size_t j = 0; j < n; ++j) {
    switch (regime) {
      case LnRowRegime::normal: x[j] = normal(rng); break;
      case LnRowRegime::large_mean: x[j] = 1000 + 4 * normal(rng); break;
      case LnRowRegime::tiny_variance: x[j] = 1; break;
      case LnRowRegime::outlier: x[j] = 0.01f * normal(rng); break;
      case LnRowRegime::wide: x[j] = sign() * std::exp2(-20 + 40 * unit(rng)); break;
      case LnRowRegime::subnormal: x[j] = sign() * std::ldexp(static_cast<float>(1 + rng() % 127), -133); break;
      case LnRowRegime::squares_overflow: x[j] = sign() * std::exp2(64 + 36 * unit(rng)); break;
      case LnRowRegime::sum_of_squares_overflow: x[j] = (j % 2 == 0 ? 1.5f : -1.5f) * 0x1p63f; break;
      case LnRowRegime::mean_overflow: x[j] = near_max(); break;
      case LnRowRegime::near_max_mixed: x[j] = sign() * near_max(); break;
    }
    x[j] = TruncateToBf16(x[j]);
  }
  if (regime == LnRowRegime::tiny_variance && n >= 2) {
    x[rng() % n] = 1 + 0x1p-7f;
    x[rng() % n] = 1 - 0x1p-8f;
  }
  if (regime == LnRowRegime::outlier) x[rng() % n] = TruncateToBf16(sign() * std::exp2(8 + 32 * unit(rng)));
  if (regime == LnRowRegime::sum_of_squares_overflow && n % 2 == 1 && n > 1) x[n - 1] = 0;
  return x;
}

// `rows` rows of `length` float values (row-major), row r in one of three regimes by r mod 3: centred (N(0, 1)), a
// large mean with a small spread (1000 + 0.01 N(0, 1)), and wide magnitudes (+-2^U(-20, 20)). The f32 order tests'
// rows (oneDNN's and ONNX Runtime's layer norm).
inline std::vector<float> ThreeRegimeRows(std::mt19937_64& rng, int64_t rows, int64_t length) {
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> exponent(-20, 20);
  std::vector<float> x(static_cast<size_t>(rows * length));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < length; ++c) {
      float& v = x[static_cast<size_t>(r * length + c)];
      switch (r % 3) {
        case 0: v = normal(rng); break;
        case 1: v = 1000 + 0.01f * normal(rng); break;
        default: v = std::exp2(exponent(rng)) * (normal(rng) < 0 ? -1.0f : 1.0f); break;
      }
    }
  }
  return x;
}

// Equal as stored, a NaN equal to any NaN: a NaN's sign and payload follow which operand the FPU propagates, which
// the declared order does not fix.
inline bool SameValueOrBothNan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace fusediff::test_support
