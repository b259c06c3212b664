// oneDNN's fused kernel under the harness: hand-worked answers for its documented arithmetic, what it rejects, the
// three comparisons end to end, replay, and the library defect the comparisons found (docs/onednn.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fusediff/fused/onednn_suite.h"
#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/formulation.h"
#include "fusediff/reference/reference.h"
#include "fusediff/tables/known_defects_file.h"
#include "onednn_test_util.h"

namespace fusediff {
namespace {

using test_support::OneDnnGraph;
using test_support::kInt8;
using test_support::kUint8;

using fused::onednn::OneDnnKernel;
using fused::onednn::OneDnnVariant;
using fused::onednn::VariantOf;



// 1x1 Conv2D, one input and one output channel: acc = bias + (x - zx) * w.
ConvCase OnePixel(float sx, int32_t zx, float sw, int8_t w, int32_t bias) {
  ConvCase conv;
  conv.batch(1).input_size(1, 1).input_channels(1).output_channels(1).kernel_size(1, 1);
  conv.input_quant(QuantParams{kUint8, sx, zx}).weight_scales({sw}).weights({w}).bias({bias});
  return conv;
}


int32_t RunOne(OneDnnKernel& kernel, const ConvCase& conv, int32_t x) {
  std::vector<int32_t> y(1);
  std::string why;
  EXPECT_TRUE(kernel.Run(conv, std::vector<int32_t>{x}, y, &why)) << why;
  return y[0];
}

TEST(OneDnnKernel, FusedAddsTheZeroPointBeforeRoundingHalfToEven) {
  // acc = 4 + (12 - 10) * 3 = 10; v = 10 * (0.5 * 0.25) = 1.25; relu; t = 1.25 / 0.5 = 2.5 (a tie).
  const ConvCase conv = OnePixel(0.5f, 10, 0.25f, 3, 4);
  for (const auto& [zy, expected] : std::vector<std::pair<int32_t, int32_t>>{{0, 2}, {1, 4}, {2, 4}}) {
    std::string why;
    auto kernel = OneDnnKernel::Create(OneDnnGraph(ActivationKind::relu, {kInt8, 1.0f, 0}, {kUint8, 0.5f, zy}), OneDnnVariant::fused, &why);
    ASSERT_TRUE(kernel) << why;
    // rne(2.5 + zy): zy = 1 gives 4, where adding zy after rounding (TFLite) would give rne(2.5) + 1 = 3.
    EXPECT_EQ(RunOne(*kernel, conv, 12), expected) << "zy=" << zy;
  }
}

TEST(OneDnnKernel, UnfusedRequantizesWithTheZeroPointInsideTheRounding) {
  // Output scale fl32(fl32(sx*sw)/su) = 0.25, acc = 10: P = 2.5; zu = 1: rne(3.5) = 4 (f32_half_even gives 3).
  // su = sy and zu = zy with relu on a positive value: the quantize step returns u itself.
  const ConvCase conv = OnePixel(0.5f, 0, 0.5f, 5, 0);
  const Convention graph = OneDnnGraph(ActivationKind::relu, {kInt8, 1.0f, 1}, {kInt8, 1.0f, 1});
  std::string why;
  auto kernel = OneDnnKernel::Create(graph, OneDnnVariant::unfused, &why);
  ASSERT_TRUE(kernel) << why;
  EXPECT_EQ(RunOne(*kernel, conv, 2), 4);
  EXPECT_EQ(reference::Requantizer(graph, 0.5f, 0.5f)(10).u, 4);
}

TEST(OneDnnKernel, RejectsWhatOneDnnCannotExpressWithTheReason) {
  std::string why;
  EXPECT_FALSE(OneDnnKernel::Create(OneDnnGraph(ActivationKind::hard_sigmoid, {kInt8, 0.05f, 0}, {kUint8, 1 / 255.0f, 0}), OneDnnVariant::fused, &why));
  EXPECT_NE(why.find("hardsigmoid"), std::string::npos) << why;
  Convention half_away = OneDnnGraph(ActivationKind::relu, {kInt8, 0.05f, 0}, {kUint8, 0.05f, 0});
  half_away.output.rounding = RoundingMode::half_away_from_zero;
  EXPECT_FALSE(OneDnnKernel::Create(half_away, OneDnnVariant::fused, &why));
  EXPECT_NE(why.find("half to even"), std::string::npos) << why;
  const Convention int16_out =
      OneDnnGraph(ActivationKind::relu, {kInt8, 0.05f, 0}, {QuantType{ScalarType::int16, false}, 0.001f, 0});
  EXPECT_FALSE(OneDnnKernel::Create(int16_out, OneDnnVariant::fused, &why));
  Convention double_rounding = OneDnnGraph(ActivationKind::relu, {kInt8, 0.05f, 0}, {kUint8, 0.05f, 0});
  double_rounding.requant = RequantVariant::double_rounding;
  double_rounding.intermediate.rounding = RoundingMode::half_away_from_zero;
  EXPECT_TRUE(OneDnnKernel::Create(double_rounding, OneDnnVariant::fused, &why)) << "the fused kernel never requantizes";
  EXPECT_FALSE(OneDnnKernel::Create(double_rounding, OneDnnVariant::unfused, &why));
  EXPECT_NE(why.find("f32_zero_point_first"), std::string::npos) << why;
}

// On every generated Conv2D draw the fused kernel agrees with the reference under its own f32-intermediate
// convention, and the unfused graph with the graph's convention, both with binary32 post-ops, to 1 LSB (the
// eltwise's own approximation of f at a tie): both do what oneDNN documents.
// The three comparisons of an activation (fused, cross-convention, unfused), without the default suite's
// float-intermediate measurements (gelu_erf's f16 and bf16 stored intermediates).
std::vector<CaseSpec> ThreeComparisons(const driver::SuiteOptions& options, ActivationKind kind) {
  std::vector<CaseSpec> specs = fused::onednn::OneDnnComparisons(options, kind);
  std::erase_if(specs, [](const CaseSpec& s) { return !(s.convention.intermediate.stored == FloatBoundary{}); });
  return specs;
}

TEST(OneDnnKernel, Conv2DDrawsAgreeWithTheReferenceUnderTheDeclaredConventions) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  for (ActivationKind kind : {ActivationKind::gelu_erf, ActivationKind::sigmoid, ActivationKind::hard_swish}) {
    driver::SuiteOptions options;
    const std::vector<CaseSpec> specs = ThreeComparisons(options, kind);
    ASSERT_EQ(specs.size(), 3u);
    for (const CaseSpec& spec : {specs[0], specs[2]}) {
      std::string why;
      auto kernel = OneDnnKernel::Create(spec.convention, VariantOf(spec), &why);
      ASSERT_TRUE(kernel) << why;
      const Convention reference_conv = reference_convention(spec);
      const bool f32 = reference_conv.intermediate.kind == IntermediateKind::f32;
      reference::ActivationEvaluator evaluator(f32 ? reference_conv : declared_convention(specs[0]));
      const reference::ActivationTable table(reference_convention(specs[2]));  // binary32 post-ops
      uint64_t compared = 0, exact = 0, weights_at_minus_128 = 0;
      generators::ConvShapeLimits full_range;  // as the oneDNN cases draw: s8 weights over [-128, 127]
      full_range.full_range_weights = true;
      for (uint32_t draw = 0; compared < 4000; ++draw) {
        const generators::TargetedDraw d =
            generators::GenerateTargetedDraw(7, case_stream_id(spec), draw, spec.convention, spec.mix, full_range);
        for (int8_t w : d.conv.weights()) weights_at_minus_128 += w == -128;
        if (d.conv.op() != ConvOp::conv2d) continue;
        std::vector<int32_t> y(d.conv.output_elements());
        ASSERT_TRUE(kernel->Run(d.conv, d.input, y, &why)) << why;
        const std::vector<int64_t> acc = reference::Conv2DAccumulators(d.conv, d.input);
        for (size_t j = 0; j < y.size(); ++j) {
          const int32_t k = static_cast<int32_t>(j % d.conv.output_channels());
          const float sw = d.conv.weight_scales()[static_cast<size_t>(k)];
          const int32_t y_ref =
              f32 ? evaluator(reference::F32IntermediateValue(acc[j], d.conv.input_quant().scale, sw)).y
                  : table.at(reference::Requantizer(reference_conv, d.conv.input_quant().scale, sw)(acc[j]).u).y;
          EXPECT_LE(std::abs(y[j] - y_ref), 1) << spec.name << " draw " << draw << " element " << j;
          exact += y[j] == y_ref;
          ++compared;
        }
      }
      EXPECT_GE(exact, compared - 2) << spec.name;  // measured: 0 or 1 off-by-one per 100,000 samples
      EXPECT_GT(weights_at_minus_128, 0u) << "the draws use the whole s8 range";
    }
  }
}

// Found by the comparisons: oneDNN 2.6.3's jit deconvolution drops the taps of an input column when output
// padding (a negative right padding) extends a kernel no wider than its stride; the gemm implementation of the
// same primitive agrees with the reference. When this test fails, oneDNN has fixed it: update docs/onednn.md.
TEST(OneDnnKernel, JitDeconvolutionWithOutputPaddingDropsTaps) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).output_padding(0, 1);
  conv.batch(1).input_size(1, 1).input_channels(1).output_channels(1).kernel_size(1, 2).stride(1, 2);
  conv.input_quant(QuantParams{kUint8, 1.0f, 0}).weight_scales({1.0f}).weights({3, 5}).bias({1});
  ASSERT_EQ(conv.output_width(), 3);
  const Convention graph = OneDnnGraph(ActivationKind::relu, {kInt8, 1.0f, 0}, {kUint8, 1.0f, 0});
  std::string why;
  auto kernel = OneDnnKernel::Create(graph, OneDnnVariant::fused, &why);
  ASSERT_TRUE(kernel) << why;
  std::vector<int32_t> y(3);
  ASSERT_TRUE(kernel->Run(conv, std::vector<int32_t>{10}, y, &why)) << why;
  const std::vector<int64_t> acc = reference::Conv2DAccumulators(conv, std::vector<int32_t>{10});
  EXPECT_EQ(acc, (std::vector<int64_t>{31, 51, 1}));  // 1 + 10*3, 1 + 10*5, bias alone in the padded column
  if (::testing::Test::HasFailure()) return;
  ASSERT_EQ(kernel->last_implementation(), "conv: jit_deconvolution:avx512_core_vnni");
  EXPECT_EQ(y, (std::vector<int32_t>{1, 1, 1})) << "oneDNN " << fused::onednn::LibraryVersion() << " via "
                                                   << kernel->implementations().front();

  // The same counterexample as a v2 replay string: one line reproduces it through the whole harness.
  ReplayKey key;
  key.spec.name = "deconv-defect";
  key.spec.convention = graph;
  key.spec.backend = "onednn";
  key.explicit_conv = ExplicitConv{conv, std::vector<int32_t>{10}, 0};
  const ReplayTrace trace = driver::Replay(parse_replay(format_replay(key)));
  EXPECT_EQ(trace.acc_reference, 31);
  EXPECT_EQ(trace.y_reference, 31);  // relu(31) / 1, zero point 0
  EXPECT_EQ(trace.y_fused, 1);
  EXPECT_TRUE(trace.f32_intermediate);
  EXPECT_NE(trace.implementation.find("deconv"), std::string::npos) << trace.implementation;

  // The ledger's entry for it (fused/onednn/known_defects.json): its replay is this case, its conditions hold for
  // the implementation that ran, and its model (the last input column's taps dropped, computed by the reference's
  // arithmetic) gives exactly what oneDNN gave.
  const KnownDefectLedger ledger =
      tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
  const KnownDefect* entry = nullptr;
  for (const KnownDefect& d : ledger.entries) {
    if (d.rule == "jit_deconv_single_block_output_padding" &&
        defect_applies(d, "oneDNN", fused::onednn::LibraryVersion(), fused::onednn::EffectiveIsa(), kernel->last_implementation())) {
      entry = &d;
    }
  }
  ASSERT_NE(entry, nullptr) << "no ledger entry for " << kernel->last_implementation() << " "
                            << fused::onednn::LibraryVersion();
  EXPECT_EQ(entry->replay, format_replay(key));
  EXPECT_EQ(entry->test, "onednn_tests: OneDnnKernel.JitDeconvolutionWithOutputPaddingDropsTaps");
  EXPECT_TRUE(draw_meets_rule(*entry, conv));
  ConvCase model_conv = conv;
  std::vector<int32_t> model_input{10};
  apply_defect_model(*entry, &model_conv, &model_input);
  const std::vector<int64_t> model = reference::Conv2DAccumulators(model_conv, model_input);
  EXPECT_EQ(model, (std::vector<int64_t>{1, 1, 1}));
}

