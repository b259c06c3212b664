// oneDNN 2.6.3's int8 jit deconvolution on stride-hole rows (docs/onednn.md, "Stride-hole rows read past the
// weights") over the weights buffer fusediff owns (onednn_weights.cpp): called as the defect needs it (u8 source,
// NO source zero-point attribute, which fusediff's own formulation always sets), the library's answer is
// deterministic and equals the ledger's model (the reference on the kernel extended to stride_h rows of
// stride_hole_tail_weight) where the rule holds; a draw the model cannot place still fails.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../../fused/onednn/src/onednn_patterns.h"
#include "fusediff/fused/onednn_defects.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/known_defects.h"
#include "fusediff/reference/reference.h"
#include "fusediff/tables/known_defects_file.h"
#include "onednn_test_util.h"

namespace fusediff {
namespace {

using namespace fused::onednn;  // its ledger rules and the bytes its paths place (onednn_defects.h)

using dnnl::memory;
using test_support::kUint8;

// A transposed convolution kernel 1 x kw, stride 2 x 1, no padding, u8 input (zero point 0), weights even in
// [-62, 62] (exact on the pre-VNNI kernels' int16 pair sums too), so that rows 1, 3, ... are stride holes.
ConvCase HoleDeconv(int32_t ih, int32_t iw, int32_t c, int32_t k, int32_t kw) {
  ConvCase conv;
  conv.op(ConvOp::conv_transpose2d).batch(1).input_size(ih, iw).input_channels(c).output_channels(k);
  conv.kernel_size(1, kw).stride(2, 1).input_quant(QuantParams{kUint8, 1.0f, 0});
  conv.weight_scales(std::vector<float>(static_cast<size_t>(k), 1.0f));
  std::vector<int8_t> w(conv.weight_elements());
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(2 * (static_cast<int32_t>(i * 17 % 61) - 30));
  std::vector<int32_t> bias(static_cast<size_t>(k));
  for (int32_t o = 0; o < k; ++o) bias[static_cast<size_t>(o)] = 101 - 37 * o;
  conv.weights(w).bias(bias);
  conv.validate();
  return conv;
}

std::vector<int32_t> HoleInput(const ConvCase& conv) {
  std::vector<int32_t> x(conv.input_elements());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>((i * 73 + 11) % 256);
  return x;
}

struct LibraryRun {
  std::string implementation;  // "conv: " + oneDNN's implementation string (the ledger's globs)
  std::vector<int32_t> y;      // the s32 destination (the accumulator, bias included), NHWC
  bool tail_rows_placed = false;
  bool prefix_is_the_real_weights = false;  // the owned buffer's first get_size() bytes = oneDNN's own reorder
};

// The deconvolution with no attributes at all (no source zero point), s32 destination, weights through
// detail::OwnDeconvolutionWeights; the destination starts as `poison` everywhere.
LibraryRun RunWithoutSourceZeroPoint(const ConvCase& conv, const std::vector<int32_t>& input, int32_t poison) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::dim n = conv.batch(), c = conv.input_channels(), k = conv.output_channels();
  const memory::desc src_md({n, c, conv.input_height(), conv.input_width()}, memory::data_type::u8, memory::format_tag::nhwc);
  const memory::dims wei_dims = {k, c, conv.kernel_height(), conv.kernel_width()};
  const memory::desc wei_any(wei_dims, memory::data_type::s8, memory::format_tag::any);
  const memory::desc bias_md({k}, memory::data_type::s32, memory::format_tag::x);
  const memory::desc dst_md({n, k, conv.output_height(), conv.output_width()}, memory::data_type::s32,
                            memory::format_tag::nhwc);
  const dnnl::deconvolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src_md, wei_any, bias_md, dst_md,
      {conv.stride_height(), conv.stride_width()}, {0, 0}, {conv.padding_top(), conv.padding_left()},
      {conv.padding_bottom() - conv.output_padding_height(), conv.padding_right() - conv.output_padding_width()});
  const dnnl::deconvolution_forward::primitive_desc pd(desc, engine);
  LibraryRun r;
  r.implementation = std::string("conv: ") + pd.impl_info_str();
  const fused::onednn::detail::DeconvolutionWeights owned =
      fused::onednn::detail::OwnDeconvolutionWeights(conv, pd.weights_desc(), engine, stream);
  r.tail_rows_placed = owned.tail_rows_placed;
  // oneDNN's own reorder of the real weights into the desc it asked for, to compare with the owned prefix.
  std::vector<int8_t> real = conv.weights();
  memory user(memory::desc(wei_dims, memory::data_type::s8, memory::format_tag::ohwi), engine, real.data());
  memory own_reorder(pd.weights_desc(), engine);
  dnnl::reorder(user, own_reorder).execute(stream, user, own_reorder);
  stream.wait();
  r.prefix_is_the_real_weights = owned.size == pd.weights_desc().get_size() &&
                                 std::memcmp(own_reorder.get_data_handle(), owned.memory.get_data_handle(), owned.size) == 0;
  std::vector<uint8_t> src(input.begin(), input.end());
  std::vector<int32_t> bias = conv.bias();
  r.y.assign(conv.output_elements(), poison);
  memory src_mem(src_md, engine, src.data()), bias_mem(bias_md, engine, bias.data()), dst_mem(dst_md, engine, r.y.data());
  dnnl::deconvolution_forward(pd).execute(stream, {{DNNL_ARG_SRC, src_mem},
                                                   {DNNL_ARG_WEIGHTS, owned.memory},
                                                   {DNNL_ARG_BIAS, bias_mem},
                                                   {DNNL_ARG_DST, dst_mem}});
  stream.wait();
  return r;
}

