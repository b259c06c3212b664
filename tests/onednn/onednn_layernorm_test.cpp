// oneDNN 2.6's layer normalization in fc+layernorm+act and fc+add+layernorm (fused/onednn/src/onednn_layernorm.cpp,
// docs/onednn.md "Layer normalization"): the same-convention cases, declared in the order oneDNN dispatches to, pass
// at tolerance 0 on the driver's own draws; a case declared in another order (ONNX Runtime's) is a cross-convention
// measurement, and its difference stays within the reordering bound: r = |delta| / bound <= 1. ctest runs this
// under each DNNL_MAX_CPU_ISA cap (tests/onednn/tests.cmake): the declared order follows the dispatch.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fusediff/driver/suite.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/fused/onednn_suite.h"
#include "fusediff/generators/targets.h"
#include "fusediff/reference/graph.h"
#include "fusediff/reference/summation.h"

namespace fusediff {
namespace {

// The path's draws with 7-bit weights: the inner product's u is then exact below VNNI too (its int16 pairs never
// saturate, and the gemm shifts an s8 source: docs/onednn.md, "Which formulation is exact without VNNI"), so every
// cap judges the norm alone. The driver's full-range draws meet the ledger's documented behaviour there instead.
generators::ConvShapeLimits SevenBitLimits(const Pattern& pattern, const fused::FusedPath& path) {
  generators::ConvShapeLimits base;
  base.full_range_weights = true;
  base.max_batch = path.max_batch();
  Formulation seven_bit;
  seven_bit.seven_bit_weights = true;
  base.formulation = seven_bit;
  return generators::PatternDrawLimits(pattern, base);
}

// The rule the module states (docs/summation-orders.md), restated from oneDNN's source rather than read back from
// the module: simple_layer_normalization takes the jit kernel where mayiuse(avx2).
std::string ExpectedOrderName(const std::string& implementation) {
  using I = dnnl::cpu_isa;
  const I isa = dnnl::get_effective_cpu_isa();
  const bool below_avx2 = isa == I::sse41 || isa == I::avx;
  if (implementation == "simple_layer_normalization:any") return below_avx2 ? "onednn_cpp" : "onednn_jit";
  if (implementation == "lnorm_ref:any") return "onednn_ref";
  return "";
}

TEST(OneDnnLayerNorm, DeclaresTheOrderOfTheDispatchedImplementation) {
  const fused::onednn::LayerNormDispatch fused = fused::onednn::DispatchedLayerNorm(true);
  const fused::onednn::LayerNormDispatch unfused = fused::onednn::DispatchedLayerNorm(false);
  std::printf("oneDNN layer norm at %s: %s, declared %s; unfused %s\n", fused.isa.c_str(), fused.implementation.c_str(),
              fused.name.c_str(), unfused.name.c_str());
  ASSERT_TRUE(fused.declared) << fused.implementation;
  EXPECT_EQ(fused.name, ExpectedOrderName(fused.implementation));
  EXPECT_EQ(fused.order, named_normalization_order(fused.name, "test"));
  EXPECT_EQ(unfused.name, ExpectedOrderName(unfused.implementation) + "+binary_mul_add");
  // The unfused graph's stats are the fused kernel's; only the output formula changes.
  EXPECT_EQ(unfused.order.mean, fused.order.mean);
  EXPECT_EQ(unfused.order.variance, fused.order.variance);
  EXPECT_EQ(unfused.order.output, NormalizationOutput::centered_times_inv);
  EXPECT_EQ(unfused.order.output_contraction, Contraction::none);
}

// Every same-convention layer norm case of the suite (fused and unfused, both patterns) on 400 of its draws as the
// driver draws them (the path's limits: up to 16 rows, 4 to 16 features, the regimes aimed at cancellation, tiny
// variance, an outlier; 7-bit weights): every output code equals the reference's. The cross case is labelled
// cross_convention.
TEST(OneDnnLayerNorm, SameConventionCasesPassAtToleranceZero) {
  driver::SuiteOptions options;
  for (const std::string pattern : {"fc+layernorm+act", "fc+add+layernorm"}) {
    const std::vector<CaseSpec> specs = fused::onednn::OneDnnPatternComparisons(options, pattern, ActivationKind::relu);
    ASSERT_EQ(specs.size(), pattern == "fc+add+layernorm" ? 5u : 4u) << pattern;  // + the float layernorm's
    for (const CaseSpec& spec : specs) {
      const Stage& ln = *find_stage(spec.pattern, StageKind::layernorm);
      if (ln.ln_in_float) continue;  // the bf16 graph: OneDnnLayerNormBf16Path
      if (spec.comparison == Comparison::cross_convention) {
        EXPECT_EQ(format_declared_normalization_order(ln.ln_order), "ort") << spec.name;
        continue;
      }
      std::string why;
      std::unique_ptr<fused::FusedPath> path = fused::onednn::CreatePath(spec, &why);
      ASSERT_TRUE(path) << spec.name << ": " << why;
      EXPECT_EQ(FindBackend(spec.backend)->DefaultTolerance(spec).max_abs_lsb, 0) << spec.name;
      const Convention conv = reference_convention(spec);
      std::optional<reference::ActivationTable> table;
      table.emplace(activation_convention(spec.pattern, conv));
      const reference::GraphReference reference(spec.pattern, conv, &*table, 1.0);
      const generators::ConvShapeLimits limits = SevenBitLimits(spec.pattern, *path);
      uint64_t compared = 0, exact = 0;
      for (uint32_t d = 0; d < 400; ++d) {
        const PatternDraw draw =
            generators::GeneratePatternDraw(1, case_stream_id(spec), d, spec.pattern, spec.convention, spec.mix, limits);
        std::vector<int32_t> y(pattern_output_geometry(spec.pattern, draw.conv).elements());
        ASSERT_TRUE(path->Run(draw, y, &why)) << spec.name << " draw " << d << ": " << why;
        const std::vector<reference::GraphElement> ref = reference(draw);
        ASSERT_EQ(ref.size(), y.size());
        for (size_t j = 0; j < y.size(); ++j) {
          EXPECT_EQ(y[j], ref[j].y) << spec.name << " draw " << d << " element " << j;
          exact += y[j] == ref[j].y;
          ++compared;
        }
      }
      std::printf("%s (%s): %llu of %llu samples exact\n", spec.name.c_str(), path->last_run().implementation.c_str(),
                  static_cast<unsigned long long>(exact), static_cast<unsigned long long>(compared));
      EXPECT_GE(compared, 4000u) << spec.name;
    }
  }
}

// The float layernorm (Stage::ln_float_out): oneDNN's f32 y is the output. Declared as dispatched, every y equals the
// reference's (SameConventionCasesPassAtToleranceZero runs that case too); declared in ONNX Runtime's order, each y
// stays within the two-pass bound of the reference's (r <= 1) and some differ (r > 0). 7-bit-weight draws.
TEST(OneDnnLayerNorm, FloatOutputAgainstOrtsOrderStaysWithinTheBound) {
  driver::SuiteOptions options;
  std::optional<CaseSpec> spec;
  for (const CaseSpec& s : fused::onednn::OneDnnPatternComparisons(options, "fc+add+layernorm", ActivationKind::relu)) {
    if (find_stage(s.pattern, StageKind::layernorm)->ln_float_out) spec = s;
  }
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->name, "fc+add+layernorm.relu.f32.onednn.conv");
  EXPECT_EQ(spec->comparison, Comparison::same_convention);
  std::string why;
  std::unique_ptr<fused::FusedPath> path = fused::onednn::CreatePath(*spec, &why);
  ASSERT_TRUE(path) << why;
  Pattern ort = spec->pattern;
  ort.stages[1].ln_order = named_normalization_order("ort", "test");
  const reference::GraphReference reference(ort, reference_convention(*spec), nullptr, 1.0);
  const generators::ConvShapeLimits limits = SevenBitLimits(spec->pattern, *path);
  double max_r = 0;
  uint64_t compared = 0, differ = 0;
  for (uint32_t d = 0; d < 400; ++d) {
    const PatternDraw draw =
        generators::GeneratePatternDraw(1, case_stream_id(*spec), d, spec->pattern, spec->convention, spec->mix, limits);
    std::vector<int32_t> y(pattern_output_geometry(spec->pattern, draw.conv).elements());
    ASSERT_TRUE(path->Run(draw, y, &why)) << "draw " << d << ": " << why;
    const std::vector<reference::GraphElement> ref = reference(draw);
    ASSERT_EQ(ref.size(), y.size());
    for (size_t j = 0; j < y.size(); ++j) {
      ASSERT_TRUE(std::isfinite(ref[j].bound) && ref[j].bound > 0) << "draw " << d << " element " << j;
      const double delta = std::fabs(double(f32_from_order_code(y[j], FloatFormat::f32)) -
                                     double(f32_from_order_code(ref[j].y, FloatFormat::f32)));
      max_r = std::max(max_r, delta / ref[j].bound);
      differ += y[j] != ref[j].y;
      ++compared;
    }
  }
  std::printf("%s (%s) against ORT's order: %llu of %llu y differ, max r %.4g\n", spec->name.c_str(),
              path->last_run().implementation.c_str(), static_cast<unsigned long long>(differ),
              static_cast<unsigned long long>(compared), max_r);
  EXPECT_GE(compared, 4000u);
  EXPECT_LE(max_r, 1.0);
  EXPECT_GT(differ, 0u);  // the orders differ somewhere: r measures something
}

// The rules of oneDNN's bf16 layer norm, restated from its source (docs/summation-orders.md, "bf16") rather than read
// back from the module: bf16 from avx512_core; vcvtneps2bf16 (subnormals flushed) from avx512_core_bf16.
bool OffersBf16(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  return isa == I::avx512_core || isa == I::avx512_core_vnni || isa == I::avx512_core_bf16 || isa == I::avx512_core_amx;
}
FloatBoundary ExpectedBf16Boundary(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  return isa == I::avx512_core_bf16 || isa == I::avx512_core_amx ? flush_subnormals_float_boundary(FloatFormat::bf16)
                                                                 : FloatBoundary{FloatFormat::bf16};
}

// The graph with bf16 boundaries around the norm (DQ -> bf16 -> LayerNormalization -> bf16 -> Q), both patterns:
// declared as oneDNN dispatches (order by implementation, the ISA's subnormal rule), every output of 400 driver draws
// equals the reference's; the same draws against the f32 graph (no boundary declared) differ somewhere, so the
// boundaries are what makes the verdict hold. Below avx512_core the case is unsupported, saying why. ctest runs this
// under the caps AVX2, AVX512_CORE and AVX512_CORE_BF16 (tests/onednn/tests.cmake).
TEST(OneDnnLayerNormBf16Path, Bf16GraphPassesAtToleranceZeroAndTheF32GraphDoesNot) {
  driver::SuiteOptions options;
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  for (const std::string pattern : {"fc+layernorm+act", "fc+add+layernorm"}) {
    std::optional<CaseSpec> bf16;
    for (const CaseSpec& spec : fused::onednn::OneDnnPatternComparisons(options, pattern, ActivationKind::relu)) {
      if (find_stage(spec.pattern, StageKind::layernorm)->ln_in_float) bf16 = spec;
    }
    ASSERT_TRUE(bf16) << pattern;
    EXPECT_EQ(bf16->name, pattern + ".relu.int8.onednn.bf16.conv");
    EXPECT_EQ(bf16->comparison, Comparison::same_convention);
    const Stage& ln = *find_stage(bf16->pattern, StageKind::layernorm);
    EXPECT_EQ(*ln.ln_in_float, ExpectedBf16Boundary(isa));
    EXPECT_EQ(*ln.ln_out_float, ExpectedBf16Boundary(isa));
    std::string why;
    std::unique_ptr<fused::FusedPath> path = fused::onednn::CreatePath(*bf16, &why);
    if (!OffersBf16(isa)) {
      EXPECT_FALSE(path) << pattern;
      EXPECT_NE(why.find("no bf16 layer norm at"), std::string::npos) << why;
      std::printf("%s at %s: unsupported: %s\n", bf16->name.c_str(), fused::onednn::EffectiveIsa().c_str(), why.c_str());
      continue;
    }
    ASSERT_TRUE(path) << bf16->name << ": " << why;
    const fused::onednn::LayerNormBf16Dispatch dispatch = fused::onednn::DispatchedLayerNormBf16();
    EXPECT_EQ(format_declared_normalization_order(ln.ln_order),
              dispatch.norm.implementation == "lnorm_ref:any" ? "onednn_ref" : "onednn_jit_bf16");
    const Convention conv = reference_convention(*bf16);
    const reference::ActivationTable table(activation_convention(bf16->pattern, conv));
    const reference::GraphReference reference(bf16->pattern, conv, &table, 1.0);
    Pattern f32_graph = bf16->pattern;
    for (Stage& s : f32_graph.stages) s.ln_in_float = s.ln_out_float = std::nullopt;
    const reference::GraphReference f32_reference(f32_graph, conv, &table, 1.0);
    const generators::ConvShapeLimits limits = SevenBitLimits(bf16->pattern, *path);
    uint64_t compared = 0, exact = 0, f32_differs = 0;
    for (uint32_t d = 0; d < 400; ++d) {
      const PatternDraw draw =
          generators::GeneratePatternDraw(1, case_stream_id(*bf16), d, bf16->pattern, bf16->convention, bf16->mix, limits);
      std::vector<int32_t> y(pattern_output_geometry(bf16->pattern, draw.conv).elements());
      ASSERT_TRUE(path->Run(draw, y, &why)) << bf16->name << " draw " << d << ": " << why;
      const std::vector<reference::GraphElement> ref = reference(draw), f32 = f32_reference(draw);
      ASSERT_EQ(ref.size(), y.size());
      for (size_t j = 0; j < y.size(); ++j) {
        EXPECT_EQ(y[j], ref[j].y) << bf16->name << " draw " << d << " element " << j;
        exact += y[j] == ref[j].y;
        f32_differs += y[j] != f32[j].y;
        ++compared;
      }
    }
    std::printf("%s (%s): %llu of %llu samples exact; against the f32 graph %llu differ\n", bf16->name.c_str(),
                path->last_run().implementation.c_str(), static_cast<unsigned long long>(exact),
                static_cast<unsigned long long>(compared), static_cast<unsigned long long>(f32_differs));
    EXPECT_GE(compared, 4000u) << bf16->name;
    EXPECT_GT(f32_differs, 0u) << bf16->name << ": the bf16 boundaries moved no output: the negative shows nothing";
  }
}

// A case declaring only one bf16 boundary, or the unfused variant, is refused naming the fields.
TEST(OneDnnLayerNormBf16Path, AHalfDeclaredBoundaryIsUnsupportedSayingWhich) {
  driver::SuiteOptions options;
  for (const CaseSpec& spec :
       fused::onednn::OneDnnPatternComparisons(options, "fc+layernorm+act", ActivationKind::relu)) {
    if (!find_stage(spec.pattern, StageKind::layernorm)->ln_in_float) continue;
    CaseSpec half = spec;
    half.pattern.stages[0].ln_out_float = std::nullopt;
    std::string why;
    EXPECT_FALSE(fused::onednn::CreatePath(half, &why));
    EXPECT_NE(why.find("ln_out_float none"), std::string::npos) << why;
    CaseSpec unfused = spec;
    unfused.backend = "onednn_unfused";
    EXPECT_FALSE(fused::onednn::CreatePath(unfused, &why));
    EXPECT_NE(why.find("use_scale | use_shift only"), std::string::npos) << why;
    return;
  }
  FAIL() << "no bf16 case in fc+layernorm+act";
}

// A bound on |mu - S / n| for a mean computed in any order (docs/summation-orders.md): the sum's error is at most
// B = SumReorderingBound(x) in any order and accumulator; the division and the store in binary32 (or binary64, then
// binary32) add at most (u + 2^-53)(1 + u) |S^| / n <= 2u (sum |x| + B) / n.
// One forward_training layer normalization with use_scale | use_shift over `rows` rows of `length` values of type
// `type` (x and y in that type's bytes), eps 1e-5: its primitive descriptor, and each row's mean and variance.
struct LayerNormRun {
  std::string implementation;
  std::vector<float> mean, variance;
};
LayerNormRun RunLayerNorm(dnnl::memory::data_type type, int64_t rows, int64_t length, void* x, void* y,
                          std::vector<float>& gamma, std::vector<float>& beta) {
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc data({rows, length}, type, memory::format_tag::ab);
  const memory::desc stat({rows}, memory::data_type::f32, memory::format_tag::a);
  const memory::desc channel({length}, memory::data_type::f32, memory::format_tag::a);
  const dnnl::layer_normalization_forward::desc desc(
      dnnl::prop_kind::forward_training, data, stat, 1e-5f,
      dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
  const dnnl::layer_normalization_forward::primitive_desc pd(desc, engine);
  LayerNormRun run{pd.impl_info_str(), std::vector<float>(static_cast<size_t>(rows)),
                   std::vector<float>(static_cast<size_t>(rows))};
  dnnl::layer_normalization_forward(pd).execute(
      stream, {{DNNL_ARG_SRC, memory(data, engine, x)}, {DNNL_ARG_DST, memory(data, engine, y)},
               {DNNL_ARG_SCALE, memory(channel, engine, gamma.data())},
               {DNNL_ARG_SHIFT, memory(channel, engine, beta.data())},
               {DNNL_ARG_MEAN, memory(stat, engine, run.mean.data())},
               {DNNL_ARG_VARIANCE, memory(stat, engine, run.variance.data())}});
  stream.wait();
  return run;
}

double MeanBound(std::span<const float> x) {
  const double b = reference::SumReorderingBound(x);
  double abs_sum = 0;
  for (const float v : x) abs_sum += std::fabs(static_cast<double>(v));
  return (b + 2 * 0x1p-24 * (abs_sum + b)) / static_cast<double>(x.size());
}
// The same for the variance of rows whose means agree (so the centred d_j agree): the products' bound.
double VarianceBound(std::span<const float> d) {
  const double b = reference::DotReorderingBound(d, d);
  double sum = 0;
  for (const float v : d) sum += static_cast<double>(v) * v;
  return (b + 2 * 0x1p-24 * (sum + b)) / static_cast<double>(d.size());
}

// ONNX Runtime's declared order against oneDNN's layer norm: rows in three regimes (N(0, 1), 1000 + N(0, 0.01),
// +-2^U(-20, 20)) at lengths 8 .. 4096. The orders differ (a verdict at tolerance 0 would fail rows: that is why such a
// case is cross_convention), and every difference is a legal reorder: r = |delta| / (B_onednn + B_ort) <= 1, for the
// mean, and for the variance where the means agree.
TEST(OneDnnLayerNorm, AnotherDeclaredOrderIsAMeasurementWithinTheReorderingBound) {
  const fused::onednn::LayerNormDispatch dispatch = fused::onednn::DispatchedLayerNorm(true);
  ASSERT_TRUE(dispatch.declared);
  const NormalizationOrder ort = named_normalization_order("ort", "test");
  std::mt19937_64 rng(30);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> exponent(-20, 20);
  int64_t rows_total = 0, mean_differs = 0, var_compared = 0, var_differs = 0, y_differs = 0;
  double max_r_mean = 0, max_r_var = 0;
  for (const int64_t length : {8, 15, 31, 64, 100, 127, 768, 1024, 4096}) {
    const int64_t rows = 60;
    std::vector<float> x(static_cast<size_t>(rows * length)), gamma(static_cast<size_t>(length)),
        beta(static_cast<size_t>(length));
    for (int64_t i = 0; i < rows * length; ++i) {
      const int64_t r = i / length;
      x[i] = r % 3 == 0 ? normal(rng)
             : r % 3 == 1 ? 1000 + 0.01f * normal(rng)
                          : std::exp2(exponent(rng)) * (normal(rng) < 0 ? -1.0f : 1.0f);
    }
    for (int64_t c = 0; c < length; ++c) {
      gamma[c] = 1 + 0.5f * normal(rng);
      beta[c] = normal(rng);
    }
    std::vector<float> y(x.size());
    const LayerNormRun run = RunLayerNorm(dnnl::memory::data_type::f32, rows, length, x.data(), y.data(), gamma, beta);
    ASSERT_EQ(run.implementation, dispatch.implementation);
    const std::vector<float>& mean = run.mean;
    const std::vector<float>& variance = run.variance;
    for (int64_t r = 0; r < rows; ++r) {
      const std::span<const float> row(x.data() + r * length, static_cast<size_t>(length));
      // The declared order reproduces oneDNN bit for bit (tests/onednn/layer_norm_order_test.cpp); ONNX Runtime's
      // is the other convention.
      const reference::LayerNormRow own = reference::LayerNormInOrder(dispatch.order, row, gamma, beta, 1e-5f);
      const reference::LayerNormRow other = reference::LayerNormInOrder(ort, row, gamma, beta, 1e-5f);
      ASSERT_EQ(own.mean, mean[r]);
      ASSERT_EQ(own.variance, variance[r]);
      ++rows_total;
      const double r_mean = std::fabs(double(mean[r]) - other.mean) / (2 * MeanBound(row));
      mean_differs += mean[r] != other.mean;
      max_r_mean = std::max(max_r_mean, mean[r] == other.mean ? 0.0 : r_mean);
      for (int64_t c = 0; c < length; ++c) y_differs += y[r * length + c] != other.y[c] ? 1 : 0;
      if (mean[r] != other.mean) continue;
      std::vector<float> d(static_cast<size_t>(length));
      for (int64_t c = 0; c < length; ++c) d[c] = row[c] - mean[r];
      ++var_compared;
      var_differs += variance[r] != other.variance;
      if (variance[r] != other.variance) {
        max_r_var = std::max(max_r_var, std::fabs(double(variance[r]) - other.variance) / (2 * VarianceBound(d)));
      }
    }
  }
  std::printf("oneDNN %s (declared %s) against the order ort: mean differs in %lld of %lld rows (max r %.3g), "
              "variance in %lld of %lld rows with equal means (max r %.3g), y in %lld values\n",
              dispatch.implementation.c_str(), dispatch.name.c_str(), static_cast<long long>(mean_differs),
              static_cast<long long>(rows_total), max_r_mean, static_cast<long long>(var_differs),
              static_cast<long long>(var_compared), max_r_var, static_cast<long long>(y_differs));
  EXPECT_GT(mean_differs + var_differs, 0) << "the orders never differ: nothing to measure";
  EXPECT_LE(max_r_mean, 1.0);
  EXPECT_LE(max_r_var, 1.0);
}

}  // namespace
}  // namespace fusediff
