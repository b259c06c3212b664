// ActivationTable: hand-worked ties per rounding mode and zero-point order, saturation, escalation on
// constructed near-ties, and properties against independent computations.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/error_stats.h"
#include "fusediff/reference/reference.h"
#include "test_util.h"

namespace fusediff::reference {
namespace {

using testing::cpp_int;
using testing::cpp_rational;

const QuantType kInt8{ScalarType::int8, false};
const QuantType kInt8Narrow{ScalarType::int8, true};
const QuantType kUint8{ScalarType::uint8, false};
const QuantType kInt16{ScalarType::int16, false};
constexpr RoundingMode kAway = RoundingMode::half_away_from_zero;
constexpr RoundingMode kEven = RoundingMode::half_to_even;
constexpr RoundingMode kUp = RoundingMode::half_up;

Convention table_convention(Activation act, QuantParams in, QuantParams out, RoundingMode mode = kAway,
                            ZeroPointOrder order = ZeroPointOrder::after_rounding) {
  Convention c;
  c.requant = RequantVariant::exact;
  c.intermediate.q = in;
  c.output.q = out;
  c.output.rounding = mode;
  c.output.zero_point_order = order;
  c.activation = act;
  return c;
}

// The reference answer for one code computed independently: f(v) as decimal text (ExactActivationDecimal),
// then t = f/sy (+ zy), rounding and saturation with the test's own textbook formulas. The decimal is correct
// to about `digits` - 1 digits, so when t lies within 10^-(digits-10) |t| of a tie, the digits go up (60, 300,
// 1500): gelu_erf(17.5)/7 = 2.5 - 1.8e-68, for one, is not decided by 60 digits.
// Returns nullopt when even 1500 digits leave t within reach of a tie (exponential tails such as
// gelu_erf(89.25) = 89.25 - 10^-1731; TEST(ActivationTable, AsymptoticTailsNextToTies) covers those).
std::optional<int32_t> decided_y(const Convention& c, int32_t u, bool* saturated = nullptr) {
  const cpp_rational sy = testing::exact(c.output.q.scale);
  const int32_t zy = c.output.q.zero_point;
  const bool before = c.output.zero_point_order == ZeroPointOrder::before_rounding;
  cpp_rational t;
  bool decided = false;
  for (int digits : {60, 300, 1500}) {
    // |f| < 10^-400 gives |f/sy| < 10^-355 (sy >= 2^-149): it rounds like 0 in every mode, so take f = 0
    // rather than expanding e.g. sigmoid(-1.28e7) ~ 10^-5.5e6 into a rational.
    const std::string text = ExactActivationDecimal(c, u, digits);
    const testing::DecimalParts parts = testing::split_decimal(text);
    const cpp_rational f = parts.exponent < -400 ? cpp_rational(0) : testing::parse_decimal(text);
    t = f / sy + (before ? zy : 0);
    const cpp_rational tie = cpp_rational(testing::floor_of(t)) + cpp_rational(1, 2);
    const cpp_rational tol = abs(t) * cpp_rational(1, boost::multiprecision::pow(cpp_int(10), unsigned(digits - 10)));
    if (abs(t - tie) > tol || f == 0) {
      decided = true;
      break;
    }
  }
  if (!decided) return std::nullopt;
  cpp_int r;
  if (before) r = testing::round_mode(t, c.output.rounding);
  else r = testing::round_mode(t, c.output.rounding) + zy;
  const int64_t y = testing::clamp64(r, c.output.q.type.qmin(), c.output.q.type.qmax());
  if (saturated) *saturated = cpp_int(y) != r;
  return static_cast<int32_t>(y);
}

int32_t independent_y(const Convention& c, int32_t u, bool* saturated = nullptr) {
  const std::optional<int32_t> y = decided_y(c, u, saturated);
  if (!y) throw std::runtime_error("test oracle: code " + std::to_string(u) + " undecided at 1500 digits");
  return *y;
}

// relu with su = 1/2, sy = 1: t = (u - zu)/2, ties at odd codes.
//   u = 1 -> 0.5: away 1, even 0, up 1;  u = 3 -> 1.5: 2, 2, 2;  u = 5 -> 2.5: 3, 2, 3;  u = -1 -> 0: 0.
TEST(ActivationTable, ReluTiesPerMode) {
  struct Row { RoundingMode mode; int32_t y1, y3, y5; };
  for (const Row& row : {Row{kAway, 1, 2, 3}, Row{kEven, 0, 2, 2}, Row{kUp, 1, 2, 3}}) {
    const ActivationTable t(table_convention(make_activation(ActivationKind::relu), {kInt8, 0.5f, 0}, {kInt8, 1.0f, 0}, row.mode));
    EXPECT_EQ(t.size(), 256u);
    EXPECT_EQ(t.at(1).y, row.y1);
    EXPECT_EQ(t.at(3).y, row.y3);
    EXPECT_EQ(t.at(5).y, row.y5);
    EXPECT_EQ(t.at(-1).y, 0);
    EXPECT_EQ(t.at(1).tie_distance, 0.0);
    EXPECT_EQ(t.at(2).tie_distance, 0.5);
    EXPECT_EQ(t.at(5).t, 2.5);
    EXPECT_EQ(t.at(5).v, 2.5);
    EXPECT_EQ(t.escalations(), 0u);
  }
}

// hard_swish(-1.5) = -1.5 * relu6(1.5) / 6 = -0.375; with sy = 0.75, t = -0.5; zy = 1.
//   after rounding:  round(-0.5) + 1 -> away -1 + 1 = 0, even 0 + 1 = 1, up 0 + 1 = 1
//   before rounding: round(1 - 0.5) = round(0.5) -> away 1, even 0, up 1
// hard_swish(1.5) = 1.5 * 4.5 / 6 = 1.125 -> t = 1.5: after: away 2+1, even 2+1, up 2+1; before round(2.5):
//   away 3, even 2, up 3.
TEST(ActivationTable, HardSwishTiesPerModeAndZeroPointOrder) {
  const Activation hs = make_activation(ActivationKind::hard_swish);
  struct Row { RoundingMode mode; ZeroPointOrder order; int32_t y_neg, y_pos; };
  const auto after = ZeroPointOrder::after_rounding, before = ZeroPointOrder::before_rounding;
  for (const Row& row : {Row{kAway, after, 0, 3}, Row{kEven, after, 1, 3}, Row{kUp, after, 1, 3},
                         Row{kAway, before, 1, 3}, Row{kEven, before, 0, 2}, Row{kUp, before, 1, 3}}) {
    const ActivationTable t(table_convention(hs, {kInt8, 0.5f, 0}, {kInt8, 0.75f, 1}, row.mode, row.order));
    EXPECT_EQ(t.at(-3).y, row.y_neg) << to_string(row.mode) << " " << to_string(row.order);
    EXPECT_EQ(t.at(3).y, row.y_pos) << to_string(row.mode) << " " << to_string(row.order);
    EXPECT_EQ(t.at(-3).f, -0.375);
    EXPECT_EQ(t.at(-3).t, row.order == before ? 0.5 : -0.5);
    EXPECT_EQ(t.at(-3).tie_distance, 0.0);
  }
}

// sigmoid(0) = 1/2 exactly; sy = 1, zy = -128: t = 1/2 is a tie.
//   after:  round(0.5) - 128 -> away -127, even -128, up -127
//   before: round(0.5 - 128) = round(-127.5) -> away -128, even -128, up -127
TEST(ActivationTable, SigmoidAtZeroWithZeroPointOrder) {
  const Activation sg = make_activation(ActivationKind::sigmoid);
  struct Row { RoundingMode mode; ZeroPointOrder order; int32_t y; };
  const auto after = ZeroPointOrder::after_rounding, before = ZeroPointOrder::before_rounding;
  for (const Row& row : {Row{kAway, after, -127}, Row{kEven, after, -128}, Row{kUp, after, -127},
                         Row{kAway, before, -128}, Row{kEven, before, -128}, Row{kUp, before, -127}}) {
    const ActivationTable t(table_convention(sg, {kInt8, 1.0f / 16, 0}, {kInt8, 1.0f, -128}, row.mode, row.order));
    EXPECT_EQ(t.at(0).y, row.y) << to_string(row.mode) << " " << to_string(row.order);
    EXPECT_EQ(t.at(0).f, 0.5);
    EXPECT_EQ(t.at(0).tie_distance, 0.0);
    EXPECT_EQ(t.escalations(), 0u);  // v = 0 is decided exactly, everything else by the filter
  }
  // A uint8 intermediate with zu = 100: the code 100 is v = 0.
  const ActivationTable t(table_convention(sg, {kUint8, 1.0f / 16, 100}, {kUint8, 1.0f / 256, 0}));
  EXPECT_EQ(t.at(100).y, 128);
  EXPECT_EQ(t.at(100).v, 0.0);
  EXPECT_EQ(t.at(0).v, -6.25);
}

TEST(ActivationTable, Saturation) {
  // relu, su = 1, sy = 0.5: t = 2u. 63 -> 126; 64 -> 128 -> 127 (saturated).
  const ActivationTable relu(table_convention(make_activation(ActivationKind::relu), {kInt8, 1.0f, 0}, {kInt8, 0.5f, 0}));
  EXPECT_EQ(relu.at(63).y, 126);
  EXPECT_FALSE(relu.at(63).saturated);
  EXPECT_EQ(relu.at(64).y, 127);
  EXPECT_TRUE(relu.at(64).saturated);
  EXPECT_EQ(relu.at(127).y, 127);
  // Narrow int8 output [-127, 127]: leaky_relu with alpha 1 is the identity; -128 saturates to -127.
  const ActivationTable narrow(table_convention(Activation{ActivationKind::leaky_relu, 1.0f}, {kInt8, 1.0f, 0},
                                                {kInt8Narrow, 1.0f, 0}));
  EXPECT_EQ(narrow.at(-128).y, -127);
  EXPECT_TRUE(narrow.at(-128).saturated);
  EXPECT_EQ(narrow.at(-127).y, -127);
  EXPECT_FALSE(narrow.at(-127).saturated);
  // sigmoid into int8 with sy = 2^-9, zy = -128: t = 512 sigma(v) - 128 exceeds 127 for large v.
  const ActivationTable sg(table_convention(make_activation(ActivationKind::sigmoid), {kInt8, 1.0f / 16, 0},
                                            {kInt8, 1.0f / 512, -128}));
  EXPECT_EQ(sg.at(127).y, 127);
  EXPECT_TRUE(sg.at(127).saturated);
  EXPECT_EQ(sg.at(-128).y, -128);  // 512 sigmoid(-8) = 0.17 -> 0 - 128
  EXPECT_FALSE(sg.at(-128).saturated);
  // Far beyond the output range nothing needs a tie decision: tanh with sy tiny saturates everywhere but 0.
  const ActivationTable th(table_convention(make_activation(ActivationKind::tanh), {kInt16, 1.0f / 64, 0},
                                            {kInt8, std::ldexp(1.0f, -100), 0}));
  EXPECT_EQ(th.at(1).y, 127);
  EXPECT_EQ(th.at(-1).y, -128);
  EXPECT_EQ(th.at(0).y, 0);
  EXPECT_EQ(th.escalations(), 0u);
}

TEST(ActivationTable, RejectsBadInput) {
  EXPECT_THROW(ActivationTable(table_convention(Activation{ActivationKind::relu, 0.5f}, {kInt8, 1.0f, 0}, {kInt8, 1.0f, 0})),
               InputError);
  EXPECT_THROW(ActivationTable(table_convention(Activation{ActivationKind::elu, NAN}, {kInt8, 1.0f, 0}, {kInt8, 1.0f, 0})),
               InputError);
  EXPECT_THROW(ActivationTable(table_convention(make_activation(ActivationKind::relu), {kInt8, 0.0f, 0}, {kInt8, 1.0f, 0})),
               InputError);
  const ActivationTable t(table_convention(make_activation(ActivationKind::relu), {kInt8, 1.0f, 0}, {kInt8, 1.0f, 0}));
  EXPECT_THROW(t.at(128), InputError);
  EXPECT_THROW(t.at(-129), InputError);
}

// Near-ties found by scanning codes in double (t within 2^-37 |t| of k + 1/2, so the filter cannot decide):
//   tanh, su = 0x1.797c88p-13, sy = 2^-15: u = +-4535 -> t = +-22054.50000003088...
//   gelu_erf, su = 0x1.1be8p-12, sy = 2^-12: u = 28672 -> x/sy = 31797.5 exactly, t = 31797.5 - 1.3e-10
//     (an exact tie of the asymptote x, missed by the exponentially small tail).
TEST(ActivationTable, EscalatesNearTiesAndGivesTheMpfrAnswer) {
  const Convention tanh_c = table_convention(make_activation(ActivationKind::tanh), {kInt16, 0x1.797c88p-13f, 0},
                                             {kInt16, std::ldexp(1.0f, -15), 0});
  for (RoundingMode mode : {kAway, kEven, kUp}) {
    Convention c = tanh_c;
    c.output.rounding = mode;
    const ActivationTable t(c);
    EXPECT_GE(t.escalations(), 2u);
    EXPECT_EQ(t.max_mpfr_bits(), 128);
    EXPECT_EQ(t.at(4535).y, independent_y(c, 4535));
    EXPECT_EQ(t.at(-4535).y, independent_y(c, -4535));
    EXPECT_EQ(t.at(4535).y, 22055);   // above the tie
    EXPECT_EQ(t.at(-4535).y, -22055);  // below the negative tie
    EXPECT_LT(t.at(4535).tie_distance, 1e-6);
  }
  const Convention gelu_c = table_convention(make_activation(ActivationKind::gelu_erf), {kInt16, 0x1.1be8p-12f, 0},
                                             {kInt16, std::ldexp(1.0f, -12), 0});
  const ActivationTable g(gelu_c);
  EXPECT_GE(g.escalations(), 1u);
  EXPECT_EQ(g.at(28672).y, 31797);
  EXPECT_EQ(g.at(28672).y, independent_y(gelu_c, 28672));
}

// gelu_erf(17.5) = 17.5 Phi(17.5) = 17.5 - 1.25e-67: with sy = 7, t = 2.5 - 1.8e-68. binary64 sees 2.5 exactly
// and a plain 128-bit enclosure of f cannot exclude the tie; the asymptotic split t = 17.5/7 - (17.5/2)
// erfc(17.5/sqrt 2)/7 keeps the second term to 128-bit relative accuracy and decides at once. Every mode then
// rounds down to 2 (no tie). (Found by TranscendentalKindsMatchDecimalEvaluation, whose 60-digit check could
// not decide it.)
TEST(ActivationTable, GeluFarNearTieNeedsMoreThan128Bits) {
  // su = 7/64, zu = -47: code 113 is v = 160 * 7/64 = 17.5.
  Convention c = table_convention(make_activation(ActivationKind::gelu_erf), {kInt8Narrow, 0.109375f, -47},
                                  {kInt8, 7.0f, -128});
  for (RoundingMode mode : {kAway, kEven, kUp}) {
    c.output.rounding = mode;
    const ActivationTable t(c);
    EXPECT_EQ(t.at(113).v, 17.5);
    EXPECT_EQ(t.at(113).y, 2 - 128);
    EXPECT_GE(t.escalations(), 1u);
    EXPECT_EQ(t.max_mpfr_bits(), 128) << to_string(mode);
    EXPECT_EQ(t.at(113).y, independent_y(c, 113));
  }
}

// Extreme float32 scales. With su = sy = 2^-149 (the smallest subnormal), gelu(x) = x/2 + x^2/sqrt(2 pi) + ...
// puts t = u/2 + ~1e-45 u^2 right next to a tie at every odd u: binary64 cannot see it, MPFR must.
TEST(ActivationTable, ExtremeScales) {
  const float tiny = std::ldexp(1.0f, -149);
  for (ActivationKind kind : {ActivationKind::gelu_erf, ActivationKind::gelu_tanh, ActivationKind::sigmoid,
                              ActivationKind::tanh, ActivationKind::silu, ActivationKind::elu,
                              ActivationKind::softplus, ActivationKind::mish}) {
    for (auto [su, sy] : {std::pair{tiny, tiny}, std::pair{tiny, 1.0f / 256}, std::pair{1e-20f, 1e-20f},
                          std::pair{1e3f, 1.0f / 256}, std::pair{1e3f, 1e3f}}) {
      const Convention c = table_convention(make_activation(kind), {kInt8, su, 0}, {kInt8, sy, 0}, kEven);
      const ActivationTable t(c);
      for (int32_t u = -128; u <= 127; u += 5) {
        EXPECT_EQ(t.at(u).y, independent_y(c, u)) << to_string(kind) << " su=" << su << " sy=" << sy << " u=" << u;
      }
    }
    // The largest scale: arguments up to 4e40; gelu_tanh(-4e40) ~ e^(-1e122) underflows even MPFR, yet the
    // enclosure [x * tiny, 0] decides y = zy.
    const Convention big = table_convention(make_activation(kind), {kInt8, 3e38f, 0}, {kInt8, 1.0f / 256, 5});
    const ActivationTable t(big);
    EXPECT_EQ(t.at(127).y, 127);  // f >= 1 (sigmoid/tanh -> 1): t >= 256 - saturated
    EXPECT_TRUE(t.at(127).saturated);
    // f(-4e40) is -1 for tanh and elu (t = -256 + 5: saturated), a vanishing value for the others (y = zy).
    const bool minus_one = kind == ActivationKind::elu || kind == ActivationKind::tanh;
    EXPECT_EQ(t.at(-128).y, minus_one ? -128 : 5) << to_string(kind);
    EXPECT_EQ(t.at(-128).saturated, minus_one) << to_string(kind);
  }
}

// Exponential tails right next to a tie, far beyond the 8192-bit cap of plain enclosures. The answers follow
// from strict inequalities: x Phi(x), x sigmoid(x), x tanh(softplus x), x sigmoid(2z) are < x for x > 0;
// softplus(x) > x; |tanh x| < 1; 0 < sigmoid < 1; elu(x) = -alpha + alpha e^x > -alpha for x < 0, alpha > 0.
//   x = 120 * 50 = 6000, sy = 32: x/sy = 187.5 exactly, so t = 187.5 -+ (something below 10^-5000).
//   gelu_erf(89.25) = 89.25 - 10^-1731 with sy = 1/2: t = 178.5 - tiny.
TEST(ActivationTable, AsymptoticTailsNextToTies) {
  const QuantParams in{kInt8, 50.0f, 0};
  const QuantParams out{kInt16, 32.0f, 0};
  for (RoundingMode mode : {kAway, kEven, kUp}) {
    for (ActivationKind kind : {ActivationKind::gelu_erf, ActivationKind::gelu_tanh, ActivationKind::silu,
                                ActivationKind::mish}) {
      const ActivationTable t(table_convention(make_activation(kind), in, out, mode));
      EXPECT_EQ(t.at(120).y, 187) << to_string(kind) << " " << to_string(mode);
    }
    const ActivationTable sp(table_convention(make_activation(ActivationKind::softplus), in, out, mode));
    EXPECT_EQ(sp.at(120).y, 188) << to_string(mode);
    // tanh/2 and sigmoid/2 at x = +-6000: +-(0.5 - tiny) and 0 + tiny -> 0; before rounding with zy = 3: 3.5 - tiny.
    const QuantParams half_out{kInt8, 2.0f, 0};
    const ActivationTable th(table_convention(make_activation(ActivationKind::tanh), in, half_out, mode));
    EXPECT_EQ(th.at(120).y, 0) << to_string(mode);
    EXPECT_EQ(th.at(-120).y, 0) << to_string(mode);
    const ActivationTable th_before(table_convention(make_activation(ActivationKind::tanh), in, {kInt8, 2.0f, 3}, mode,
                                                     ZeroPointOrder::before_rounding));
    EXPECT_EQ(th_before.at(120).y, 3) << to_string(mode);
    EXPECT_EQ(th_before.at(-120).y, 3) << to_string(mode);  // 3 - 0.5 + tiny
    const ActivationTable sg(table_convention(make_activation(ActivationKind::sigmoid), in, half_out, mode));
    EXPECT_EQ(sg.at(120).y, 0) << to_string(mode);
    // elu with alpha 1.5 at x = -6000, sy = 1: t = -1.5 + 1.5 e^-6000 -> -1.
    const ActivationTable el(table_convention(Activation{ActivationKind::elu, 1.5f}, in, {kInt8, 1.0f, 0}, mode));
    EXPECT_EQ(el.at(-120).y, -1) << to_string(mode);
    // gelu_erf(89.25) / 0.5 = 178.5 - 10^-1731.
    const ActivationTable g(table_convention(make_activation(ActivationKind::gelu_erf), {kUint8, 0.875f, 0},
                                             {kUint8, 0.5f, 0}, mode));
    EXPECT_EQ(g.at(102).v, 89.25);
    EXPECT_EQ(g.at(102).y, 178) << to_string(mode);
  }
}

TEST(ActivationTable, FilterOffSendsEveryCodeToMpfr) {
  ActivationTableOptions all_mpfr;
  all_mpfr.use_double_filter = false;
  const Convention c = table_convention(make_activation(ActivationKind::gelu_tanh), {kInt8, 1.0f / 32, 0},
                                        {kInt8, 1.0f / 64, 0});
  const ActivationTable slow(c, all_mpfr), fast(c);
  EXPECT_EQ(slow.escalations(), 255u);  // every code but v = 0
  EXPECT_EQ(fast.escalations(), 0u);
  for (int32_t u = -128; u <= 127; ++u) EXPECT_EQ(fast.at(u).y, slow.at(u).y) << u;
}

TEST(ActivationTable, ThrowsAtThePrecisionCapInsteadOfGuessing) {
  ActivationTableOptions low;
  low.mpfr_start_bits = 8;
  low.mpfr_cap_bits = 16;  // far too little for a t within 2^-30 of a tie
  const Convention tanh_c = table_convention(make_activation(ActivationKind::tanh), {kInt16, 0x1.797c88p-13f, 0},
                                             {kInt16, std::ldexp(1.0f, -15), 0});
  try {
    ActivationTable t(tanh_c, low);
    FAIL() << "expected UndecidableError";
  } catch (const UndecidableError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("u=-4535"), std::string::npos) << what;
    EXPECT_NE(what.find("Lindemann"), std::string::npos) << what;
  }
  // gelu_erf, su = 0x1.a03b68p-13, sy = 2^-12: u = 21590 -> t = 17551.50000006230 (not an asymptote tie: x/sy
  // is 17551.64, the tail -0.14 brings it within 6e-8 of the tie).
  const Convention gelu_c = table_convention(make_activation(ActivationKind::gelu_erf), {kInt16, 0x1.a03b68p-13f, 0},
                                             {kInt16, std::ldexp(1.0f, -12), 0});
  try {
    ActivationTable t(gelu_c, low);
    FAIL() << "expected UndecidableError";
  } catch (const UndecidableError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("u=21590"), std::string::npos) << what;
    EXPECT_NE(what.find("no theorem"), std::string::npos) << what;
  }
  const ActivationTable decided(gelu_c);  // at the default cap it is decided, as the decimal oracle says
  EXPECT_EQ(decided.at(21590).y, 17552);
  EXPECT_EQ(decided.at(21590).y, independent_y(gelu_c, 21590));
}