bool IsJitInt8Deconvolution(const std::string& implementation) {
  return implementation.find("jit_deconvolution:") != std::string::npos ||
         implementation.find("jit_uni_deconv") != std::string::npos;
}

const KnownDefect* StrideHoleEntry(const KnownDefectLedger& ledger, const std::string& implementation) {
  for (const KnownDefect& d : ledger.entries) {
    if (d.rule == "jit_deconv_stride_hole" &&
        defect_applies(d, "oneDNN", fused::onednn::LibraryVersion(), fused::onednn::EffectiveIsa(), implementation)) {
      return &d;
    }
  }
  return nullptr;
}

const DefectCallAttributes kNoSourceZeroPoint{false, ScalarType::uint8};

// The kernels the ledger's entries were measured on: AVX512_CORE_VNNI unless a cap (the per-ISA ctest runs) says
// otherwise; on a CPU without it oneDNN dispatches lower, where the same defect has entries too.
void SelectMeasuredIsa() {
  if (std::getenv("DNNL_MAX_CPU_ISA") == nullptr && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
    test_support::SelectIsa(dnnl::cpu_isa::avx512_core_vnni);
  }
}

// Pinned by the ledger's stride-hole entries: fails once oneDNN computes the hole rows as the bias alone. Where no
// entry names the kernel that ran (another ISA's), the library must be right.
TEST(OneDnnStrideHole, LibraryEqualsTheModelOverTheOwnedTail) {
  SelectMeasuredIsa();
  // 3 and 4 channels: one block on every ISA (sse41's 4 x 4 too); C = 3 leaves a padded channel in the block.
  const ConvCase conv = HoleDeconv(3, 2, 3, 4, 2);
  const std::vector<int32_t> input = HoleInput(conv);
  const LibraryRun a = RunWithoutSourceZeroPoint(conv, input, -77777);
  if (!IsJitInt8Deconvolution(a.implementation)) GTEST_SKIP() << a.implementation << " is no jit int8 deconvolution";
  const LibraryRun b = RunWithoutSourceZeroPoint(conv, input, 12345);
  EXPECT_TRUE(a.tail_rows_placed) << a.implementation;
  EXPECT_TRUE(a.prefix_is_the_real_weights) << a.implementation;
  EXPECT_EQ(a.y, b.y) << "the answer must not depend on the destination's poison or on the heap";

  const KnownDefectLedger ledger =
      tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
  const KnownDefect* entry = StrideHoleEntry(ledger, a.implementation);
  if (entry == nullptr) {
    EXPECT_EQ(std::vector<int64_t>(a.y.begin(), a.y.end()), reference::Conv2DAccumulators(conv, input))
        << "no stride-hole ledger entry for " << a.implementation << ": the library must be right";
    return;
  }
  EXPECT_NE(entry->test.find("OneDnnStrideHole.LibraryEqualsTheModelOverTheOwnedTail"), std::string::npos);
  ASSERT_TRUE(draw_meets_rule(*entry, conv, kNoSourceZeroPoint));
  ConvCase changed = conv;
  std::vector<int32_t> changed_input = input;
  apply_defect_model(*entry, &changed, &changed_input);
  ASSERT_EQ(changed.output_elements(), conv.output_elements());
  const std::vector<int64_t> model = reference::Conv2DAccumulators(changed, changed_input);
  const std::vector<int64_t> plain = reference::Conv2DAccumulators(conv, input);
  size_t hole_outputs = 0, hole_outputs_wrong = 0;
  for (size_t i = 0; i < a.y.size(); ++i) {
    const bool hole = is_stride_hole_row(conv, conv.output_coord(i).oy);
    EXPECT_EQ(a.y[i], model[i]) << "output " << i << " (row " << conv.output_coord(i).oy << "), reference " << plain[i];
    if (!hole) {
      EXPECT_EQ(model[i], plain[i]) << "the model changes only the hole rows: output " << i;
    }
    hole_outputs += hole;
    hole_outputs_wrong += hole && a.y[i] != plain[i];
    if (hole && a.y[i] != plain[i]) {
      EXPECT_TRUE(explained_by_defect(static_cast<int32_t>(plain[i]), a.y[i], static_cast<int32_t>(model[i]), 0));
    }
  }
  EXPECT_EQ(hole_outputs, 2u * 3u * 4u);  // rows 1 and 3, 3 columns, 4 channels
  EXPECT_EQ(hole_outputs_wrong, hole_outputs) << "every hole-row output shows the defect";
}