// The defect under a source zero point and an s8 source: the dropped column's zero-point compensation goes with it
// (the model subtracts nothing for those taps), for every output of a 3-channel, 2-row draw.
TEST(OneDnnKernel, JitDeconvolutionDefectFollowsTheModelWithZeroPoints) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  const KnownDefectLedger ledger =
      tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
  for (const bool s8 : {false, true}) {
    ConvCase conv;
    conv.op(ConvOp::conv_transpose2d).output_padding(0, 1);
    conv.batch(1).input_size(2, 3).input_channels(3).output_channels(2).kernel_size(1, 2).stride(1, 2);
    const QuantType type{s8 ? ScalarType::int8 : ScalarType::uint8, false};
    conv.input_quant(QuantParams{type, 1.0f, s8 ? -5 : 9}).weight_scales({1.0f, 1.0f});
    std::vector<int8_t> weights;
    for (int i = 0; i < 2 * 2 * 3; ++i) weights.push_back(static_cast<int8_t>(i * 7 % 23 - 11));
    conv.weights(weights).bias({3, -4});
    std::vector<int32_t> input;
    for (int i = 0; i < 2 * 3 * 3; ++i) input.push_back(s8 ? i * 13 % 50 - 25 : i * 13 % 50);
    // y = round_half_even(leaky_relu(acc) / 32): scales 1 and a power-of-two output scale keep every binary32
    // step exact, and |acc| <= 2 * 3 * 11 * 50 stays inside int8 after the division.
    const Convention graph = OneDnnGraph(ActivationKind::leaky_relu, {kInt8, 1.0f, 0}, {kInt8, 32.0f, 0});
    std::string why;
    auto kernel = OneDnnKernel::Create(graph, OneDnnVariant::fused, &why);
    ASSERT_TRUE(kernel) << why;
    std::vector<int32_t> y(conv.output_elements());
    ASSERT_TRUE(kernel->Run(conv, input, y, &why)) << why;
    const KnownDefect* entry = nullptr;
    for (const KnownDefect& d : ledger.entries) {
      if (d.rule == "jit_deconv_single_block_output_padding" &&
        defect_applies(d, "oneDNN", fused::onednn::LibraryVersion(), fused::onednn::EffectiveIsa(), kernel->last_implementation())) {
      entry = &d;
    }
    }
    ASSERT_NE(entry, nullptr) << kernel->last_implementation();
    ASSERT_TRUE(draw_meets_rule(*entry, conv));
    const std::vector<int64_t> full = reference::Conv2DAccumulators(conv, input);
    ConvCase model_conv = conv;
    std::vector<int32_t> model_input = input;
    apply_defect_model(*entry, &model_conv, &model_input);
    const std::vector<int64_t> dropped = reference::Conv2DAccumulators(model_conv, model_input);
    size_t differs = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      // leaky_relu(acc) / 32 rounded half to even: both accumulators the same way.
      const auto quantize = [&](int64_t acc) {
        const float v = static_cast<float>(acc);
        const float f = v >= 0 ? v : v * graph.activation.alpha;
        return static_cast<int32_t>(std::max(-128.0f, std::min(127.0f, std::nearbyint(f * 0.03125f))));
      };
      differs += quantize(full[i]) != quantize(dropped[i]);
      EXPECT_EQ(y[i], quantize(dropped[i])) << (s8 ? "s8" : "u8") << " output " << i << ": reference "
                                            << quantize(full[i]);
    }
    EXPECT_GT(differs, 0u);  // the defect shows in this draw
  }
}

