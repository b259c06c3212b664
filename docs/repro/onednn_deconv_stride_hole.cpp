// Standalone reproduction: oneDNN 2.6.3's int8 jit deconvolution (jit_deconvolution:avx512_core*, and
// jit_uni_deconv for avx2/sse41) reads weights past the end of its weights buffer on the output rows that no kernel
// row reaches ("stride holes" in H: stride_h > kh), when the source is u8 and no source zero-point attribute is
// set. Those rows should hold the bias alone; the library adds one spurious kernel row: source row ih_max times
// the bytes that follow the real kernel rows in the blocked weights (the next ic/oc block's weights, or whatever
// lies after the buffer). So its output depends on memory nobody wrote: nondeterministic from run to run
// (docs/onednn.md, "Stride-hole rows read past the weights"). Plain C++ against dnnl.hpp; no fusediff code.
//
// Cause (oneDNN v2.6.3 src/cpu/x64/jit_avx512_core_x8s8s32x_deconvolution.cpp): execute_forward_2d gives such a
// row kh_padding = kh_len = 0 and, for u8 without a source zero point, filt = weights + kh_lo * (kh stride) with
// kh_lo = (oj + t_pad) % stride_h >= kh. kh_loop's kh loop is a do-while whose `cmp(reg_kh, 0); je(skip_kh_loop)`
// guard is emitted only when signed_input || src_zero_point || dilate_h >= ih || min(t_pad, b_pad) < 0 ||
// (kh - 1) * (dilate_h + 1) < max(t_pad, b_pad); otherwise one kernel row is computed with kh_padding = 0.
// Fixed upstream by commit 9b877a2aa7 "cpu: x64: fix a segfault in int8 deconv" (first in v3.1), which adds
// `|| (jcp.kh < jcp.stride_h)` to that guard (same in jit_uni_x8s8s32x_deconvolution.cpp).
//
// The repro owns the blocked weights buffer and gives it a tail (bytes after weights_desc().get_size()) that it
// fills with a known pattern, so the out-of-bounds read is deterministic and its value is predicted exactly.
//
// Build and run (Debian libdnnl-dev 2.6.3):
//   g++ -std=c++17 -O2 docs/repro/onednn_deconv_stride_hole.cpp -ldnnl -o stride_hole && ./stride_hole
// Modes:
//   ./stride_hole             the minimal case under two tail patterns, on jit_deconvolution:avx512_core_vnni
//                             (selected with dnnl::set_max_cpu_isa unless DNNL_MAX_CPU_ISA caps it; a CPU without
//                             it dispatches lower, to kernels with the same defect); exit 0 when oneDNN shows the
//                             defect and its output equals the model, 1 when it computes the reference (a fixed
//                             oneDNN) or something else, 2 on a oneDNN error, 77 when the implementation is not a
//                             jit int8 deconvolution (the CPU lacks SSE4.1/AVX2/AVX-512: nothing to show)
//   ./stride_hole amx         the same draw on the AMX kernel (jit_deconvolution:avx512_core_amx*): exit 0 when it
//                             computes the reference under both tail patterns, 1 otherwise, 77 without AMX
//   ./stride_hole sweep       every small geometry x {u8 without zero point, u8 with zero point 0, s8}: per
//                             implementation, draws, wrong draws, wrong draws the rule predicts and the model
//                             explains, the second (signed / zero-point) defect's, wrong draws outside both
//   ./stride_hole one IH KH SH PT PB IW KW SW PL PR IC OC [u8|u8zp0|s8]   one geometry (oneDNN's paddings), every
//                             output under both tail patterns
//   ./stride_hole library     the minimal geometry with the weights buffer oneDNN allocates itself (as PyTorch and
//                             fusediff do), run 8 times: run under valgrind --tool=memcheck to see the read
//   ./stride_hole impls       the minimal geometry through every implementation oneDNN offers (the primitive
//                             descriptor's next_impl): which ones give the reference
// Run under DNNL_MAX_CPU_ISA=AVX2 / SSE41 to reach jit_uni_deconv.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
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