// ---- Properties.

rc::Gen<float> scale_gen(int lo, int hi) {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::pair(rc::gen::inRange(lo, hi), rc::gen::inRange<uint32_t>(0, 1u << 23)),
                   [](const std::pair<int, uint32_t>& p) { return std::bit_cast<float>((uint32_t(p.first + 127) << 23) | p.second); }),
      rc::gen::map(rc::gen::inRange(lo, hi), [](int e) { return std::ldexp(1.0f, e); }),
      rc::gen::map(rc::gen::pair(rc::gen::inRange(lo, hi), rc::gen::element(3, 5, 7)),
                   [](const std::pair<int, int>& p) { return std::ldexp(float(p.second), p.first); }));
}

rc::Gen<Convention> convention_gen(bool rational_kinds) {
  return rc::gen::exec([rational_kinds] {
    Convention c;
    c.requant = RequantVariant::exact;
    const QuantType in = *rc::gen::element(kInt8, kInt8Narrow, kUint8);
    const QuantType out = *rc::gen::element(kInt8, kInt8Narrow, kUint8);
    c.intermediate.q = QuantParams{in, *scale_gen(-7, 0), *rc::gen::inRange(in.qmin(), in.qmax() + 1)};
    c.output.q = QuantParams{out, *scale_gen(-9, 1), *rc::gen::inRange(out.qmin(), out.qmax() + 1)};
    c.output.rounding = *rc::gen::element(kAway, kEven, kUp);
    c.output.zero_point_order = *rc::gen::element(ZeroPointOrder::after_rounding, ZeroPointOrder::before_rounding);
    const ActivationKind kind =
        rational_kinds ? *rc::gen::element(ActivationKind::relu, ActivationKind::relu6, ActivationKind::leaky_relu,
                                           ActivationKind::hard_sigmoid, ActivationKind::hard_swish)
                       : *rc::gen::element(ActivationKind::gelu_erf, ActivationKind::gelu_tanh, ActivationKind::sigmoid,
                                           ActivationKind::tanh, ActivationKind::silu, ActivationKind::elu,
                                           ActivationKind::softplus, ActivationKind::mish);
    c.activation = make_activation(kind);
    if (takes_alpha(kind) && *rc::gen::arbitrary<bool>()) c.activation.alpha = *rc::gen::element(0.25f, 0.1f, 2.0f, 0.0f);
    return c;
  });
}

