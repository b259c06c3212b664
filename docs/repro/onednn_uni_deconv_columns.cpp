// Standalone reproduction: oneDNN 2.6.3's jit_uni_deconv (AVX2, AVX2_VNNI, SSE41 int8 deconvolution) computes the
// taps its register blocks schedule, which with output padding passed as a negative right padding (PyTorch's
// mapping) is not the definition: a last full block reads input column iw, one pixel past the row (the next row's
// first pixel, or past the source buffer for the last row), and some geometries skip a tap (docs/onednn.md,
// "jit_uni_deconv reads the columns its blocks schedule"). Plain C++ against dnnl.hpp; no fusediff code.
//
// Cause (v2.6.3 src/cpu/x64/jit_uni_x8s8s32x_deconvolution.cpp): init_conf (lines 274-322) picks ur_w, generate()
// (1304-1352) calls the blocks with l_overflow / r_overflow1 / r_overflow, compute_ker computes tap ki for block
// columns in [get_ow_start, get_ow_end) (455-475) with (jj + l_pad - ki) % stride == 0; get_ow_end removes a negative
// r_pad only for a block as wide as the row or the tail (468), r_overflow1 ignores it.
//
// The repro owns the source buffer and writes a known tail after it, so a read past the input is deterministic, and
// Schedule() below is that logic: the library must equal "bias + sum over the scheduled taps", reading past the row.
//
// Build and run (Debian libdnnl-dev 2.6.3):
//   g++ -std=c++17 -O2 docs/repro/onednn_uni_deconv_columns.cpp -ldnnl -o uni_deconv && ./uni_deconv
// Modes (AVX2 is selected with dnnl::set_max_cpu_isa unless DNNL_MAX_CPU_ISA caps it):
//   ./uni_deconv          the minimal case: exit 0 when the library reads past the row as scheduled, 1 when it
//                         computes the definition (a fixed oneDNN) or something else, 77 without jit_uni_deconv
//   ./uni_deconv sweep    every small W geometry, with and without a source zero point: draws, wrong draws, wrong
//                         draws the schedule explains, right draws it mispredicts
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// A ConvTranspose2D with stride 1 in H (the W direction alone), NHWC, u8 source, s32 destination.
struct Geometry {
  int n = 1, c = 2, k = 8, ih = 1, iw = 3, kh = 1, kw = 3, sw = 2, dw = 1, pl = 1, pr = 0, opw = 1;
  int oh() const { return ih + kh - 1; }
  int ow() const { return (iw - 1) * sw - pl - pr + (kw - 1) * dw + opw + 1; }
};

// The register blocks of a row (init_conf, generate): width, l_overflow, r_overflow of each; empty when none fits.
struct Block {
  int width, lo, ro;
};
std::vector<Block> Blocks(const Geometry& g, int regs, int oc_block, int* tail_out) {
  const int ow = g.ow(), s = g.sw, ext = (g.kw - 1) * g.dw, l_pad = g.pl, r_pad = g.pr - g.opw;
  const int nb_oc = (g.k + oc_block - 1) / oc_block;
  int nbo = std::min(4, nb_oc);
  for (; nbo > 1; --nbo) {
    if (nb_oc % nbo == 0 && l_pad <= regs / (nbo + 1)) break;
  }
  int ur_w = regs / (nbo + 1), tail = 0;
  const int l_ovf = std::max(0, (ext - l_pad) / s);
  if (ow < ur_w) {
    ur_w = ow;
  } else {
    for (; ur_w >= 1; --ur_w) {
      tail = ow % ur_w;
      const int r_no_tail = std::max(0, (ext - std::max(0, r_pad) - tail) / s);
      if (ur_w % s == 0 && ur_w >= l_ovf * s && ur_w >= r_no_tail * s) break;
      if (ur_w == 1) return {};
    }
  }
  *tail_out = tail;
  const int r_ovf = std::max(0, (ext - std::max(0, r_pad)) / s);
  const int r_ovf1 = std::max(0, (ext - std::max(0, r_pad) - tail) / s);
  const int nur_w = ow / ur_w - (r_ovf1 > 0 ? 1 : 0);
  std::vector<Block> blocks;
  if (ur_w == ow) return {{ur_w, l_ovf, r_ovf}};
  if (nur_w == 0) {
    blocks.push_back({ur_w, l_ovf, r_ovf1});
  } else {
    int done = 0;
    if (l_ovf > 0) blocks.push_back({ur_w, l_ovf, 0}), ++done;
    if ((l_ovf <= 0 && nur_w > 0) || (l_ovf > 0 && nur_w > 1)) {
      do blocks.push_back({ur_w, 0, 0}); while (++done < nur_w);
    }
    if (r_ovf1 > 0) blocks.push_back({ur_w, 0, r_ovf1});
  }
  if (tail) blocks.push_back({tail, 0, r_ovf});
  return blocks;
}