struct Geometry {
  int ih = 2, iw = 1, ic = 4, oc = 2, kh = 1, kw = 1, sh = 2, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int oh() const { return (ih - 1) * sh - pt - pb + kh; }
  int ow() const { return (iw - 1) * sw - pl - pr + kw; }
};

enum class Source { u8_no_zp, u8_zp0, s8 };
const char* Name(Source s) { return s == Source::u8_no_zp ? "u8, no zero point" : s == Source::u8_zp0 ? "u8, zero point 0" : "s8"; }

// Deterministic small values (no <random>: the same on every libstdc++).
int32_t Value(uint32_t i, uint32_t salt, int lo, int hi) {
  uint32_t x = i * 2654435761u ^ (salt * 40503u + 0x9e3779b9u);
  x ^= x >> 15; x *= 2246822519u; x ^= x >> 13;
  return lo + static_cast<int32_t>(x % static_cast<uint32_t>(hi - lo + 1));
}

// Weights (and tail bytes) are even values in [-62, 62]: the pre-VNNI kernels' int16 pair sums
// (2 * 255 * 62 < 32767) and their halved weights (s8 source: w / 2 exact) stay exact, so only this defect remains
// on every ISA.

// Byte offset of logical weight (o, i, h, w) in the blocked weights the implementation asked for (read from its
// descriptor: OIhw4i16o4i for jit_deconvolution, OIhw2i8o4i / OIhw4o4i for jit_uni_deconv on avx2 / sse41); h may
// exceed kh - 1: that is where the defect reads.
size_t BlockedOffset(const memory::desc& md, int o, int i, int h, int w) {
  const dnnl_blocking_desc_t& b = md.data.format_desc.blocking;
  const int64_t pos[4] = {o, i, h, w};
  int64_t block[4] = {1, 1, 1, 1};
  for (int k = 0; k < b.inner_nblks; ++k) block[b.inner_idxs[k]] *= b.inner_blks[k];
  int64_t offset = md.data.offset0, rem[4];
  for (int d = 0; d < 4; ++d) {
    offset += pos[d] / block[d] * b.strides[d];
    rem[d] = pos[d] % block[d];
  }
  int64_t inner = 0, step = 1;
  for (int k = b.inner_nblks - 1; k >= 0; --k) {
    const int d = static_cast<int>(b.inner_idxs[k]);
    inner += rem[d] % b.inner_blks[k] * step;
    rem[d] /= b.inner_blks[k];
    step *= b.inner_blks[k];
  }
  return static_cast<size_t>(offset + inner);
}

// The tail after the weights buffer: pattern p, except at the places of padded input channels (i >= ic). There the
// kernel multiplies source bytes that are not input (the next pixel's, or stale register contents) that no model
// can know; 0 there keeps the model exact where the spurious row lies wholly past the buffer.
void FillTail(const Geometry& g, const memory::desc& md, uint8_t* buffer, size_t size, size_t tail, int p) {
  for (size_t t = 0; t < tail; ++t) {
    buffer[size + t] = static_cast<uint8_t>(2 * Value(static_cast<uint32_t>(t), 100 + static_cast<uint32_t>(p), -31, 31));
  }
  const dnnl_dims_t& padded = md.data.padded_dims;
  for (int64_t o = 0; o < padded[0]; ++o)
    for (int64_t i = g.ic; i < padded[1]; ++i)
      for (int h = 0; h < g.kh + g.sh + 1; ++h)
        for (int w = 0; w < g.kw; ++w) {
          const size_t at = BlockedOffset(md, static_cast<int>(o), static_cast<int>(i), h, w);
          if (at >= size && at < size + tail) buffer[at] = 0;
        }
}

// The rule: the defect shows on a row no kernel row reaches, with a u8 source and no source zero-point attribute,
// where the kernel omits its kh guard (stride_h > kh, t_pad >= 0, b_pad >= 0).
bool RulePredicts(const Geometry& g, Source s) {
  return s == Source::u8_no_zp && g.sh > g.kh && g.pt >= 0 && g.pb >= 0 && (g.kh - 1) >= std::max(g.pt, g.pb);
}

