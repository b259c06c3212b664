// Standalone reproduction: oneDNN 2.6.3's int8 brgemm convolution (brgconv:avx512_core_vnni) dies with SIGSEGV when
// an output row has no kernel row inside the input (every tap of the row in the top/bottom padding: an empty kh
// range), the post-ops hold a sum and an eltwise, and the primitive keeps no accumulation buffer (jcp.use_buffer
// false). Plain C++ against dnnl.hpp; no fusediff code (docs/onednn.md, "brgconv: an empty kernel range crashes").
//
// Cause (oneDNN v2.6.3):
//   src/cpu/x64/jit_brgemm_conv.cpp:1834-1851 (ker_vpad; ker_base 1499/1544-1552 and ker_trans 1685/1694-1702 alike):
//     a row whose kd/kh range is empty (BRGEMM_CONV_KER_HEADER 1339-1344: kh_f <= kh_s) calls no brgemm kernel;
//     perform_outwork (1051-1132) runs the post-ops over the whole row with the "po" kernel kernels_po_[...]
//     (call_outwork_ker, 1086-1114).
//   src/cpu/x64/jit_brgemm_conv.cpp:368-384 (add_po_kernel): that kernel gets alpha = 0 when the sum post-op writes
//     into dst directly (!is_init && IMPLICATION(with_sum, use_buffer) is false): "nothing to read from the
//     accumulator", beta = 1.
//   src/cpu/x64/jit_brgemm_post_ops.hpp:286-310 (jit_brgemm_kernel_post_ops): the post-ops injector is still built
//     (with_sum && beta != 0), but with the eltwise injector's save_state = (alpha != 0) && with_eltwise = false, so
//     its preamble never loads the constant-table pointer into its reserved register rax
//     (injectors/jit_uni_eltwise_injector.cpp:111-124), and generate() (958-959) emits the table only when
//     alpha != 0. apply_post_ops (674) runs the injected eltwise anyway: it reads its constants through rax, which
//     holds the opmask value generate() moved there (878-904: (1 << (oc % 16)) - 1) or a saturation bound
//     (init_saturate_f32, 699-705): vmulps 0x580(%rax) at rax = 0xf for gelu_erf with oc = 4 -> SIGSEGV.
//   With use_buffer (a kh block smaller than kh, more than one ic block, or exec_base with width padding:
//   jit_brgemm_conv_utils.cpp:1096-1102) the po kernel has alpha = 1, loads and emits the table: no crash.
//   AMX (brgconv:avx512_core_amx) rejects dilation and paddings >= the kernel (init_conf), so no row is empty there.
//
// Build and run (Debian libdnnl-dev 2.6.3):
//   g++ -std=c++17 -O2 docs/repro/onednn_brgconv_empty_kernel_range.cpp -ldnnl -o brgconv_repro && ./brgconv_repro
// Modes:
//   ./brgconv_repro            the minimal draw: a 1x1 u8 image, a 2x1 kernel with H dilation 1 (oneDNN's: taps two
//                              rows apart), top and bottom padding 1, so the one output row's taps are rows -1 and 1;
//                              post-ops sum + eltwise_gelu_erf; executed in a forked child. Selects
//                              avx512_core_vnni with dnnl::set_max_cpu_isa unless DNNL_MAX_CPU_ISA caps it. Exit 0
//                              ("SIGSEGV: the defect is here") when the child dies of SIGSEGV, 1 when it completes
//                              ("no crash: fixed here"), 2 on a oneDNN error, 77 ("skipped: implementation ...")
//                              when the implementation is not brgconv:avx512_core* (below AVX512_CORE_VNNI).
//   ./brgconv_repro near       the minimal draw, fusediff's seed 30 and 36 draws and near misses (ih = 2, no top
//                              padding, no dilation, no sum, no eltwise; relu, f32 dst): each line says whether the
//                              child crashed; exit 0 when exactly the ones marked "crashes" do (77 as above).
//                              (Whether use_buffer is set depends on the blocking oneDNN picks, which depends on its
//                              thread count: not a near miss one can pin without fixing OMP_NUM_THREADS.)
//   ./brgconv_repro one KEY=VALUE...   one draw: mb ic oc ih iw kh kw sh sw dh dw (oneDNN's dilation) pt pb pl pr,
//                              src=u8|s8, sum=0|1, elt=gelu_erf|gelu_tanh|relu|elu|tanh|logistic|swish|hardswish|
//                              clip|linear|mish|soft_relu|none,
//                              dzp=0|1 (runtime destination zero point), szp=0|1, perch=0|1 (per-channel scales),
//                              dst=s8|u8|f32; prints the implementation, the scratchpad size, "crash SIGSEGV" or "ok".
#include <oneapi/dnnl/dnnl.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Draw {
  int mb = 1, ic = 1, oc = 1, ih = 1, iw = 1, kh = 2, kw = 1, sh = 1, sw = 1, dh = 1, dw = 0, pt = 1, pb = 1, pl = 0, pr = 0;
  std::string src = "u8", dst = "s8", elt = "gelu_erf";
  int sum = 1, dzp = 0, szp = 0, perch = 0;
  int oh() const { return (ih + pt + pb - ((kh - 1) * (dh + 1) + 1)) / sh + 1; }
  int ow() const { return (iw + pl + pr - ((kw - 1) * (dw + 1) + 1)) / sw + 1; }
};

