// Declared summation orders (reference/summation.h): worked examples where orders differ, the reordering bound
// against the exact sum (exact integers: Boost.Multiprecision) over random rows, permutations and orders, and the
// rows whose sums are exact in every order.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/model/summation_order.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/summation.h"
#include "../support/layer_norm_rows.h"

namespace fusediff::reference {
namespace {

using boost::multiprecision::cpp_int;

SummationOrder Order(const char* text) { return parse_summation_order(text, "order"); }

// v 2^scale as an exact integer (v a multiple of 2^-scale: every binary32 sum of binary32 values is a multiple
// of 2^-149, every sum of their products a multiple of 2^-298).
cpp_int Scaled(double v, int scale) {
  int e = 0;
  const double f = std::frexp(v, &e);
  const auto m = static_cast<int64_t>(std::ldexp(f, 53));  // v = m 2^(e - 53), exact
  const int shift = e - 53 + scale;
  cpp_int big = m;
  if (shift >= 0) return big << shift;
  const cpp_int unit = cpp_int(1) << -shift;
  if (big % unit != 0) ADD_FAILURE() << v << " is not a multiple of 2^-" << scale;
  return big / unit;
}

// ceil(v 2^scale) for v >= 0.
cpp_int ScaledCeil(double v, int scale) {
  int e = 0;
  const double f = std::frexp(v, &e);
  const auto m = static_cast<int64_t>(std::ldexp(f, 53));
  const int shift = e - 53 + scale;
  if (shift >= 0) return cpp_int(m) << shift;
  const cpp_int unit = cpp_int(1) << -shift;
  return (cpp_int(m) + unit - 1) / unit;
}

cpp_int ExactSum(const std::vector<float>& x) {
  cpp_int sum = 0;
  for (const float v : x) sum += Scaled(v, 149);
  return sum;
}

cpp_int ExactDot(const std::vector<float>& a, const std::vector<float>& b) {
  cpp_int sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += Scaled(a[i], 149) * Scaled(b[i], 149);
  return sum;
}

TEST(SummationOrder, WorkedExamplesWhereOrdersDiffer) {
  // 2^24 + 1 ties to 2^24 (even): left to right loses both ones, the pairwise tree keeps them (1 + 1 = 2).
  const std::vector<float> x{0x1p24f, 1, 1};
  EXPECT_EQ(SumInOrder(Order("sequential:nofma:prod32:acc32"), x), 0x1p24);
  EXPECT_EQ(SumInOrder(Order("pairwise(1):nofma:prod32:acc32"), x), 0x1p24 + 2);
  EXPECT_EQ(SumInOrder(Order("sequential:nofma:prod32:acc64"), x), 0x1p24 + 2);
  // Eight lanes: 2^24 in lane 0, ones in lanes 1..7, and one tail element. halve.adjacent.adjacent: lane 0 + lane 4
  // ties to 2^24, the other pairs make 2, 2, 2; then 2^24 + 2, 4; then 2^24 + 6; the tail makes 2^24 + 7, a tie
  // that rounds to even, 2^24 + 8. The sequential lane fold and left to right lose every one.
  std::vector<float> row(9, 1.0f);
  row[0] = 0x1p24f;
  EXPECT_EQ(SumInOrder(Order("blocked(8x1,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32"), row), 0x1p24 + 8);
  EXPECT_EQ(SumInOrder(Order("blocked(8x1,sequential,tail_after_fold):nofma:prod32:acc32"), row), 0x1p24);
  EXPECT_EQ(SumInOrder(Order("sequential:nofma:prod32:acc32"), row), 0x1p24);
  // bf16 accumulator: 256 + 1 rounds to 256 (8 significant bits).
  EXPECT_EQ(SumInOrder(Order("sequential:nofma:prod32:accbf16"), std::vector<float>{256, 1, 1}), 256);
  // fma keeps the product exact: -(1 + 2^-12) plus (1 + 2^-13)^2 = 1 + 2^-12 + 2^-26 leaves 2^-26 only with fma.
  const std::vector<float> a{1, 1 + 0x1p-13f}, b{-(1 + 0x1p-12f), 1 + 0x1p-13f};
  EXPECT_EQ(DotInOrder(Order("sequential:fma:prod32:acc32"), a, b), 0x1p-26);
  EXPECT_EQ(DotInOrder(Order("sequential:nofma:prod32:acc32"), a, b), 0);
}

// lanes 8 with halve.adjacent.adjacent, 9 vectors and unroll 8: vectors 0..7 into accumulators 0..7, the halving
// fold, vector 8 into accumulator 0, then the lanes, then the tail: checked against the same steps written out.
TEST(SummationOrder, BlockedFollowsItsDeclaredSteps) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000, 1000);
  std::vector<float> x(8 * 9 + 3);
  for (float& v : x) v = dist(rng);
  float acc[8][8] = {};
  for (int v = 0; v < 8; ++v)
    for (int l = 0; l < 8; ++l) acc[v][l] += x[v * 8 + l];
  for (int m = 8; m > 1; m /= 2)
    for (int j = 0; j < m / 2; ++j)
      for (int l = 0; l < 8; ++l) acc[j][l] += acc[j + m / 2][l];
  for (int l = 0; l < 8; ++l) acc[0][l] += x[64 + l];
  float h[4];
  for (int l = 0; l < 4; ++l) h[l] = acc[0][l] + acc[0][l + 4];
  float sum = (h[0] + h[1]) + (h[2] + h[3]);
  for (size_t i = 72; i < x.size(); ++i) sum += x[i];
  EXPECT_EQ(SumInOrder(Order("blocked(8x8,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32"), x), sum);
  // tail_into_lane0 (GCC's omp simd reduction): four lanes, the tail into lane 0, then lane 0 + lane 1 + ...
  float lane[4] = {};
  for (size_t v = 0; v < x.size() / 4; ++v)
    for (int l = 0; l < 4; ++l) lane[l] += x[v * 4 + l];
  for (size_t i = x.size() / 4 * 4; i < x.size(); ++i) lane[0] += x[i];
  EXPECT_EQ(SumInOrder(Order("blocked(4x1,sequential,tail_into_lane0):nofma:prod32:acc32"), x),
            ((lane[0] + lane[1]) + lane[2]) + lane[3]);
}

