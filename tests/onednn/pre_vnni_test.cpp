// oneDNN 2.6.3 on every ISA it dispatches to (docs/onednn.md, "Without VNNI: documented behaviour" and
// "jit_uni_deconv reads the columns its blocks schedule"): the ledger's models equal the library, and every sample
// that differs from the reference is one of them. ctest runs these under each DNNL_MAX_CPU_ISA cap
// (onednn.pre_vnni.<ISA>, onednn.uni_deconv_columns.<ISA>); uncapped they hold for whatever this CPU runs.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "fusediff/fused/onednn_defects.h"
#include "fusediff/fused/onednn_suite.h"
#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/known_defects.h"
#include "fusediff/reference/reference.h"
#include "fusediff/tables/known_defects_file.h"
#include "onednn_test_util.h"

namespace fusediff {
namespace {

using namespace fused::onednn;  // its ledger rules and the bytes its paths place (onednn_defects.h)

KnownDefectLedger Ledger() {
  return tables::ReadKnownDefects(std::string(FUSEDIFF_SOURCE_DIR) + "/fused/onednn/known_defects.json");
}

// The cap this process runs under (ctest's DNNL_MAX_CPU_ISA), and whether oneDNN reaches it on this CPU.
struct Cap {
  std::string name;  // empty: no cap
  bool reached = true;
};
Cap ProcessCap() {
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  if (cap == nullptr) cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (cap == nullptr) return {};
  std::string lower(cap);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {cap, fused::onednn::EffectiveIsa() == lower};
}

#define SKIP_UNLESS_THE_CAP_IS_REACHED()                                                                         \
  do {                                                                                                          \
    const Cap cap = ProcessCap();                                                                               \
    if (!cap.reached) {                                                                                         \
      GTEST_SKIP() << "DNNL_MAX_CPU_ISA=" << cap.name << " is not reachable on this CPU: oneDNN dispatches to "  \
                   << fused::onednn::EffectiveIsa();                                                            \
    }                                                                                                           \
  } while (false)

bool Vnni(const std::string& isa) {
  return isa.find("vnni") != std::string::npos || isa.find("bf16") != std::string::npos ||
         isa.find("amx") != std::string::npos;
}

// Every same-convention relu case of the oneDNN paths (conv2d+act fused and unfused, the sum and binary chains and
// their graph, fc+act), on the default draws. relu's tolerance is 0, so a ledger model explains a sample only when
// it is the library's output exactly.
TEST(OneDnnPreVnni, LedgerExplainsEverySampleThatDiffers) {
  SKIP_UNLESS_THE_CAP_IS_REACHED();
  const KnownDefectLedger ledger = Ledger();
  driver::SuiteOptions options;
  options.backend = "onednn";
  options.activation = ActivationKind::relu;
  options.samples = 6000;
  std::vector<CaseSpec> specs;
  for (const char* pattern : {"conv2d+act", "conv2d+add+act", "fc+act"}) {
    options.pattern = pattern;
    for (CaseSpec& s : driver::BuildSuite(options)) {
      if (s.comparison == Comparison::same_convention && s.backend != kBuiltInPath) specs.push_back(std::move(s));
    }
  }
  ASSERT_GE(specs.size(), 5u);
  driver::ReferenceCache cache;
  driver::RunOptions run;
  run.known_defects = &ledger;
  std::map<std::string, uint64_t> explained_by;
  for (const CaseSpec& spec : specs) {
    const CaseResult r = driver::RunCase(spec, run, cache);
    EXPECT_NE(r.verdict, Verdict::fail) << spec.name << ": " << r.reason;
    EXPECT_NE(r.verdict, Verdict::nondeterministic) << spec.name << ": " << r.reason;
    EXPECT_EQ(r.stats.overall.max_abs(), 0) << spec.name << " (" << r.implementation << ")";
    for (const KnownDefectTally& t : r.known_defects) {
      EXPECT_EQ(t.stats.overall.count(), t.predicted_samples) << spec.name << " " << t.id << ": the model is exact";
      explained_by[t.id] += t.stats.overall.count();
    }
  }
  const std::string isa = fused::onednn::EffectiveIsa();
  uint64_t documented = 0;
  for (const KnownDefect& d : ledger.entries) {
    if (d.kind == LedgerKind::documented_behaviour) documented += explained_by[d.id];
  }
  std::printf("[ oneDNN   ] %s: %llu samples explained as documented behaviour\n", isa.c_str(),
              static_cast<unsigned long long>(documented));
  if (Vnni(isa)) {
    EXPECT_EQ(documented, 0u) << "VNNI kernels compute int8 exactly";
  } else {
    // Without VNNI the jit kernels' u8 pairs saturate and their s8 sources lose the weights' last bit.
    EXPECT_GT(explained_by["onednn-2.6-pre-vnni-jit-u8-int16-pairs"], 0u) << isa;
    EXPECT_GT(explained_by["onednn-2.6-pre-vnni-jit-s8-halved-weights"], 0u) << isa;
  }
}

// --strict: the same documented samples fail their case.
TEST(OneDnnPreVnni, StrictCountsDocumentedBehaviourAsFailure) {
  SKIP_UNLESS_THE_CAP_IS_REACHED();
  if (Vnni(fused::onednn::EffectiveIsa())) GTEST_SKIP() << "VNNI: nothing is documented behaviour here";
  const KnownDefectLedger ledger = Ledger();
  driver::SuiteOptions options;
  options.samples = 6000;
  const CaseSpec spec = fused::onednn::OneDnnComparisons(options, ActivationKind::relu).front();
  driver::ReferenceCache cache;
  driver::RunOptions run;
  run.known_defects = &ledger;
  const CaseResult lenient = driver::RunCase(spec, run, cache);
  run.strict = true;
  const CaseResult strict = driver::RunCase(spec, run, cache);
  ASSERT_EQ(lenient.verdict, Verdict::documented_behaviour) << lenient.reason;
  EXPECT_EQ(strict.verdict, Verdict::fail);
  EXPECT_NE(strict.reason.find("failing under --strict"), std::string::npos) << strict.reason;
  EXPECT_EQ(compared_samples(strict), compared_samples(lenient));
}

// One transposed convolution straight through oneDNN: s32 destination (the accumulator), a u8 source with
// fusediff's tail past it, the weights reordered by oneDNN, oneDNN's paddings as PyTorch passes output padding.
struct LibraryRun {
  std::string implementation;
  std::vector<int32_t> acc;
};
LibraryRun RunDeconvolution(const ConvCase& conv, const std::vector<int32_t>& input, bool zero_point_attribute) {
  using dnnl::memory;
  using Tag = memory::format_tag;
  using DataType = memory::data_type;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc src_md({conv.batch(), conv.input_channels(), conv.input_height(), conv.input_width()}, DataType::u8, Tag::nhwc);
  const memory::dims wei_dims = {conv.output_channels(), conv.input_channels(), conv.kernel_height(), conv.kernel_width()};
  const memory::desc dst_md({conv.batch(), conv.output_channels(), conv.output_height(), conv.output_width()}, DataType::s32, Tag::nhwc);
  dnnl::primitive_attr attr;
  if (zero_point_attribute) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  const dnnl::deconvolution_forward::primitive_desc pd(
      dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src_md,
                                        memory::desc(wei_dims, DataType::s8, Tag::any), dst_md,
                                        {conv.stride_height(), conv.stride_width()},
                                        {conv.dilation_height() - 1, conv.dilation_width() - 1},
                                        {conv.padding_top(), conv.padding_left()},
                                        {conv.padding_bottom() - conv.output_padding_height(),
                                         conv.padding_right() - conv.output_padding_width()}),
      attr, engine);
  std::vector<uint8_t> src(input.size() + kSourceTailBytes);
  for (size_t i = 0; i < src.size(); ++i) {
    src[i] = static_cast<uint8_t>(i < input.size() ? input[i] : source_tail_code(i - input.size(), true));
  }
  std::vector<int8_t> weights = conv.weights();
  LibraryRun r{pd.impl_info_str(), std::vector<int32_t>(conv.output_elements(), -77777)};
  memory src_mem(src_md, engine, src.data()), dst_mem(dst_md, engine, r.acc.data());
  memory user_weights({wei_dims, DataType::s8, Tag::ohwi}, engine, weights.data()), wei_mem(pd.weights_desc(), engine);
  dnnl::reorder(user_weights, wei_mem).execute(stream, user_weights, wei_mem);
  int32_t zero_point = conv.input_quant().zero_point;
  memory zp_mem({{1}, DataType::s32, Tag::x}, engine, &zero_point);
  dnnl::deconvolution_forward(pd).execute(stream, {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem},
                                                  {DNNL_ARG_DST, dst_mem}, {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem}});
  stream.wait();
  return r;
}

