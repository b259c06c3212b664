// Stage kind layernorm (f32 arithmetic) and its patterns fc+layernorm+act, fc+add+layernorm: reference and built-in
// kernel against hand-computed rows; the kernel kept whole matches the reference exactly (tolerance 0) for every
// named order and any seed; the generators' row regimes; each layernorm mutant detected, shrunk to one row and
// replayed; bad parameters refused naming the field; a layernorm case's replay string round-trips.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/mutant_search.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/stage_kernel.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/mutants.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reference/stage_eval.h"
#include "fusediff/reference/stages.h"
#include "../support/any_seed_property.h"
#include "../support/pattern_cases.h"

namespace fusediff {
namespace {

QuantParams Int8(float scale, int32_t zero_point) { return QuantParams{QuantType{ScalarType::int8, false}, scale, zero_point}; }

// A small row with its hand-computed result: builder-style named fields.
struct RowCase {
  std::vector<int32_t> codes;
  QuantParams in = Int8(0.5f, 0);
  std::vector<float> gamma, beta;
  QuantParams out = Int8(1.0f / 64, 0);
  std::vector<int32_t> expected;
  RowCase& with_codes(std::vector<int32_t> v) { codes = std::move(v); return *this; }
  RowCase& with_gamma(std::vector<float> v) { gamma = std::move(v); return *this; }
  RowCase& with_beta(std::vector<float> v) { beta = std::move(v); return *this; }
  RowCase& with_out(QuantParams q) { out = q; return *this; }
  RowCase& expecting(std::vector<int32_t> v) { expected = std::move(v); return *this; }
};

// x = 0.5 q = [0.5, 1, 1.5, 2]: mu = 1.25, var = 0.3125; (x - mu) / sqrt(var + 1e-5) = [-1.341619, -0.447206,
// 0.447206, 1.341619]. At 1/64: [-85.86, -28.62, 28.62, 85.86] (+ beta 0.25 on the last: 101.86); at 1/128 the ends
// saturate (-171.7, 171.7).
std::vector<RowCase> HandRows() {
  return {RowCase{}
              .with_codes({1, 2, 3, 4})
              .with_gamma({1, 1, 1, 1})
              .with_beta({0, 0, 0, 0.25f})
              .expecting({-86, -29, 29, 102}),
          RowCase{}
              .with_codes({1, 2, 3, 4})
              .with_gamma({1, 1, 1, 1})
              .with_beta({0, 0, 0, 0})
              .with_out(Int8(1.0f / 128, 0))
              .expecting({-128, -57, 57, 127}),
          // gamma -2 on the first: 2.683238 * 64 = 171.7 saturates high; a constant row is all beta (0.5 * 64).
          RowCase{}
              .with_codes({1, 2, 3, 4})
              .with_gamma({-2, 1, 1, 1})
              .with_beta({0, 0, 0, 0})
              .expecting({127, -29, 29, 86}),
          RowCase{}
              .with_codes({7, 7, 7, 7})
              .with_gamma({1, 1, 1, 1})
              .with_beta({0.5f, 0.5f, 0.5f, 0.5f})
              .expecting({32, 32, 32, 32})};
}

Stage LayerNormStage(const char* order, const QuantParams& out) {
  Stage s;
  s.kind = StageKind::layernorm;
  s.ln_order = named_normalization_order(order, "test");
  s.out = out;
  return s;
}

std::vector<int32_t> ReferenceRow(const RowCase& row, const Stage& stage) {
  Pattern p = parse_pattern_name("fc+layernorm+act", "test");
  p.stages[0] = stage;
  const Convention c;
  const PatternDraw draw;
  StageOperands ops;
  ops.gamma = row.gamma;
  ops.beta = row.beta;
  const reference::ActivationLookup none;
  const reference::StageInputs in{p, c, draw, ops, none, row.in};
  reference::GraphTensor t;
  t.shape = PatternGeometry{1, 1, 1, static_cast<int32_t>(row.codes.size())};
  for (int32_t q : row.codes) t.e.push_back(reference::GraphElement{0, q, 0, 0});
  reference::reference_stage(StageKind::layernorm).Apply(stage, in, t);
  std::vector<int32_t> y;
  for (const reference::GraphElement& e : t.e) y.push_back(e.y);
  return y;
}

std::vector<int32_t> FusedRow(const RowCase& row, const Stage& stage, Mutant mutant = Mutant::none) {
  CaseSpec spec;
  spec.pattern = parse_pattern_name("fc+layernorm+act", "test");
  spec.pattern.stages[0] = stage;
  spec.mutant = mutant;
  std::string why;
  const std::unique_ptr<fused::StageKernel> k =
      fused::find_fused_stage(StageKind::layernorm)->Create(spec, stage, row.in, &why);
  StageOperands ops;
  ops.gamma = row.gamma;
  ops.beta = row.beta;
  fused::StageTensor t{PatternGeometry{1, 1, 1, static_cast<int32_t>(row.codes.size())}, row.codes};
  k->Run(ops, t);
  return t.codes;
}

TEST(LayerNorm, ReferenceAndKernelMatchHandComputedRowsInEveryNamedOrder) {
  for (const NamedNormalizationOrder& order : named_normalization_orders()) {
    for (const RowCase& row : HandRows()) {
      SCOPED_TRACE(std::string(order.name));
      const Stage stage = LayerNormStage(std::string(order.name).c_str(), row.out);
      EXPECT_EQ(ReferenceRow(row, stage), row.expected);
      EXPECT_EQ(FusedRow(row, stage), row.expected);
    }
  }
}

// A random valid order: every shape, lane count, unroll, fold, tail, contraction and precision the model allows.
SummationOrder RandomOrder() {
  SummationOrder o;
  o.shape = *rc::gen::element(SumShape::sequential, SumShape::pairwise, SumShape::blocked);
  o.leaf = *rc::gen::inRange(1, 17);
  o.lanes = 1 << *rc::gen::inRange(0, 5);
  o.unroll = 1 << *rc::gen::inRange(0, 4);
  if (*rc::gen::arbitrary<bool>()) {
    for (int m = o.lanes; m > 1; m /= 2) o.lane_fold.push_back(*rc::gen::element(LaneFoldStep::halve, LaneFoldStep::adjacent));
  }
  o.tail = *rc::gen::element(BlockedTail::after_fold, BlockedTail::into_lane0, BlockedTail::after_fold_mul4);
  o.accumulator = *rc::gen::element(AccumulatorPrecision::binary32, AccumulatorPrecision::binary64, AccumulatorPrecision::bf16);
  o.product_precision = *rc::gen::element(ProductPrecision::binary32, ProductPrecision::binary64);
  const bool fma = o.accumulator == AccumulatorPrecision::binary32 && *rc::gen::arbitrary<bool>();
  o.contraction = fma ? Contraction::fma : Contraction::none;
  return o;
}

// The kernel's own lanes and accumulators against the reference's emulation, for any declared order: one row of
// random codes (1 to 300 features), random gamma and beta, bit for bit on every output code.
RC_GTEST_PROP(LayerNorm, KernelMatchesTheReferenceInAnyDeclaredOrder, ()) {
  NormalizationOrder order;
  order.stats = *rc::gen::element(NormalizationStats::two_pass, NormalizationStats::mean_in_double,
                                  NormalizationStats::welford, NormalizationStats::one_pass);
  order.mean = RandomOrder();
  order.variance = RandomOrder();
  order.output = *rc::gen::element(NormalizationOutput::centered_times_inv, NormalizationOutput::scale_times_inv,
                                   NormalizationOutput::scale_over_sqrt, NormalizationOutput::centered_over_sqrt);
  order.output_contraction = *rc::gen::element(Contraction::none, Contraction::fma);
  RC_TAG(std::string(to_string(order.stats)) + "/" + std::string(to_string(order.variance.shape)));
  const int n = *rc::gen::inRange(1, 301);
  RowCase row;
  row.in = Int8(std::ldexp(1.0f + *rc::gen::inRange(0, 1000) / 1000.0f, -*rc::gen::inRange(2, 9)), *rc::gen::inRange(-20, 21));
  row.out = Int8(1.0f / 32, *rc::gen::inRange(-5, 6));
  const int centre = *rc::gen::inRange(-128, 128), spread = *rc::gen::inRange(0, 128);
  for (int j = 0; j < n; ++j) {
    row.codes.push_back(std::clamp(centre + *rc::gen::inRange(-spread, spread + 1), -128, 127));
    row.gamma.push_back(*rc::gen::inRange(-1500, 1501) / 1000.0f);
    row.beta.push_back(*rc::gen::inRange(-500, 501) / 1000.0f);
  }
  Stage stage = LayerNormStage("ort", row.out);
  stage.ln_order = order;
  // The graph's float boundaries around the norm (none, bf16 by either subnormal rule, f16), each side on its own.
  const auto boundary = [] {
    return *rc::gen::element(std::optional<FloatBoundary>{}, std::optional<FloatBoundary>{FloatBoundary{FloatFormat::bf16}},
                             std::optional<FloatBoundary>{flush_subnormals_float_boundary(FloatFormat::bf16)},
                             std::optional<FloatBoundary>{FloatBoundary{FloatFormat::f16}});
  };
  stage.ln_in_float = boundary();
  stage.ln_out_float = boundary();
  RC_TAG(stage.ln_in_float ? format_float_boundary(*stage.ln_in_float) : "no in boundary");
  const std::vector<int32_t> fused = FusedRow(row, stage), reference = ReferenceRow(row, stage);
  RC_LOG() << format_normalization_order(order) << " n=" << n << " in=" << format_quant_params(row.in);
  for (size_t j = 0; j < fused.size(); ++j) {
    if (fused[j] != reference[j]) RC_LOG() << " j=" << j << " fused " << fused[j] << " reference " << reference[j];
  }
  RC_ASSERT(fused == reference);
}

// The graph's bf16 boundaries around the norm (Stage::ln_in_float, ln_out_float), by hand. Row A: x = 3 q = (300,
// 303, 306, 300) stores as (300, 304, 306, 300) (bf16 steps by 2 there; 303 a tie: to even, 304): y = (-0.9623,
// 0.5774, 1.3472, -0.9623), codes at 1/64 (-61.58, 36.95, 86.22, -61.58) against binary32's (-57.89, 19.30, 96.48,
// -57.89). Row B: x exact in bf16; y_0 = 1 - 0.125 * 1.341619 = 0.832298 stores as 213/256, which is exactly
// -21.5 codes at 1/128 - 128: to even, -22 (binary32: -21.47, -21).
TEST(LayerNorm, Bf16BoundariesRoundXAndYInReferenceAndKernel) {
  const RowCase a = RowCase{}.with_codes({100, 101, 102, 100}).with_gamma({1, 1, 1, 1}).with_beta({0, 0, 0, 0});
  RowCase row_a = a;
  row_a.in = Int8(3.0f, 0);
  const RowCase row_b = RowCase{}
                            .with_codes({1, 2, 3, 4})
                            .with_gamma({0.125f, 0.125f, 0.125f, 0.125f})
                            .with_beta({1, 1, 1, 1})
                            .with_out(Int8(1.0f / 128, -128));
  struct Expected {
    const RowCase& row;
    std::vector<int32_t> f32, bf16;
  };
  const Expected rows[] = {{row_a, {-58, 19, 96, -58}, {-62, 37, 86, -62}}, {row_b, {-21, -7, 7, 21}, {-22, -7, 7, 21}}};
  for (const NamedNormalizationOrder& order : named_normalization_orders()) {
    SCOPED_TRACE(std::string(order.name));
    for (const Expected& e : rows) {
      Stage stage = LayerNormStage(std::string(order.name).c_str(), e.row.out);
      EXPECT_EQ(ReferenceRow(e.row, stage), e.f32);
      EXPECT_EQ(FusedRow(e.row, stage), e.f32);
      for (const FloatBoundary& b : {FloatBoundary{FloatFormat::bf16}, flush_subnormals_float_boundary(FloatFormat::bf16)}) {
        stage.ln_in_float = b;
        stage.ln_out_float = b;
        EXPECT_EQ(ReferenceRow(e.row, stage), e.bf16);
        EXPECT_EQ(FusedRow(e.row, stage), e.bf16);
      }
    }
  }
  // Each boundary on its own: row A moves by x's (y's rounding adds the -61.5 tie only), row B by y's alone.
  Stage only_in = LayerNormStage("ort", row_a.out);
  only_in.ln_in_float = FloatBoundary{FloatFormat::bf16};
  EXPECT_EQ(ReferenceRow(row_a, only_in), (std::vector<int32_t>{-62, 37, 86, -62}));
  Stage only_in_b = LayerNormStage("ort", row_b.out);
  only_in_b.ln_in_float = FloatBoundary{FloatFormat::bf16};
  EXPECT_EQ(ReferenceRow(row_b, only_in_b), (std::vector<int32_t>{-21, -7, 7, 21}));
  Stage only_out = LayerNormStage("ort", row_b.out);
  only_out.ln_out_float = FloatBoundary{FloatFormat::bf16};
  EXPECT_EQ(ReferenceRow(row_b, only_out), (std::vector<int32_t>{-22, -7, 7, 21}));
  EXPECT_EQ(FusedRow(row_b, only_out), (std::vector<int32_t>{-22, -7, 7, 21}));
}

TEST(LayerNorm, QuantizeLinearRoundsHalfToEvenAndSaturates) {
  const QuantParams q = Int8(0.25f, 0);
  EXPECT_EQ(reference::QuantizeLinearHalfEven(0.625f, q).code, 2);   // 2.5 -> 2
  EXPECT_EQ(reference::QuantizeLinearHalfEven(0.875f, q).code, 4);   // 3.5 -> 4
  EXPECT_EQ(reference::QuantizeLinearHalfEven(-0.625f, q).code, -2);  // -2.5 -> -2
  EXPECT_EQ(reference::QuantizeLinearHalfEven(0.6250001f, q).code, 3);
  EXPECT_EQ(reference::QuantizeLinearHalfEven(0.625f, Int8(0.25f, 5)).code, 7);  // the zero point after rounding
  const reference::StageRounding high = reference::QuantizeLinearHalfEven(1e30f, q);
  EXPECT_EQ(high.code, 127);
  EXPECT_TRUE(high.saturated);
  EXPECT_EQ(reference::QuantizeLinearHalfEven(-INFINITY, q).code, -128);
}

TEST(LayerNorm, MutantKernelsDifferFromTheDeclaredOneWhereTheyShould) {
  const RowCase row = HandRows()[0];
  const Stage stage = LayerNormStage("ort", row.out);
  // eps = 1e-5 against var = 0.3125: dropping it or adding it after the root moves no code here...
  EXPECT_EQ(FusedRow(row, stage, Mutant::ln_drop_eps), row.expected);
  // ...but on a row one code off constant (var = 0.046875 at scale 0.5, n = 4) with eps = var they do.
  RowCase off = RowCase{}.with_codes({2, 2, 2, 3}).with_gamma({1, 1, 1, 1}).with_beta({0, 0, 0, 0});
  Stage near = stage;
  near.ln_eps = 0.046875f;
  const std::vector<int32_t> declared = FusedRow(off, near);
  EXPECT_EQ(declared, ReferenceRow(off, near));
  EXPECT_NE(FusedRow(off, near, Mutant::ln_drop_eps), declared);
  EXPECT_NE(FusedRow(off, near, Mutant::ln_eps_after_sqrt), declared);
  // One row: its mean over the rows is each element itself, so every centred value is 0.
  EXPECT_EQ(FusedRow(row, stage, Mutant::ln_mean_wrong_axis), (std::vector<int32_t>{0, 0, 0, 16}));
}

std::vector<CaseSpec> LayerNormCases(size_t samples) {
  std::vector<CaseSpec> cases;
  for (CaseSpec& spec : test_support::CasesOfPatterns({"fc+layernorm+act", "fc+add+layernorm"}, samples)) {
    if (find_stage(spec.pattern, StageKind::layernorm)->ln_features != 0) continue;  // long rows: their own test
    cases.push_back(spec);
    if (spec.fusion != Fusion::keep_all) continue;
    for (const NamedNormalizationOrder& order : named_normalization_orders()) {  // every declared order kept whole
      CaseSpec other = spec;
      for (Stage& s : other.pattern.stages) {
        if (s.kind == StageKind::layernorm) s.ln_order = named_normalization_order(order.name, "test");
      }
      other.name.append(".").append(order.name);
      cases.push_back(other);
    }
  }
  return cases;
}

RC_GTEST_PROP(LayerNorm, KeptWholeMatchesTheReferenceExactlyForAnySeed, ()) {
  static const std::vector<CaseSpec> cases = LayerNormCases(400);
  static driver::ReferenceCache cache;
  test_support::CheckAnyCaseOnAnySeed(cases, cache);
}

TEST(LayerNorm, LongRowsOf4096FeaturesPassAtToleranceZero) {
  driver::SuiteOptions options;
  options.samples = 8192;
  driver::ReferenceCache cache;
  size_t long_cases = 0;
  for (const CaseSpec& spec : driver::PatternCases(options, std::string("fc+layernorm+act"))) {
    if (spec.pattern.stages[0].ln_features != 4096) continue;
    ++long_cases;
    const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
    EXPECT_EQ(r.verdict, Verdict::pass) << spec.name;
    EXPECT_EQ(r.stats.overall.max_abs(), 0) << spec.name;
  }
  // Per activation of --pattern: ORT's order kept whole, and run as oneDNN's jit order on exact rows (judged).
  EXPECT_EQ(long_cases, 6u);
}

// The row statistics the regimes aim at, classified over many draws of the first row (x = su (u - zu)).
RC_GTEST_PROP(LayerNorm, GeneratorsReachEveryRowRegime, ()) {
  const auto regime = *rc::gen::element(LnRegime::cancellation, LnRegime::tiny_variance, LnRegime::outlier);
  Pattern p = parse_pattern_name("fc+layernorm+act", "test");
  p.stages[0].ln_regime = regime;
  p.stages[0].out = Int8(1.0f / 32, 0);
  Convention c;
  c.intermediate.q = Int8(0.05f, *rc::gen::inRange(-20, 20));
  const uint64_t seed = *rc::gen::inRange<uint64_t>(1, 1u << 30);
  const PatternDraw d = generators::GeneratePatternDraw(seed, 3, 0, p, c, RegionMix{}, generators::PatternDrawLimits(p));
  const ConvCase& conv = d.conv;
  const int32_t n = conv.output_channels();
  RC_ASSERT(n >= 4 && n <= 16);
  RC_ASSERT(d.operands(0).gamma.size() == size_t(n));
  // The first row's u codes as the reference computes them.
  std::vector<double> x;
  for (int32_t k = 0; k < n; ++k) {
    int64_t acc = conv.bias()[size_t(k)];
    for (int32_t ci = 0; ci < conv.input_channels(); ++ci) {
      acc += int64_t(d.input[size_t(ci)] - conv.input_quant().zero_point) * conv.weights()[conv.weight_index(k, 0, 0, ci)];
    }
    const double m = double(conv.input_quant().scale) * conv.weight_scales()[size_t(k)] / c.intermediate.q.scale;
    const double u = std::clamp(std::round(double(acc) * m) + c.intermediate.q.zero_point, -128.0, 127.0);
    x.push_back(c.intermediate.q.scale * (u - c.intermediate.q.zero_point));
  }
  double mean = 0, var = 0, max_dev = 0;
  for (double v : x) mean += v / n;
  for (double v : x) var += (v - mean) * (v - mean) / n;
  for (double v : x) max_dev = std::max(max_dev, std::abs(v - mean));
  const double s = c.intermediate.q.scale;
  RC_CLASSIFY(var == 0, "constant row");
  RC_CLASSIFY(var > 0 && var < 2 * s * s, "variance within two squared LSBs");
  RC_CLASSIFY(std::abs(mean) > 40 * std::sqrt(var), "mean over 40 standard deviations");
  RC_CLASSIFY(max_dev > 2.5 * std::sqrt(var) && var > 0, "outlier beyond 2.5 standard deviations");
  switch (regime) {
    case LnRegime::cancellation: RC_ASSERT(std::abs(mean) > 10 * std::sqrt(var)); break;
    case LnRegime::tiny_variance: RC_ASSERT(var <= s * s); break;
    case LnRegime::outlier: RC_ASSERT(max_dev >= 0.5 * s * 100); break;  // 100 codes or more from the mean
    default: break;
  }
}

TEST(LayerNorm, EachMutantIsDetectedShrunkToOneRowAndReplays) {
  driver::MutantSearchOptions options;
  options.seeds = 1;
  for (Mutant m : {Mutant::ln_drop_eps, Mutant::ln_eps_after_sqrt, Mutant::ln_one_pass_variance,
                   Mutant::ln_mean_wrong_axis, Mutant::ln_skip_after_norm, Mutant::ln_bf16_variance}) {
    SCOPED_TRACE(std::string(to_string(m)));
    const driver::MutantReport r = driver::EvaluateMutant(m, options);
    ASSERT_TRUE(r.detected);
    ASSERT_TRUE(r.shrunk.has_value());
    const ConvCase& conv = r.shrunk->sample.conv;
    // One row; the mean over the wrong axis may need the second row it averaged over (a lone row's mean over the
    // rows is itself: its outputs become beta, which can land on the reference's codes).
    EXPECT_LE(conv.batch(), m == Mutant::ln_mean_wrong_axis ? 2 : 1);
    EXPECT_EQ(conv.output_elements(), size_t(conv.batch()) * size_t(conv.output_channels()));
    EXPECT_NE(r.replay.find(";lng="), std::string::npos) << r.replay;
    const ReplayTrace t = driver::Replay(parse_replay(r.replay));
    EXPECT_EQ(t.y_reference, r.shrunk->y_reference);
    EXPECT_EQ(t.y_fused, r.shrunk->y_fused);
    EXPECT_NE(t.y_reference, t.y_fused);
  }
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(LayerNorm, BadParametersAreRefusedNamingTheField) {
  const Convention c;
  Pattern p = parse_pattern_name("fc+layernorm+act", "test");
  p.stages[0].out = Int8(1.0f / 32, 0);
  Pattern bad = p;
  bad.stages[0].ln_eps = 0;
  EXPECT_NE(ErrorOf([&] { validate(bad, c); }).find("pattern.layernorm.eps"), std::string::npos);
  bad.stages[0].ln_eps = NAN;
  EXPECT_NE(ErrorOf([&] { validate(bad, c); }).find("pattern.layernorm.eps"), std::string::npos);
  bad = p;
  bad.stages[0].ln_features = 5000;
  EXPECT_NE(ErrorOf([&] { validate(bad, c); }).find("pattern.layernorm.features"), std::string::npos);
  bad = p;
  bad.stages[0].out.scale = -1;
  EXPECT_NE(ErrorOf([&] { validate(bad, c); }).find("pattern.layernorm.out"), std::string::npos);
  EXPECT_NE(ErrorOf([] { parse_declared_normalization_order("onednn_fast", "replay.ln_order"); }).find("replay.ln_order"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { parse_declared_normalization_order("two_pass/mean=random/var=x/y", "replay.ln_order"); })
                .find("replay.ln_order"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { parse_ln_regime("calm", "replay.ln_regime"); }).find("replay.ln_regime"), std::string::npos);
}

// One draw of `spec` (seed 5, case 7, draw 0) and the replay key that spells its operands out.
struct DrawAndKey {
  PatternDraw draw;
  ReplayKey key;
};
DrawAndKey OneDrawKey(const CaseSpec& spec) {
  DrawAndKey out{generators::GeneratePatternDraw(5, 7, 0, spec.pattern, spec.convention, RegionMix{},
                                                 generators::PatternDrawLimits(spec.pattern)),
                 ReplayKey{}};
  out.key.spec = spec;
  out.key.explicit_conv = ExplicitConv{out.draw.conv, out.draw.input, 1, out.draw.stages};
  return out;
}

// The float boundaries around the norm: absent by default (no text anywhere: earlier replay strings and results
// hold); set, in the description and the replay string, which round-trips and replays exactly through the built-in
// kernel; bad text and a boundary under the integer arithmetic are refused naming the field.
TEST(LayerNorm, FloatBoundariesRoundTripAndBadOnesNameTheField) {
  driver::SuiteOptions options;
  options.samples = 100;
  CaseSpec spec = driver::PatternCases(options, std::string("fc+add+layernorm")).front();
  ASSERT_EQ(spec.fusion, Fusion::keep_all);
  ReplayKey plain_key;
  plain_key.spec = spec;
  const std::string plain = format_replay(plain_key);
  EXPECT_EQ(plain.find("ln_in_float"), std::string::npos) << plain;
  EXPECT_EQ(describe_pattern(spec.pattern, spec.fusion).find(" in "), std::string::npos);
  Stage& ln = spec.pattern.stages[1];
  ln.ln_in_float = FloatBoundary{FloatFormat::bf16};
  ln.ln_out_float = flush_subnormals_float_boundary(FloatFormat::bf16);
  const std::string described = describe_pattern(spec.pattern, spec.fusion);
  EXPECT_NE(described.find(" in bf16:rne:inf:keep_subnormals:nan_payload out bf16:rne:inf:flush_subnormals:nan_payload"),
            std::string::npos) << described;
  const ReplayKey key = OneDrawKey(spec).key;
  const std::string text = format_replay(key);
  SCOPED_TRACE(text);
  EXPECT_NE(text.find("ln_in_float=bf16:rne:inf:keep_subnormals:nan_payload"), std::string::npos);
  EXPECT_NE(text.find("ln_out_float=bf16:rne:inf:flush_subnormals:nan_payload"), std::string::npos);
  const ReplayKey back = parse_replay(text);
  EXPECT_EQ(back.spec.pattern, spec.pattern);
  EXPECT_EQ(format_replay(back), text);
  const ReplayTrace t = driver::Replay(back);
  EXPECT_EQ(t.y_reference, t.y_fused);
  std::string bad = text;
  bad.replace(bad.find("ln_in_float=bf16"), 16, "ln_in_float=bf17");
  EXPECT_NE(ErrorOf([&] { parse_replay(bad); }).find("replay.ln_in_float"), std::string::npos);
  bad = text;
  bad.replace(bad.find("flush_subnormals"), 16, "flush_everything");
  EXPECT_NE(ErrorOf([&] { parse_replay(bad); }).find("replay.ln_out_float"), std::string::npos);
  Pattern integer = spec.pattern;
  integer.stages[1].ln_arithmetic = LayerNormArithmetic::tflite_int16;
  integer.stages[1].ln_in_float = std::nullopt;
  EXPECT_NE(ErrorOf([&] { validate(integer, spec.convention); }).find("layernorm.out_float: a float boundary"),
            std::string::npos);
  // The built-in binary32 fusions run their own rows, without the boundaries: refused, saying so.
  CaseSpec skip = spec;
  skip.fusion = Fusion::skip_add_f32;
  skip.comparison = Comparison::cross_convention;
  ReplayKey skip_key = key;
  skip_key.spec = skip;
  EXPECT_NE(ErrorOf([&] { driver::Replay(skip_key); }).find("declare no float boundary"), std::string::npos);
}

// keep_all with the bf16 boundaries through the driver (--fused lut): every pattern case kept whole passes at
// tolerance 0 with both boundaries declared, by either subnormal rule.
TEST(LayerNorm, KeptWholeWithBf16BoundariesPassesAtToleranceZero) {
  driver::SuiteOptions options;
  options.samples = 3000;
  driver::ReferenceCache cache;
  size_t judged = 0;
  for (const char* p : {"fc+layernorm+act", "fc+add+layernorm"}) {
    for (CaseSpec spec : driver::PatternCases(options, std::string(p))) {
      Stage& ln = *std::find_if(spec.pattern.stages.begin(), spec.pattern.stages.end(),
                                [](const Stage& s) { return s.kind == StageKind::layernorm; });
      if (spec.fusion != Fusion::keep_all || ln.ln_arithmetic != LayerNormArithmetic::f32 || ln.ln_features != 0) continue;
      ln.ln_in_float = FloatBoundary{FloatFormat::bf16};
      ln.ln_out_float = judged % 2 ? flush_subnormals_float_boundary(FloatFormat::bf16) : FloatBoundary{FloatFormat::bf16};
      const CaseResult r = driver::RunCase(spec, driver::RunOptions{}, cache);
      EXPECT_EQ(r.verdict, Verdict::pass) << spec.name;
      EXPECT_EQ(r.stats.overall.max_abs(), 0) << spec.name;
      EXPECT_GE(r.stats.overall.count(), 3000u) << spec.name;
      ++judged;
    }
  }
  EXPECT_GE(judged, 6u);  // per pattern, its activations' keep_all cases
}

TEST(LayerNorm, ReplayOfALayerNormCaseRoundTrips) {
  driver::SuiteOptions options;
  options.samples = 100;
  for (const char* name : {"fc+layernorm+act", "fc+add+layernorm"}) {
    const CaseSpec spec = driver::PatternCases(options, std::string(name)).front();
    const auto [d, key] = OneDrawKey(spec);
    const std::string text = format_replay(key);
    SCOPED_TRACE(text);
    const ReplayKey back = parse_replay(text);
    EXPECT_EQ(back.spec.pattern, spec.pattern);
    ASSERT_TRUE(back.explicit_conv.has_value());
    const size_t ln = std::string(name) == "fc+add+layernorm" ? 1 : 0;
    EXPECT_EQ(back.explicit_conv->stages[ln].gamma, d.stages[ln].gamma);
    EXPECT_EQ(back.explicit_conv->stages[ln].beta, d.stages[ln].beta);
    EXPECT_EQ(format_replay(back), text);
    const ReplayTrace t = driver::Replay(back);
    EXPECT_EQ(t.y_reference, t.y_fused);  // kept whole: exact
    // A gamma short of one value per feature is refused, naming the key.
    std::string cut = text;
    const size_t at = cut.find(";lng=");
    ASSERT_NE(at, std::string::npos);
    cut.insert(at + 5, "1:");
    EXPECT_NE(ErrorOf([&] { parse_replay(cut); }).find("replay.lng"), std::string::npos);
  }
}

}  // namespace
}  // namespace fusediff