// tail_after_fold_mul4 (GCC's vectorized epilogue, ONNX Runtime 1.30's MLAS AVX2 variance): eight lanes under fma,
// folded 4+4, 2+2, 1+1; a tail of 4 or more squares starts with 4 rounded squares added in order, the rest fused.
// A tail of 3 is all fused, as tail_after_fold. Some row of 15 tells the two tails apart.
TEST(SummationOrder, TailAfterFoldMul4RoundsTheFirstFourTailProducts) {
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal(0, 1);
  const SummationOrder mul4 = Order("blocked(8x1,halve.halve.halve,tail_after_fold_mul4):fma:prod32:acc32");
  const SummationOrder plain = Order("blocked(8x1,halve.halve.halve,tail_after_fold):fma:prod32:acc32");
  int differ = 0;
  for (int row = 0; row < 200; ++row) {
    for (const size_t n : {size_t{11}, size_t{15}}) {
      std::vector<float> d(n);
      for (float& v : d) v = normal(rng);
      float lane[8] = {};
      for (int l = 0; l < 8; ++l) lane[l] = std::fma(d[l], d[l], 0.0f);
      for (int l = 0; l < 4; ++l) lane[l] += lane[l + 4];
      for (int l = 0; l < 2; ++l) lane[l] += lane[l + 2];
      float sum = lane[0] + lane[1];
      size_t i = 8;
      if (n - i >= 4) {
        for (; i < 12; ++i) sum += d[i] * d[i];  // fl32(fl32(d d) + s): -ffp-contract=off
      }
      for (; i < n; ++i) sum = std::fma(d[i], d[i], sum);
      ASSERT_EQ(DotInOrder(mul4, d, d), sum) << "n " << n << " row " << row;
      if (n == 11) {
        ASSERT_EQ(DotInOrder(plain, d, d), sum) << "row " << row;
      }
      differ += n == 15 && DotInOrder(plain, d, d) != sum ? 1 : 0;
    }
  }
  EXPECT_GT(differ, 0);
}

// A random binary32 value: a 24-bit significand and an exponent in [-40, 40], either sign; some exact zeros.
float RandomValue(std::mt19937_64& rng) {
  const uint32_t m = static_cast<uint32_t>(rng() % (1u << 24));
  const int e = static_cast<int>(rng() % 81) - 40 - 23;
  const float v = std::ldexp(static_cast<float>(m), e);
  return (rng() & 1) ? -v : v;
}