// The source column the kernel reads for (ox, kx), INT_MIN where it computes nothing (compute_ker).
std::vector<int> Schedule(const Geometry& g, int regs, int oc_block, bool signed_or_zp) {
  int tail = 0;
  const std::vector<Block> blocks = Blocks(g, regs, oc_block, &tail);
  if (blocks.empty()) return {};
  const int ow = g.ow(), s = g.sw, kw = g.kw, d = g.dw, l_pad = g.pl, r_pad = g.pr - g.opw;
  std::vector<int> reads(static_cast<size_t>(ow) * kw, INT_MIN);
  int origin = 0;
  for (const Block& b : blocks) {
    const int width = (b.width == ow || b.width == tail) ? b.width + std::min(0, r_pad) : b.width;
    for (int ki = 0; ki < kw; ++ki) {
      int start = (ow - 1 + r_pad) % s + b.lo * s - (kw - 1 - ki) * d;
      while (start < 0) start += s;
      int res = (width - 1 + l_pad) % s + b.ro * s - ki * d;
      while (res < 0) res += s;
      for (int jj = start; jj < width - res && origin + jj < ow; ++jj) {
        if ((jj + l_pad - ki) % s != 0 || (!signed_or_zp && (jj - start) % s != 0)) continue;
        reads[static_cast<size_t>(origin + jj) * kw + ki] = (origin + jj + l_pad - ki * d) / s;
      }
    }
    origin += b.width;
  }
  return reads;
}

struct Outcome {
  std::string implementation;
  bool ran = false, wrong = false, as_scheduled = false;
};

// bias 0 + sum over the taps of (x - zp) * w, the taps by definition (`reads` empty) or as scheduled.
long long Accumulator(const Geometry& g, const std::vector<uint8_t>& x, const std::vector<int8_t>& w, int zp,
                      const std::vector<int>* reads, int n, int oy, int ox, int k) {
  long long acc = 0;
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = oy - ky;
    if (iy < 0 || iy >= g.ih) continue;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int shifted = ox + g.pl - kx * g.dw;
      int ix = shifted >= 0 && shifted % g.sw == 0 && shifted / g.sw < g.iw ? shifted / g.sw : INT_MIN;
      if (reads) ix = (*reads)[static_cast<size_t>(ox) * g.kw + kx];
      if (ix == INT_MIN) continue;
      for (int c = 0; c < g.c; ++c) {  // a column past the row reads the next pixels in memory (NHWC)
        acc += (x[((static_cast<size_t>(n) * g.ih + iy) * g.iw + ix) * g.c + c] - zp) *
               static_cast<long long>(w[((static_cast<size_t>(k) * g.kh + ky) * g.kw + kx) * g.c + c]);
      }
    }
  }
  return acc;
}