struct Result {
  std::string implementation;
  std::vector<int32_t> library;    // oneDNN's s32 destination (NHWC)
  std::vector<int64_t> reference;  // bias + sum over taps of w * x
  std::vector<int64_t> model;      // where the rule predicts the defect: the reference plus, on rows no kernel row
                                   // reaches, the spurious row kh_lo; elsewhere the reference
  std::vector<bool> hole_row;      // per output row: no kernel row reaches it
};

struct Options {
  Source source = Source::u8_no_zp;
  int pattern = 0;           // tail pattern (only with own_weights)
  bool own_weights = true;   // the repro allocates the weights buffer (with a tail) or lets oneDNN allocate it
  int skip_impls = 0;        // take the primitive descriptor's n-th implementation
};

bool Run(const Geometry& g, const Options& opt, Result* r) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const int oh = g.oh(), ow = g.ow();
  const bool s8 = opt.source == Source::s8;
  const memory::desc src_md({1, g.ic, g.ih, g.iw}, s8 ? dt::s8 : dt::u8, tag::nhwc);
  const memory::desc wei_any({g.oc, g.ic, g.kh, g.kw}, dt::s8, tag::any), wei_user({g.oc, g.ic, g.kh, g.kw}, dt::s8, tag::ohwi);
  const memory::desc bias_md({g.oc}, dt::s32, tag::x), dst_md({1, g.oc, oh, ow}, dt::s32, tag::nhwc);
  primitive_attr attr;
  if (opt.source == Source::u8_zp0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  deconvolution_forward::primitive_desc pd;
  try {
    const deconvolution_forward::desc desc(prop_kind::forward_inference, algorithm::deconvolution_direct, src_md,
                                           wei_any, bias_md, dst_md, {g.sh, g.sw}, {0, 0}, {g.pt, g.pl}, {g.pb, g.pr});
    pd = deconvolution_forward::primitive_desc(desc, attr, eng);
    for (int k = 0; k < opt.skip_impls; ++k) if (!pd.next_impl()) return false;
  } catch (const error&) {
    return false;
  }
  r->implementation = pd.impl_info_str();
  std::vector<uint8_t> src(static_cast<size_t>(g.ih) * g.iw * g.ic);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(s8 ? Value(i, 1, -128, 127) : Value(i, 1, 0, 255));
  std::vector<int8_t> wei(static_cast<size_t>(g.oc) * g.kh * g.kw * g.ic);  // OHWI
  for (size_t i = 0; i < wei.size(); ++i) wei[i] = static_cast<int8_t>(2 * Value(i, 2, -31, 31));
  std::vector<int32_t> bias(g.oc);
  for (int k = 0; k < g.oc; ++k) bias[k] = Value(k, 3, -1000, 1000);
  std::vector<int32_t> dst(static_cast<size_t>(oh) * ow * g.oc, -77777);
  int32_t zp = 0;
  const memory::desc wei_md = pd.weights_desc();
  const size_t size = wei_md.get_size();
  // The tail covers every row the kernel can read: kh_lo < stride_h, so at most stride_h kernel rows past any
  // block's start, plus slack.
  const size_t tail = static_cast<size_t>(g.sh + 1) * g.kw * 256 + 4096;
  std::vector<uint8_t> storage;
  uint8_t* buffer = nullptr;
  memory wu(wei_user, eng, wei.data()), wei_m;
  if (opt.own_weights) {
    storage.assign(size + tail + 64, 0);
    buffer = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
    FillTail(g, wei_md, buffer, size, tail, opt.pattern);
    wei_m = memory(wei_md, eng, buffer);
  } else {
    wei_m = memory(wei_md, eng);
  }
  reorder(wu, wei_m).execute(strm, wu, wei_m);
  memory src_m(src_md, eng, src.data()), bias_m(bias_md, eng, bias.data()), dst_m(dst_md, eng, dst.data());
  memory zp_m({{1}, dt::s32, tag::x}, eng, &zp);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m}, {DNNL_ARG_BIAS, bias_m},
                                          {DNNL_ARG_DST, dst_m}};
  if (opt.source == Source::u8_zp0) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_m});
  deconvolution_forward(pd).execute(strm, args);
  strm.wait();
  r->library = dst;

  // Plain loops. out[oy][ox][k] = bias[k] + sum over (iy, ix, ky, kx) with oy = iy*sh - pt + ky,
  // ox = ix*sw - pl + kx of w[k][ky][kx][c] * x[iy][ix][c] (zero point 0).
  const auto x_at = [&](int iy, int ix, int c) -> int64_t {
    const uint8_t b = src[(static_cast<size_t>(iy) * g.iw + ix) * g.ic + c];
    return s8 ? int64_t{static_cast<int8_t>(b)} : int64_t{b};
  };
  // The model reads the bytes the kernel reads: the blocked buffer itself, and past its end the tail.
  const bool blocked = opt.own_weights && wei_md != wei_user;
  const auto byte_at = [&](size_t offset) -> int64_t {
    if (offset >= size + tail) { std::fprintf(stderr, "model reads past the tail\n"); std::exit(2); }
    return static_cast<int8_t>(buffer[offset]);
  };
  r->reference.assign(dst.size(), 0);
  r->model.assign(dst.size(), 0);
  r->hole_row.assign(oh, false);
  for (int oy = 0; oy < oh; ++oy) {
    bool reached = false;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int ny = oy + g.pt - ky;
      reached = reached || (ny >= 0 && ny % g.sh == 0 && ny / g.sh < g.ih);
    }
    r->hole_row[oy] = !reached;
    const int kh_lo = (oy + g.pt) % g.sh, ih_max = (oy + g.pt - kh_lo) / g.sh;
    for (int ox = 0; ox < ow; ++ox)
      for (int k = 0; k < g.oc; ++k) {
        int64_t acc = bias[k];
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx) {
            const int ny = oy + g.pt - ky, nx = ox + g.pl - kx;
            if (ny < 0 || nx < 0 || ny % g.sh || nx % g.sw || ny / g.sh >= g.ih || nx / g.sw >= g.iw) continue;
            for (int c = 0; c < g.ic; ++c)
              acc += int64_t{wei[((static_cast<size_t>(k) * g.kh + ky) * g.kw + kx) * g.ic + c]} * x_at(ny / g.sh, nx / g.sw, c);
          }
        const size_t o = (static_cast<size_t>(oy) * ow + ox) * g.oc + k;
        r->reference[o] = acc;
        int64_t spurious = 0;
        if (!reached && blocked && RulePredicts(g, opt.source) && ih_max < g.ih) {
          for (int kx = 0; kx < g.kw; ++kx) {
            const int nx = ox + g.pl - kx;
            if (nx < 0 || nx % g.sw || nx / g.sw >= g.iw) continue;
            for (int c = 0; c < g.ic; ++c) spurious += byte_at(BlockedOffset(wei_md, k, c, kh_lo, kx)) * x_at(ih_max, nx / g.sw, c);
          }
        }
        r->model[o] = acc + spurious;
      }
  }
  return true;
}