// A random order: any shape, lane count, unroll, fold; contraction and product precision (binary32 or binary64
// accumulators: the bound does not cover bf16 ones).
SummationOrder RandomOrder(std::mt19937_64& rng, bool products) {
  SummationOrder order;
  order.shape = static_cast<SumShape>(rng() % 3);
  order.leaf = 1 + static_cast<int>(rng() % 16);
  order.lanes = 1 << (rng() % 5);
  order.unroll = 1 << (rng() % 4);
  if (rng() % 2) {
    for (int m = order.lanes; m > 1; m /= 2) order.lane_fold.push_back(static_cast<LaneFoldStep>(rng() % 2));
  }
  order.tail = static_cast<BlockedTail>(rng() % 3);
  order.accumulator = (rng() % 4 == 0) ? AccumulatorPrecision::binary64 : AccumulatorPrecision::binary32;
  if (products) {
    order.product_precision = static_cast<ProductPrecision>(rng() % 2);
    if (order.accumulator == AccumulatorPrecision::binary32 && rng() % 2) order.contraction = Contraction::fma;
  }
  return order;
}

RC_GTEST_PROP(SummationBound, AnyOrderOfAnyPermutationStaysWithinGammaNMinus1, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
  const size_t n = *rc::gen::inRange<size_t>(1, 1200);
  std::vector<float> x(n);
  for (float& v : x) v = (rng() % 8 == 0) ? 0.0f : RandomValue(rng);
  const cpp_int exact = ExactSum(x);
  const double bound = SumReorderingBound(x);
  std::shuffle(x.begin(), x.end(), rng);
  const SummationOrder first = RandomOrder(rng, false), second = RandomOrder(rng, false);
  const cpp_int s1 = Scaled(SumInOrder(first, x), 149), s2 = Scaled(SumInOrder(second, x), 149);
  RC_ASSERT(abs(s1 - exact) <= ScaledCeil(bound, 149));
  RC_ASSERT(abs(s1 - s2) <= ScaledCeil(bound, 149) * 2);
  RC_TAG(n < 64 ? "n < 64" : "n >= 64");
}

RC_GTEST_PROP(SummationBound, AnyOrderOfProductsStaysWithinGammaN, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
  const size_t n = *rc::gen::inRange<size_t>(1, 800);
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = RandomValue(rng);
    b[i] = RandomValue(rng);
  }
  const cpp_int exact = ExactDot(a, b);
  const double bound = DotReorderingBound(a, b);
  const SummationOrder order = RandomOrder(rng, true);
  RC_ASSERT(abs(Scaled(DotInOrder(order, a, b), 298) - exact) <= ScaledCeil(bound, 298));
  RC_TAG(to_string(order.contraction));
}

// The bound is attained closely enough to matter: 2^24 followed by ones loses every one left to right.
TEST(SummationBound, IsNearlyAttained) {
  std::vector<float> x(1001, 1.0f);
  x[0] = 0x1p24f;
  const double error = 1000;  // sequential: 2^24 + 1 ties to 2^24 each time
  EXPECT_EQ(SumInOrder(Order("sequential:nofma:prod32:acc32"), x), 0x1p24);
  EXPECT_LE(error, SumReorderingBound(x));
  EXPECT_GT(error, SumReorderingBound(x) / 2);  // within a factor 2: the bound is not loose here
}

// benchdnn-style rows: k_j 2^e with sum |k_j| <= 2^24: every order returns the exact sum; one unit more and an
// order exists that rounds (the check says so).
std::vector<float> ExactRow(std::mt19937_64& rng, size_t n, int e) {
  std::vector<float> x(n);
  const uint64_t budget = (uint64_t{1} << 24) / n;  // |k_j| <= budget keeps sum |k_j| <= 2^24
  for (float& v : x) {
    const auto k = static_cast<int64_t>(rng() % (budget + 1));
    v = std::ldexp(static_cast<float>((rng() & 1) ? -k : k), e);
  }
  return x;
}

RC_GTEST_PROP(ExactRows, EveryOrderReturnsTheExactSum, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
  const size_t n = *rc::gen::inRange<size_t>(1, 5000);
  const int e = *rc::gen::inRange(-60, 40);
  std::vector<float> x = ExactRow(rng, n, e);
  RC_ASSERT(SumIsExactInEveryOrder(x));
  const cpp_int exact = ExactSum(x);
  for (int i = 0; i < 4; ++i) RC_ASSERT(Scaled(SumInOrder(RandomOrder(rng, false), x), 149) == exact);
}

TEST(ExactRows, TheConditionIsSharp) {
  std::vector<float> x{0x1p24f, 1};  // sum |k| = 2^24 + 1 units of 2^0
  EXPECT_FALSE(SumIsExactInEveryOrder(x));
  EXPECT_NE(SumInOrder(Order("sequential:nofma:prod32:acc32"), x), 0x1p24 + 1);
  x = {0x1p23f, 0x1p23f - 1, 1};  // exactly 2^24 units
  EXPECT_TRUE(SumIsExactInEveryOrder(x));
  x = {0.5f, 0x1p23f};  // units of 2^-1: 2^24 + 1 of them
  EXPECT_FALSE(SumIsExactInEveryOrder(x));
  EXPECT_FALSE(SumIsExactInEveryOrder(std::vector<float>{1, INFINITY}));
  EXPECT_TRUE(SumIsExactInEveryOrder(std::vector<float>{}));
}