// More than one ic block: the spurious row meets the next block's real weights, which the model cannot place. The
// rule refuses the draw, and its hole-row outputs are neither the reference nor the model: judged, they fail.
TEST(OneDnnStrideHole, MultiBlockDrawIsNotExplained) {
  SelectMeasuredIsa();
  const ConvCase conv = HoleDeconv(2, 1, 17, 2, 1);  // 17 input channels: two ic blocks on every ISA
  const std::vector<int32_t> input = HoleInput(conv);
  const LibraryRun a = RunWithoutSourceZeroPoint(conv, input, 0);
  if (!IsJitInt8Deconvolution(a.implementation)) GTEST_SKIP() << a.implementation << " is no jit int8 deconvolution";
  EXPECT_FALSE(a.tail_rows_placed);
  EXPECT_TRUE(a.prefix_is_the_real_weights);
  EXPECT_EQ(a.y, RunWithoutSourceZeroPoint(conv, input, 999).y);  // owned and non-zero tail: still deterministic
  const KnownDefectLedger ledger =
      tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
  const KnownDefect* entry = StrideHoleEntry(ledger, a.implementation);
  if (entry == nullptr) GTEST_SKIP() << "no stride-hole ledger entry for " << a.implementation << " (checked above)";
  EXPECT_FALSE(draw_meets_rule(*entry, conv, kNoSourceZeroPoint));
  ConvCase changed = conv;
  std::vector<int32_t> changed_input = input;
  apply_defect_model(*entry, &changed, &changed_input);
  const std::vector<int64_t> model = reference::Conv2DAccumulators(changed, changed_input);
  const std::vector<int64_t> plain = reference::Conv2DAccumulators(conv, input);
  size_t unexplained = 0;
  for (size_t i = 0; i < a.y.size(); ++i) {
    if (!is_stride_hole_row(conv, conv.output_coord(i).oy)) {
      EXPECT_EQ(a.y[i], plain[i]) << "output " << i;
      continue;
    }
    unexplained += !explained_by_defect(static_cast<int32_t>(plain[i]), a.y[i], static_cast<int32_t>(model[i]), 0) &&
                   a.y[i] != plain[i];
  }
  EXPECT_EQ(unexplained, 2u) << "row 1's two outputs are wrong and not the model's";
}

// fusediff's own formulation (a source zero-point attribute, here of value 0, and the owned weights) is right on
// the same draw: the default run's results do not change.
TEST(OneDnnStrideHole, WithTheSourceZeroPointAttributeTheKernelIsRight) {
  SelectMeasuredIsa();
  const ConvCase conv = HoleDeconv(3, 2, 3, 4, 2);
  const std::vector<int32_t> input = HoleInput(conv);
  const Convention graph = test_support::OneDnnGraph(ActivationKind::relu, {test_support::kInt8, 1.0f, 0},
                                                     {test_support::kInt8, 64.0f, 0});
  std::string why;
  auto kernel = fused::onednn::OneDnnKernel::Create(graph, fused::onednn::OneDnnVariant::fused, &why);
  ASSERT_TRUE(kernel) << why;
  std::vector<int32_t> y(conv.output_elements());
  ASSERT_TRUE(kernel->Run(conv, input, y, &why)) << why;
  if (!IsJitInt8Deconvolution(kernel->last_implementation())) GTEST_SKIP() << kernel->last_implementation();
  const std::vector<int64_t> plain = reference::Conv2DAccumulators(conv, input);
  for (size_t i = 0; i < y.size(); ++i) {
    // relu(acc) / 64 rounded half to even (binary32 exact: |acc| < 2^24, power-of-two scale), saturated to int8.
    const float v = static_cast<float>(std::max<int64_t>(plain[i], 0)) / 64.0f;
    EXPECT_EQ(y[i], static_cast<int32_t>(std::min(127.0f, std::nearbyint(v)))) << "output " << i;
  }
}

}  // namespace
}  // namespace fusediff
