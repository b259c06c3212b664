// oneDNN's float convolutions (docs/onednn.md, "bf16 convolutions"): the exact-sum draws at tolerance 0, general
// draws within the derived summation bound, and which reference the f32 convolution under fpmath_mode bf16 matches,
// per implementation. Every test that runs oneDNN's bf16 kernels skips, saying why, where the CPU has no native
// bf16 dot product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusediff/fused/onednn_suite.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/float_conv.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/graph.h"
#include "fusediff/reference/reference.h"
#include "onednn_test_util.h"

namespace fusediff {
namespace {

// The bf16 kernels these tests measured: AVX512_CORE_BF16 selected (test_support::SelectIsa); skipped where the CPU
// has no native bf16 dot product.
#define SKIP_WITHOUT_BF16() FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_bf16, "AVX512_CORE_BF16")

// The relu cases of one float convolution, fused and unfused, as the suite declares them.
std::vector<CaseSpec> Cases(const FloatConv& fc) {
  driver::SuiteOptions options;
  options.float_conv = fc;
  options.activation = ActivationKind::relu;
  options.backend = "onednn";
  return fused::onednn::OneDnnComparisons(options, ActivationKind::relu);
}

PatternDraw Draw(const CaseSpec& spec, uint32_t d) {
  generators::ConvShapeLimits base;
  base.full_range_weights = true;
  base.max_batch = 16;
  return generators::GeneratePatternDraw(1, case_stream_id(spec), d, spec.pattern, spec.convention, spec.mix,
                                         generators::PatternDrawLimits(spec.pattern, base));
}

TEST(FloatConvReference, PowerOfTwoScalesMakeTheSumExact) {
  // With pow2 scales every product and partial sum is an integer multiple of sx' sw' below 2^24: v is acc sx' sw'.
  const FloatConv fc{true, FloatFormat::bf16, true, false};
  EXPECT_EQ(float_conv_scale(fc, 0.75f), 1.0f);    // log2 0.75 = -0.415: rounds to 0
  EXPECT_EQ(float_conv_scale(fc, 0.7f), 0.5f);     // log2 0.7 = -0.515: rounds to -1
  EXPECT_EQ(float_conv_scale(fc, 0.0011771045f), 0x1p-10f);
  const CaseSpec spec = Cases(fc)[0];
  int compared = 0;
  for (uint32_t d = 0; d < 40; ++d) {
    const PatternDraw draw = Draw(spec, d);
    bool small = true;
    for (int32_t k = 0; k < draw.conv.output_channels(); ++k) small = small && draw.conv.accumulator_bound(k) < (1 << 24);
    if (!small) continue;
    const std::vector<int64_t> acc = reference::Conv2DAccumulators(draw.conv, draw.input);
    const std::vector<reference::FloatConvElement> v = reference::FloatConvValues(draw.conv, draw.input, fc, fc.operands);
    for (size_t i = 0; i < acc.size(); ++i) {
      const size_t k = i % static_cast<size_t>(draw.conv.output_channels());
      const double scale = static_cast<double>(float_conv_scale(fc, draw.conv.input_quant().scale)) *
                           float_conv_scale(fc, draw.conv.weight_scales()[k]);
      ASSERT_EQ(static_cast<double>(v[i].v), static_cast<double>(acc[i]) * scale) << "draw " << d << " element " << i;
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(FloatConvReference, OrderCodesCountUlps) {
  EXPECT_EQ(float_order_code(0x3F800000u, FloatFormat::f32), 0x3F800000);
  EXPECT_EQ(float_order_code(0x80000000u, FloatFormat::f32), 0);
  EXPECT_EQ(float_order_code(0x3F80u, FloatFormat::bf16) - float_order_code(0x3F7Fu, FloatFormat::bf16), 1);
  EXPECT_EQ(float_order_code(0x0001u, FloatFormat::bf16) - float_order_code(0x8001u, FloatFormat::bf16), 2);
  EXPECT_EQ(f32_from_order_code(-0x3F80, FloatFormat::bf16), -1.0f);
  EXPECT_EQ(f32_from_order_code(0x3F800000, FloatFormat::f32), 1.0f);
}

// Draws per general-draw test: about as many as `fusediff run --samples 100000` runs per case (docs/onednn.md).
constexpr uint32_t kGeneralDraws = 200;

TEST(FloatConvReference, CasesReplayAndBadOptionsAreInputErrors) {
  for (const FloatConv& fc : {FloatConv{true, FloatFormat::bf16, true, false}, FloatConv{true, FloatFormat::f32, false, true}}) {
    EXPECT_EQ(parse_float_conv(format_float_conv(fc), "test"), fc);
    for (const CaseSpec& spec : Cases(fc)) {
      ReplayKey key;
      key.seed = 1;
      key.sample = 7;
      key.spec = spec;
      const ReplayKey back = parse_replay(format_replay(key));
      EXPECT_EQ(back.spec.convention, spec.convention) << spec.name;
      EXPECT_EQ(back.spec.backend, spec.backend) << spec.name;
      EXPECT_EQ(canonical_key(back.spec), canonical_key(spec)) << spec.name;
    }
  }
  EXPECT_THROW(parse_float_conv("f16", "--float-conv"), InputError);
  EXPECT_THROW(parse_float_conv("bf16:fast", "--float-conv"), InputError);
  Convention c;
  c.float_conv = FloatConv{true, FloatFormat::bf16, false, true};  // fpmath on bf16 operands, integer intermediate
  EXPECT_THROW(validate(c), InputError);
}

// y values of a draw: the path's and a reference's (declared convention, operands as given).
struct Measured {
  uint64_t compared = 0, exact = 0, beyond = 0;
  int64_t max_ulp = 0;
  double max_ratio = 0;  // |error| / bound
};

// The derived bound on |y_fused - y_reference| as values (relu is 1-Lipschitz and exact in binary32). Summed in
// any order or tree, with exact products (bf16 x bf16 has 16 significand bits; an FMA's product is exact) or
// rounded ones (f32 x f32 without FMA), n products deviate from the exact S by at most gamma_n A, A = sum |x w|
// (Higham, Accuracy and Stability, (4.4) with the products' own rounding), gamma_n = n u / (1 - n u), u = 2^-24.
// The bias addition rounds once more on each side, the reference's fl32(S) once: with A' = A + |b|,
// |v_fused - v_reference| <= (gamma_n + 4 u) A'. A bf16 destination rounds both to nearest: + one bf16 ulp.
double Bound(const reference::FloatConvElement& e, FloatFormat out, double y) {
  const double u = 0x1p-24;
  const double n = e.terms;
  const double bound = (n * u / (1 - n * u) + 4 * u) * e.abs_sum * (1 + 0x1p-40);
  if (out == FloatFormat::f32) return bound;
  int exponent = 0;
  std::frexp(std::fabs(y) + bound, &exponent);  // bf16's ulp at the larger magnitude: 2^(exponent - 8)
  return bound + std::ldexp(1.0, exponent - 8);
}

TEST(OneDnnFloatConv, ExactSumDrawsMatchAtToleranceZero) {
  SKIP_WITHOUT_BF16();
  for (const FloatConv& fc : {FloatConv{true, FloatFormat::bf16, true, false}, FloatConv{true, FloatFormat::f32, true, true}}) {
    for (const CaseSpec& spec : Cases(fc)) {
      std::string why;
      std::unique_ptr<fused::FusedPath> path = fused::onednn::CreatePath(spec, &why);
      ASSERT_TRUE(path) << spec.name << ": " << why;
      const reference::GraphReference reference(spec.pattern, reference_convention(spec), nullptr, 1.0);
      uint64_t compared = 0;
      for (uint32_t d = 0; d < 30; ++d) {
        const PatternDraw draw = Draw(spec, d);
        std::vector<int32_t> y(draw.conv.output_elements());
        if (!path->Run(draw, y, &why)) continue;  // dilated deconvolutions, accumulators beyond 2^24
        const std::vector<reference::GraphElement> ref = reference(draw);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], ref[i].y) << spec.name << " draw " << d << " element " << i;
        compared += y.size();
      }
      EXPECT_GT(compared, 500u) << spec.name;
    }
  }
}

// General draws (the scales as drawn): every sample within the bound, against the bf16-input reference; measured
// per implementation.
TEST(OneDnnFloatConv, GeneralDrawsWithinTheDerivedBound) {
  SKIP_WITHOUT_BF16();
  const FloatConv fc{true, FloatFormat::bf16, false, false};
  for (const CaseSpec& spec : Cases(fc)) {
    std::string why;
    std::unique_ptr<fused::FusedPath> path = fused::onednn::CreatePath(spec, &why);
    ASSERT_TRUE(path) << spec.name << ": " << why;
    const Convention declared = reference_convention(spec);
    const FloatFormat out = declared.output.float_value->format;
    std::map<std::string, Measured> by_implementation;
    uint64_t compared = 0;
    for (uint32_t d = 0; d < kGeneralDraws; ++d) {
      const PatternDraw draw = Draw(spec, d);
      std::vector<int32_t> y(draw.conv.output_elements());
      if (!path->Run(draw, y, &why)) continue;
      Measured& m = by_implementation[path->last_run().implementation];
      const std::vector<reference::FloatConvElement> v = reference::FloatConvValues(draw.conv, draw.input, fc, fc.operands);
      for (size_t i = 0; i < y.size(); ++i) {
        const float vr = reference::RoundToFormat(v[i].v, declared.intermediate.stored);
        const int32_t yr = reference::FloatOutputCode(reference::Binary32Activation(declared.activation, vr), *declared.output.float_value);
        const double a = f32_from_order_code(y[i], out), b = f32_from_order_code(yr, out);
        const double bound = Bound(v[i], out, std::fmax(std::fabs(a), std::fabs(b)));
        ++m.compared;
        ++compared;
        m.exact += y[i] == yr;
        m.max_ulp = std::max<int64_t>(m.max_ulp, std::abs(int64_t{y[i]} - yr));
        m.max_ratio = std::fmax(m.max_ratio, std::fabs(a - b) / bound);
        EXPECT_LE(std::fabs(a - b), bound) << spec.name << " draw " << d << " element " << i << ": " << a << " vs " << b;
      }
    }
    for (const auto& [implementation, m] : by_implementation) {
      std::printf("%s, %s: %llu compared, %.3f %% exact, max %lld ulp, max |e| / bound %.3g\n", spec.name.c_str(),
                  implementation.c_str(), static_cast<unsigned long long>(m.compared),
                  100.0 * static_cast<double>(m.exact) / static_cast<double>(m.compared), static_cast<long long>(m.max_ulp),
                  m.max_ratio);
    }
    EXPECT_GT(compared, 1000u);
  }
}

// fpmath_mode bf16 only allows down-conversion: per implementation, which reference (f32 operands or bf16 operands)
// each sample lies within the bound of. A sample discriminates where the two references lie further apart than
// both bounds together; every sample must match at least one, and the tally says which the library computes.
TEST(OneDnnFloatConv, FpmathBf16MatchesTheF32OrTheBf16InputReference) {
  SKIP_WITHOUT_BF16();
  const FloatConv fc{true, FloatFormat::f32, false, true};
  const CaseSpec spec = Cases(fc)[0];  // fused, f32 destination
  std::string why;
  std::unique_ptr<fused::FusedPath> path = fused::onednn::CreatePath(spec, &why);
  ASSERT_TRUE(path) << why;
  const Convention declared = reference_convention(spec);
  struct Tally {
    uint64_t samples = 0, f32_exact = 0, discriminating = 0, f32 = 0, bf16 = 0, neither = 0;
  };
  std::map<std::string, Tally> by_implementation;
  for (uint32_t d = 0; d < kGeneralDraws; ++d) {
    const PatternDraw draw = Draw(spec, d);
    std::vector<int32_t> y(draw.conv.output_elements());
    if (!path->Run(draw, y, &why)) continue;
    Tally& t = by_implementation[path->last_run().implementation];
    const std::vector<reference::FloatConvElement> r32 = reference::FloatConvValues(draw.conv, draw.input, fc, FloatFormat::f32);
    const std::vector<reference::FloatConvElement> r16 = reference::FloatConvValues(draw.conv, draw.input, fc, FloatFormat::bf16);
    for (size_t i = 0; i < y.size(); ++i) {
      const double a = f32_from_order_code(y[i], FloatFormat::f32);
      const double e32 = reference::Binary32Activation(declared.activation, r32[i].v);
      const double e16 = reference::Binary32Activation(declared.activation, r16[i].v);
      const double b32 = Bound(r32[i], FloatFormat::f32, 0), b16 = Bound(r16[i], FloatFormat::f32, 0);
      const bool in32 = std::fabs(a - e32) <= b32, in16 = std::fabs(a - e16) <= b16;
      ++t.samples;
      t.f32_exact += a == e32;
      t.neither += !in32 && !in16;
      if (std::fabs(e32 - e16) > b32 + b16) {
        ++t.discriminating;
        t.f32 += in32;
        t.bf16 += in16;
      }
    }
  }
  ASSERT_FALSE(by_implementation.empty());
  for (const auto& [implementation, t] : by_implementation) {
    std::printf("fpmath bf16, %s: %llu samples, %llu equal to the f32 reference; %llu discriminating: %llu match the f32 "
                "reference, %llu the bf16-input one; %llu neither\n",
                implementation.c_str(), static_cast<unsigned long long>(t.samples),
                static_cast<unsigned long long>(t.f32_exact), static_cast<unsigned long long>(t.discriminating),
                static_cast<unsigned long long>(t.f32), static_cast<unsigned long long>(t.bf16),
                static_cast<unsigned long long>(t.neither));
    EXPECT_EQ(t.neither, 0u) << implementation;
    EXPECT_GT(t.discriminating, 0u) << implementation;
  }
}

}  // namespace
}  // namespace fusediff