NormalizationOrder NormOrder(NormalizationStats stats, const char* mean, const char* var) {
  NormalizationOrder order;
  order.stats = stats;
  order.mean = Order(mean);
  order.variance = Order(var);
  order.output = NormalizationOutput::centered_times_inv;
  order.output_contraction = Contraction::fma;
  return order;
}

// On rows mu0 + k_j 2^e with the k_j in +- pairs (sum k_j = 0), every two-pass order and the double mean give the
// same mean (mu0, exactly) and the same variance (one rounding of an exact sum), so the same output.
TEST(ExactRows, MeanAndVarianceMatchAcrossOrders) {
  std::mt19937_64 rng(11);
  for (const size_t n : {1u, 2u, 7u, 64u, 768u, 1000u, 4096u}) {
    const float mu0 = 12.0f;  // with e = -6: 768 2^-6 units, n of them stay below 2^24 units
    std::vector<float> x(n, mu0), gamma(n, 1.5f), beta(n, -0.25f);
    for (size_t j = 0; j + 1 < n; j += 2) {
      const float d = std::ldexp(static_cast<float>(rng() % 64), -6);
      x[j] = mu0 + d;
      x[j + 1] = mu0 - d;
    }
    std::shuffle(x.begin(), x.end(), rng);
    const LayerNormRow a = LayerNormInOrder(NormOrder(NormalizationStats::two_pass, "sequential:nofma:prod32:acc32",
                                                      "sequential:nofma:prod32:acc32"),
                                            x, gamma, beta, 1e-5f);
    const LayerNormRow b = LayerNormInOrder(
        NormOrder(NormalizationStats::two_pass, "blocked(8x8,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32",
                  "blocked(8x8,halve.adjacent.adjacent,tail_after_fold):fma:prod32:acc32"),
        x, gamma, beta, 1e-5f);
    const LayerNormRow c = LayerNormInOrder(NormOrder(NormalizationStats::mean_in_double, "sequential:nofma:prod32:acc32",
                                                      "pairwise(4):fma:prod32:acc32"),
                                            x, gamma, beta, 1e-5f);
    EXPECT_EQ(a.mean, mu0) << n;
    EXPECT_EQ(b.mean, mu0) << n;
    EXPECT_EQ(c.mean, mu0) << n;
    EXPECT_EQ(a.variance, b.variance) << n;
    EXPECT_EQ(a.variance, c.variance) << n;
    EXPECT_EQ(a.y, b.y) << n;
    EXPECT_EQ(a.y, c.y) << n;
  }
}

// An exact row as the exact_rows regime draws it: (c + delta_j) 2^e with sum delta_j = 0, |delta_j| <= w,
// n w^2 <= 2^24 (generators/src/targets.cpp ExactRowCodes), any n.
std::vector<float> PairedExactRow(std::mt19937_64& rng, size_t n, int64_t c, int64_t w, int e) {
  std::vector<int64_t> delta(n, 0);
  for (size_t j = 0; j + 1 < n; j += 2) {
    delta[j] = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * w + 1)) - w;
    delta[j + 1] = -delta[j];
  }
  std::shuffle(delta.begin(), delta.end(), rng);
  std::vector<float> x(n);
  for (size_t j = 0; j < n; ++j) x[j] = std::ldexp(static_cast<float>(c + delta[j]), e);
  return x;
}