// The default run's oneDNN cases with the ledger: the defect's samples are counted as known_defect, every other
// sample passes, and without the ledger the same draws fail.
TEST(OneDnnComparisons, LedgerExplainsTheDeconvolutionDefectAndNothingElse) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  const KnownDefectLedger ledger =
      tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
  driver::SuiteOptions options;
  // One of gelu_erf's draws meets the defect's conditions under opad:negative_pad (batches up to 16:
  // FusedPath::max_batch; half the output-padding draws pass it as an extended input, where it does not apply).
  options.samples = 40000;
  const std::vector<CaseSpec> specs = fused::onednn::OneDnnComparisons(options, ActivationKind::gelu_erf);
  driver::ReferenceCache cache;
  driver::RunOptions with;
  with.known_defects = &ledger;
  const driver::RunOptions without;
  uint64_t explained_total = 0;
  for (const CaseSpec& spec : specs) {
    const CaseResult r = driver::RunCase(spec, with, cache);
    const CaseResult bare = driver::RunCase(spec, without, cache);
    uint64_t explained = 0;
    for (const KnownDefectTally& t : r.known_defects) {
      explained += t.stats.overall.count();
      EXPECT_LE(t.stats.overall.count(), t.predicted_samples);
      EXPECT_FALSE(t.no_longer_reproduces()) << spec.name << " " << t.id;
    }
    explained_total += explained;
    // The ledger moves samples out of the judged statistics, never adds or drops one.
    EXPECT_EQ(compared_samples(r), bare.stats.overall.count()) << spec.name;
    EXPECT_TRUE(bare.known_defects.empty());
    if (spec.comparison == Comparison::cross_convention) {
      EXPECT_EQ(r.verdict, Verdict::cross_convention);
      continue;
    }
    EXPECT_EQ(r.verdict, explained > 0 ? Verdict::known_defect : Verdict::pass) << spec.name << ": " << r.reason;
    if (explained > 0) {
      EXPECT_EQ(bare.verdict, Verdict::fail) << spec.name;
    }
  }
  EXPECT_GT(explained_total, 0u);
}