// Runs one draw (u8 source with a known tail past it, even weights in [-62, 62]: exact without VNNI too).
Outcome Run(const Geometry& g, int zp, std::mt19937& rng) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const memory::desc src({g.n, g.c, g.ih, g.iw}, dt::u8, tag::nhwc), dst({g.n, g.k, g.oh(), g.ow()}, dt::s32, tag::nhwc);
  const memory::desc wei_any({g.k, g.c, g.kh, g.kw}, dt::s8, tag::any), wei_user({g.k, g.c, g.kh, g.kw}, dt::s8, tag::ohwi);
  dnnl::primitive_attr attr;
  if (zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  Outcome o;
  std::unique_ptr<dnnl::deconvolution_forward::primitive_desc> pd;
  try {
    pd = std::make_unique<dnnl::deconvolution_forward::primitive_desc>(
        dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src,
                                          wei_any, dst, {1, g.sw}, {0, g.dw - 1}, {0, g.pl}, {0, g.pr - g.opw}),
        attr, eng);
  } catch (const dnnl::error&) {
    return o;
  }
  o.implementation = pd->impl_info_str();
  if (o.implementation.find("jit_uni_deconv") != 0) return o;
  const size_t nin = static_cast<size_t>(g.n) * g.ih * g.iw * g.c, tail = 256;
  std::vector<uint8_t> x(nin + tail);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i < nin ? rng() : 37 + 11 * (i - nin));
  std::vector<int8_t> w(static_cast<size_t>(g.k) * g.kh * g.kw * g.c);
  for (int8_t& v : w) v = static_cast<int8_t>(2 * (static_cast<int>(rng() % 63) - 31));
  std::vector<int32_t> y(static_cast<size_t>(g.n) * g.oh() * g.ow() * g.k);
  memory sm(src, eng, x.data()), wu(wei_user, eng, w.data()), dm(dst, eng, y.data()), wm(pd->weights_desc(), eng);
  dnnl::reorder(wu, wm).execute(strm, wu, wm);
  int32_t z = zp;
  memory zm({{1}, dt::s32, tag::x}, eng, &z);
  dnnl::deconvolution_forward(*pd).execute(strm, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm},
                                                  {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zm}});
  strm.wait();
  const bool avx2 = o.implementation.find("avx2") != std::string::npos;
  const bool vnni = o.implementation.find("vnni") != std::string::npos;
  const std::vector<int> reads = Schedule(g, vnni ? 14 : 12, avx2 ? 8 : 4, zp != 0);
  o.ran = true;
  o.as_scheduled = !reads.empty();
  for (int n = 0; n < g.n; ++n)
    for (int oy = 0; oy < g.oh(); ++oy)
      for (int ox = 0; ox < g.ow(); ++ox)
        for (int k = 0; k < g.k; ++k) {
          const long long got = y[((static_cast<size_t>(n) * g.oh() + oy) * g.ow() + ox) * g.k + k];
          o.wrong = o.wrong || got != Accumulator(g, x, w, zp, nullptr, n, oy, ox, k);
          o.as_scheduled = o.as_scheduled && !reads.empty() && got == Accumulator(g, x, w, zp, &reads, n, oy, ox, k);
        }
  return o;
}

int Sweep(std::mt19937& rng, const dnnl_version_t* v) {
  long draws = 0, wrong = 0, explained = 0, mispredicted = 0;
  std::string implementation;
  for (int zp : {0, 7})
    for (int dw = 1; dw <= 2; ++dw)
      for (int kw = 1; kw <= 3; ++kw)
        for (int s = 1; s <= 3; ++s)
          for (int pl = 0; pl < kw; ++pl)
            for (int pr = 0; pr < kw; ++pr)
              for (int opw = 0; opw < std::max(s, dw); ++opw)
                for (int iw = 1; iw <= 6; ++iw) {
                  const Geometry g{2, 3, 5, 2, iw, 2, kw, s, dw, pl, pr, opw};
                  if (g.ow() < 1) continue;
                  const Outcome o = Run(g, zp, rng);
                  if (!o.ran) continue;
                  implementation = o.implementation;
                  ++draws;
                  wrong += o.wrong;
                  explained += o.wrong && o.as_scheduled;
                  mispredicted += !o.wrong && !o.as_scheduled;
                }
  std::printf("oneDNN %d.%d.%d %s: %ld draws, %ld wrong, %ld of them as scheduled, %ld right draws mispredicted\n",
              v->major, v->minor, v->patch, implementation.c_str(), draws, wrong, explained, mispredicted);
  return explained == wrong && mispredicted == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "minimal";
  if (std::getenv("DNNL_MAX_CPU_ISA") == nullptr && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
    dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
  }
  std::mt19937 rng(5);
  const dnnl_version_t* v = dnnl_version();
  if (mode == "sweep") return Sweep(rng, v);
  if (mode != "minimal") {
    std::fprintf(stderr, "usage: uni_deconv [minimal|sweep]\n");
    return 2;
  }
  // 1x3 input, 2 -> 8 channels, kernel 1x3, stride 1x2, left padding 1, output padding 0x1 (right padding -1).
  const Outcome o = Run(Geometry{}, 0, rng);
  std::printf("oneDNN %d.%d.%d %s: ConvTranspose2D iw 3, kw 3, stride 2, left padding 1, output padding 1\n", v->major,
              v->minor, v->patch, o.implementation.c_str());
  if (!o.ran) {
    std::printf("skipped: implementation %s is not jit_uni_deconv\n", o.implementation.c_str());
    return 77;
  }
  if (o.wrong && o.as_scheduled) {
    std::printf("defect: the last block reads input column iw, past the row, as its schedule says\n");
    return 0;
  }
  std::printf(o.wrong ? "wrong, but not as scheduled\n" : "correct: the defect is fixed here\n");
  return 1;
}
