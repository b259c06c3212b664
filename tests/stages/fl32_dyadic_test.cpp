// The dyadic binary32 helpers behind the ORT stage rules against the host FPU (x86-64 SSE: IEEE binary32, round
// to nearest even, gradual underflow) and glibc's correctly rounded fmaf: bit for bit.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fl32_dyadic.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

float sum(float x, float y) { return detail::fl32_sum(detail::exact_dyadic(x), detail::exact_dyadic(y)); }

// Any finite float, uniform over the bit patterns below infinity's, either sign.
rc::Gen<float> AnyFinite() {
  return rc::gen::map(rc::gen::pair(rc::gen::arbitrary<bool>(), rc::gen::inRange<uint32_t>(0, 0x7F800000u)),
                      [](const std::pair<bool, uint32_t>& p) {
                        return std::bit_cast<float>(p.second | (p.first ? 0x80000000u : 0u));
                      });
}

// Normal floats of nearby magnitudes (exponents within +-30 of `exponent`, kept in binary32's normal range), where
// sums cancel and round.
rc::Gen<float> Near(int exponent) {
  return rc::gen::map(rc::gen::tuple(rc::gen::arbitrary<bool>(), rc::gen::inRange(exponent - 30, exponent + 31),
                                     rc::gen::inRange<uint32_t>(0, 1u << 23)),
                      [](const std::tuple<bool, int, uint32_t>& t) {
                        const float m = 1.0f + std::ldexp(static_cast<float>(std::get<2>(t)), -23);
                        const float v = std::ldexp(m, std::clamp(std::get<1>(t), -126, 127));
                        return std::get<0>(t) ? -v : v;
                      });
}

TEST(Fl32Dyadic, HandWorked) {
  EXPECT_EQ(sum(1.0f, 0x1p-24f), 1.0f);                       // tie -> even
  EXPECT_EQ(sum(1.0f, 0x1.000002p-24f), 1.0f + 0x1p-23f);     // just above the tie
  EXPECT_EQ(sum(1.0f, 0x1p-60f), 1.0f);                       // far below: the sticky bit alone
  EXPECT_EQ(sum(1.0f + 0x1p-23f, 0x1p-24f), 1.0f + 0x1p-22f); // tie -> even, upward
  EXPECT_EQ(sum(0x1p-149f, -0x1p-149f), 0.0f);
  EXPECT_EQ(bits(sum(-0.0f, -0.0f)), 0x80000000u);
  EXPECT_EQ(bits(sum(-0.0f, 0.0f)), 0u);
  EXPECT_TRUE(std::isinf(sum(std::numeric_limits<float>::max(), std::numeric_limits<float>::max())));
  // a b = 2^-24 (1 + 2^-24 - 2^-47): 1 + a b lies just above the tie 1 + 2^-24 and rounds up, while the separately
  // rounded product is 2^-24 and 1 + 2^-24 is a tie that rounds to 1.
  EXPECT_EQ(Fl32FusedMultiplyAdd(0x1.000002p-24f, 0x1.fffffep-1f, 1.0f), 1.0f + 0x1p-23f);
  EXPECT_EQ(sum(1.0f, Fl32Multiply(0x1.000002p-24f, 0x1.fffffep-1f)), 1.0f);
  EXPECT_EQ(detail::fl32_quotient(1.0f, 3.0f), 1.0f / 3.0f);
  EXPECT_EQ(detail::fl32_quotient(0x1p-149f, 2.0f), 0.0f);            // tie between 0 and 2^-149 -> 0
  EXPECT_EQ(detail::fl32_quotient(0x1.8p-148f, 4.0f), 0x1p-149f);      // 0.75 * 2^-149 -> 2^-149
  EXPECT_THROW(detail::fl32_quotient(1.0f, 0.0f), InputError);
}

RC_GTEST_PROP(Fl32Dyadic, SumMatchesHost, ()) {
  const float x = *AnyFinite();
  const float y = *rc::gen::oneOf(AnyFinite(), Near(std::ilogb(x == 0.0f ? 1.0f : x)));
  const volatile float host = x + y;
  RC_ASSERT(bits(sum(x, y)) == bits(host));
}

RC_GTEST_PROP(Fl32Dyadic, FusedMultiplyAddMatchesFmaf, ()) {
  const float a = *rc::gen::oneOf(AnyFinite(), Near(0)), b = *rc::gen::oneOf(AnyFinite(), Near(0));
  // c near the product's magnitude (cancellation), near its last bits (ties), or anywhere.
  const int e = std::ilogb(a == 0.0f ? 1.0f : a) + std::ilogb(b == 0.0f ? 1.0f : b);
  const float c = *rc::gen::oneOf(AnyFinite(), Near(e), Near(e - 24));
  const volatile float host = std::fmaf(a, b, c);
  RC_ASSERT(bits(Fl32FusedMultiplyAdd(a, b, c)) == bits(host));
}

RC_GTEST_PROP(Fl32Dyadic, QuotientMatchesHost, ()) {
  const float a = *AnyFinite(), b = *AnyFinite();
  RC_PRE(b != 0.0f);
  const volatile float host = a / b;
  RC_ASSERT(bits(detail::fl32_quotient(a, b)) == bits(host));
}

}  // namespace
}  // namespace fusediff::reference
