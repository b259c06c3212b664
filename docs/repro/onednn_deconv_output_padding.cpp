// Standalone reproduction: oneDNN 2.6.3's int8 jit deconvolution drops the taps of the last input column when
// output padding is passed, as PyTorch passes it, as a negative right padding (docs/onednn.md, "The deconvolution
// defect"). Plain C++ against dnnl.hpp; no fusediff code.
//
// Build and run (Debian libdnnl-dev 2.6.3):
//   g++ -std=c++17 -O2 docs/repro/onednn_deconv_output_padding.cpp -ldnnl -o deconv_repro && ./deconv_repro
// Modes:
//   ./deconv_repro            the minimal case on jit_deconvolution:avx512_core_vnni (selected with
//                             dnnl::set_max_cpu_isa unless DNNL_MAX_CPU_ISA caps it: AVX512_CORE reaches
//                             jit_deconvolution:avx512_core, which has it too); exit 0 when oneDNN shows the defect,
//                             1 when it computes the reference (a fixed oneDNN), 2 on a oneDNN error, 77 when this
//                             CPU reaches no jit_deconvolution:avx512_core* (no AVX-512: nothing to show)
//   ./deconv_repro amx        the same draw on the AMX kernel (jit_deconvolution:avx512_core_amx*): exit 0 when it
//                             computes the reference, 1 when it shows the defect, 77 without AMX
//   ./deconv_repro sweep [narrow]   every small geometry: per implementation, how many draws are wrong, and whether each
//                             wrong draw equals the model "input column iw-1 contributes nothing" (prints counts);
//                             `narrow`: even weights in [-62, 62], exact on the pre-VNNI kernels too
//   ./deconv_repro one IW KW SW PL OPW OC SRC ZP [IH KH SH OPH]   one geometry, every output printed
//                             (DECONV_REPRO_NARROW=1: the narrow weights)
// Run under DNNL_MAX_CPU_ISA=AVX512_CORE / AVX2 / SSE41 to reach the other implementations.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Geometry {
  int ih = 1, iw = 1, kh = 1, kw = 2, sh = 1, sw = 2, pt = 0, pl = 0, oph = 0, opw = 1;
  int ic = 1, oc = 1;
  bool s8_src = false;
  int zp = 0;
  int oh() const { return (ih - 1) * sh - 2 * pt + kh + oph; }  // symmetric padding pt/pt, pl/pl as PyTorch
  int ow() const { return (iw - 1) * sw - 2 * pl + kw + opw; }
};

// Deterministic small values (no <random>: the same on every libstdc++).
int32_t Value(uint32_t i, uint32_t salt, int lo, int hi) {
  uint32_t x = i * 2654435761u ^ (salt * 40503u + 0x9e3779b9u);
  x ^= x >> 15; x *= 2246822519u; x ^= x >> 13;
  return lo + static_cast<int32_t>(x % static_cast<uint32_t>(hi - lo + 1));
}

struct Result {
  std::vector<int32_t> library;    // oneDNN's s32 destination
  std::vector<int64_t> reference;  // bias + sum over taps of w * (x - zp)
  std::vector<int64_t> model;      // the same with input column iw-1 left out
  std::string implementation;
};

// One deconvolution through oneDNN (NHWC u8/s8 source, OIHW-logical s8 weights, s32 bias, runtime source zero
// point, s32 destination: the accumulators themselves) and through plain loops.
// Weights: full range [-127, 127], or with `narrow` even values in [-62, 62], which keeps the pre-VNNI kernels'
// int16 pair sums (2 * 255 * 63 < 32767) and their halved weights (w / 2 exact) exact, so only the deconvolution
// defect remains.
bool g_narrow_weights = false;