dt Type(const std::string& s) { return s == "s8" ? dt::s8 : s == "u8" ? dt::u8 : dt::f32; }

bool Algorithm(const std::string& name, dnnl::algorithm* alg) {
  static const std::map<std::string, dnnl::algorithm> algs = {
      {"gelu_erf", dnnl::algorithm::eltwise_gelu_erf}, {"relu", dnnl::algorithm::eltwise_relu},
      {"tanh", dnnl::algorithm::eltwise_tanh},         {"logistic", dnnl::algorithm::eltwise_logistic},
      {"swish", dnnl::algorithm::eltwise_swish},       {"hardswish", dnnl::algorithm::eltwise_hardswish},
      {"clip", dnnl::algorithm::eltwise_clip},         {"linear", dnnl::algorithm::eltwise_linear},
      {"elu", dnnl::algorithm::eltwise_elu},           {"gelu_tanh", dnnl::algorithm::eltwise_gelu_tanh},
      {"mish", dnnl::algorithm::eltwise_mish},         {"soft_relu", dnnl::algorithm::eltwise_soft_relu}};
  const auto it = algs.find(name);
  if (it == algs.end()) return false;
  *alg = it->second;
  return true;
}

struct Outcome {
  std::string implementation;  // empty: oneDNN refused the draw (error holds why)
  std::string error;
  size_t scratchpad = 0;
  int signal = 0;    // the child's fatal signal, 0 when it completed
  int y0 = 0;        // the first output (when completed)
};

