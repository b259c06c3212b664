// The layernorm stage's tflite_int16 arithmetic (TFLite's integer layer norm): the fixed-point inverse square root
// pinned at hand-computed values; the operands derived from gamma and beta as TFLite's LSTM derives them; a row
// computed by hand; the built-in kernel equal to the reference over random rows (RapidCheck: row lengths 1 to 300,
// non-powers of two, variances below 1, saturation); the --pattern cases (same convention at tolerance 0, the
// cross-convention measurement labelled); bad text refused naming the field; describe and replay name it.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/fixedpoint.h"
#include "fusediff/fused/stage_kernel.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reference/tflite_layer_norm.h"

namespace fusediff {
namespace {

QuantParams Params(ScalarType type, float scale, int32_t zero_point) {
  return QuantParams{QuantType{type, false}, scale, zero_point};
}

// Pins of GetInvSqrtQuantizedMultiplierExp(input, -1), worked by hand from its definition (the normalization by
// powers of 4, five Newton steps in Q3.28 with SRDHM products, the final sqrt(2)/2) in exact integer arithmetic,
// independently of both implementations. multiplier 2^(shift - 31) approximates 1/sqrt(input): 2 is the worst
// (v = 1/4 after normalization, the farthest start for the Newton steps: relative error 1.2e-6).
struct InvSqrtPin {
  int32_t input;
  int32_t multiplier;
  int32_t shift;
};
constexpr InvSqrtPin kInvSqrtPins[] = {
    {0, 2147483647, 0},          {1, 2147483647, 0},          {2, 1518498372, 0},   {3, 1239850284, 0},
    {4, 1073741828, 0},          {5, 960383900, 0},           {16, 536870914, 0},   {100, 214748363, 0},
    {1000, 271637587, -2},       {12345, 309246148, -4},      {1 << 20, 268435457, -7},
    {(1 << 29) - 1, 189812531, -11}, {1 << 29, 379624593, -12}, {1 << 30, 268435457, -12},
    {2147483647, 189812531, -12}};

TEST(TfliteLayerNorm, InverseSquareRootMatchesHandComputedValues) {
  for (const InvSqrtPin& pin : kInvSqrtPins) {
    SCOPED_TRACE(pin.input);
    const reference::QuantizedMultiplier r = reference::TfliteInvSqrtMultiplier(pin.input);
    EXPECT_EQ(r.multiplier, pin.multiplier);
    EXPECT_EQ(r.shift, pin.shift);
    int32_t m = 0;
    int shift = 0;
    fused::GetInvSqrtQuantizedMultiplierExp(pin.input, -1, &m, &shift);
    EXPECT_EQ(m, pin.multiplier);
    EXPECT_EQ(shift, pin.shift);
    if (pin.input >= 1) {  // and each is 1/sqrt(input) within the iteration's error
      const double value = std::ldexp(static_cast<double>(pin.multiplier), pin.shift - 31);
      EXPECT_NEAR(value * std::sqrt(static_cast<double>(pin.input)), 1.0, 2e-6);
    }
  }
}

TEST(TfliteLayerNorm, OperandsAreDerivedAsTheIntegerLstmDerivesThem) {
  const std::vector<float> gamma{1.0f, -0.5f, 0.25f, 0.0f}, beta{0.5f, -0.25f, 0.0f, 1e-9f};
  const reference::TfliteLayerNormOperands o = reference::DeriveTfliteLayerNormOperands(gamma, beta);
  const float s_g = 1.0f / 32767.0f;  // max |gamma| = 1
  EXPECT_EQ(o.gamma_scale, s_g);
  // gamma / s_g: 32767, -16383.5 (away: -16384), 8191.75 (8192), 0.
  EXPECT_EQ(o.weights, (std::vector<int32_t>{32767, -16384, 8192, 0}));
  // beta / (s_g 2^-10) = beta 1024 32767 (up to s_g's rounding): 16776704 for 0.5.
  EXPECT_NEAR(o.bias[0], 0.5 * 1024 * 32767, 1.0);
  EXPECT_EQ(o.bias[0], -2 * o.bias[1]);
  EXPECT_EQ(o.bias[2], 0);
  EXPECT_EQ(o.bias[3], 0);
  EXPECT_EQ(o.variance_limit, 1);  // 10000 s_g = 0.305: max(1, 0)
  EXPECT_EQ(o.scale.multiplier, 1073774592);  // s_g = 2^-15 (1 + 2^-15 + ...): QuantizeMultiplier
  EXPECT_EQ(o.scale.shift, -14);
  // Every gamma zero: s_g = 1 (TFLite's symmetric quantizer), weights 0; a large gamma raises the variance guard.
  EXPECT_EQ(reference::DeriveTfliteLayerNormOperands(std::vector<float>{0, 0}, std::vector<float>{0, 0}).gamma_scale, 1.0f);
  EXPECT_EQ(reference::DeriveTfliteLayerNormOperands(std::vector<float>{32767}, std::vector<float>{0}).variance_limit, 10000);
}

// The kernel through its stage interface on one row of codes.
std::vector<int32_t> KernelRow(const std::vector<int32_t>& codes, const QuantParams& in, const QuantParams& out,
                               const std::vector<float>& gamma, const std::vector<float>& beta) {
  Stage s;
  s.kind = StageKind::layernorm;
  s.ln_arithmetic = LayerNormArithmetic::tflite_int16;
  s.out = out;
  CaseSpec spec;
  spec.pattern = parse_pattern_name("fc+layernorm+act", "test");
  spec.pattern.stages[0] = s;
  std::string why;
  const auto kernel = fused::find_fused_stage(StageKind::layernorm)->Create(spec, s, in, &why);
  if (kernel == nullptr) throw std::runtime_error("no tflite_int16 layernorm kernel: " + why);
  StageOperands ops;
  ops.gamma = gamma;
  ops.beta = beta;
  fused::StageTensor t{PatternGeometry{1, 1, 1, static_cast<int32_t>(codes.size())}, codes};
  kernel->Run(ops, t);
  return t.codes;
}

// A row by hand: v = [-3, -1, 1, 3] (n = 4), gamma = 1 (w = 32767, s_g = 1/32767), beta = 0, out int16 at 2^-12.
// S = 0, Q = 20: mean 0, var = 20 2^18 / 2^20 = 5; 1/sqrt(5) ~ 0.4472136 (960383900, shift 0): rescaled =
// round(1024 v 0.4472136) = [-1374, -458, 458, 1374]; t = rescaled 32767; t4 = round(t / 1024) =
// [-43967, -14656, 14656, 43967]; y = t4 s_g 2^12 rounded: [-5496, -1832, 1832, 5496] (= 4096 v / sqrt(5), to the
// fixed point's rounding).
TEST(TfliteLayerNorm, ReferenceAndKernelMatchAHandComputedRow) {
  const std::vector<int32_t> v{-3, -1, 1, 3};
  const std::vector<float> gamma(4, 1.0f), beta(4, 0.0f);
  const QuantParams out = Params(ScalarType::int16, 1.0f / 4096, 0);
  const std::vector<int32_t> expected{-5496, -1832, 1832, 5496};
  EXPECT_EQ(reference::TfliteLayerNormRow(v, reference::DeriveTfliteLayerNormOperands(gamma, beta), out), expected);
  EXPECT_EQ(KernelRow(v, Params(ScalarType::int8, 0.5f, 0), out, gamma, beta), expected);
}

RC_GTEST_PROP(TfliteLayerNorm, KernelEqualsTheReferenceOverRandomRows, ()) {
  const bool int16_in = *rc::gen::arbitrary<bool>();
  const QuantParams in = int16_in ? Params(ScalarType::int16, 1.0f / 4096, 0)
                                  : Params(ScalarType::int8, 0.05f, *rc::gen::inRange(-128, 128));
  const bool int16_out = *rc::gen::arbitrary<bool>();
  const QuantParams out = Params(int16_out ? ScalarType::int16 : ScalarType::int8,
                                 std::ldexp(1.0f, -*rc::gen::inRange(0, 15)), 0);
  const int n = *rc::gen::oneOf(rc::gen::inRange(1, 9), rc::gen::inRange(1, 301), rc::gen::element(64, 128, 256, 300));
  // Rows: anywhere in the type, near one code (a variance below 1: variance_limit), or a large mean with a spread
  // of a few codes (TFLite's trunc(2^20 / n) drives the variance negative for most n that are not powers of two).
  const int regime = *rc::gen::inRange(0, 3);
  const int32_t lo = in.type.qmin(), hi = in.type.qmax();
  const int32_t centre = *rc::gen::inRange(lo, hi + 1);
  std::vector<int32_t> codes(static_cast<size_t>(n));
  for (int32_t& q : codes) {
    q = regime == 0 ? *rc::gen::inRange(lo, hi + 1)
                    : std::clamp(centre + *rc::gen::inRange(regime == 1 ? 0 : -3, regime == 1 ? 2 : 4), lo, hi);
  }
  // gamma up to 2^8 (the output saturates), beta up to 2^6 (its int32 code up to 2^31: saturates too).
  const float g_scale = std::ldexp(1.0f, *rc::gen::inRange(-8, 9));
  const float b_scale = std::ldexp(1.0f, *rc::gen::inRange(-8, 7));
  std::vector<float> gamma, beta;
  for (int j = 0; j < n; ++j) {
    gamma.push_back(static_cast<float>(*rc::gen::inRange(-1000, 1001)) / 1000 * g_scale);
    beta.push_back(static_cast<float>(*rc::gen::inRange(-1000, 1001)) / 1000 * b_scale);
  }
  const reference::TfliteLayerNormOperands ops = reference::DeriveTfliteLayerNormOperands(gamma, beta);
  std::vector<int32_t> v;
  for (int32_t q : codes) v.push_back(q - in.zero_point);
  std::vector<bool> saturated;
  const std::vector<int32_t> expected = reference::TfliteLayerNormRow(v, ops, out, &saturated);
  RC_CLASSIFY(std::any_of(saturated.begin(), saturated.end(), [](bool b) { return b; }), "saturated");
  RC_CLASSIFY((n & (n - 1)) != 0, "n not a power of two");
  RC_CLASSIFY(regime == 1, "variance below 1");
  RC_ASSERT(KernelRow(codes, in, out, gamma, beta) == expected);
}

// Both arithmetics' --pattern cases: the integer one kept whole passes at tolerance 0, ORT's graph run by the
// integer kernel is a measurement; neither is in the default suite.
TEST(TfliteLayerNorm, PatternCasesPassAtToleranceZeroAndTheOtherArithmeticIsMeasured) {
  driver::SuiteOptions options;
  options.samples = 4000;
  driver::ReferenceCache cache;
  size_t same = 0, measured = 0;
  for (const char* p : {"fc+layernorm+act", "fc+add+layernorm"}) {
    for (const CaseSpec& spec : driver::PatternCases(options, std::string(p))) {
      const Stage& ln = *find_stage(spec.pattern, StageKind::layernorm);
      const bool integer = ln.ln_arithmetic == LayerNormArithmetic::tflite_int16;
      if (!integer && spec.fusion != Fusion::norm_other_arithmetic) continue;
      const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
      if (integer) {
        ++same;
        EXPECT_EQ(spec.comparison, Comparison::same_convention) << spec.name;
        EXPECT_EQ(r.verdict, Verdict::pass) << spec.name;
        EXPECT_EQ(r.stats.overall.max_abs(), 0) << spec.name;
      } else {
        ++measured;
        EXPECT_EQ(r.verdict, Verdict::cross_convention) << spec.name;
        EXPECT_GT(r.stats.overall.max_abs(), 0) << spec.name;  // the arithmetics differ
      }
    }
  }
  EXPECT_EQ(same, 4u);      // fc+layernorm+act: three activations; fc+add+layernorm: one
  EXPECT_EQ(measured, 4u);
  for (const CaseSpec& spec : driver::PatternCases(options, std::nullopt)) {  // the default suite's
    const Stage* ln = find_stage(spec.pattern, StageKind::layernorm);
    EXPECT_FALSE(ln && (ln->ln_arithmetic != LayerNormArithmetic::f32 || spec.fusion == Fusion::norm_other_arithmetic))
        << spec.name;
  }
}

std::string Replay(const CaseSpec& spec) {
  ReplayKey key;
  key.seed = 1;
  key.spec = spec;
  return format_replay(key);
}

std::string ErrorOf(const std::string& text) {
  try {
    parse_replay(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(TfliteLayerNorm, DescribeAndReplayNameTheArithmeticAndBadTextIsRefused) {
  driver::SuiteOptions options;
  options.samples = 100;
  std::vector<CaseSpec> cases;
  for (const CaseSpec& spec : driver::PatternCases(options, std::string("fc+add+layernorm"))) {
    if (spec.name.find("tflite_int16") != std::string::npos) cases.push_back(spec);
  }
  ASSERT_EQ(cases.size(), 2u);
  for (const CaseSpec& spec : cases) {
    const std::string text = Replay(spec);
    const ReplayKey back = parse_replay(text);
    EXPECT_EQ(back.spec.pattern, spec.pattern) << text;
    EXPECT_EQ(back.spec.fusion, spec.fusion) << text;
    EXPECT_EQ(format_replay(back), text);
  }
  const std::string kept = describe_pattern(cases[0].pattern, cases[0].fusion);
  const std::string measured = describe_pattern(cases[1].pattern, cases[1].fusion);
  EXPECT_NE(kept.find("layernorm tflite_int16"), std::string::npos) << kept;
  EXPECT_NE(measured.find("layernorm f32"), std::string::npos) << measured;
  EXPECT_NE(measured.find("fused arithmetic tflite_int16"), std::string::npos) << measured;
  std::string bad = Replay(cases[0]);
  ASSERT_NE(bad.find("ln=tflite_int16"), std::string::npos) << bad;
  bad.replace(bad.find("ln=tflite_int16"), 15, "ln=tflite_int8");
  EXPECT_NE(ErrorOf(bad).find("replay.ln"), std::string::npos) << ErrorOf(bad);
  // The integer arithmetic needs a power-of-two output scale with zero point 0: refused naming the field.
  CaseSpec odd = cases[0];
  odd.pattern.stages[1].out = Params(ScalarType::int8, 0.03f, 0);
  const std::string odd_error = ErrorOf(Replay(odd));
  EXPECT_NE(odd_error.find("layernorm.out"), std::string::npos) << odd_error;
  EXPECT_NE(odd_error.find("power-of-two"), std::string::npos) << odd_error;
}

}  // namespace
}  // namespace fusediff
