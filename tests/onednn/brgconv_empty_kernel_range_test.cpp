// oneDNN 2.6.3's brgconv crash on an empty kernel range (docs/onednn.md, "brgconv: an empty kernel range crashes"):
// the predicate the oneDNN pattern path withholds draws by (fused::onednn::BrgconvEmptyKernelRangeCrashes) against
// what the library does, each primitive executed in a forked child: it predicts a crash exactly where the child dies
// of SIGSEGV. Needs oneDNN's avx512_core_vnni kernels (skipped, naming the ISA, where the CPU cannot reach them).
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "fusediff/fused/onednn_defects.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/known_defects.h"
#include "onednn_test_util.h"

namespace fusediff {
namespace {

using namespace fused::onednn;  // its ledger rules and the bytes its paths place (onednn_defects.h)

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;

// One u8 -> s8 convolution as the oneDNN pattern path calls it (nhwc, weights `any`, f32 bias, user scratchpad,
// scales per channel), oneDNN's geometry (dilation 0: dense). Post-ops: sum (s8, zero point -1) and/or eltwise.
struct Problem {
  int64_t mb = 1, ic = 1, oc = 1, ih = 1, iw = 1, kh = 2, kw = 1, sh = 1, sw = 1, dh = 1, dw = 0, pt = 1, pb = 1, pl = 0,
          pr = 0;
  bool sum = true, eltwise = true, dst_zero_point = false;
  int64_t oh() const { return (ih + pt + pb - ((kh - 1) * (dh + 1) + 1)) / sh + 1; }
  int64_t ow() const { return (iw + pl + pr - ((kw - 1) * (dw + 1) + 1)) / sw + 1; }
};

struct Outcome {
  bool created = false;
  std::string implementation;
  size_t scratchpad = 0;
  bool predicted = false;  // BrgconvEmptyKernelRangeCrashes
  int signal = 0;          // the child's fatal signal; 0: it completed
};

Outcome Execute(const Problem& p) {
  using namespace dnnl;
  Outcome out;
  engine eng(engine::kind::cpu, 0);
  const memory::desc src({p.mb, p.ic, p.ih, p.iw}, DataType::u8, Tag::nhwc);
  const memory::desc wei({p.oc, p.ic, p.kh, p.kw}, DataType::s8, Tag::any);
  const memory::desc bias({p.oc}, DataType::f32, Tag::x);
  const memory::desc dst({p.mb, p.oc, p.oh(), p.ow()}, DataType::s8, Tag::nhwc);
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  attr.set_output_scales(2, std::vector<float>(static_cast<size_t>(p.oc), 0.0625f));
  if (p.dst_zero_point) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  post_ops po;
  if (p.sum) po.append_sum(0.5f, -1, DataType::s8);
  if (p.eltwise) po.append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  attr.set_post_ops(po);
  convolution_forward::primitive_desc pd;
  try {
    pd = convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src, wei, bias, dst,
                                  {p.sh, p.sw}, {p.dh, p.dw}, {p.pt, p.pl}, {p.pb, p.pr}),
        attr, eng);
  } catch (const error&) {
    return out;  // oneDNN refuses the problem
  }
  out.created = true;
  out.implementation = pd.impl_info_str();
  out.scratchpad = pd.scratchpad_desc().get_size();
  out.predicted = fused::onednn::BrgconvEmptyKernelRangeCrashes(
      out.implementation, p.sum && p.eltwise, {p.ih, p.oh(), p.kh, p.sh, p.dh, p.pt}, out.scratchpad,
      fused::onednn::OneDnnMaxThreads());
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    stream s(eng);
    memory sm(pd.src_desc(), eng), wm(pd.weights_desc(), eng), bm(pd.bias_desc(), eng), dm(pd.dst_desc(), eng),
        sp(pd.scratchpad_desc(), eng);
    std::memset(sm.get_data_handle(), 7, pd.src_desc().get_size());
    std::memset(wm.get_data_handle(), 3, pd.weights_desc().get_size());
    std::memset(bm.get_data_handle(), 0, pd.bias_desc().get_size());
    std::memset(dm.get_data_handle(), 5, pd.dst_desc().get_size());
    int32_t zero_point = 4;
    memory zp({{1}, DataType::s32, Tag::x}, eng, &zero_point);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm},
                                         {DNNL_ARG_DST, dm}, {DNNL_ARG_SCRATCHPAD, sp}};
    if (p.dst_zero_point) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, zp});
    convolution_forward(pd).execute(s, args);
    s.wait();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  out.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  EXPECT_TRUE(WIFSIGNALED(status) || WEXITSTATUS(status) == 0) << "the child exited with " << WEXITSTATUS(status);
  return out;
}