TEST(ExactRows, TheLayerNormCheckAcceptsExactRowsAndRefusesOthers) {
  std::mt19937_64 rng(5);
  for (const size_t n : {1u, 2u, 3u, 12u, 16u, 1000u, 4096u}) {
    EXPECT_TRUE(LayerNormStatsAreExactInEveryOrder(PairedExactRow(rng, n, 120, 64, -5))) << n;
  }
  // mu = fl32(7 / 3) rounds: d_j has 24 significant bits, its square is not exact.
  EXPECT_FALSE(LayerNormStatsAreExactInEveryOrder(std::vector<float>{1, 2, 4}));
  // The sum of x and mu = 1 are exact, but the squares 4095^2, 4095^2, 1, 1, 0 are 2 4095^2 + 2 > 2^24 units of 1
  // (4095^2 + 4095^2 + 1 is odd and above 2^25: it rounds); with 2047 they are 2 2047^2 + 2 < 2^24 units.
  EXPECT_FALSE(LayerNormStatsAreExactInEveryOrder(std::vector<float>{4096, -4094, 2, 0, 1}));
  EXPECT_TRUE(LayerNormStatsAreExactInEveryOrder(std::vector<float>{2048, -2046, 2, 0, 1}));
  EXPECT_FALSE(LayerNormStatsAreExactInEveryOrder(std::vector<float>{}));
  EXPECT_FALSE(LayerNormStatsAreExactInEveryOrder(std::vector<float>{0x1p24f, 1}));  // the sum of x rounds
  // A square that underflows: d = 2^-80 (its square 2^-160 is below binary32's smallest subnormal).
  EXPECT_FALSE(LayerNormStatsAreExactInEveryOrder(std::vector<float>{0x1p-80f, -0x1p-80f}));
}

// A random two_pass or mean_in_double order with binary32 or binary64 accumulators: what exact_rows_difference
// (model/summation_order.h) says is equal on exact rows, unless `other` draws welford, one_pass, bf16 accumulators
// and any output.
NormalizationOrder RandomNormalizationOrder(std::mt19937_64& rng, bool other) {
  NormalizationOrder o;
  o.stats = static_cast<NormalizationStats>(rng() % (other ? 4 : 2));
  o.mean = RandomOrder(rng, false);
  o.variance = RandomOrder(rng, true);
  if (other && rng() % 4 == 0) o.variance.accumulator = AccumulatorPrecision::bf16;
  if (other && rng() % 4 == 0) o.mean.accumulator = AccumulatorPrecision::bf16;
  if (o.variance.accumulator == AccumulatorPrecision::bf16) o.variance.contraction = Contraction::none;
  o.output = static_cast<NormalizationOutput>(rng() % (other ? 4 : 1));
  o.output_contraction = other && rng() % 2 ? Contraction::none : Contraction::fma;
  return o;
}

// The model's rule holds: two orders it finds equal give the same mean, variance and y, bit for bit, on every
// exact row (any length, centre, spread, gamma and beta); where it finds them different, the classification
// shows how often they still agree (a rule may be conservative, never wrong).
RC_GTEST_PROP(ExactRows, OrdersEqualOnExactRowsGiveTheSameOutputs, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
  constexpr size_t kLengths[] = {1, 2, 3, 7, 8, 15, 16, 31, 64, 100, 255, 768, 4096};
  // Drawn from rng, not rc::gen::inRange, whose early (small-size) values crowd the low end.
  const size_t n = kLengths[rng() % std::size(kLengths)];
  const int64_t w = std::min<int64_t>(static_cast<int64_t>(rng() % 129), static_cast<int64_t>(std::sqrt(0x1p24 / n)));
  const int64_t c = static_cast<int64_t>(rng() % 256) - 128;
  const int e = static_cast<int>(rng() % 16) - 12;
  const std::vector<float> x = PairedExactRow(rng, n, c, w, e);
  RC_ASSERT(LayerNormStatsAreExactInEveryOrder(x));
  std::vector<float> gamma(n), beta(n);
  for (size_t j = 0; j < n; ++j) {
    gamma[j] = static_cast<float>(static_cast<int>(rng() % 3001) - 1500) / 1000.0f;
    beta[j] = static_cast<float>(static_cast<int>(rng() % 1001) - 500) / 1000.0f;
  }
  RC_CLASSIFY(n >= 768, "n >= 768");
  const bool other = *rc::gen::arbitrary<bool>();
  const NormalizationOrder a = RandomNormalizationOrder(rng, false), b = RandomNormalizationOrder(rng, other);
  const float eps = *rc::gen::element(1e-5f, std::ldexp(1.0f, 2 * e));
  const LayerNormRow ra = LayerNormInOrder(a, x, gamma, beta, eps), rb = LayerNormInOrder(b, x, gamma, beta, eps);
  const bool same = ra.mean == rb.mean && ra.variance == rb.variance && ra.y == rb.y;
  if (exact_rows_difference(a, b).empty()) {
    RC_LOG() << format_normalization_order(a) << " / " << format_normalization_order(b) << " n=" << n;
    RC_ASSERT(same);
    RC_TAG("equal by the rule");
  } else {
    RC_TAG(same ? "different by the rule, same here" : "different by the rule, different here");
  }
}