bool Run(const Geometry& g, Result* r) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const int oh = g.oh(), ow = g.ow();
  const memory::dims src_dims = {1, g.ic, g.ih, g.iw}, wei_dims = {g.oc, g.ic, g.kh, g.kw}, dst_dims = {1, g.oc, oh, ow};
  const memory::desc src_md(src_dims, g.s8_src ? dt::s8 : dt::u8, tag::nhwc);
  const memory::desc wei_any(wei_dims, dt::s8, tag::any), wei_user(wei_dims, dt::s8, tag::ohwi);
  const memory::desc bias_md({g.oc}, dt::s32, tag::x), dst_md(dst_dims, dt::s32, tag::nhwc);
  // PyTorch's mapping of output padding: the right (bottom) padding minus the output padding, here negative.
  const deconvolution_forward::desc desc(prop_kind::forward_inference, algorithm::deconvolution_direct, src_md, wei_any,
                                         bias_md, dst_md, {g.sh, g.sw}, {0, 0}, {g.pt, g.pl},
                                         {g.pt - g.oph, g.pl - g.opw});
  primitive_attr attr;
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  deconvolution_forward::primitive_desc pd;
  try {
    pd = deconvolution_forward::primitive_desc(desc, attr, eng);
  } catch (const error& e) {
    return false;
  }
  r->implementation = pd.impl_info_str();
  std::vector<uint8_t> src(static_cast<size_t>(g.ih) * g.iw * g.ic);
  for (size_t i = 0; i < src.size(); ++i) {
    const int32_t v = g.s8_src ? Value(i, 1, -128, 127) : Value(i, 1, 0, 255);
    src[i] = static_cast<uint8_t>(v);
  }
  std::vector<int8_t> wei(static_cast<size_t>(g.oc) * g.kh * g.kw * g.ic);  // OHWI
  for (size_t i = 0; i < wei.size(); ++i) wei[i] = static_cast<int8_t>(g_narrow_weights ? 2 * Value(i, 2, -31, 31) : Value(i, 2, -127, 127));
  std::vector<int32_t> bias(g.oc);
  for (int k = 0; k < g.oc; ++k) bias[k] = Value(k, 3, -1000, 1000);
  std::vector<int32_t> dst(static_cast<size_t>(oh) * ow * g.oc, 0);
  int32_t zp = g.zp;
  memory src_m(src_md, eng, src.data()), wu(wei_user, eng, wei.data()), bias_m(bias_md, eng, bias.data());
  memory dst_m(dst_md, eng, dst.data());
  memory wei_m = wu;
  if (pd.weights_desc() != wei_user) {
    wei_m = memory(pd.weights_desc(), eng);
    reorder(wu, wei_m).execute(strm, wu, wei_m);
  }
  memory zp_m({{1}, dt::s32, tag::x}, eng, &zp);
  deconvolution_forward(pd).execute(strm, {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m}, {DNNL_ARG_BIAS, bias_m},
                                           {DNNL_ARG_DST, dst_m}, {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_m}});
  strm.wait();
  r->library = dst;
  // out[oy][ox][k] = bias[k] + sum_{iy,ix,ky,kx: oy = iy*sh - pt + ky, ox = ix*sw - pl + kx} w[k][ky][kx][c]*(x - zp)
  r->reference.assign(dst.size(), 0);
  r->model.assign(dst.size(), 0);
  for (int oy = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox)
      for (int k = 0; k < g.oc; ++k) {
        int64_t full = bias[k], dropped = bias[k];
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx) {
            const int ny = oy + g.pt - ky, nx = ox + g.pl - kx;
            if (ny < 0 || nx < 0 || ny % g.sh || nx % g.sw) continue;
            const int iy = ny / g.sh, ix = nx / g.sw;
            if (iy >= g.ih || ix >= g.iw) continue;
            for (int c = 0; c < g.ic; ++c) {
              const size_t si = (static_cast<size_t>(iy) * g.iw + ix) * g.ic + c;
              const int32_t x = g.s8_src ? static_cast<int8_t>(src[si]) : src[si];
              const int64_t term = int64_t{wei[((static_cast<size_t>(k) * g.kh + ky) * g.kw + kx) * g.ic + c]} * (x - zp);
              full += term;
              if (ix != g.iw - 1) dropped += term;
            }
          }
        const size_t o = (static_cast<size_t>(oy) * ow + ox) * g.oc + k;
        r->reference[o] = full;
        r->model[o] = dropped;
      }
  return true;
}