bool IsJitInt8Deconv(const std::string& impl) {
  return impl.rfind("jit_deconvolution:", 0) == 0 || impl.rfind("jit_uni_deconv", 0) == 0;
}

void Print(const Geometry& g, const Result& r) {
  const int ow = g.ow();
  for (int oy = 0; oy < g.oh(); ++oy)
    for (int ox = 0; ox < ow; ++ox)
      for (int k = 0; k < g.oc; ++k) {
        const size_t o = (static_cast<size_t>(oy) * ow + ox) * g.oc + k;
        std::printf("    y[oy=%d][ox=%d][k=%d] library %7d  reference %7lld  model %7lld%s%s\n", oy, ox, k, r.library[o],
                    static_cast<long long>(r.reference[o]), static_cast<long long>(r.model[o]),
                    r.hole_row[oy] ? "  (row no kernel row reaches)" : "",
                    r.library[o] != r.reference[o] ? "  WRONG" : "");
      }
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
  if (mode == "minimal") SelectIsa(dnnl::cpu_isa::avx512_core_vnni);
  if (mode == "amx") SelectIsa(dnnl::cpu_isa::avx512_core_amx);
  const dnnl_version_t* v = dnnl_version();
  // Minimal: 1x4 input pixels in 2 rows, 2 output channels, kernel 1x1, stride 2x1, no padding: 3 output rows;
  // row 1 is reached by no kernel row, so it must be the bias alone.
  const Geometry minimal;
  try {
    if (mode == "minimal") {
      Result a, b, zp0, s8;
      Options o;
      if (!Run(minimal, o, &a)) { std::printf("rejected\n"); return 2; }
      std::printf("oneDNN %d.%d.%d %s: deconvolution ih2 iw1 ic4 -> oc2, kernel 1x1, stride 2x1, pads 0; "
                  "u8 source, no source zero point, s32 destination\n", v->major, v->minor, v->patch,
                  a.implementation.c_str());
      if (!IsJitInt8Deconv(a.implementation)) {
        std::printf("skipped: implementation %s is not a jit int8 deconvolution\n", a.implementation.c_str());
        return 77;
      }
      o.pattern = 1;
      Run(minimal, o, &b);
      std::printf("  weights tail pattern 0:\n");
      Print(minimal, a);
      std::printf("  weights tail pattern 1:\n");
      Print(minimal, b);
      o.pattern = 0;
      o.source = Source::u8_zp0;
      Run(minimal, o, &zp0);
      o.source = Source::s8;
      Run(minimal, o, &s8);
      const bool zp0_right = zp0.library == std::vector<int32_t>(zp0.reference.begin(), zp0.reference.end());
      const bool s8_right = s8.library == std::vector<int32_t>(s8.reference.begin(), s8.reference.end());
      std::printf("  same draw with a source zero-point attribute of value 0: %s; with an s8 source: %s\n",
                  zp0_right ? "reference" : "WRONG", s8_right ? "reference" : "WRONG");
      const auto as64 = [](const std::vector<int32_t>& y) { return std::vector<int64_t>(y.begin(), y.end()); };
      const bool a_model = as64(a.library) == a.model, b_model = as64(b.library) == b.model;
      const bool wrong = as64(a.library) != a.reference && as64(b.library) != b.reference;
      if (wrong && a_model && b_model && a.library != b.library) {
        std::printf("defect: the row no kernel row reaches adds a kernel row read past the weights (output follows "
                    "the tail, equals the model under both patterns)\n");
        return 0;
      }
      if (as64(a.library) == a.reference && as64(b.library) == b.reference) {
        std::printf("correct: the defect is fixed here\n");
        return 1;
      }
      std::printf("wrong, but not the known signature (model %s/%s)\n", a_model ? "yes" : "no", b_model ? "yes" : "no");
      return 1;
    }
    if (mode == "amx") {
      Result a, b;
      Options o;
      if (!Run(minimal, o, &a)) { std::printf("rejected\n"); return 2; }
      std::printf("oneDNN %d.%d.%d %s: the minimal stride-hole draw (u8 source, no source zero point)\n", v->major,
                  v->minor, v->patch, a.implementation.c_str());
      if (a.implementation.find("jit_deconvolution:avx512_core_amx") != 0) {
        std::printf("skipped: implementation %s; the draw is for jit_deconvolution:avx512_core_amx* (AMX)\n",
                    a.implementation.c_str());
        return 77;
      }
      o.pattern = 1;
      Run(minimal, o, &b);
      const auto right = [](const Result& r) {
        return std::vector<int64_t>(r.library.begin(), r.library.end()) == r.reference;
      };
      Print(minimal, a);
      if (right(a) && right(b)) {
        std::printf("correct: the defect is absent here\n");
        return 0;
      }
      std::printf("wrong: the AMX kernel does not compute the reference\n");
      return 1;
    }
    if (mode == "one") {
      if (argc < 14) { std::fprintf(stderr, "one IH KH SH PT PB IW KW SW PL PR IC OC [u8|u8zp0|s8]\n"); return 2; }
      Geometry g;
      g.ih = std::atoi(argv[2]); g.kh = std::atoi(argv[3]); g.sh = std::atoi(argv[4]); g.pt = std::atoi(argv[5]);
      g.pb = std::atoi(argv[6]); g.iw = std::atoi(argv[7]); g.kw = std::atoi(argv[8]); g.sw = std::atoi(argv[9]);
      g.pl = std::atoi(argv[10]); g.pr = std::atoi(argv[11]); g.ic = std::atoi(argv[12]); g.oc = std::atoi(argv[13]);
      Options o;
      const std::string src = argc > 14 ? argv[14] : "u8";
      o.source = src == "s8" ? Source::s8 : src == "u8zp0" ? Source::u8_zp0 : Source::u8_no_zp;
      for (int p = 0; p < 2; ++p) {
        o.pattern = p;
        Result r;
        if (!Run(g, o, &r)) { std::printf("rejected\n"); return 2; }
        std::printf("%s %s, weights tail pattern %d:\n", r.implementation.c_str(), Name(o.source), p);
        Print(g, r);
      }
      return 0;
    }
    if (mode == "library") {
      // oneDNN allocates the weights (memory(desc, engine)) as PyTorch and fusediff do: run it 8 times.
      for (int run = 0; run < 8; ++run) {
        Options o;
        o.own_weights = false;
        Result r;
        if (!Run(minimal, o, &r)) { std::printf("rejected\n"); return 2; }
        std::printf("run %d %s row 1: library %d %d reference %lld %lld\n", run, r.implementation.c_str(),
                    r.library[2], r.library[3], static_cast<long long>(r.reference[2]),
                    static_cast<long long>(r.reference[3]));
        // Disturb the heap between runs, as a long process does.
        std::vector<std::vector<uint8_t>> noise;
        for (int k = 0; k < 16; ++k) noise.emplace_back(static_cast<size_t>(256 + 64 * k), static_cast<uint8_t>(run * 37 + k));
      }
      return 0;
    }
    if (mode == "impls") {
      // The iterator lists one implementation many times (one entry per instantiation): print each once.
      std::string last;
      for (int skip = 0; skip < 5000; ++skip) {
        Options o;
        o.skip_impls = skip;
        Result r;
        if (!Run(minimal, o, &r)) break;
        if (r.implementation == last) continue;
        last = r.implementation;
        const bool right = std::vector<int64_t>(r.library.begin(), r.library.end()) == r.reference;
        std::printf("%-36s %s\n", r.implementation.c_str(), right ? "reference" : "WRONG");
      }
      return 0;
    }
    if (mode == "sweep") {
      // Per implementation: draws; wrong draws (any output differs from the plain loops under either tail pattern)
      // split into: the rule predicts them and the model gives every output under both patterns; the rule predicts
      // them, only rows no kernel row reaches are wrong, but the model misses a value (the spurious row met real
      // weights at a padded channel's place: source bytes that are not input); the second defect (s8 source or a
      // source zero point, stride_h >= kh + 2, wrong on hole rows only; counted: how many give the same value under
      // both tails, and how many are wrong only on rows with (oy + t_pad) mod stride_h > kh); and wrong outside both.
      struct Tally {
        int draws = 0, wrong = 0, modelled = 0, unmodelled = 0, second = 0, second_same_under_both_tails = 0;
        int second_far_rows_only = 0, outside = 0, predicted_but_right = 0;
      };
      std::map<std::string, Tally> tally;
      for (int ih = 1; ih <= 3; ++ih)
        for (int kh = 1; kh <= 3; ++kh)
          for (int sh = 1; sh <= 4; ++sh)
            for (int pt = 0; pt < kh; ++pt)
              for (int pb = 0; pb < kh; ++pb)  // pb < 0: docs/repro/onednn_deconv_output_padding.cpp
                for (int kw = 1; kw <= 2; ++kw)
                  for (int sw = 1; sw <= 2; ++sw)
                    for (int ic : {3, 4, 16, 19})
                      for (int oc : {1, 17})
                        for (Source s : {Source::u8_no_zp, Source::u8_zp0, Source::s8}) {
                          Geometry g;
                          g.ih = ih; g.kh = kh; g.sh = sh; g.pt = pt; g.pb = pb; g.kw = kw; g.sw = sw; g.iw = 3;
                          g.ic = ic; g.oc = oc;
                          if (g.oh() < 1 || g.ow() < 1) continue;
                          Options o;
                          o.source = s;
                          Result r, r1;
                          if (!Run(g, o, &r)) continue;
                          o.pattern = 1;
                          Run(g, o, &r1);
                          Tally& t = tally[r.implementation];
                          ++t.draws;
                          const std::vector<int64_t> y(r.library.begin(), r.library.end()), y1(r1.library.begin(), r1.library.end());
                          // only_holes: every wrong output lies on a row no kernel row reaches; only_far_holes: on
                          // such a row with (oy + t_pad) mod stride_h > kh (the second defect, signed / zero-point path).
                          bool any_hole = false, only_holes = true, only_far_holes = true;
                          for (bool h : r.hole_row) any_hole = any_hole || h;
                          for (size_t e = 0; e < y.size(); ++e) {
                            const int row = static_cast<int>(e / (static_cast<size_t>(g.ow()) * g.oc));
                            if (y[e] == r.reference[e] && y1[e] == r1.reference[e]) continue;
                            if (!r.hole_row[row]) only_holes = false;
                            if (!r.hole_row[row] || (row + g.pt) % g.sh <= g.kh) only_far_holes = false;
                          }
                          const bool predicted = RulePredicts(g, s) && any_hole;
                          const bool wrong = y != r.reference || y1 != r1.reference;
                          t.wrong += wrong;
                          const char* what = nullptr;
                          if (wrong && predicted && y == r.model && y1 == r1.model) ++t.modelled;
                          else if (wrong && predicted && only_holes) { ++t.unmodelled; what = "predicted, value not modelled"; }
                          else if (wrong && s != Source::u8_no_zp && g.sh >= g.kh + 2 && only_holes) {
                            ++t.second;
                            t.second_same_under_both_tails += y == y1;
                            t.second_far_rows_only += only_far_holes;
                            what = "second defect (s8 / zero point, stride_h >= kh + 2, hole rows only)";
                          } else if (wrong) { ++t.outside; what = "OUTSIDE the rule"; }
                          if (what != nullptr) {
                            std::printf("%s: %s ih%d kh%d sh%d pt%d pb%d kw%d sw%d ic%d oc%d %s\n", what,
                                        r.implementation.c_str(), ih, kh, sh, pt, pb, kw, sw, ic, oc, Name(s));
                          }
                          if (!wrong && predicted) ++t.predicted_but_right;
                        }
      for (const auto& [impl, t] : tally) {
        std::printf("%-36s draws %5d  wrong %5d: predicted and modelled %5d, predicted but not modelled %4d, second "
                    "defect %4d (same under both tails %d, only rows (oy+pt)%%sh > kh %d), outside both %d; predicted "
                    "but right %d\n", impl.c_str(), t.draws, t.wrong, t.modelled, t.unmodelled, t.second,
                    t.second_same_under_both_tails, t.second_far_rows_only, t.outside, t.predicted_but_right);
      }
      return 0;
    }
  } catch (const dnnl::error& e) {
    std::printf("oneDNN error: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "usage: %s [minimal|sweep|library|impls]\n", argv[0]);
  return 2;
}