// Piecewise-rational kinds against the test's own rational formulas and rounding.
cpp_rational rational_f(const Activation& a, const cpp_rational& x) {
  const auto relu6 = [](const cpp_rational& t) { return t < 0 ? cpp_rational(0) : (t > 6 ? cpp_rational(6) : t); };
  switch (a.kind) {
    case ActivationKind::relu: return x < 0 ? cpp_rational(0) : x;
    case ActivationKind::relu6: return relu6(x);
    case ActivationKind::leaky_relu: return x < 0 ? cpp_rational(testing::exact(a.alpha) * x) : x;
    case ActivationKind::hard_sigmoid: return relu6(x + 3) / 6;
    case ActivationKind::hard_swish: return x * relu6(x + 3) / 6;
    default: throw std::logic_error("not rational");
  }
}

RC_GTEST_PROP(ActivationTable, RationalKindsMatchIndependentArithmetic, ()) {
  const Convention c = *convention_gen(true);
  const ActivationTable t(c);
  const cpp_rational su = testing::exact(c.intermediate.q.scale), sy = testing::exact(c.output.q.scale);
  const int32_t zy = c.output.q.zero_point;
  int ties = 0;
  for (int32_t u = c.intermediate.q.type.qmin(); u <= c.intermediate.q.type.qmax(); ++u) {
    const cpp_rational f = rational_f(c.activation, cpp_rational(u - c.intermediate.q.zero_point) * su);
    const bool before = c.output.zero_point_order == ZeroPointOrder::before_rounding;
    const cpp_int r = before ? testing::round_mode(f / sy + zy, c.output.rounding) : testing::round_mode(f / sy, c.output.rounding) + zy;
    const int64_t y = testing::clamp64(r, c.output.q.type.qmin(), c.output.q.type.qmax());
    RC_ASSERT(t.at(u).y == y);
    RC_ASSERT(t.at(u).saturated == (cpp_int(y) != r));
    ties += t.at(u).tie_distance == 0;
  }
  RC_CLASSIFY(ties > 0, "has ties");
}