// Creates the primitive here (so the implementation is known) and executes it in a forked child.
Outcome Run(const Draw& d) {
  using namespace dnnl;
  Outcome out;
  engine eng(engine::kind::cpu, 0);
  const memory::desc src({d.mb, d.ic, d.ih, d.iw}, Type(d.src), tag::nhwc);
  const memory::desc wei({d.oc, d.ic, d.kh, d.kw}, dt::s8, tag::any);
  const memory::desc bia({d.oc}, dt::f32, tag::x);
  const memory::desc dst({d.mb, d.oc, d.oh(), d.ow()}, Type(d.dst), tag::nhwc);
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  if (d.perch) attr.set_output_scales(2, std::vector<float>(static_cast<size_t>(d.oc), 0.05f));
  else attr.set_output_scales(0, {0.05f});
  if (d.dzp) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  if (d.szp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  post_ops po;
  if (d.sum) po.append_sum(0.5f, d.dst == "f32" ? 0 : 1, Type(d.dst));
  algorithm alg;
  if (d.elt != "none") {
    if (!Algorithm(d.elt, &alg)) { out.error = "unknown eltwise " + d.elt; return out; }
    po.append_eltwise(1.0f, alg, 0.5f, 2.0f);
  }
  attr.set_post_ops(po);
  convolution_forward::primitive_desc pd;
  try {
    pd = convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src, wei, bia, dst,
                                  {d.sh, d.sw}, {d.dh, d.dw}, {d.pt, d.pl}, {d.pb, d.pr}),
        attr, eng);
  } catch (const error& e) {
    out.error = e.what();
    return out;
  }
  out.implementation = pd.impl_info_str();
  out.scratchpad = pd.scratchpad_desc().get_size();
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) { out.error = "pipe failed"; return out; }
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fd[0]);
    stream s(eng);
    memory sm(pd.src_desc(), eng), wm(pd.weights_desc(), eng), bm(pd.bias_desc(), eng), dm(pd.dst_desc(), eng),
        sp(pd.scratchpad_desc(), eng);
    std::memset(sm.get_data_handle(), 3, pd.src_desc().get_size());
    std::memset(wm.get_data_handle(), 1, pd.weights_desc().get_size());
    std::memset(bm.get_data_handle(), 0, pd.bias_desc().get_size());
    std::memset(dm.get_data_handle(), 0, pd.dst_desc().get_size());  // the sum's previous dst: 0
    int32_t zp = 2;
    memory zpm({{1}, dt::s32, tag::x}, eng, &zp);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm},
                                         {DNNL_ARG_DST, dm}, {DNNL_ARG_SCRATCHPAD, sp}};
    if (d.dzp) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, zpm});
    if (d.szp) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zpm});
    convolution_forward(pd).execute(s, args);
    s.wait();
    const void* y = dm.get_data_handle();
    const int y0 = d.dst == "f32" ? static_cast<int>(*static_cast<const float*>(y))
                 : d.dst == "u8" ? *static_cast<const uint8_t*>(y) : *static_cast<const int8_t*>(y);
    if (write(pipe_fd[1], &y0, sizeof y0) != static_cast<ssize_t>(sizeof y0)) _exit(3);
    _exit(0);
  }
  close(pipe_fd[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  } else if (read(pipe_fd[0], &out.y0, sizeof out.y0) != static_cast<ssize_t>(sizeof out.y0)) {
    out.error = "the child exited without an output";
  }
  close(pipe_fd[0]);
  return out;
}

std::string Describe(const Outcome& o) {
  if (o.implementation.empty()) return "oneDNN error: " + o.error;
  std::string s = o.implementation + " scratchpad " + std::to_string(o.scratchpad) + ": ";
  if (o.signal == SIGSEGV) return s + "crash SIGSEGV";
  if (o.signal != 0) return s + "crash signal " + std::to_string(o.signal);
  if (!o.error.empty()) return s + o.error;
  return s + "ok, y[0] = " + std::to_string(o.y0);
}

bool IsBrgconv(const std::string& impl) {
  return impl.rfind("brgconv:avx512_core", 0) == 0 && impl.find("amx") == std::string::npos;
}

// Caps oneDNN at avx512_core_vnni before its first dispatch, unless DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA does.
void SelectIsa() {
  if (std::getenv("DNNL_MAX_CPU_ISA") == nullptr && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
    dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_vnni);
  }
}

