#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <limits>

#include "fusediff/fused/fixedpoint.h"
#include "fusediff/fused/lut.h"

namespace fusediff::fused {
namespace {

RC_GTEST_PROP(RoundingDivideByPOT64, AgreesWithTheInt32VersionOnInt32Inputs, (int32_t x, uint8_t e)) {
  const int exponent = e % 32;
  RC_ASSERT(RoundingDivideByPOT64(x, exponent) == int64_t{RoundingDivideByPOT(x, exponent)});
}

TEST(RoundingDivideByPOT64, RoundsHalfAwayFromZeroBeyondInt32) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(RoundingDivideByPOT64(big + (int64_t{1} << 9), 10), (int64_t{1} << 30) + 1);   // +0.5 -> away
  EXPECT_EQ(RoundingDivideByPOT64(-big - (int64_t{1} << 9), 10), -(int64_t{1} << 30) - 1); // -0.5 -> away
  EXPECT_EQ(RoundingDivideByPOT64(big + (int64_t{1} << 9) - 1, 10), int64_t{1} << 30);     // just below the tie
  EXPECT_EQ(RoundingDivideByPOT64(std::numeric_limits<int64_t>::max(), 62), 2);
  EXPECT_EQ(RoundingDivideByPOT64(-5, 1), -3);
  EXPECT_EQ(RoundingDivideByPOT64(5, 1), 3);
}

TEST(PwlLookup, EvaluatesTheSegmentHoldingTheCodeAndSaturates) {
  const std::vector<PwlSegment> segments = {{-128, -1, 0, -5, 0}, {0, 127, 3, 10, 1}};
  const QuantType int8{ScalarType::int8, false};
  EXPECT_EQ(PwlLookup(segments, -128, int8), -5);
  EXPECT_EQ(PwlLookup(segments, 0, int8), 10);
  EXPECT_EQ(PwlLookup(segments, 1, int8), 12);   // 3/2 = 1.5 -> 2
  EXPECT_EQ(PwlLookup(segments, 3, int8), 15);   // 9/2 = 4.5 -> 5
  EXPECT_EQ(PwlLookup(segments, 127, int8), 127);  // 190.5 + 10 saturates
  EXPECT_THROW(PwlLookup({{0, 5, 0, 0, 0}}, 6, int8), std::out_of_range);
}

TEST(FitPwl, MeetsItsReportedErrorAndCoversEveryCode) {
  Convention c;
  c.activation = make_activation(ActivationKind::gelu_erf);
  c.intermediate.q = QuantParams{QuantType{ScalarType::int8, false}, 0.05f, 3};
  c.output.q = QuantParams{QuantType{ScalarType::int8, false}, 0.03f, -100};
  const std::vector<int32_t> direct = LUTPopulateInt8(c.activation, c.intermediate.q, c.output);
  for (int32_t count : {1, 4, 16, 256}) {
    const PwlFit fit = FitPwl(c, count);
    ASSERT_EQ(fit.segments.size(), static_cast<size_t>(count));
    EXPECT_EQ(fit.segments.front().u_lo, -128);
    EXPECT_EQ(fit.segments.back().u_hi, 127);
    int64_t worst = 0;
    for (int32_t u = -128; u <= 127; ++u) {
      worst = std::max<int64_t>(worst, std::abs(PwlLookup(fit.segments, u, c.output.q.type) - direct[u + 128]));
    }
    EXPECT_EQ(worst, fit.max_abs_error) << count;
    if (count == 256) {
      EXPECT_EQ(worst, 0);  // one code per segment is exact
    }
  }
  EXPECT_LE(FitPwl(c, 16).max_abs_error, FitPwl(c, 4).max_abs_error);
}

}  // namespace
}  // namespace fusediff::fused