// Every formulation passes the same arithmetic: on draws made for a formulation (zero point 0, one weight scale,
// 7-bit weights where it needs them), oneDNN's output under it equals its output under the default formulation.
TEST(OneDnnKernel, EveryFormulationGivesTheDefaultFormulationsOutputs) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  driver::SuiteOptions options;
  const CaseSpec spec = fused::onednn::OneDnnComparisons(options, ActivationKind::gelu_tanh)[0];
  std::string why;
  auto kernel = OneDnnKernel::Create(spec.convention, VariantOf(spec), &why);
  ASSERT_TRUE(kernel) << why;
  std::vector<Formulation> variants(7);
  variants[1].zero_points_absent = true;
  variants[2].common_scales = true;
  variants[3].source = Formulation::Source::u8;
  variants[4].source = Formulation::Source::s8;
  variants[5].seven_bit_weights = true;
  variants[6].f32_bias = true;
  uint64_t compared = 0;
  for (size_t v = 1; v < variants.size(); ++v) {
    generators::ConvShapeLimits limits;
    limits.full_range_weights = true;
    limits.formulation = variants[v];
    for (uint32_t draw = 0, done = 0; done < 12; ++draw) {
      const generators::TargetedDraw d = generators::GenerateTargetedDraw(5, case_stream_id(spec), draw, spec.convention, spec.mix, limits);
      if (d.conv.op() != ConvOp::conv2d) continue;
      if (variants[v].zero_points_absent) {
        EXPECT_EQ(d.conv.input_quant().zero_point, 0) << "the drawn type passed as is: its zero point is 0";
      }
      if (variants[v].seven_bit_weights) {
        for (int8_t w : d.conv.weights()) ASSERT_TRUE(w >= -64 && w <= 63) << int(w);
      }
      std::vector<int32_t> y_default(d.conv.output_elements()), y(d.conv.output_elements());
      std::string rejected;
      if (!kernel->Run(d.conv, d.input, y_default, &rejected)) continue;  // e.g. beyond 2^24
      ASSERT_TRUE(kernel->Run(d.conv, d.input, y, &why, variants[v])) << format_formulation(variants[v]) << ": " << why;
      EXPECT_EQ(y, y_default) << format_formulation(variants[v]) << " draw " << draw;
      compared += y.size();
      ++done;
    }
  }
  EXPECT_GT(compared, 1000u);
}