// The rule's "different" is not vacuous: on exact rows, ORT's order and oneDNN's C++ kernel's (another output
// formula) give other outputs, while ORT's and oneDNN's jit order never do.
TEST(ExactRows, OtherOutputFormulasDifferOnExactRowsWhereTheStatisticsAgree) {
  const NormalizationOrder ort = named_normalization_order("ort", "test");
  const NormalizationOrder jit = named_normalization_order("onednn_jit", "test");
  const NormalizationOrder cpp = named_normalization_order("onednn_cpp", "test");
  ASSERT_TRUE(exact_rows_difference(ort, jit).empty());
  ASSERT_FALSE(exact_rows_difference(ort, cpp).empty());
  std::mt19937_64 rng(3);
  size_t outputs_differ = 0;
  for (int i = 0; i < 200; ++i) {
    const size_t n = 4 + rng() % 13;
    const std::vector<float> x = PairedExactRow(rng, n, static_cast<int64_t>(rng() % 200) - 100, 1 + rng() % 20, -5);
    std::vector<float> gamma(n), beta(n);
    for (size_t j = 0; j < n; ++j) {
      gamma[j] = static_cast<float>(static_cast<int>(rng() % 3001) - 1500) / 1000.0f;
      beta[j] = static_cast<float>(static_cast<int>(rng() % 1001) - 500) / 1000.0f;
    }
    const LayerNormRow a = LayerNormInOrder(ort, x, gamma, beta, 1e-5f), b = LayerNormInOrder(jit, x, gamma, beta, 1e-5f),
                       c = LayerNormInOrder(cpp, x, gamma, beta, 1e-5f);
    EXPECT_EQ(a.y, b.y);
    EXPECT_EQ(a.mean, c.mean);
    EXPECT_EQ(a.variance, c.variance);
    outputs_differ += a.y != c.y;
  }
  EXPECT_GT(outputs_differ, 10u);
}

// The named wrong-but-used variant: E[x^2] - mu^2 at a large mean loses the variance entirely; two-pass keeps it.
TEST(NormalizationOrder, OnePassCancelsAtALargeMean) {
  std::vector<float> x{10000.0f, 10000.5f, 9999.5f, 10000.0f}, gamma(4, 1.0f), beta(4, 0.0f);
  const char* seq = "sequential:nofma:prod32:acc32";
  const LayerNormRow two = LayerNormInOrder(NormOrder(NormalizationStats::two_pass, seq, seq), x, gamma, beta, 0);
  const LayerNormRow one = LayerNormInOrder(NormOrder(NormalizationStats::one_pass, seq, seq), x, gamma, beta, 0);
  EXPECT_EQ(two.variance, 0.125f);
  EXPECT_NE(one.variance, 0.125f);
}

// An absent beta adds nothing (a kernel run without use_shift): x - mu = -0 - (+0) = -0 keeps its sign through
// (x - mu) r; a beta of zeros adds +0 and makes it +0. An absent gamma is a gamma of ones in every output formula.
TEST(NormalizationOrder, AbsentShiftKeepsNegativeZero) {
  const std::vector<float> x{-0.0f, 0.0f, 1.0f, -1.0f}, ones(4, 1.0f), zeros(4, 0.0f);
  for (const NamedNormalizationOrder& named : named_normalization_orders()) {
    SCOPED_TRACE(std::string(named.name));
    const NormalizationOrder order = named_normalization_order(named.name, "test");
    const LayerNormRow absent = LayerNormInOrder(order, x, {}, {}, 1e-5f);
    const LayerNormRow added = LayerNormInOrder(order, x, ones, zeros, 1e-5f);
    ASSERT_EQ(absent.mean, 0.0f);
    EXPECT_TRUE(std::signbit(absent.y[0]) && absent.y[0] == 0);
    EXPECT_FALSE(std::signbit(added.y[0]));
    for (size_t j = 1; j < x.size(); ++j) EXPECT_EQ(absent.y[j], added.y[j]) << j;
    const LayerNormRow scaled = LayerNormInOrder(order, x, ones, {}, 1e-5f);
    for (size_t j = 0; j < x.size(); ++j) EXPECT_EQ(std::signbit(scaled.y[j]), std::signbit(absent.y[j])) << j;
  }
  EXPECT_THROW(LayerNormInOrder(named_normalization_order("sequential", "test"), x, std::vector<float>(3, 1.0f), {},
                                1e-5f),
               std::invalid_argument);
}

