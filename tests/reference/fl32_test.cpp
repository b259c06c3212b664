// The binary32 emulation behind f32_half_even against the host FPU (x86-64 SSE: IEEE binary32, round to
// nearest even, gradual underflow): they must agree bit for bit, which checks the emulation.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"

namespace fusediff::reference {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(Fl32, HandWorked) {
  EXPECT_EQ(Fl32FromInt64((1 << 24) + 1), 16777216.0f);  // tie -> even (2^24)
  EXPECT_EQ(Fl32FromInt64((1 << 24) + 3), 16777220.0f);  // tie -> even (2^24 + 4)
  EXPECT_EQ(Fl32FromInt64((1 << 24) + 2), 16777218.0f);  // exact
  EXPECT_EQ(Fl32FromInt64(std::numeric_limits<int64_t>::min()), -9223372036854775808.0f);
  EXPECT_EQ(Fl32FromInt64(std::numeric_limits<int64_t>::max()), 9223372036854775808.0f);
  EXPECT_EQ(bits(Fl32FromInt64(0)), 0u);
  const float t75 = std::ldexp(1.0f, -75);
  EXPECT_EQ(bits(Fl32Multiply(t75, t75)), 0u);                               // 2^-150: tie between 0 and 2^-149 -> 0
  EXPECT_EQ(Fl32Multiply(1.5f * t75, t75), std::ldexp(1.0f, -149));          // 0.75 * 2^-149 -> 2^-149
  EXPECT_EQ(bits(Fl32Multiply(-t75, t75)), 0x80000000u);                     // -0
  EXPECT_TRUE(std::isinf(Fl32Multiply(1e30f, 1e30f)));                       // overflow
  EXPECT_EQ(Fl32Multiply(3.0f, 1.0f / 3.0f), 1.0f);
  EXPECT_EQ(Fl32Divide(1.0f, 3.0f), 1.0f / 3.0f);
  EXPECT_EQ(Fl32Divide(std::numeric_limits<float>::max(), 0.5f), std::numeric_limits<float>::infinity());
  // Largest finite: (2 - 2^-23) * 2^127; (2 - 2^-24) * 2^127 is the tie -> rounds to even = infinity.
  EXPECT_EQ(Fl32Multiply(std::numeric_limits<float>::max(), 1.0f), std::numeric_limits<float>::max());
  EXPECT_THROW(Fl32Divide(1.0f, 0.0f), InputError);
  EXPECT_THROW(Fl32Multiply(INFINITY, 1.0f), InputError);
}

// Any finite float: random sign, exponent field 0..254, fraction.
rc::Gen<float> any_finite() {
  return rc::gen::map(rc::gen::tuple(rc::gen::arbitrary<bool>(), rc::gen::inRange<uint32_t>(0, 255),
                                     rc::gen::inRange<uint32_t>(0, 1u << 23)),
                      [](const std::tuple<bool, uint32_t, uint32_t>& t) {
                        return std::bit_cast<float>((uint32_t(std::get<0>(t)) << 31) | (std::get<1>(t) << 23) |
                                                    std::get<2>(t));
                      });
}

RC_GTEST_PROP(Fl32, FromInt64MatchesHost, ()) {
  const int shift = *rc::gen::inRange(0, 64);
  const int64_t v = *rc::gen::arbitrary<int64_t>() >> shift;
  const volatile float host = static_cast<float>(v);
  RC_ASSERT(bits(Fl32FromInt64(v)) == bits(host));
}

RC_GTEST_PROP(Fl32, MultiplyMatchesHost, ()) {
  const float a = *any_finite(), b = *any_finite();
  const volatile float host = a * b;
  RC_ASSERT(bits(Fl32Multiply(a, b)) == bits(host));
  RC_CLASSIFY(std::fpclassify(host) == FP_SUBNORMAL, "subnormal");
  RC_CLASSIFY(std::isinf(host), "overflow");
}

RC_GTEST_PROP(Fl32, MultiplyNearUnderflowMatchesHost, ()) {
  // Exponents chosen so that products land around the subnormal range.
  const float a = std::ldexp(1.0f + *rc::gen::inRange(0, 1 << 23) * std::ldexp(1.0f, -23), *rc::gen::inRange(-90, -40));
  const float b = std::ldexp(1.0f + *rc::gen::inRange(0, 1 << 23) * std::ldexp(1.0f, -23), *rc::gen::inRange(-110, -40));
  const volatile float host = a * b;
  RC_ASSERT(bits(Fl32Multiply(a, b)) == bits(host));
}

RC_GTEST_PROP(Fl32, DivideMatchesHost, ()) {
  const float a = *any_finite(), b = *any_finite();
  RC_PRE(b != 0.0f);
  const volatile float host = a / b;
  RC_ASSERT(bits(Fl32Divide(a, b)) == bits(host));
}

}  // namespace
}  // namespace fusediff::reference
