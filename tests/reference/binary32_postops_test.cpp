// The binary32 post-op rule (PostOpArithmetic::binary32, oneDNN 2.x): hand-computed ties, the host FPU as an
// independent implementation of the same binary32 steps (this file is compiled with -ffp-contract=off, so the host
// computes exactly the steps the rule names, one rounding each), and the table and evaluator that use it.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

Convention Binary32Convention(ActivationKind kind, QuantParams u, QuantParams y) {
  Convention c;
  c.activation = make_activation(kind);
  c.requant = RequantVariant::f32_zero_point_first;
  c.intermediate.q = u;
  c.intermediate.rounding = RoundingMode::half_to_even;
  c.output.q = y;
  c.output.rounding = RoundingMode::half_to_even;
  c.output.zero_point_order = ZeroPointOrder::before_rounding;
  c.post_ops = PostOpArithmetic::binary32;
  return c;
}

const QuantType kInt8{ScalarType::int8, false};
const QuantType kUint8{ScalarType::uint8, false};

TEST(Binary32PostOps, HandComputedSteps) {
  // sy = 3: fl32(1/3) = 11184811 * 2^-25 = 0.3333333432674407958984375. e = 193.5:
  //   e fl32(1/3) = 64.50000192224979400634765625 exactly; the binary32 grid at 64 is 2^-17 = 7.63e-6, so the
  //   product rounds to 64.5; + (-100) = -35.5 exactly: a tie, half to even -> -36.
  //   One fused multiply-add would keep the 1.92e-6: -35.49999807..., to the 2^-18 grid at 32 -> -35.4999961853,
  //   which rounds to -35. The exact t = 193.5/3 - 100 = -35.5 -> -36.
  EXPECT_EQ(bits(Binary32OutputValue(193.5f, 3.0f, -100)), bits(-35.5f));
  EXPECT_EQ(Fl32FusedMultiplyAdd(193.5f, Fl32Divide(1.0f, 3.0f), -100.0f), -35.499996185302734375f);
  // sy = 7: fl32(1/7) = 9586981 * 2^-26; e = 311.5: e fl32(1/7) = 44.50000198930501937866211 -> 44.500003814697265625
  //   (the 2^-18 grid at 32: 1.99e-6 is past its half, 1.91e-6); - 100 = -55.499996185302734375 -> -55, where the
  //   exact t = 311.5/7 - 100 = -55.5 is a tie -> -56.
  EXPECT_EQ(bits(Binary32OutputValue(311.5f, 7.0f, -100)), bits(-55.499996185302734375f));
  // zy = 0 adds nothing; an exact zero product stays a zero.
  EXPECT_EQ(bits(Binary32OutputValue(-2.0f, 1e30f, 0)), bits(Fl32Multiply(-2.0f, Fl32Divide(1.0f, 1e30f))));
  EXPECT_EQ(Binary32OutputValue(0.0f, 3.0f, 5), 5.0f);
  // relu6 and leaky_relu in binary32.
  EXPECT_EQ(Binary32Activation(make_activation(ActivationKind::relu6), 7.5f), 6.0f);
  EXPECT_EQ(Binary32Activation(make_activation(ActivationKind::relu6), -0.25f), 0.0f);
  EXPECT_EQ(Binary32Activation(make_activation(ActivationKind::relu), -3.0f), 0.0f);
  Activation leaky = make_activation(ActivationKind::leaky_relu);
  leaky.alpha = 0.1f;  // 0x3DCCCCCD, above 1/10
  // 0.1f * 5 = 0.500000007450580596923828125 exactly; binary32 neighbours 0.5 and 0.5 + 2^-24: rounds to 0.5.
  EXPECT_EQ(Binary32Activation(leaky, -5.0f), -0.5f);
  EXPECT_EQ(Binary32Activation(leaky, 5.0f), 5.0f);
  // hard_swish: fl32(v * fl32(clip(fl32(v + 3), 0, 6) / 6)); v = 1: 4/6 -> fl32(2/3) = 0.666666686534881591796875,
  // times 1 exactly. The exact hard_swish(1) = 2/3 is below fl32(2/3).
  EXPECT_EQ(Binary32Activation(make_activation(ActivationKind::hard_swish), 1.0f), 0.666666686534881591796875f);
  EXPECT_EQ(Binary32Activation(make_activation(ActivationKind::hard_swish), -3.5f), -0.0f);
  EXPECT_EQ(Binary32Activation(make_activation(ActivationKind::hard_swish), 3.0f), 3.0f);
  // Transcendental kinds: fl32 of the exact f. sigmoid(0) = 1/2 exactly; tanh(1) = 0.76159415595576488811...,
  // whose nearest binary32 is 0.761594176292419433593750 (0x3F42F7D6).
  EXPECT_EQ(Binary32Activation(make_activation(ActivationKind::sigmoid), 0.0f), 0.5f);
  EXPECT_EQ(bits(Binary32Activation(make_activation(ActivationKind::tanh), 1.0f)), 0x3F42F7D6u);
  // softplus(-100) = e^-100 (1 - ...) = 3.72e-44: subnormal, 2^-149 * 26.55... -> 27 * 2^-149.
  EXPECT_EQ(bits(Binary32Activation(make_activation(ActivationKind::softplus), -100.0f)), 27u);
  EXPECT_THROW(Binary32Activation(make_activation(ActivationKind::relu), INFINITY), InputError);
}