// Overflow follows IEEE arithmetic through the declared roundings: squares that are finite but sum past binary32's
// largest value give a variance of +inf, r = 0 and y = beta; a sum of x that overflows gives mu = +inf and y = NaN.
TEST(NormalizationOrder, OverflowingSumsGiveBetaOrNan) {
  const float a = 1.5f * 0x1p63f;  // a^2 = 1.125 2^127 is finite; 2 a^2 is not
  const std::vector<float> gamma{2.0f, 3.0f}, beta{0.5f, -0.25f};
  for (const NamedNormalizationOrder& named : named_normalization_orders()) {
    SCOPED_TRACE(std::string(named.name));
    const NormalizationOrder order = named_normalization_order(named.name, "test");
    if (order_for_length(order, 2).stats == NormalizationStats::welford) continue;  // m2 += d (x - m): another sum
    const LayerNormRow squares = LayerNormInOrder(order, std::vector<float>{a, -a}, gamma, beta, 1e-5f);
    EXPECT_EQ(squares.mean, 0.0f);
    EXPECT_EQ(squares.variance, std::numeric_limits<float>::infinity());
    EXPECT_EQ(squares.y, beta);
    const float big = 1.5f * 0x1p127f;
    const LayerNormRow mean = LayerNormInOrder(order, std::vector<float>{big, big}, gamma, beta, 1e-5f);
    if (order.mean.accumulator == AccumulatorPrecision::binary64) {  // ort: 2 big is finite in binary64
      EXPECT_EQ(mean.mean, big);
      EXPECT_EQ(mean.y, beta);
      continue;
    }
    EXPECT_EQ(mean.mean, std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(mean.y[0]) && std::isnan(mean.y[1]));
  }
}

// ---- The float layernorm's pair bound (summation.h LayerNormPairBounds): two two-pass evaluations of a row stay
// within it, element by element; what is not such an evaluation leaves it.

// A random order of the bound's class (model/summation_order.h normalization_bound_uncovered): two_pass or
// mean_in_double, any sum shapes, precisions and contractions, any output form.
NormalizationOrder RandomTwoPassOrder(std::mt19937_64& rng) {
  NormalizationOrder o = RandomNormalizationOrder(rng, true);
  o.stats = rng() % 2 ? NormalizationStats::two_pass : NormalizationStats::mean_in_double;
  if (o.mean.accumulator == AccumulatorPrecision::bf16) o.mean.accumulator = AccumulatorPrecision::binary32;
  if (o.variance.accumulator == AccumulatorPrecision::bf16) o.variance.accumulator = AccumulatorPrecision::binary32;
  return o;
}

// The largest |y_a - y_b| / bound over a row, the outputs stored at `out` (absent: binary32).
double RowRatio(const NormalizationOrder& a, const NormalizationOrder& b, const std::vector<float>& x,
                const std::vector<float>& gamma, const std::vector<float>& beta, float eps,
                const std::optional<FloatBoundary>& out = std::nullopt) {
  const std::vector<double> bound = LayerNormPairBounds(x, gamma, beta, eps, out);
  const LayerNormRow ra = LayerNormInOrder(a, x, gamma, beta, eps), rb = LayerNormInOrder(b, x, gamma, beta, eps);
  double r = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const double ya = out ? RoundToFormat(ra.y[j], *out) : ra.y[j], yb = out ? RoundToFormat(rb.y[j], *out) : rb.y[j];
    if (!std::isfinite(bound[j])) continue;
    r = std::max(r, std::fabs(ya - yb) / bound[j]);
  }
  return r;
}

RC_GTEST_PROP(LayerNormPairBound, AnyTwoTwoPassEvaluationsStayWithinIt, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
  constexpr size_t kLengths[] = {1, 2, 3, 7, 8, 9, 16, 31, 64, 100, 768, 4096};
  constexpr test_support::LnRowRegime kRegimes[] = {
      test_support::LnRowRegime::normal, test_support::LnRowRegime::large_mean,
      test_support::LnRowRegime::tiny_variance, test_support::LnRowRegime::outlier, test_support::LnRowRegime::wide,
      test_support::LnRowRegime::subnormal};
  const size_t n = kLengths[rng() % std::size(kLengths)];
  const test_support::LnRowRegime regime = kRegimes[rng() % std::size(kRegimes)];
  const std::vector<float> x = test_support::LayerNormRegimeRow(rng, regime, n);
  std::vector<float> gamma(n), beta(n);
  const float gain = std::ldexp(1.0f, static_cast<int>(rng() % 21) - 10);
  for (size_t j = 0; j < n; ++j) {
    gamma[j] = gain * static_cast<float>(static_cast<int>(rng() % 3001) - 1500) / 1000.0f;
    beta[j] = static_cast<float>(static_cast<int>(rng() % 1001) - 500) / 1000.0f;
  }
  const float eps = *rc::gen::element(1e-5f, 1e-12f, 0.25f);
  const std::optional<FloatBoundary> out =
      rng() % 3 == 0 ? std::optional<FloatBoundary>(parse_float_boundary("bf16", "test")) : std::nullopt;
  const NormalizationOrder a = RandomTwoPassOrder(rng), b = RandomTwoPassOrder(rng);
  RC_LOG() << format_normalization_order(a) << " / " << format_normalization_order(b) << " n=" << n << " regime "
           << test_support::to_string(regime);
  const double r = RowRatio(a, b, x, gamma, beta, eps, out);
  RC_ASSERT(r <= 1.0);
  RC_TAG(test_support::to_string(regime));
  RC_CLASSIFY(r > 0.01, "r > 0.01");
}