// Transcendental kinds: every code against f(v) to 60 digits, rounded by the test.
RC_GTEST_PROP(ActivationTable, TranscendentalKindsMatchDecimalEvaluation, ()) {
  const Convention c = *convention_gen(false);
  const ActivationTable t(c);
  RC_LOG() << describe(c) << " alpha=" << c.activation.alpha << "\n";
  bool oracle_undecided = false;
  for (int32_t u = c.intermediate.q.type.qmin(); u <= c.intermediate.q.type.qmax(); u += 3) {
    RC_LOG() << "u=" << u << "\n";
    bool saturated = false;
    const std::optional<int32_t> y = decided_y(c, u, &saturated);
    if (!y) {
      oracle_undecided = true;
      continue;
    }
    RC_ASSERT(t.at(u).y == *y);
    RC_ASSERT(t.at(u).saturated == saturated);
  }
  RC_CLASSIFY(t.escalations() > 0, "escalated");
  RC_CLASSIFY(oracle_undecided, "a tail beyond 1500 digits skipped");
}

// The double filter never decides differently from MPFR alone.
RC_GTEST_PROP(ActivationTable, FilterAgreesWithMpfrOnly, ()) {
  const Convention c = *convention_gen(false);
  ActivationTableOptions all_mpfr;
  all_mpfr.use_double_filter = false;
  const ActivationTable fast(c), slow(c, all_mpfr);
  for (int32_t u = c.intermediate.q.type.qmin(); u <= c.intermediate.q.type.qmax(); ++u) {
    RC_ASSERT(fast.at(u).y == slow.at(u).y);
    RC_ASSERT(fast.at(u).saturated == slow.at(u).saturated);
    RC_ASSERT(std::fabs(fast.at(u).t - slow.at(u).t) <= 1e-9 * std::max(1.0, std::fabs(slow.at(u).t)));
  }
}