// The output rounding with binary32 post-ops: the zero point is added in binary32 and t itself is rounded.
TEST(Binary32PostOps, EvaluatorRoundsTheBinary32Value) {
  Convention c = Binary32Convention(ActivationKind::relu, {kInt8, 1.0f, 0}, {kInt8, 3.0f, -100});
  c.intermediate.kind = IntermediateKind::f32;
  c.requant = RequantVariant::f32_half_even;
  ActivationEvaluator evaluator(c);
  // The first hand-computed case above: relu(193.5) = 193.5, t = -35.5 exactly, a tie -> -36.
  const ActivationPoint p = evaluator(193.5f);
  EXPECT_EQ(p.t, -35.5);
  EXPECT_EQ(p.y, -36);
  EXPECT_EQ(p.tie_distance, 0.0);
  EXPECT_EQ(p.f, 193.5);
  // The second: t = -55.499996185302734375 -> -55 (the exact rule gives -56).
  Convention c7 = c;
  c7.output.q.scale = 7.0f;
  ActivationEvaluator evaluator7(c7);
  EXPECT_EQ(evaluator7(311.5f).y, -55);
  c7.post_ops = PostOpArithmetic::exact;
  ActivationEvaluator exact7(c7);
  EXPECT_EQ(exact7(311.5f).y, -56);
  // Binary32 post-ops need the zero point before rounding, half to even.
  Convention bad = c;
  bad.output.zero_point_order = ZeroPointOrder::after_rounding;
  EXPECT_THROW(validate(bad), InputError);
  EXPECT_THROW(ActivationEvaluator{bad}, InputError);
}

// The per-code table dequantizes in binary32: v = fl32(su (u - zu)), and every code's y is the rule's.
TEST(Binary32PostOps, TableDequantizesInBinary32) {
  const Convention c = Binary32Convention(ActivationKind::leaky_relu, {kInt8, 0.0123f, 3}, {kUint8, 0.0457f, 17});
  const ActivationTable table(c);
  for (int32_t u = -128; u <= 127; ++u) {
    const float v = Fl32Multiply(static_cast<float>(u - 3), 0.0123f);
    const float t = Binary32OutputValue(Binary32Activation(c.activation, v), 0.0457f, 17);
    const double y = std::clamp(std::nearbyint(static_cast<double>(t)), 0.0, 255.0);
    EXPECT_EQ(table.at(u).y, static_cast<int32_t>(y)) << u;
    EXPECT_EQ(table.at(u).v, static_cast<double>(v)) << u;
  }
}

// Any finite float of moderate magnitude (|x| < 2^40), random sign, exponent and fraction.
rc::Gen<float> ModerateFloat() {
  return rc::gen::map(rc::gen::tuple(rc::gen::arbitrary<bool>(), rc::gen::inRange<uint32_t>(0, 127 + 40),
                                     rc::gen::inRange<uint32_t>(0, 1u << 23)),
                      [](const std::tuple<bool, uint32_t, uint32_t>& t) {
                        const auto [negative, exponent, fraction] = t;
                        return std::bit_cast<float>((negative ? 0x80000000u : 0u) | (exponent << 23) | fraction);
                      });
}

// The host's binary32 arithmetic (SSE, round to nearest even, no contraction) computing the rule's steps.
float HostActivation(const Activation& a, float v) {
  switch (a.kind) {
    case ActivationKind::relu: return v > 0 ? v : 0.0f;
    case ActivationKind::leaky_relu: return v > 0 ? v : a.alpha * v;
    case ActivationKind::relu6: return v > 0 ? (v < 6 ? v : 6.0f) : 0.0f;
    case ActivationKind::hard_swish: {
      const float shifted = v + 3.0f;
      const float clipped = shifted > 0 ? (shifted < 6 ? shifted : 6.0f) : 0.0f;
      const float sixth = clipped / 6.0f;
      return v * sixth;
    }
    default: return NAN;
  }
}

RC_GTEST_PROP(Binary32PostOps, EqualsTheHostsIeeeArithmetic, ()) {
  const ActivationKind kind = *rc::gen::element(ActivationKind::relu, ActivationKind::leaky_relu, ActivationKind::relu6,
                                                ActivationKind::hard_swish);
  Activation a = make_activation(kind);
  if (kind == ActivationKind::leaky_relu) a.alpha = *ModerateFloat();
  const float v = *rc::gen::oneOf(ModerateFloat(), rc::gen::map(rc::gen::inRange(-2000, 2000), [](int k) {
    return static_cast<float>(k) / 128.0f;  // near the knees -3, 0, 3, 6
  }));
  const float scale = std::fabs(*ModerateFloat());
  RC_PRE(scale > 0.0f && std::isfinite(1.0f / scale));
  const int32_t zero_point = *rc::gen::inRange(-40000, 40000);
  const float e = Binary32Activation(a, v);
  const float host_e = HostActivation(a, v);
  RC_ASSERT(bits(e) == bits(host_e) || (e == 0 && host_e == 0));
  const float host_t = host_e * (1.0f / scale) + static_cast<float>(zero_point);  // two roundings: no contraction
  const float t = Binary32OutputValue(e, scale, zero_point);
  RC_ASSERT(bits(t) == bits(host_t) || (t == 0 && host_t == 0));
}

}  // namespace
}  // namespace fusediff::reference
