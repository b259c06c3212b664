// The known-defect ledger's matching rules (model/known_defects.h): globs, version ranges, the jit deconvolution's
// geometry rule (the exact rule docs/onednn.md measured), the value check and the defect's model.
#include "fusediff/model/known_defects.h"

#include <gtest/gtest.h>

namespace fusediff {
namespace {

const QuantType kUint8{ScalarType::uint8, false};

// A ConvTranspose2D of one row: iw inputs, kernel 1 x kw, stride 1 x sw, padding pl left and right, output padding
// opw, oc output channels.
ConvCase Deconv(int32_t iw, int32_t kw, int32_t sw, int32_t pl, int32_t opw, int32_t oc = 1) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).output_padding(0, opw).padding(0, pl, 0, pl);
  conv.batch(1).input_size(1, iw).input_channels(1).output_channels(oc).kernel_size(1, kw).stride(1, sw);
  conv.input_quant(QuantParams{kUint8, 1.0f, 3}).weight_scales(std::vector<float>(static_cast<size_t>(oc), 1.0f));
  conv.weights(std::vector<int8_t>(static_cast<size_t>(oc * kw), 1)).bias(std::vector<int32_t>(static_cast<size_t>(oc), 0));
  return conv;
}

KnownDefect JitEntry(int32_t registers) {
  KnownDefect d;
  d.id = "test";
  d.library = "oneDNN";
  d.version_min = "2.6.0";
  d.version_max = "2.6.3";
  d.implementations = {"conv: jit_deconvolution:avx512_core_vnni*"};
  d.rule = DefectRule::jit_deconv_single_block_output_padding;
  d.registers = registers;
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

TEST(KnownDefects, AppliesOnlyToItsLibraryVersionAndImplementation) {
  const KnownDefect d = JitEntry(30);
  EXPECT_TRUE(defect_applies(d, "oneDNN", "2.6.3 (commit N/A)", "conv: jit_deconvolution:avx512_core_vnni"));
  EXPECT_FALSE(defect_applies(d, "oneDNN", "3.0.0", "conv: jit_deconvolution:avx512_core_vnni"));
  EXPECT_FALSE(defect_applies(d, "oneDNN", "2.6.3", "conv: jit_uni_deconv:avx2"));
  EXPECT_FALSE(defect_applies(d, "", "2.6.3", "conv: jit_deconvolution:avx512_core_vnni"));
}

TEST(KnownDefects, JitDeconvRuleIsTheMeasuredOne) {
  const KnownDefect vnni = JitEntry(30), plain = JitEntry(28);
  // The minimal case: kernel 2, stride 2, output padding 1: (2-1) mod 2 + 1 >= 2.
  EXPECT_TRUE(draw_meets_rule(vnni, Deconv(1, 2, 2, 0, 1)));
  // Kernel 3 / stride 2 / output padding 1: 2 mod 2 + 1 < 2 (correct in the probes).
  EXPECT_FALSE(draw_meets_rule(vnni, Deconv(3, 3, 2, 0, 1)));
  // Kernel 2 / stride 3 / output padding 2: 1 + 2 >= 3.
  EXPECT_TRUE(draw_meets_rule(vnni, Deconv(2, 2, 3, 0, 2)));
  // Kernel 3 / stride 3 / padding 1 / output padding 2: -r_pad = 1, 2 + 1 >= 3.
  EXPECT_TRUE(draw_meets_rule(vnni, Deconv(4, 3, 3, 1, 2)));
  // No negative right padding: output padding not above the right padding.
  EXPECT_FALSE(draw_meets_rule(vnni, Deconv(3, 2, 2, 1, 1)));
  EXPECT_FALSE(draw_meets_rule(vnni, Deconv(3, 2, 2, 0, 0)));
  // The same draw with its output padding passed as an extended input: oneDNN's right padding is >= 0.
  Formulation extended;
  extended.extended_input = true;
  EXPECT_FALSE(draw_meets_rule(vnni, Deconv(1, 2, 2, 0, 1), extended));
  EXPECT_TRUE(draw_meets_rule(vnni, Deconv(1, 2, 2, 0, 1), Formulation{}));
  // A Conv2D never.
  ConvCase conv = Deconv(3, 2, 2, 0, 0);
  conv.op(ConvOp::conv2d);
  EXPECT_FALSE(draw_meets_rule(vnni, conv));
  // One register block: 15 output columns with VNNI (30 / 2), 14 without (28 / 2); wider outputs take blocks
  // that are multiples of the stride and are computed right.
  EXPECT_EQ(Deconv(6, 2, 2, 0, 1).output_width(), 13);
  EXPECT_EQ(Deconv(7, 2, 2, 0, 1).output_width(), 15);
  EXPECT_EQ(jit_deconv_block_width(30, Deconv(6, 2, 2, 0, 1)), 13);
  EXPECT_EQ(jit_deconv_block_width(30, Deconv(7, 2, 2, 0, 1)), 14);
  EXPECT_TRUE(draw_meets_rule(vnni, Deconv(6, 2, 2, 0, 1)));
  EXPECT_FALSE(draw_meets_rule(vnni, Deconv(7, 2, 2, 0, 1)));
  // Stride 3 and 15 columns: 15 is a multiple of 3, so one block with VNNI; without, blocks of 12.
  const ConvCase s3 = Deconv(5, 1, 3, 0, 2);
  EXPECT_EQ(s3.output_width(), 15);
  EXPECT_EQ(jit_deconv_block_width(30, s3), 15);
  EXPECT_EQ(jit_deconv_block_width(28, s3), 12);
  // More than 16 output channels: two blocks unrolled, ur_w = 30 / 3 = 10.
  EXPECT_EQ(jit_deconv_block_width(30, Deconv(5, 2, 2, 0, 1, 17)), 10);
  EXPECT_FALSE(draw_meets_rule(vnni, Deconv(5, 2, 2, 0, 1, 17)));  // ow = 11 > 10
  EXPECT_TRUE(draw_meets_rule(vnni, Deconv(4, 2, 2, 0, 1, 17)));   // ow = 9
  EXPECT_TRUE(draw_meets_rule(plain, Deconv(6, 2, 2, 0, 1)));
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

TEST(KnownDefects, ModelSetsTheLastInputColumnToTheZeroPoint) {
  ConvCase conv = Deconv(3, 2, 2, 0, 1);
  conv.batch(2).input_size(2, 3).input_channels(2);
  std::vector<int32_t> input(conv.input_elements());
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<int32_t>(10 + i);
  const std::vector<int32_t> changed = apply_defect_model(JitEntry(30), conv, input);
  for (int32_t n = 0; n < 2; ++n)
    for (int32_t y = 0; y < 2; ++y)
      for (int32_t x = 0; x < 3; ++x)
        for (int32_t c = 0; c < 2; ++c) {
          const size_t i = conv.input_index(n, y, x, c);
          EXPECT_EQ(changed[i], x == 2 ? 3 : input[i]) << n << y << x << c;
        }
}

}  // namespace
}  // namespace fusediff
