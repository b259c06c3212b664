// oneDNN's ledger rules and models (fused/onednn_defects.h): the jit deconvolution's geometry rules (the exact rules
// docs/onednn.md measured), the stride-hole tail and its model, and the repository's own ledger.
#include "fusediff/fused/onednn_defects.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "../support/row_deconv.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/tables/known_defects_file.h"

namespace fusediff {
namespace {

using namespace fused::onednn;

const QuantType kUint8{ScalarType::uint8, false};

using test_support::RowDeconv;

KnownDefect JitEntry(int32_t registers) {
  KnownDefect d;
  d.id = "test";
  d.library = "oneDNN";
  d.version_min = "2.6.0";
  d.version_max = "2.6.3";
  d.implementations = {"conv: jit_deconvolution:avx512_core_vnni*"};
  d.rule = "jit_deconv_single_block_output_padding";
  d.model = "drop_last_input_column";
  d.registers = registers;
  return d;
}

// The strided int8 1x1 convolution's race (rule rtus_int8_tail, docs/onednn.md): 1x1, a stride, no padding, every
// output dimension times its stride the input's, ic not a multiple of the copy's 16 bytes; and only where oneDNN runs
// on two or more threads (one thread has no next workspace to write into).
TEST(KnownDefects, RtusRuleIsOneDnnsReduceToUnitStrideWithATail) {
  KnownDefect race;
  race.rule = "rtus_int8_tail";
  race.model = std::string(kThreadRace);
  race.block = 16;
  const auto conv = [](int32_t ic, int32_t h, int32_t w, int32_t stride_h, int32_t stride_w, int32_t pad) {
    ConvCase c;
    c.input_size(h, w).kernel_size(1, 1).stride(stride_h, stride_w).padding(pad, 0, pad, 0);
    c.input_channels(ic).output_channels(6);
    return c;
  };
  const bool threads = OneDnnMaxThreads() >= 2;
  EXPECT_EQ(draw_meets_rule(race, conv(7, 8, 2, 2, 1, 0)), threads);   // the default run's draw
  EXPECT_EQ(draw_meets_rule(race, conv(8, 8, 2, 2, 1, 0)), threads);   // 16 does not divide 8 either
  EXPECT_EQ(draw_meets_rule(race, conv(23, 4, 6, 2, 3, 0)), threads);  // strides in both dimensions
  EXPECT_FALSE(draw_meets_rule(race, conv(16, 8, 2, 2, 1, 0)));        // no tail
  EXPECT_FALSE(draw_meets_rule(race, conv(7, 8, 2, 1, 1, 0)));         // no stride: no workspace
  EXPECT_FALSE(draw_meets_rule(race, conv(7, 7, 2, 2, 1, 0)));         // 4 rows times 2 is not 7: no workspace
  EXPECT_FALSE(draw_meets_rule(race, conv(7, 8, 2, 2, 1, 1)));         // padding: no workspace
  ConvCase wide = conv(7, 8, 2, 2, 1, 0);
  wide.kernel_size(1, 2);
  EXPECT_FALSE(draw_meets_rule(race, wide));
  ConvCase transposed = conv(7, 8, 2, 2, 1, 0);
  transposed.op(ConvOp::conv_transpose2d);
  EXPECT_FALSE(draw_meets_rule(race, transposed));
}

TEST(KnownDefects, JitDeconvRuleIsTheMeasuredOne) {
  const KnownDefect vnni = JitEntry(30), plain = JitEntry(28);
  // The minimal case: kernel 2, stride 2, output padding 1: (2-1) mod 2 + 1 >= 2.
  EXPECT_TRUE(draw_meets_rule(vnni, RowDeconv(1, 2, 2, 0, 1)));
  // Kernel 3 / stride 2 / output padding 1: 2 mod 2 + 1 < 2 (correct in the probes).
  EXPECT_FALSE(draw_meets_rule(vnni, RowDeconv(3, 3, 2, 0, 1)));
  // Kernel 2 / stride 3 / output padding 2: 1 + 2 >= 3.
  EXPECT_TRUE(draw_meets_rule(vnni, RowDeconv(2, 2, 3, 0, 2)));
  // Kernel 3 / stride 3 / padding 1 / output padding 2: -r_pad = 1, 2 + 1 >= 3.
  EXPECT_TRUE(draw_meets_rule(vnni, RowDeconv(4, 3, 3, 1, 2)));
  // No negative right padding: output padding not above the right padding.
  EXPECT_FALSE(draw_meets_rule(vnni, RowDeconv(3, 2, 2, 1, 1)));
  EXPECT_FALSE(draw_meets_rule(vnni, RowDeconv(3, 2, 2, 0, 0)));
  // The same draw with its output padding passed as an extended input: oneDNN's right padding is >= 0.
  Formulation extended;
  extended.extended_input = true;
  EXPECT_FALSE(draw_meets_rule(vnni, RowDeconv(1, 2, 2, 0, 1), extended));
  EXPECT_TRUE(draw_meets_rule(vnni, RowDeconv(1, 2, 2, 0, 1), Formulation{}));
  // A Conv2D never.
  ConvCase conv = RowDeconv(3, 2, 2, 0, 0);
  conv.op(ConvOp::conv2d);
  EXPECT_FALSE(draw_meets_rule(vnni, conv));
  // One register block: 15 output columns with VNNI (30 / 2), 14 without (28 / 2); wider outputs take blocks
  // that are multiples of the stride and are computed right.
  EXPECT_EQ(RowDeconv(6, 2, 2, 0, 1).output_width(), 13);
  EXPECT_EQ(RowDeconv(7, 2, 2, 0, 1).output_width(), 15);
  EXPECT_EQ(jit_deconv_block_width(30, RowDeconv(6, 2, 2, 0, 1)), 13);
  EXPECT_EQ(jit_deconv_block_width(30, RowDeconv(7, 2, 2, 0, 1)), 14);
  EXPECT_TRUE(draw_meets_rule(vnni, RowDeconv(6, 2, 2, 0, 1)));
  EXPECT_FALSE(draw_meets_rule(vnni, RowDeconv(7, 2, 2, 0, 1)));
  // Stride 3 and 15 columns: 15 is a multiple of 3, so one block with VNNI; without, blocks of 12.
  const ConvCase s3 = RowDeconv(5, 1, 3, 0, 2);
  EXPECT_EQ(s3.output_width(), 15);
  EXPECT_EQ(jit_deconv_block_width(30, s3), 15);
  EXPECT_EQ(jit_deconv_block_width(28, s3), 12);
  // More than 16 output channels: two blocks unrolled, ur_w = 30 / 3 = 10.
  EXPECT_EQ(jit_deconv_block_width(30, RowDeconv(5, 2, 2, 0, 1, 17)), 10);
  EXPECT_FALSE(draw_meets_rule(vnni, RowDeconv(5, 2, 2, 0, 1, 17)));  // ow = 11 > 10
  EXPECT_TRUE(draw_meets_rule(vnni, RowDeconv(4, 2, 2, 0, 1, 17)));   // ow = 9
  EXPECT_TRUE(draw_meets_rule(plain, RowDeconv(6, 2, 2, 0, 1)));
}

KnownDefect StrideHoleEntry(int32_t block) {
  KnownDefect d = JitEntry(0);
  d.rule = "jit_deconv_stride_hole";
  d.registers = 0;
  d.block = block;
  d.model = "stride_hole_tail_rows";
  return d;
}

// A ConvTranspose2D of ih rows: kernel kh x 1, stride sh x 1, padding pt top and pb bottom, output padding oph,
// c -> k channels, u8 input with zero point 0.
ConvCase HoleDeconv(int32_t ih, int32_t kh, int32_t sh, int32_t pt, int32_t pb, int32_t oph, int32_t c = 3,
                    int32_t k = 2) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).output_padding(oph, 0).padding(pt, 0, pb, 0);
  conv.batch(1).input_size(ih, 2).input_channels(c).output_channels(k).kernel_size(kh, 1).stride(sh, 1);
  conv.input_quant(QuantParams{kUint8, 1.0f, 0}).weight_scales(std::vector<float>(static_cast<size_t>(k), 1.0f));
  std::vector<int8_t> w(conv.weight_elements());
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int32_t>(i % 7) - 3);
  conv.weights(w).bias(std::vector<int32_t>(static_cast<size_t>(k), 5));
  return conv;
}

