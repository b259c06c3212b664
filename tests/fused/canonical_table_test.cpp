// The canonical tables' searches (fused/canonical.h): the minimax pwl line against brute force on small
// segments, exact lines recovered, and the minimax knots never worse than TFLite's and reported truthfully.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "fusediff/fused/canonical.h"
#include "fusediff/fused/fixedpoint.h"
#include "fusediff/fused/lut.h"

namespace fusediff::fused {
namespace {

const QuantType kInt8{ScalarType::int8, false};

// max |e| of a segment's line over its codes: sat(RoundingDivideByPOT64(m x, shift) + c), restated plainly.
int64_t LineError(const PwlSegment& s, const std::vector<int32_t>& y, const QuantType& out) {
  int64_t worst = 0;
  for (size_t x = 0; x < y.size(); ++x) {
    const int64_t v = RoundingDivideByPOT64(int64_t{s.slope} * static_cast<int64_t>(x), s.shift) + s.offset;
    worst = std::max<int64_t>(worst, std::abs(std::clamp<int64_t>(v, out.qmin(), out.qmax()) - y[x]));
  }
  return worst;
}

// Every slope up to 257 * 2^shift (steeper lines jump from rail to rail within a code: no new output pattern)
// and every offset that leaves some code unsaturated, exhaustively.
int64_t BruteForceBest(const std::vector<int32_t>& y, int32_t shift, const QuantType& out) {
  int64_t best = INT64_MAX;
  const int32_t m_range = (257 << shift) + 1;
  const int32_t reach = 257 * static_cast<int32_t>(y.size()) + 2;
  for (int32_t m = -m_range; m <= m_range; ++m) {
    for (int32_t c = out.qmin() - reach; c <= out.qmax() + reach; ++c) {
      best = std::min(best, LineError(PwlSegment{0, static_cast<int32_t>(y.size()) - 1, m, c, shift}, y, out));
    }
  }
  return best;
}

TEST(MinimaxPwlLine, MatchesBruteForceOnSmallSegments) {
  std::mt19937 rng(20261201);  // fixed seed: the same cases every run
  for (int trial = 0; trial < 18; ++trial) {
    const int32_t n = 2 + static_cast<int32_t>(rng() % 3);
    const int32_t shift = static_cast<int32_t>(rng() % 3);
    // Near zero, or against either rail so that saturation matters.
    const int32_t base = std::vector<int32_t>{0, 118, -124}[rng() % 3];
    std::vector<int32_t> y;
    for (int32_t x = 0; x < n; ++x) y.push_back(std::clamp(base + static_cast<int32_t>(rng() % 21) - 10, -128, 127));
    const PwlLine line = MinimaxPwlLine(y, 0, shift, kInt8);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n " << n << " shift " << shift << " base " << base);
    EXPECT_TRUE(line.exhaustive);
    EXPECT_EQ(line.segment.shift, shift);
    EXPECT_EQ(line.max_abs_error, LineError(line.segment, y, kInt8));  // the figure is the lookup's own
    EXPECT_EQ(line.max_abs_error, BruteForceBest(y, shift, kInt8));
  }
}

TEST(MinimaxPwlLine, RecoversAnExactLineAndItsSaturation) {
  // y = sat(RoundingDivideByPOT64(1234567 * x, 20) + 17) over 700 codes, running into the int8 rail.
  std::vector<int32_t> y;
  const PwlSegment truth{-300, 399, 1234567, 17, 20};
  for (int32_t u = truth.u_lo; u <= truth.u_hi; ++u) y.push_back(PwlLookup({truth}, u, kInt8));
  const PwlLine line = MinimaxPwlLine(y, truth.u_lo, truth.shift, kInt8);
  EXPECT_EQ(line.max_abs_error, 0);
  EXPECT_EQ(LineError(line.segment, y, kInt8), 0);
  EXPECT_EQ(line.segment.u_lo, -300);
  EXPECT_EQ(line.segment.u_hi, 399);
}

TEST(MinimaxPwlLine, SingleCodeAndFlatSegments) {
  const std::vector<int32_t> one = {42};
  const PwlLine single = MinimaxPwlLine(one, 5, 31, kInt8);
  EXPECT_EQ(single.max_abs_error, 0);
  EXPECT_EQ(single.segment.offset, 42);
  const std::vector<int32_t> flat(50, 127);  // all on the rail
  EXPECT_EQ(MinimaxPwlLine(flat, 0, 31, kInt8).max_abs_error, 0);
}

// A correctly rounded int16 tanh at su = 2^-12, sy = 2^-15 (double precision: enough for test data).
std::vector<int32_t> TanhCodes() {
  std::vector<int32_t> y;
  for (int32_t u = -32768; u <= 32767; ++u) {
    const double t = std::tanh(std::ldexp(u, -12)) * 32768.0;
    y.push_back(static_cast<int32_t>(std::clamp(std::round(t), -32768.0, 32767.0)));
  }
  return y;
}

int64_t KnotsError(const std::array<int16_t, 513>& knots, const std::vector<int32_t>& y) {
  int64_t worst = 0;
  for (int32_t u = -32768; u <= 32767; ++u) {
    worst = std::max<int64_t>(worst, std::abs(LUTLookup(static_cast<int16_t>(u), knots) - y[u + 32768]));
  }
  return worst;
}

TEST(BestLutInterpKnots, NeverWorseThanTfliteAndTruthful) {
  const std::vector<int32_t> y = TanhCodes();
  const Activation tanh = make_activation(ActivationKind::tanh);
  const auto tflite = LUTPopulateInt16(tanh, 0x1p-12f, 0, 0x1p-15f, 0);
  const int64_t tflite_error = KnotsError(tflite, y);
  const std::optional<MinimaxKnots> best = BestLutInterpKnots(y, tflite_error);
  ASSERT_TRUE(best);
  EXPECT_LE(best->max_abs_error, tflite_error);
  EXPECT_EQ(KnotsError(best->knots, y), best->max_abs_error);
  // One LSB below the optimum is infeasible by definition: asking for it finds nothing.
  EXPECT_GT(best->max_abs_error, 0);  // interpolation cannot follow tanh exactly at this scale
  EXPECT_FALSE(BestLutInterpKnots(y, best->max_abs_error - 1));
}

TEST(BestLutInterpKnots, FindsAnExactTableWhenOneExists) {
  // y is what a table produces: that table (or another as good) is exact.
  const auto tflite = LUTPopulateInt16(make_activation(ActivationKind::sigmoid), 0x1p-11f, 0, 0x1p-15f, 0);
  std::vector<int32_t> y;
  for (int32_t u = -32768; u <= 32767; ++u) y.push_back(LUTLookup(static_cast<int16_t>(u), tflite));
  const std::optional<MinimaxKnots> best = BestLutInterpKnots(y, 2);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->max_abs_error, 0);
  EXPECT_EQ(KnotsError(best->knots, y), 0);
}

}  // namespace
}  // namespace fusediff::fused