bool Parse(Draw* d, const char* arg) {
  const char* eq = std::strchr(arg, '=');
  if (eq == nullptr) return false;
  const std::string key(arg, eq), value(eq + 1);
  const std::map<std::string, int*> ints = {{"mb", &d->mb}, {"ic", &d->ic}, {"oc", &d->oc}, {"ih", &d->ih},
                                            {"iw", &d->iw}, {"kh", &d->kh}, {"kw", &d->kw}, {"sh", &d->sh},
                                            {"sw", &d->sw}, {"dh", &d->dh}, {"dw", &d->dw}, {"pt", &d->pt},
                                            {"pb", &d->pb}, {"pl", &d->pl}, {"pr", &d->pr}, {"sum", &d->sum},
                                            {"dzp", &d->dzp}, {"szp", &d->szp}, {"perch", &d->perch}};
  if (const auto it = ints.find(key); it != ints.end()) {
    *it->second = std::atoi(value.c_str());
    return true;
  }
  if (key == "src") d->src = value;
  else if (key == "dst") d->dst = value;
  else if (key == "elt") d->elt = value;
  else return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "minimal";
  SelectIsa();
  const dnnl_version_t* v = dnnl_version();
  std::printf("oneDNN %d.%d.%d (%s)\n", v->major, v->minor, v->patch, v->hash);
  if (mode == "one") {
    Draw d;
    for (int a = 2; a < argc; ++a) {
      if (!Parse(&d, argv[a])) { std::fprintf(stderr, "bad argument %s\n", argv[a]); return 2; }
    }
    const Outcome o = Run(d);
    std::printf("%s\n", Describe(o).c_str());
    return o.implementation.empty() ? 2 : 0;
  }
  if (mode != "minimal" && mode != "near") {
    std::fprintf(stderr, "usage: %s [minimal|near|one KEY=VALUE...]\n", argv[0]);
    return 2;
  }
  const Draw minimal;
  const Outcome o = Run(minimal);
  std::printf("minimal draw: u8 1x1x1x1, kernel 2x1, dilation 1x0 (oneDNN's), padding 1,0,1,0; sum + eltwise_gelu_erf: %s\n",
              Describe(o).c_str());
  if (o.implementation.empty()) return 2;
  if (!IsBrgconv(o.implementation)) {
    std::printf("skipped: implementation %s; the draw is for brgconv:avx512_core* (AVX512_CORE_VNNI)\n",
                o.implementation.c_str());
    return 77;
  }
  if (mode == "minimal") {
    if (o.signal == SIGSEGV) {
      std::printf("SIGSEGV: the defect is here\n");
      return 0;
    }
    std::printf(o.signal == 0 && o.error.empty() ? "no crash: fixed here\n" : "a different failure\n");
    return 1;
  }
  // near: the minimal draw and draws one condition away from it.
  struct Near {
    const char* what;
    bool crashes;
    Draw d;
  };
  std::vector<Near> near;
  near.push_back({"the minimal draw", true, minimal});
  Draw d = minimal;
  d.ih = 2; d.pb = 0; near.push_back({"ih = 2 (row 1 is a tap)", false, d});
  d = minimal; d.pt = 0; d.pb = 2; near.push_back({"no top padding (row 0 is a tap)", false, d});
  d = minimal; d.dh = 0; d.pb = 0; near.push_back({"no dilation (row 0 is a tap)", false, d});
  d = minimal; d.sum = 0; near.push_back({"no sum post-op", false, d});
  d = minimal; d.elt = "none"; near.push_back({"no eltwise post-op", false, d});
  d = minimal; d.elt = "relu"; near.push_back({"eltwise_relu", true, d});
  d = minimal; d.dzp = 1; d.perch = 1; d.dst = "f32"; near.push_back({"f32 dst, per-channel scales, dst zero point", true, d});
  d = minimal; d.mb = 3; d.ic = 4; d.oc = 4; d.iw = 8; d.kw = 3; d.sw = 2; d.pr = 1; d.dzp = 1; d.perch = 1;
  near.push_back({"fusediff seed 30's draw (mb3 ic4 oc4 iw8 kw3 sw2)", true, d});
  d = minimal; d.mb = 3; d.ic = 6; d.oc = 4; d.iw = 9; d.kw = 2; d.dw = 1; d.pl = 1; d.dzp = 1; d.perch = 1;
  near.push_back({"fusediff seed 36's draw (mb3 ic6 oc4 iw9 kw2 dw1 pw1)", true, d});
  int wrong = 0;
  for (const Near& n : near) {
    const Outcome r = Run(n.d);
    const bool crashed = r.signal == SIGSEGV;
    const bool as_expected = !r.implementation.empty() && crashed == n.crashes;
    wrong += !as_expected;
    std::printf("%-55s %-8s %s%s\n", n.what, n.crashes ? "crashes" : "runs", Describe(r).c_str(),
                as_expected ? "" : "  UNEXPECTED");
  }
  std::printf(wrong == 0 ? "near misses: as expected\n" : "near misses: %d unexpected\n", wrong);
  return wrong == 0 ? 0 : 1;
}
