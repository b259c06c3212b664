// The known-defect ledger's generic matching (model/known_defects.h): globs, version ranges, the value check, the
// model's own rule and models, and the registry that backends extend. A library's rules are tested with its backend
// (tests/onednn/onednn_defects_test.cpp).
#include "fusediff/model/known_defects.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "../support/row_deconv.h"
#include "fusediff/model/errors.h"

namespace fusediff {
namespace {

using test_support::RowDeconv;

KnownDefect Entry(std::string rule, std::string model) {
  KnownDefect d;
  d.id = "test";
  d.library = "SomeLib";
  d.version_min = "2.6.0";
  d.version_max = "2.6.3";
  d.implementations = {"conv: jit_kernel:avx512_core_vnni*"};
  d.rule = std::move(rule);
  d.model = std::move(model);
  return d;
}

TEST(KnownDefects, GlobMatchesStarsAndLiterals) {
  EXPECT_TRUE(glob_match("conv: jit_deconvolution:avx512_core_vnni*", "conv: jit_deconvolution:avx512_core_vnni"));
  EXPECT_TRUE(glob_match("conv: jit_deconvolution:avx512_core_vnni*",
                         "conv: jit_deconvolution:avx512_core_vnni; dequantize: jit:uni"));
  EXPECT_FALSE(glob_match("conv: jit_deconvolution:avx512_core_vnni*", "conv: jit_deconvolution:avx512_core"));
  EXPECT_FALSE(glob_match("conv: jit_deconvolution:avx512_core", "conv: jit_deconvolution:avx512_core_vnni"));
  EXPECT_TRUE(glob_match("*deconv*", "conv: jit_deconvolution:avx2"));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXbYb"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("", "x"));
}

TEST(KnownDefects, VersionRangeIsInclusiveAndNumeric) {
  EXPECT_TRUE(version_in_range("2.6.3 (commit N/A)", "2.6.0", "2.6.3"));
  EXPECT_TRUE(version_in_range("2.6", "2.6.0", "2.6.3"));
  EXPECT_FALSE(version_in_range("2.7.0", "2.6.0", "2.6.3"));
  EXPECT_FALSE(version_in_range("2.10.0", "2.6.0", "2.9.0"));  // numeric, not lexicographic
  EXPECT_TRUE(version_in_range("2.10.0", "2.6.0", "2.11"));
  EXPECT_FALSE(version_in_range("", "0", "9"));
  EXPECT_FALSE(version_in_range("N/A", "0", "9"));
}

TEST(KnownDefects, AppliesOnlyToItsLibraryVersionIsaAndImplementation) {
  KnownDefect d = Entry("source_as_passed", "drop_last_input_column");
  EXPECT_TRUE(defect_applies(d, "SomeLib", "2.6.3 (commit N/A)", "avx512_core_bf16", "conv: jit_kernel:avx512_core_vnni"));
  EXPECT_FALSE(defect_applies(d, "SomeLib", "3.0.0", "avx512_core_bf16", "conv: jit_kernel:avx512_core_vnni"));
  EXPECT_FALSE(defect_applies(d, "SomeLib", "2.6.3", "avx2", "conv: jit_other:avx2"));
  EXPECT_FALSE(defect_applies(d, "", "2.6.3", "avx512_core_vnni", "conv: jit_kernel:avx512_core_vnni"));
  // An ISA condition: the gemm implementations' names do not say the ISA they ran on.
  d.implementations = {"conv: x64:gemm_s8u8s32:jit"};
  d.isas = {"avx512_core", "avx2"};
  EXPECT_TRUE(defect_applies(d, "SomeLib", "2.6.3", "avx2", "conv: x64:gemm_s8u8s32:jit"));
  EXPECT_FALSE(defect_applies(d, "SomeLib", "2.6.3", "avx512_core_vnni", "conv: x64:gemm_s8u8s32:jit"));
  EXPECT_FALSE(defect_applies(d, "SomeLib", "2.6.3", "avx2_vnni", "conv: x64:gemm_s8u8s32:jit"));
}

TEST(KnownDefects, ValueCheckExplainsOnlyTheModelsValue) {
  // y_ref 31, the model (taps dropped) 1: the library's 1 is the defect, anything else is not.
  EXPECT_TRUE(explained_by_defect(31, 1, 1, 0));
  EXPECT_FALSE(explained_by_defect(31, 2, 1, 0));   // a different wrong value: still a failure
  EXPECT_TRUE(explained_by_defect(31, 2, 1, 1));    // within the case's tolerance of the model
  EXPECT_FALSE(explained_by_defect(31, 3, 1, 1));
  EXPECT_FALSE(explained_by_defect(31, 31, 1, 0));  // right: nothing to explain
  EXPECT_FALSE(explained_by_defect(5, 6, 5, 1));    // the model does not change this output: judged as usual
}

TEST(KnownDefects, ModelSkipsTheLastInputColumnsTaps) {
  ConvCase conv = RowDeconv(3, 2, 2, 0, 1);
  conv.batch(2).input_size(2, 3).input_channels(2);
  std::vector<int32_t> input(conv.input_elements());
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<int32_t>(10 + i);
  ConvCase changed_conv = conv;
  std::vector<int32_t> changed = input;
  apply_defect_model(Entry("source_as_passed", "drop_last_input_column"), &changed_conv, &changed);
  EXPECT_EQ(describe(changed_conv), describe(conv));  // the geometry, weights and input stay
  EXPECT_EQ(changed_conv.weights(), conv.weights());
  EXPECT_EQ(changed, input);
  // The kernel's schedule: every tap the definition has but those reading the last input column (x = 2).
  bool dropped = false;
  for (int32_t ox = 0; ox < conv.output_width(); ++ox)
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      const int32_t ix = conv.source_column(ox, kx);
      EXPECT_EQ(changed_conv.source_column(ox, kx), ix == 2 ? -1 : ix) << ox << " " << kx;
      dropped = dropped || ix == 2;
    }
  EXPECT_TRUE(dropped);
}

TEST(KnownDefects, SourceAsPassedReadsTheSourceTheLibrarySaw) {
  KnownDefect d = Entry("source_as_passed", "int16_pairs_per_tap");
  d.source = ScalarType::uint8;
  d.op = ConvOp::conv_transpose2d;
  EXPECT_TRUE(draw_meets_rule(d, RowDeconv(3, 2, 2, 0, 1)));
  DefectCallAttributes s8;
  s8.source_type = ScalarType::int8;
  EXPECT_FALSE(draw_meets_rule(d, RowDeconv(3, 2, 2, 0, 1), s8));
  ConvCase conv = RowDeconv(3, 2, 2, 0, 0);
  conv.op(ConvOp::conv2d);
  EXPECT_FALSE(draw_meets_rule(d, conv));
}

TEST(KnownDefects, TheRegistryNamesWhatItKnowsAndRefusesTwins) {
  try {
    (void)defect_rule("bogus", "draw.rule");
    FAIL() << "an unknown rule was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("draw.rule: unknown draw rule 'bogus' (expected source_as_passed"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)defect_model("bogus", "model"), InputError);
  EXPECT_FALSE(defect_model(kNotExecuted, "model").apply);
  EXPECT_THROW(RegisterDefectRule({"source_as_passed", {}, false, nullptr}), std::logic_error);
  EXPECT_THROW(RegisterDefectModel({"halved_weights", nullptr}), std::logic_error);
  RegisterDefectRule({"model_test_rule", {}, false, [](const KnownDefect&, const ConvCase&, const DefectCallAttributes&) {
                        return true;
                      }});
  EXPECT_TRUE(draw_meets_rule(Entry("model_test_rule", "halved_weights"), RowDeconv(3, 2, 2, 0, 0)));
}

}  // namespace
}  // namespace fusediff