size_t Wrong(const Result& r) {
  size_t n = 0;
  for (size_t i = 0; i < r.library.size(); ++i) n += r.library[i] != r.reference[i];
  return n;
}
bool MatchesModel(const Result& r) {
  for (size_t i = 0; i < r.library.size(); ++i) if (r.library[i] != r.model[i]) return false;
  return true;
}

}  // namespace

// Caps oneDNN at `isa` before its first dispatch, unless DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA already does.
void SelectIsa(dnnl::cpu_isa isa) {
  if (std::getenv("DNNL_MAX_CPU_ISA") == nullptr && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
    dnnl::set_max_cpu_isa(isa);
  }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "minimal";
  g_narrow_weights = std::getenv("DECONV_REPRO_NARROW") != nullptr;  // `one`: the sweep's narrow weights
  if (mode == "minimal" || mode == "amx") {
    const bool amx = mode == "amx";
    SelectIsa(amx ? dnnl::cpu_isa::avx512_core_amx : dnnl::cpu_isa::avx512_core_vnni);
    // One input pixel x = 10 (zero point 0), kernel 1x2 with weights {3, 5}, stride 1x2, output padding 0x1, bias 1:
    // the reference outputs are 1 + 10*3 = 31, 1 + 10*5 = 51 and the bias alone, 1, in the padded column.
    using namespace dnnl;
    using tag = memory::format_tag;
    using dt = memory::data_type;
    engine eng(engine::kind::cpu, 0);
    stream strm(eng);
    const deconvolution_forward::desc desc(
        prop_kind::forward_inference, algorithm::deconvolution_direct, {{1, 1, 1, 1}, dt::u8, tag::nhwc},
        {{1, 1, 1, 2}, dt::s8, tag::any}, {{1}, dt::s32, tag::x}, {{1, 1, 1, 3}, dt::s32, tag::nhwc}, {1, 2}, {0, 0},
        {0, 0}, {0, -1});
    try {
      const deconvolution_forward::primitive_desc pd(desc, eng);
      uint8_t x = 10;
      int8_t w[2] = {3, 5};
      int32_t b = 1, y[3] = {-7, -7, -7};
      memory src_m(pd.src_desc(), eng, &x), wu({{1, 1, 1, 2}, dt::s8, tag::ohwi}, eng, w), bias_m(pd.bias_desc(), eng, &b);
      memory wei_m(pd.weights_desc(), eng), dst_m(pd.dst_desc(), eng, y);
      reorder(wu, wei_m).execute(strm, wu, wei_m);
      deconvolution_forward(pd).execute(strm, {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m}, {DNNL_ARG_BIAS, bias_m},
                                               {DNNL_ARG_DST, dst_m}});
      strm.wait();
      const dnnl_version_t* v = dnnl_version();
      const std::string impl = pd.impl_info_str();
      std::printf("oneDNN %d.%d.%d %s: y = {%d, %d, %d}, reference {31, 51, 1}\n", v->major, v->minor, v->patch,
                  impl.c_str(), y[0], y[1], y[2]);
      const bool expected_kernel = amx ? impl.find("jit_deconvolution:avx512_core_amx") == 0
                                       : impl == "jit_deconvolution:avx512_core_vnni" || impl == "jit_deconvolution:avx512_core";
      if (!expected_kernel) {
        std::printf("skipped: implementation %s; the draw is for %s\n", impl.c_str(),
                    amx ? "jit_deconvolution:avx512_core_amx* (AMX)" : "jit_deconvolution:avx512_core* (AVX-512)");
        return 77;
      }
      if (y[0] == 31 && y[1] == 51 && y[2] == 1) {
        std::printf(amx ? "correct: the defect is absent here\n" : "correct: the defect is fixed here\n");
        return amx ? 0 : 1;
      }
      if (y[0] == 1 && y[1] == 1 && y[2] == 1) {
        std::printf("defect: the taps of input column 0 are dropped\n");
        return amx ? 1 : 0;
      }
      std::printf("wrong, but not the known signature\n");
      return 1;
    } catch (const error& e) {
      std::printf("oneDNN error: %s\n", e.what());
      return 2;
    }
  }
  if (mode == "one") {
    if (argc < 10) { std::fprintf(stderr, "one IW KW SW PL OPW OC SRC(u8|s8) ZP [IH KH SH OPH]\n"); return 2; }
    Geometry g;
    g.iw = std::atoi(argv[2]); g.kw = std::atoi(argv[3]); g.sw = std::atoi(argv[4]); g.pl = std::atoi(argv[5]);
    g.opw = std::atoi(argv[6]); g.oc = std::atoi(argv[7]); g.s8_src = std::strcmp(argv[8], "s8") == 0;
    g.zp = std::atoi(argv[9]);
    if (argc >= 14) { g.ih = std::atoi(argv[10]); g.kh = std::atoi(argv[11]); g.sh = std::atoi(argv[12]); g.oph = std::atoi(argv[13]); }
    g.ic = 3;
    Result r;
    if (!Run(g, &r)) { std::printf("rejected\n"); return 2; }
    std::printf("%s ow=%d wrong=%zu model=%s\n", r.implementation.c_str(), g.ow(), Wrong(r), MatchesModel(r) ? "yes" : "no");
    for (size_t i = 0; i < r.library.size(); ++i) {
      std::printf("  [%zu] library %d reference %lld model %lld%s\n", i, r.library[i],
                  static_cast<long long>(r.reference[i]), static_cast<long long>(r.model[i]),
                  r.library[i] != r.reference[i] ? "  WRONG" : "");
    }
    return 0;
  }
  if (mode == "sweep") {
    g_narrow_weights = g_narrow_weights || (argc > 2 && std::strcmp(argv[2], "narrow") == 0);
    // Per implementation: draws, wrong draws, wrong draws the model explains, and the predicted rule's agreement.
    struct Tally { int draws = 0, wrong = 0, explained = 0, rule_hits = 0, rule_misses = 0; };
    std::map<std::string, Tally> tally;
    for (int iw = 1; iw <= 10; ++iw)
      for (int kw = 1; kw <= 3; ++kw)
        for (int sw = 1; sw <= 3; ++sw)
          for (int pl = 0; pl < kw; ++pl)
            for (int opw = 0; opw < sw; ++opw)
              for (int oc : {1, 8, 17})
                for (int src = 0; src < 2; ++src) {
                  Geometry g;
                  g.iw = iw; g.kw = kw; g.sw = sw; g.pl = pl; g.opw = opw; g.oc = oc; g.s8_src = src; g.ic = 3;
                  g.zp = src ? -3 : 7;
                  g.ih = 2; g.kh = 2; g.sh = 1;
                  if (g.ow() < 1) continue;
                  Result r;
                  if (!Run(g, &r)) continue;
                  Tally& t = tally[r.implementation];
                  ++t.draws;
                  const bool wrong = Wrong(r) > 0;
                  t.wrong += wrong;
                  t.explained += wrong && MatchesModel(r);
                  if (wrong) std::printf("wrong %s iw=%d kw=%d sw=%d pl=%d opw=%d oc=%d %s ow=%d: %zu of %zu, model %s\n",
                                         r.implementation.c_str(), iw, kw, sw, pl, opw, oc, src ? "s8" : "u8", g.ow(),
                                         Wrong(r), r.library.size(), MatchesModel(r) ? "yes" : "no");
                }
    for (const auto& [impl, t] : tally) {
      std::printf("%-40s draws %4d  wrong %4d  explained by the model %4d\n", impl.c_str(), t.draws, t.wrong, t.explained);
    }
    return 0;
  }
  std::fprintf(stderr, "usage: %s [minimal|sweep|one ...]\n", argv[0]);
  return 2;
}