// oneDNN accepts a deconvolution only when pad_r > -stride: output padding of at least the stride plus the far
// padding as a negative padding is rejected ("dilated deconvolution"). The same draw with its input extended by
// zero-point columns runs, and gives the reference's accumulators.
TEST(OneDnnKernel, ExtendedInputComputesWhatNegativePaddingCannotExpress) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).output_padding(0, 1);
  conv.batch(1).input_size(1, 2).input_channels(1).output_channels(1).kernel_size(1, 2).stride(1, 1).dilation(1, 2);
  conv.input_quant(QuantParams{kUint8, 1.0f, 0}).weight_scales({1.0f}).weights({3, 5}).bias({1});
  const std::vector<int32_t> x = {10, 20};
  const std::vector<int64_t> acc = reference::Conv2DAccumulators(conv, x);
  ASSERT_EQ(acc, (std::vector<int64_t>{31, 61, 51, 101, 1}));  // taps at ox = ix + 2 kx, then the padded column
  const Convention graph = OneDnnGraph(ActivationKind::relu, {kInt8, 1.0f, 0}, {kUint8, 1.0f, 0});
  std::string why;
  auto kernel = OneDnnKernel::Create(graph, OneDnnVariant::fused, &why);
  ASSERT_TRUE(kernel) << why;
  std::vector<int32_t> y(acc.size());
  EXPECT_FALSE(kernel->Run(conv, x, y, &why));
  EXPECT_NE(why.find("dilated deconvolution"), std::string::npos) << why;
  Formulation extended;
  extended.extended_input = true;
  ASSERT_TRUE(kernel->Run(conv, x, y, &why, extended)) << why;
  EXPECT_EQ(y, (std::vector<int32_t>{31, 61, 51, 101, 1})) << kernel->last_implementation();
}