// Not vacuous: at a large mean and small spread the one-pass variance, and on a near-constant row an eps ten times
// too large, leave the bound; ORT's and oneDNN's jit orders stay within it there.
TEST(LayerNormPairBound, OnePassAndAWrongEpsLeaveIt) {
  std::mt19937_64 rng(7);
  const NormalizationOrder ort = named_normalization_order("ort", "test"), jit = named_normalization_order("onednn_jit", "test");
  NormalizationOrder one_pass = ort;
  one_pass.stats = NormalizationStats::one_pass;
  double cancel = 0, legal = 0, wrong_eps = 0;
  for (const size_t n : {16, 64, 768}) {
    std::vector<float> x(n), gamma(n, 1.0f), beta(n, 0.0f);
    for (float& v : x) v = 1000.0f + 0.01f * static_cast<float>(static_cast<int>(rng() % 201) - 100) / 100.0f;
    cancel = std::max(cancel, RowRatio(ort, one_pass, x, gamma, beta, 1e-5f));
    legal = std::max(legal, RowRatio(ort, jit, x, gamma, beta, 1e-5f));
    std::vector<float> flat(n, 1.0f);
    flat[0] = 1 + 0x1p-10f;
    const std::vector<double> bound = LayerNormPairBounds(flat, gamma, beta, 1e-5f, std::nullopt);
    const LayerNormRow right = LayerNormInOrder(ort, flat, gamma, beta, 1e-5f);
    const LayerNormRow wrong = LayerNormInOrder(ort, flat, gamma, beta, 1e-4f);
    for (size_t j = 0; j < n; ++j) wrong_eps = std::max(wrong_eps, std::fabs(double(right.y[j]) - wrong.y[j]) / bound[j]);
  }
  EXPECT_GT(cancel, 1.0);
  EXPECT_GT(wrong_eps, 1.0);
  EXPECT_LE(legal, 1.0);
  EXPECT_GT(legal, 0.0);  // the orders do differ on these rows
  std::printf("one-pass r %.3g, eps 1e-4 for 1e-5 r %.3g, ort vs onednn_jit r %.3g\n", cancel, wrong_eps, legal);
}

// An infinite or NaN statistic, or an output near binary32's largest value, has no finite bound: the comparison
// counts such an element as unbounded rather than judging it.
TEST(LayerNormPairBound, OverflowIsUnbounded) {
  const float a = 1.5f * 0x1p63f;  // a^2 finite, 2 a^2 not: var = +inf in binary32
  const std::vector<double> b = LayerNormPairBounds(std::vector<float>{a, -a}, std::vector<float>{1, 1},
                                                    std::vector<float>{0, 0}, 1e-5f, std::nullopt);
  EXPECT_FALSE(std::isfinite(b[0]));  // binary32's var is +inf (y = beta) where the exact y is +-1: no bound
  const float big = 1.5f * 0x1p127f;
  const std::vector<double> m = LayerNormPairBounds(std::vector<float>{big, -big}, std::vector<float>{0x1p126f, 1},
                                                    std::vector<float>{0, 0}, 1e-5f, std::nullopt);
  EXPECT_FALSE(std::isfinite(m[0]));  // the sum of |x| overflows binary32
  const std::vector<double> g = LayerNormPairBounds(std::vector<float>{1, -1}, std::vector<float>{1.5f * 0x1p127f, 1},
                                                    std::vector<float>{0, 0}, 1e-5f, std::nullopt);
  EXPECT_FALSE(std::isfinite(g[0]));  // gamma / sigma (a scale_* form's product) passes 2^127
  EXPECT_TRUE(std::isfinite(g[1]));
  EXPECT_THROW(LayerNormPairBounds(std::vector<float>{1, 2}, std::vector<float>{1}, std::vector<float>{0, 0}, 1e-5f,
                                   std::nullopt),
               std::invalid_argument);
}

}  // namespace
}  // namespace fusediff::reference