// Every small W geometry (the H direction plain: stride 1, no stride holes): weights even in [-62, 62] keep the
// pre-VNNI pairs exact, so only the column schedule can move an output.
TEST(OneDnnUniDeconvColumns, LibraryEqualsTheLedgersScheduleOverASweep) {
  if (ProcessCap().name.empty()) test_support::SelectIsa(dnnl::cpu_isa::avx2);
  SKIP_UNLESS_THE_CAP_IS_REACHED();
  const KnownDefectLedger ledger = Ledger();
  uint64_t draws = 0, wrong = 0, predicted = 0;
  std::string implementation;
  uint32_t seed = 12345;
  const auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  for (int32_t dw = 1; dw <= 2; ++dw)
    for (int32_t kw = 1; kw <= 3; ++kw)
      for (int32_t sw = 1; sw <= 3; ++sw)
        for (int32_t pl = 0; pl < kw; ++pl)
          for (int32_t pr = 0; pr < kw; ++pr)
            for (int32_t opw = 0; opw < std::max(sw, dw); ++opw)
              for (int32_t iw = 1; iw <= 5; iw += 2)
                for (bool zp : {false, true}) {
                  ConvCase conv;
                  conv.op(ConvOp::conv_transpose2d).batch(2).input_size(2, iw).input_channels(3).output_channels(5);
                  conv.kernel_size(2, kw).stride(1, sw).dilation(1, dw).padding(0, pl, 0, pr).output_padding(0, opw);
                  conv.input_quant({test_support::kUint8, 1.0f, zp ? 7 : 0}).weight_scales(std::vector<float>(5, 1.0f));
                  std::vector<int8_t> w(conv.weight_elements());
                  for (int8_t& v : w) v = static_cast<int8_t>(2 * (static_cast<int32_t>(next() % 63) - 31));
                  conv.weights(w).bias({0, 0, 0, 0, 0});  // no bias passed: the accumulator itself
                  if (conv.output_width() < 1) continue;
                  std::vector<int32_t> x(conv.input_elements());
                  for (int32_t& v : x) v = static_cast<int32_t>(next() % 256);
                  LibraryRun r;
                  try {
                    r = RunDeconvolution(conv, x, zp);
                  } catch (const dnnl::error&) {
                    continue;  // a geometry oneDNN refuses
                  }
                  if (r.implementation.find("jit_uni_deconv") == std::string::npos) continue;
                  implementation = r.implementation;
                  const KnownDefect* entry = nullptr;
                  for (const KnownDefect& d : ledger.entries) {
                    if (d.rule == "jit_uni_deconv_columns" &&
                        defect_applies(d, "oneDNN", fused::onednn::LibraryVersion(), fused::onednn::EffectiveIsa(),
                                       "conv: " + r.implementation)) {
                      entry = &d;
                    }
                  }
                  ASSERT_NE(entry, nullptr) << "no column-schedule entry for " << r.implementation;
                  const DefectCallAttributes call{zp, ScalarType::uint8, false};
                  const std::vector<int64_t> plain = reference::Conv2DAccumulators(conv, x);
                  ConvCase model = conv;
                  std::vector<int32_t> model_input = x;
                  const bool meets = draw_meets_rule(*entry, conv, call);
                  if (meets) apply_defect_model(*entry, &model, &model_input, call);
                  const std::vector<int64_t> expected = reference::Conv2DAccumulators(model, model_input);
                  ++draws;
                  bool differs = false;
                  for (size_t i = 0; i < r.acc.size(); ++i) {
                    EXPECT_EQ(r.acc[i], expected[i]) << describe(conv) << (zp ? " zp 7" : "") << ", output " << i;
                    differs = differs || r.acc[i] != plain[i];
                  }
                  wrong += differs;
                  predicted += meets && differs;
                  if (::testing::Test::HasFailure()) return;
                }
  std::printf("[ oneDNN   ] %s: %llu draws, %llu wrong, every one predicted by the schedule and equal to it\n",
              implementation.c_str(), static_cast<unsigned long long>(draws), static_cast<unsigned long long>(wrong));
  if (implementation.empty()) GTEST_SKIP() << "no draw ran on jit_uni_deconv (" << fused::onednn::EffectiveIsa() << ")";
  EXPECT_GT(wrong, 0u) << "the sweep meets the defect";
  EXPECT_EQ(predicted, wrong);
}

// The AMX int8 deconvolution (jit_deconvolution:avx512_core_amx*) is another kernel: on the draws of both defects
// (the dropped last column, the stride-hole rows) it computes the reference (an AMX Xeon's run, issue 23).
TEST(OneDnnAmx, DeconvolutionDefectsAreAbsent) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_amx, "AVX512_CORE_AMX");
  const KnownDefectLedger ledger = Ledger();
  size_t checked = 0;
  for (const KnownDefect& d : ledger.entries) {
    if (d.rule != "jit_deconv_single_block_output_padding" && d.rule != "jit_deconv_stride_hole") continue;
    const ReplayTrace t = driver::Replay(parse_replay(d.replay));
    EXPECT_NE(t.implementation_of_draw.find("amx"), std::string::npos) << t.implementation_of_draw;
    EXPECT_EQ(t.y_fused, t.y_reference) << d.id << " on " << t.implementation_of_draw;
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace fusediff