// Poison in the destination and a user-managed scratchpad changes nothing oneDNN computes: every repetition of a
// draw gives the same codes (the determinism check has something to find only where a kernel reads memory it did
// not write).
TEST(OneDnnKernel, RepetitionsOverDifferentPoisonAgree) {
  driver::SuiteOptions options;
  for (const CaseSpec& spec : {fused::onednn::OneDnnComparisons(options, ActivationKind::silu)[0],
                               fused::onednn::OneDnnComparisons(options, ActivationKind::silu)[2]}) {
    std::string why;
    auto kernel = OneDnnKernel::Create(spec.convention, VariantOf(spec), &why);
    ASSERT_TRUE(kernel) << why;
    generators::ConvShapeLimits limits;
    limits.full_range_weights = true;
    limits.draw_formulations = true;
    uint64_t compared = 0;
    for (uint32_t draw = 0; draw < 20; ++draw) {
      const PatternDraw d = generators::GeneratePatternDraw(2, case_stream_id(spec), draw, spec.pattern, spec.convention, spec.mix, limits);
      std::vector<int32_t> first(d.conv.output_elements()), again(first.size());
      kernel->set_repetition(0);
      if (!kernel->Run(d.conv, d.input, first, &why, d.formulation)) continue;
      for (uint32_t r = 1; r < 3; ++r) {
        kernel->set_repetition(r);
        ASSERT_TRUE(kernel->Run(d.conv, d.input, again, &why, d.formulation)) << why;
        EXPECT_EQ(again, first) << spec.name << " draw " << draw << " repetition " << r;
      }
      compared += first.size();
    }
    EXPECT_GT(compared, 250u) << spec.name;
  }
}