// Piecewise-rational kinds through the double filter: the same codes, saturation and quant_boundary
// classification as exact rationals everywhere (use_double_filter = false), tie distances within 2^-30.
RC_GTEST_PROP(ActivationTable, RationalFilterAgreesWithExactRationals, ()) {
  const Convention c = *convention_gen(true);
  ActivationTableOptions exact_only;
  exact_only.use_double_filter = false;
  const ActivationTable fast(c), exact(c, exact_only);
  for (int32_t u = c.intermediate.q.type.qmin(); u <= c.intermediate.q.type.qmax(); ++u) {
    RC_ASSERT(fast.at(u).y == exact.at(u).y);
    RC_ASSERT(fast.at(u).saturated == exact.at(u).saturated);
    RC_ASSERT((fast.at(u).tie_distance <= fusediff::kQuantBoundaryTieDistance) ==
              (exact.at(u).tie_distance <= fusediff::kQuantBoundaryTieDistance));
    RC_ASSERT(std::fabs(fast.at(u).tie_distance - exact.at(u).tie_distance) <= 0x1p-30);
  }
}

// ---- Decimal text.

TEST(ActivationDecimal, KnownValues) {
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::softplus), "0", 40),
            "0.6931471805599453094172321214581765680755");
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::sigmoid), "0"), "0.5");
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::relu), "-3"), "0");
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::relu6), "7.25"), "6");
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::hard_sigmoid), "1", 10), "0.6666666667");
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::tanh), "1", 30), "0.761594155955764888119458282605");
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::gelu_erf), "1", 25), "0.8413447460685429485852325");
  // leaky_relu uses the exact float32 alpha: 0.01f = 0.00999999977648258209228515625.
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::leaky_relu), "-1", 40), "-0.00999999977648258209228515625");
  EXPECT_EQ(ActivationDecimal(make_activation(ActivationKind::elu), "-1e-3", 20), "-0.00099950016662500833194");
  EXPECT_THROW(ActivationDecimal(make_activation(ActivationKind::tanh), "1.2.3"), InputError);
  EXPECT_THROW(ActivationDecimal(make_activation(ActivationKind::tanh), "abc"), InputError);
  EXPECT_THROW(ActivationDecimal(Activation{ActivationKind::tanh, 1.0f}, "1"), InputError);
}

TEST(ActivationDecimal, ExactActivationDecimalUsesTheCodesValue) {
  // su = 1/16, zu = 3: code 19 is v = 1.
  const Convention c = table_convention(make_activation(ActivationKind::tanh), {kInt8, 1.0f / 16, 3}, {kInt8, 1.0f / 128, 0});
  EXPECT_EQ(ExactActivationDecimal(c, 19, 30), ActivationDecimal(c.activation, "1", 30));
  EXPECT_EQ(ExactActivationDecimal(c, 3), "0");
  EXPECT_THROW(ExactActivationDecimal(c, 200), InputError);
}

}  // namespace
}  // namespace fusediff::reference