std::string Describe(const Problem& p) {
  return "mb" + std::to_string(p.mb) + "ic" + std::to_string(p.ic) + "oc" + std::to_string(p.oc) + "_ih" +
         std::to_string(p.ih) + "iw" + std::to_string(p.iw) + "_kh" + std::to_string(p.kh) + "kw" + std::to_string(p.kw) +
         "_sh" + std::to_string(p.sh) + "sw" + std::to_string(p.sw) + "_dh" + std::to_string(p.dh) + "dw" +
         std::to_string(p.dw) + "_pt" + std::to_string(p.pt) + "pb" + std::to_string(p.pb) + "pl" + std::to_string(p.pl) +
         "pr" + std::to_string(p.pr) + (p.sum ? "_sum" : "") + (p.eltwise ? "_eltwise" : "") +
         (p.dst_zero_point ? "_dzp" : "");
}

// The draws of fusediff run --seed 30 and --seed 36 (DNNL_VERBOSE), their near misses, and the minimal draw.
TEST(OneDnnBrgconvEmptyKernelRange, PredictsExactlyTheCrashingProblems) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  Problem seed30;  // mb3_ic4oc4_ih1oh1kh2sh1dh1ph1_iw8ow4kw3sw2dw0pw0
  seed30.mb = 3; seed30.ic = 4; seed30.oc = 4; seed30.iw = 8; seed30.kw = 3; seed30.sw = 2; seed30.pr = 1;
  seed30.dst_zero_point = true;
  Problem seed36;  // mb3_ic6oc4_ih1oh1kh2sh1dh1ph1_iw9ow8kw2sw1dw1pw1
  seed36.mb = 3; seed36.ic = 6; seed36.oc = 4; seed36.iw = 9; seed36.kw = 2; seed36.dw = 1; seed36.pl = 1;
  seed36.dst_zero_point = true;
  const Problem minimal;
  struct Expect {
    const char* what;
    Problem p;
    bool crashes;
  };
  std::vector<Expect> cases = {{"seed 30", seed30, true}, {"seed 36", seed36, true}, {"minimal", minimal, true}};
  for (const Problem& base : {seed30, seed36, minimal}) {
    Problem p = base;
    p.ih = 2; p.pb = 0;  // row 1 is a tap
    cases.push_back({"ih 2", p, false});
    p = base;
    p.pt = 0; p.pb = 2;  // row 0 is a tap
    cases.push_back({"no top padding", p, false});
    p = base;
    p.dh = 0; p.pb = 0;  // dense: row 0 is a tap
    cases.push_back({"no dilation", p, false});
    p = base;
    p.sum = false;
    cases.push_back({"no sum", p, false});
    p = base;
    p.eltwise = false;
    cases.push_back({"no eltwise", p, false});
  }
  for (const Expect& c : cases) {
    const Outcome o = Execute(c.p);
    ASSERT_TRUE(o.created) << c.what << " " << Describe(c.p);
    EXPECT_EQ(o.implementation, "brgconv:avx512_core_vnni") << c.what << " " << Describe(c.p);
    EXPECT_EQ(o.signal == SIGSEGV, c.crashes) << c.what << " " << Describe(c.p) << ": signal " << o.signal;
    EXPECT_EQ(o.predicted, c.crashes) << c.what << " " << Describe(c.p) << ", scratchpad " << o.scratchpad;
  }
}