TEST(OneDnnComparisons, RunSideBySideOnTheSameDrawsWithTheirLabels) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  driver::SuiteOptions options;
  options.samples = 3000;
  std::vector<CaseSpec> specs = ThreeComparisons(options, ActivationKind::gelu_erf);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(case_stream_id(specs[0]), case_stream_id(specs[1]));
  EXPECT_EQ(case_stream_id(specs[0]), case_stream_id(specs[2]));
  EXPECT_NE(canonical_key(specs[0]), canonical_key(specs[1]));
  driver::ReferenceCache cache;
  driver::RunOptions run;
  run.seed = 3;
  std::vector<CaseResult> results;
  for (const CaseSpec& spec : specs) results.push_back(driver::RunCase(spec, run, cache));
  EXPECT_NE(results[0].reference_convention.find("u=f32"), std::string::npos) << results[0].reference_convention;
  EXPECT_EQ(results[1].verdict, Verdict::cross_convention);
  EXPECT_NE(results[1].reason.find("cross-convention"), std::string::npos);
  EXPECT_NE(results[0].verdict, Verdict::unsupported) << results[0].reason;
  EXPECT_NE(results[2].verdict, Verdict::unsupported) << results[2].reason;
  EXPECT_EQ(results[0].stats.overall.count() + results[0].unsupported_samples, 3000u);
  EXPECT_EQ(results[0].stats.overall.count(), results[2].stats.overall.count());
  EXPECT_FALSE(results[0].implementation.empty());
  EXPECT_NE(results[2].implementation.find("eltwise"), std::string::npos) << results[2].implementation;
  // The fusion moves the answer away from the quantize-then-activate graph on many samples.
  EXPECT_LT(results[1].stats.overall.exact_fraction(), 0.95);

  // Every worst sample names what produced it and replays to the same codes under its formulation.
  for (const CaseResult& r : results) {
    for (const WorstCaseReport& w : r.worst) {
      EXPECT_NE(w.sample.implementation.find("conv: "), std::string::npos) << w.replay;
      EXPECT_NE(w.replay.find(";form="), std::string::npos) << w.replay;
      const ReplayTrace trace = driver::Replay(parse_replay(w.replay));
      EXPECT_EQ(trace.y_fused, w.sample.y_fused) << w.replay;
      EXPECT_EQ(trace.y_reference, w.sample.y_ref) << w.replay;
      EXPECT_EQ(trace.implementation_of_draw, w.sample.implementation) << w.replay;
      EXPECT_EQ(trace.repeat, 2u);
      EXPECT_TRUE(trace.y_repetitions.empty());
    }
  }

  // Determinism is checked on every draw (two repetitions), and oneDNN passes it. Attribution: every compared
  // sample is counted under one implementation and once per formulation dimension (opad: output padding only).
  for (const CaseResult& r : results) {
    EXPECT_EQ(r.repeat, 2u);
    EXPECT_EQ(r.stats.nondeterministic, 0u) << r.spec.name;
    uint64_t by_implementation = 0;
    for (const auto& [name, s] : r.stats.by_implementation) by_implementation += s.count();
    EXPECT_EQ(by_implementation, r.stats.overall.count());
    for (const char* dimension : {"zp:", "scales:", "src:", "wei:", "bias:"}) {
      uint64_t n = 0;
      for (const auto& [item, s] : r.stats.by_formulation) n += item.rfind(dimension, 0) == 0 ? s.count() : 0;
      EXPECT_EQ(n, r.stats.overall.count()) << dimension;
    }
    EXPECT_GT(r.stats.by_formulation.count("zp:absent"), 0u);
    EXPECT_GT(r.stats.by_formulation.count("scales:common"), 0u);
    EXPECT_GT(r.stats.by_formulation.count("wei:7bit"), 0u);
    // Both output-padding formulations ran on each output-padding draw.
    const PairedFormulations& p = r.stats.paired;
    ASSERT_EQ(p.dimension, "opad");
    EXPECT_GT(p.draws, 0u);
    EXPECT_EQ(p.values, (std::vector<std::string>{"negative_pad", "extended_input"}));
    EXPECT_EQ(p.rejected[1], 0u) << "the extended input is never rejected";
    EXPECT_LE(p.differing_samples, p.both_samples);
  }

  const Provenance p = driver::CurrentProvenance("test");
  EXPECT_EQ(provenance_value(p, "onednn", "library"), "oneDNN");
  EXPECT_EQ(provenance_value(p, "onednn", "version").rfind("2.", 0), 0u) << provenance_value(p, "onednn", "version");
  EXPECT_FALSE(provenance_value(p, "onednn", "isa").empty());
}

