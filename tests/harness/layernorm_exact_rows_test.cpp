// The layernorm's exact-rows regime (model/pattern.h LnRegime::exact_rows, docs/summation-orders.md "Rows exact in
// every order"): every drawn row has a mean sum and a variance sum exact in every order; under it, ORT's declared
// order run as oneDNN's jit order (norm_other_order) is judged and passes at tolerance 0 through the built-in
// kernel, while an order with another output formula stays a measurement; a mutant is still detected; a replay
// line regenerates the draw.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/mutants.h"
#include "fusediff/reference/stage_eval.h"
#include "fusediff/reference/summation.h"
#include "../support/pattern_cases.h"

namespace fusediff {
namespace {

// The --pattern cases of both layernorm patterns that run the exact-rows regime.
std::vector<CaseSpec> ExactRowsCases(size_t samples) {
  std::vector<CaseSpec> cases;
  for (CaseSpec& spec : test_support::CasesOfPatterns({"fc+layernorm+act", "fc+add+layernorm"}, samples)) {
    if (find_stage(spec.pattern, StageKind::layernorm)->ln_regime == LnRegime::exact_rows) cases.push_back(spec);
  }
  return cases;
}

// The first row's codes on the norm's input boundary, computed here in double from the draw's FC and residual (the
// aim puts every value mid-interval of its code, so plain rounding finds it), and that boundary.
std::vector<int32_t> NormInputCodes(const CaseSpec& spec, const PatternDraw& d, QuantParams* in) {
  const ConvCase& conv = d.conv;
  const QuantParams& u = spec.convention.intermediate.q;
  const Stage* add = find_stage(spec.pattern, StageKind::add);
  *in = add ? add->out : u;
  std::vector<int32_t> codes;
  for (int32_t k = 0; k < conv.output_channels(); ++k) {
    int64_t acc = conv.bias()[size_t(k)];
    for (int32_t ci = 0; ci < conv.input_channels(); ++ci) {
      acc += int64_t(d.input[size_t(ci)] - conv.input_quant().zero_point) * conv.weights()[conv.weight_index(k, 0, 0, ci)];
    }
    const double m = double(conv.input_quant().scale) * conv.weight_scales()[size_t(k)] / u.scale;
    const double uc = std::clamp(std::round(double(acc) * m) + u.zero_point, double(u.type.qmin()), double(u.type.qmax()));
    if (!add) {
      codes.push_back(int32_t(uc));
      continue;
    }
    const int32_t r = d.operands(spec.pattern, StageKind::add).codes[size_t(k)];
    const double s = (double(u.scale) * (uc - u.zero_point) + double(add->residual.scale) * (r - add->residual.zero_point)) /
                         add->out.scale + add->out.zero_point;
    codes.push_back(int32_t(std::clamp(std::round(s), double(add->out.type.qmin()), double(add->out.type.qmax()))));
  }
  return codes;
}

// A row that is not exact under the regime is a harness error thrown by the reference, never a pass: codes 1, 2, 4 at
// 2^-5 have mu = fl32(7 / 96), whose centred squares are not exact.
TEST(LayerNormExactRows, ARowThatIsNotExactIsAnErrorNeverAPass) {
  Pattern p = parse_pattern_name("fc+layernorm+act", "test");
  Stage& stage = p.stages[0];
  stage.ln_regime = LnRegime::exact_rows;
  stage.out = QuantParams{QuantType{ScalarType::int8, false}, 1.0f / 32, 0};
  const Convention c;
  const PatternDraw draw;
  StageOperands ops;
  ops.gamma = {1, 1, 1};
  ops.beta = {0, 0, 0};
  const reference::ActivationLookup none;
  const reference::StageInputs in{p, c, draw, ops, none, QuantParams{QuantType{ScalarType::int8, false}, 1.0f / 32, 0}};
  const auto row = [&](std::vector<int32_t> codes) {
    reference::GraphTensor t;
    t.shape = PatternGeometry{1, 1, 1, 3};
    for (int32_t q : codes) t.e.push_back(reference::GraphElement{0, q, 0, 0});
    reference::reference_stage(StageKind::layernorm).Apply(stage, in, t);
  };
  EXPECT_NO_THROW(row({3, 5, 4}));  // mu = 4 / 32 exactly, d = -1, 1, 0 (x 2^-5)
  try {
    row({1, 2, 4});
    ADD_FAILURE() << "an inexact row passed";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("layernorm regime exact_rows: row 0 (codes 1,2,4"), std::string::npos) << e.what();
  }
  stage.ln_regime = LnRegime::mixed;  // no promise, no check
  EXPECT_NO_THROW(row({1, 2, 4}));
}

// Every drawn row (one a draw) is exact: its x_j sum exactly in every order, mu = S / n is a binary32 value, and the
// variance terms d_j^2 = fl32(x_j - mu)^2 are exact and sum exactly in every order. Any seed, any case, any
// power-of-two input scale and zero point, rows of the drawn length or of 4,096.
RC_GTEST_PROP(LayerNormExactRows, EveryDrawnRowIsExactInEveryOrder, ()) {
  static const std::vector<CaseSpec> cases = ExactRowsCases(100);
  CaseSpec spec = *rc::gen::elementOf(cases);
  QuantParams& u = spec.convention.intermediate.q;
  u.scale = std::ldexp(1.0f, *rc::gen::inRange(-9, 1));
  u.zero_point = *rc::gen::inRange(-40, 41);
  for (Stage& s : spec.pattern.stages) {
    if (s.kind == StageKind::add) s.out = u;  // the add's sum at u's boundary, as the suite's cases
  }
  validate(spec.pattern, spec.convention);
  const uint64_t seed = *rc::gen::inRange<uint64_t>(1, uint64_t{1} << 40);
  const uint32_t draw = *rc::gen::inRange<uint32_t>(0, 1000);
  const PatternDraw d = generators::GeneratePatternDraw(seed, 11, draw, spec.pattern, spec.convention, spec.mix,
                                                        generators::PatternDrawLimits(spec.pattern));
  RC_ASSERT(d.conv.batch() == 1);
  QuantParams in;
  const std::vector<int32_t> codes = NormInputCodes(spec, d, &in);
  std::vector<float> x;
  for (int32_t q : codes) x.push_back(in.scale * static_cast<float>(q - in.zero_point));
  RC_ASSERT(reference::SumIsExactInEveryOrder(x));  // the mean's terms
  double sum = 0;
  for (float v : x) sum += v;
  const float mean = static_cast<float>(sum / static_cast<double>(x.size()));
  RC_ASSERT(static_cast<double>(mean) * static_cast<double>(x.size()) == sum);  // mu exact: sum delta_j = 0
  std::vector<float> squares;
  for (float v : x) {
    const float dj = v - mean;
    RC_ASSERT(static_cast<double>(dj * dj) == static_cast<double>(dj) * dj);
    squares.push_back(dj * dj);
  }
  RC_ASSERT(reference::SumIsExactInEveryOrder(squares));  // the variance's terms
  RC_ASSERT(reference::LayerNormStatsAreExactInEveryOrder(x));
  const auto [lo, hi] = std::minmax_element(codes.begin(), codes.end());
  RC_CLASSIFY(*lo == *hi, "constant row");
  RC_CLASSIFY(*hi - *lo == 2 && x.size() > 2, "one +1/-1 pair or a spread of 2");
  RC_CLASSIFY(*hi == in.type.qmax() || *lo == in.type.qmin(), "a code at an end of the type");
  RC_CLASSIFY(x.size() == 4096, "4,096 features");
}

// Under exact rows, ORT's order run as oneDNN's jit order is judged and passes at tolerance 0, also on rows of 4,096
// features; oneDNN's C++ kernel's order (another output formula) stays a measurement. Without exact rows the same
// pair of orders differs on some samples (the default suite's measurement), so the verdict rests on the regime.
TEST(LayerNormExactRows, OtherOrderCasesAreJudgedAndPassAtToleranceZero) {
  driver::ReferenceCache cache;
  size_t judged = 0, measured = 0;
  for (const CaseSpec& spec : ExactRowsCases(8192)) {
    SCOPED_TRACE(spec.name);
    const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
    ASSERT_GT(r.stats.overall.count(), 0u);
    if (find_stage(spec.pattern, StageKind::layernorm)->ln_fused_order == named_normalization_order("onednn_jit", "t")) {
      EXPECT_EQ(spec.comparison, Comparison::same_convention);
      EXPECT_EQ(r.tolerance.max_abs_lsb, 0);
      EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
      EXPECT_EQ(r.stats.overall.max_abs(), 0);
      ++judged;
    } else {
      EXPECT_EQ(spec.comparison, Comparison::cross_convention);
      EXPECT_EQ(r.verdict, Verdict::cross_convention);
      ++measured;
    }
  }
  EXPECT_EQ(judged, 8u);    // fc+layernorm+act: 3 activations x (rows drawn, 4,096); fc+add+layernorm: 2
  EXPECT_EQ(measured, 4u);  // one onednn_cpp case each

  driver::SuiteOptions options;
  options.samples = 20000;
  options.activation = ActivationKind::sigmoid;
  bool seen = false;
  for (const CaseSpec& spec : driver::PatternCases(options, std::string("fc+layernorm+act"))) {
    const Stage& ln = spec.pattern.stages[0];
    if (spec.fusion != Fusion::norm_other_order || ln.ln_regime != LnRegime::mixed) continue;
    seen = true;
    EXPECT_EQ(spec.comparison, Comparison::cross_convention);
    EXPECT_GT(driver::RunCase(spec, driver::RunOptions{}, cache).stats.overall.max_abs(), 0) << spec.name;
  }
  EXPECT_TRUE(seen);
}

const CaseSpec& JudgedCase(const std::vector<CaseSpec>& cases, const char* pattern) {
  for (const CaseSpec& spec : cases) {
    if (pattern_name(spec.pattern) == pattern && spec.comparison == Comparison::same_convention &&
        find_stage(spec.pattern, StageKind::layernorm)->ln_features == 0) {
      return spec;
    }
  }
  throw std::logic_error(std::string("no judged exact-rows case of ") + pattern);
}

// A wrong kernel is still caught on exact rows: eps dropped (a constant row divides by sqrt(0)), the variance summed
// in bf16. The one-pass variance is not always: on an exact row whose sum of x^2 is exact too and whose n is a power
// of two, E[x^2] - mu^2 is the two-pass variance exactly; it shows only where fl32(sum x^2 / n) rounds.
TEST(LayerNormExactRows, MutantsAreStillDetected) {
  const std::vector<CaseSpec> cases = ExactRowsCases(20000);
  driver::ReferenceCache cache;
  for (const char* pattern : {"fc+layernorm+act", "fc+add+layernorm"}) {
    for (Mutant m : {Mutant::ln_drop_eps, Mutant::ln_bf16_variance, Mutant::ln_one_pass_variance}) {
      CaseSpec spec = JudgedCase(cases, pattern);
      spec.mutant = m;
      SCOPED_TRACE(spec.name + " " + std::string(to_string(m)));
      const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
      EXPECT_EQ(r.verdict, Verdict::fail);
      EXPECT_GT(r.stats.overall.max_abs(), 0);
    }
  }
}

// The replay line of an exact-rows case names the regime and regenerates the draw: a mutant's worst samples replay
// to the same reference and fused codes, and a passing case's samples replay equal.
TEST(LayerNormExactRows, ReplayLinesRegenerateTheDraw) {
  const std::vector<CaseSpec> cases = ExactRowsCases(4000);
  driver::ReferenceCache cache;
  for (const char* pattern : {"fc+layernorm+act", "fc+add+layernorm"}) {
    CaseSpec spec = JudgedCase(cases, pattern);
    spec.mutant = Mutant::ln_drop_eps;
    const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
    ASSERT_FALSE(r.worst.empty()) << spec.name;
    for (size_t i = 0; i < std::min<size_t>(3, r.worst.size()); ++i) {
      const std::string& line = r.worst[i].replay;
      SCOPED_TRACE(line);
      EXPECT_NE(line.find(";ln_regime=exact_rows"), std::string::npos);
      const ReplayTrace t = driver::Replay(parse_replay(line));
      EXPECT_EQ(t.key.spec.pattern, spec.pattern);
      EXPECT_EQ(t.y_reference, r.worst[i].sample.y_ref);
      EXPECT_EQ(t.y_fused, r.worst[i].sample.y_fused);
      EXPECT_NE(t.conv_shape.find("N1 "), std::string::npos) << t.conv_shape;  // one row a draw
    }
    ReplayKey key;
    key.seed = 1;
    key.spec = JudgedCase(cases, pattern);
    for (uint64_t sample : {0u, 17u, 1234u}) {
      key.sample = sample;
      const ReplayKey back = parse_replay(format_replay(key));
      EXPECT_EQ(back.spec.comparison, Comparison::same_convention);
      const ReplayTrace t = driver::Replay(back);
      EXPECT_EQ(t.y_reference, t.y_fused) << format_replay(key);
    }
  }
}

}  // namespace
}  // namespace fusediff