// Over a grid of small geometries (fusediff's ranges: kernels up to 3, oneDNN dilation 0/1, paddings below the
// kernel, strides 1/2) with the sum + eltwise chain: the predicate says SIGSEGV exactly where the child dies of it,
// and the geometric part is the ledger rule's (is_empty_kernel_range_row on the same ConvCase).
TEST(OneDnnBrgconvEmptyKernelRange, PredicateEqualsTheLibraryOverAGrid) {
  FUSEDIFF_REQUIRE_ISA(dnnl::cpu_isa::avx512_core_vnni, "AVX512_CORE_VNNI");
  int problems = 0, crashes = 0, brgconv = 0, empty_rows = 0;
  for (int64_t ih = 1; ih <= 3; ++ih)
    for (int64_t kh = 1; kh <= 3; ++kh)
      for (int64_t dh = 0; dh <= 1; ++dh)
        for (int64_t sh = 1; sh <= 2; ++sh)
          for (int64_t pt = 0; pt < kh; ++pt)
            for (int64_t pb = 0; pb < kh; ++pb)
              for (int w = 0; w < 3; ++w) {
                Problem p;
                p.ih = ih; p.kh = kh; p.dh = dh; p.sh = sh; p.pt = pt; p.pb = pb;
                p.mb = 2; p.ic = 3; p.oc = 5;
                const int64_t widths[3][6] = {{8, 3, 2, 0, 0, 1}, {5, 3, 1, 0, 2, 2}, {4, 2, 1, 1, 1, 1}};  // iw kw sw dw pl pr
                p.iw = widths[w][0]; p.kw = widths[w][1]; p.sw = widths[w][2]; p.dw = widths[w][3]; p.pl = widths[w][4];
                p.pr = widths[w][5];
                const int64_t ext_h = (kh - 1) * (dh + 1) + 1, ext_w = (p.kw - 1) * (p.dw + 1) + 1;
                if (ih + pt + pb < ext_h || p.iw + p.pl + p.pr < ext_w) continue;
                // oneDNN's bottom/right padding for the floor output size.
                p.pb = (p.oh() - 1) * sh + ext_h - ih - pt;
                p.pr = (p.ow() - 1) * p.sw + ext_w - p.iw - p.pl;
                if (p.pb < 0 || p.pr < 0) continue;
                const Outcome o = Execute(p);
                if (!o.created) continue;
                ++problems;
                brgconv += o.implementation.rfind("brgconv:", 0) == 0;
                crashes += o.signal != 0;
                EXPECT_EQ(o.predicted, o.signal == SIGSEGV)
                    << Describe(p) << " on " << o.implementation << ", scratchpad " << o.scratchpad << ", signal " << o.signal;
                EXPECT_TRUE(o.signal == 0 || o.signal == SIGSEGV) << Describe(p) << ": signal " << o.signal;
                // The ledger rule sees the same rows on fusediff's ConvCase (dilation 1: dense).
                ConvCase conv;
                conv.batch(1).input_size(static_cast<int32_t>(ih), 1).input_channels(1).output_channels(1)
                    .kernel_size(static_cast<int32_t>(kh), 1).stride(static_cast<int32_t>(sh), 1)
                    .dilation(static_cast<int32_t>(dh + 1), 1)
                    .padding(static_cast<int32_t>(pt), 0, static_cast<int32_t>(p.pb), 0);
                bool empty_row = false;
                for (int32_t oy = 0; oy < conv.output_height(); ++oy) empty_row = empty_row || is_empty_kernel_range_row(conv, oy);
                EXPECT_EQ(conv.output_height(), p.oh()) << Describe(p);
                EXPECT_EQ(empty_row, fused::onednn::BrgconvEmptyKernelRow({ih, p.oh(), kh, sh, dh, pt})) << Describe(p);
                empty_rows += empty_row && o.implementation.rfind("brgconv:", 0) == 0;
              }
  // Of the brgconv problems with an empty row, those that did not crash keep an accumulation buffer (which ones
  // depends on the blocking oneDNN picks for its thread count).
  std::printf("[ oneDNN   ] %d problems (%d on brgconv, %d of them with an empty row), %d crashed, each predicted\n",
              problems, brgconv, empty_rows, crashes);
  EXPECT_GT(crashes, 0);
  EXPECT_GE(empty_rows, crashes);
  EXPECT_GT(brgconv, crashes);
}

}  // namespace
}  // namespace fusediff