TEST(OneDnnComparisons, ShardsMergeToTheWholeRun) {
  driver::SuiteOptions options;
  options.samples = 3000;
  driver::ReferenceCache cache;
  driver::RunOptions whole;
  // The first of the oneDNN cases where oneDNN refuses some draws (the refused samples must merge too).
  CaseSpec spec;
  CaseResult expected;
  std::vector<CaseSpec> candidates = fused::onednn::OneDnnComparisons(options, ActivationKind::gelu_erf);
  for (CaseSpec& chain : fused::onednn::OneDnnPatternComparisons(options, "conv2d+add+act", ActivationKind::gelu_erf)) {
    candidates.push_back(std::move(chain));
  }
  for (const CaseSpec& candidate : candidates) {
    spec = candidate;
    expected = driver::RunCase(spec, whole, cache);
    if (expected.unsupported_samples > 0) break;
  }
  ASSERT_GT(expected.unsupported_samples, 0u) << "no oneDNN case refuses a draw at seed 1";
  driver::RunOptions part = whole;
  part.shard_count = 3;
  part.shard_index = 2;  // merged out of order: the result must not depend on it
  CaseResult merged = driver::RunCase(spec, part, cache);
  for (uint32_t index : {0u, 1u}) {
    part.shard_index = index;
    merge_case_result(merged, driver::RunCase(spec, part, cache), whole.seed);
  }
  EXPECT_EQ(merged.stats.overall.count(), expected.stats.overall.count());
  EXPECT_EQ(merged.stats.overall.max_abs(), expected.stats.overall.max_abs());
  EXPECT_EQ(merged.unsupported_samples, expected.unsupported_samples);
  EXPECT_EQ(merged.first_unsupported_sample, expected.first_unsupported_sample);
  EXPECT_EQ(merged.unsupported_sample_reason, expected.unsupported_sample_reason);
  EXPECT_EQ(merged.implementation, expected.implementation);
  EXPECT_EQ(merged.reference_escalations, expected.reference_escalations);
  EXPECT_EQ(merged.stats.worst.sorted(), expected.stats.worst.sorted());
  EXPECT_EQ(merged.stats.by_implementation, expected.stats.by_implementation);
  EXPECT_EQ(merged.stats.by_formulation, expected.stats.by_formulation);
  EXPECT_EQ(merged.stats.paired, expected.stats.paired);
  EXPECT_EQ(merged.stats.nondeterministic, expected.stats.nondeterministic);
  EXPECT_EQ(merged.verdict, expected.verdict);
}

}  // namespace
}  // namespace fusediff