TEST(KnownDefects, StrideHoleRuleIsTheMeasuredOne) {
  const DefectCallAttributes absent{false, std::nullopt};
  const KnownDefect avx512 = StrideHoleEntry(16), sse41 = StrideHoleEntry(4);
  // fusediff's case: kernel_h 1, stride_h 2, pads 0: rows 1, 3, ... are holes.
  const ConvCase hole = HoleDeconv(3, 1, 2, 0, 0, 0);
  EXPECT_TRUE(is_stride_hole_row(hole, 1));
  EXPECT_FALSE(is_stride_hole_row(hole, 2));
  EXPECT_TRUE(draw_meets_rule(avx512, hole, absent));
  EXPECT_TRUE(draw_meets_rule(avx512, HoleDeconv(2, 2, 4, 1, 1, 0), absent));  // kh 2 < stride 4, pads < kh
  // The attribute present (fusediff's one formulation on main, the default), or an s8 source: the kernel's guard.
  EXPECT_FALSE(draw_meets_rule(avx512, hole));
  EXPECT_FALSE(draw_meets_rule(avx512, hole, DefectCallAttributes{true, ScalarType::uint8}));
  EXPECT_FALSE(draw_meets_rule(avx512, hole, DefectCallAttributes{false, ScalarType::int8}));
  ConvCase drawn_int8 = hole;  // a drawn int8 input the formulation passes as u8 (shifted by +128)
  drawn_int8.input_quant(QuantParams{QuantType{ScalarType::int8, false}, 1.0f, -128});
  EXPECT_FALSE(draw_meets_rule(avx512, drawn_int8, absent));
  EXPECT_TRUE(draw_meets_rule(avx512, drawn_int8, DefectCallAttributes{false, ScalarType::uint8}));
  // stride_h <= kh: no row without a kernel row.
  EXPECT_FALSE(draw_meets_rule(avx512, HoleDeconv(3, 2, 2, 0, 0, 0), absent));
  EXPECT_FALSE(draw_meets_rule(avx512, HoleDeconv(3, 1, 1, 0, 0, 0), absent));
  // b_pad = padding_bottom - output_padding_h < 0: the guard is emitted; b_pad >= kh: the kernel refuses it.
  EXPECT_FALSE(draw_meets_rule(avx512, HoleDeconv(3, 1, 2, 0, 0, 1), absent));
  EXPECT_FALSE(draw_meets_rule(avx512, HoleDeconv(3, 1, 2, 0, 1, 0), absent));
  EXPECT_TRUE(draw_meets_rule(avx512, HoleDeconv(3, 2, 3, 0, 1, 1), absent));  // b_pad 0
  // One input row and kernel_h 1: the only output row is reached.
  EXPECT_FALSE(draw_meets_rule(avx512, HoleDeconv(1, 1, 2, 0, 0, 0), absent));
  // More than one ic or oc block: not modelled.
  EXPECT_TRUE(draw_meets_rule(avx512, HoleDeconv(3, 1, 2, 0, 0, 0, 16, 16), absent));
  EXPECT_FALSE(draw_meets_rule(avx512, HoleDeconv(3, 1, 2, 0, 0, 0, 17, 2), absent));
  EXPECT_FALSE(draw_meets_rule(avx512, HoleDeconv(3, 1, 2, 0, 0, 0, 3, 17), absent));
  EXPECT_TRUE(draw_meets_rule(sse41, HoleDeconv(3, 1, 2, 0, 0, 0, 4, 4), absent));
  EXPECT_FALSE(draw_meets_rule(sse41, HoleDeconv(3, 1, 2, 0, 0, 0, 5, 4), absent));
  // A Conv2D, and the other rule's entry, do not take it.
  ConvCase conv2d = hole;
  conv2d.op(ConvOp::conv2d);
  EXPECT_FALSE(draw_meets_rule(avx512, conv2d, absent));
  EXPECT_FALSE(draw_meets_rule(JitEntry(30), hole, absent));
}

TEST(KnownDefects, StrideHoleTailWeightIsNeverZeroAndFitsThePreVnniKernels) {
  bool both_signs[2] = {false, false};
  for (int32_t o = 0; o < 17; ++o)
    for (int32_t c = 0; c < 17; ++c)
      for (int32_t h = 0; h < 4; ++h)
        for (int32_t kx = 0; kx < 3; ++kx) {
          const int32_t w = stride_hole_tail_weight(o, c, h, kx);
          EXPECT_NE(w, 0);
          EXPECT_EQ(w % 2, 0);
          EXPECT_LE(std::abs(w), 62);
          both_signs[w > 0] = true;
          EXPECT_EQ(w, stride_hole_tail_weight(o, c, h, kx));  // a pure function
        }
  EXPECT_TRUE(both_signs[0] && both_signs[1]);
}

// The model: kernel extended to stride_h rows of stride_hole_tail_weight, bottom padding raised to keep the
// output's size; only the hole rows change, each by source row ih_max times tail row kh_lo.
TEST(KnownDefects, StrideHoleModelAddsTheTailRowOnHoleRowsOnly) {
  const ConvCase conv = HoleDeconv(3, 1, 2, 0, 0, 0);
  std::vector<int32_t> input(conv.input_elements());
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<int32_t>(i * 29 % 256);
  ConvCase changed = conv;
  std::vector<int32_t> changed_input = input;
  apply_defect_model(StrideHoleEntry(16), &changed, &changed_input);
  changed.validate();
  EXPECT_EQ(changed_input, input);
  EXPECT_EQ(changed.kernel_height(), 2);
  EXPECT_EQ(changed.padding_bottom(), 1);
  EXPECT_EQ(changed.output_height(), conv.output_height());
  EXPECT_EQ(changed.output_width(), conv.output_width());
  for (int32_t k = 0; k < 2; ++k)
    for (int32_t c = 0; c < 3; ++c) {
      EXPECT_EQ(changed.weights()[changed.weight_index(k, 0, 0, c)], conv.weights()[conv.weight_index(k, 0, 0, c)]);
      EXPECT_EQ(changed.weights()[changed.weight_index(k, 1, 0, c)], stride_hole_tail_weight(k, c, 1, 0));
    }
  // Stride <= kernel: nothing to model.
  ConvCase no_holes = HoleDeconv(3, 2, 2, 0, 0, 0);
  const ConvCase before = no_holes;
  std::vector<int32_t> x(no_holes.input_elements(), 1);
  apply_defect_model(StrideHoleEntry(16), &no_holes, &x);
  EXPECT_EQ(describe(no_holes), describe(before));
  EXPECT_EQ(no_holes.weights(), before.weights());
}

TEST(KnownDefectsFile, TheRepositorysLedgerParses) {
  const KnownDefectLedger ledger =
      tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
  ASSERT_GE(ledger.entries.size(), 1u);
  for (const KnownDefect& d : ledger.entries) {
    EXPECT_EQ(d.library, "oneDNN");
    EXPECT_FALSE(d.test.empty());
    // A draw that replays alone; a race's names the sample it was found at (no draw shows it every time: its
    // proof is the pinned repro).
    EXPECT_EQ(parse_replay(d.replay).explicit_conv.has_value(), !thread_race(d)) << d.replay;
    EXPECT_FALSE(d.explanation.empty()) << d.id;
  }
  // Every documented behaviour names the implementations it applies to, and is not a defect of those without VNNI.
  size_t documented = 0;
  for (const KnownDefect& d : ledger.entries) documented += d.kind == LedgerKind::documented_behaviour;
  EXPECT_GE(documented, 5u);
}

}  // namespace
}  // namespace fusediff
