// Standalone probe: what oneDNN 2.6.3's int8 convolutions compute without VNNI (docs/onednn.md, "On a CPU without
// VNNI"). Plain C++ against dnnl.hpp; no fusediff code.
//
// Build and run (Debian libdnnl-dev 2.6.3), once per ISA cap:
//   g++ -std=c++17 -O2 docs/repro/onednn_pre_vnni_int8.cpp -ldnnl -o pre_vnni && for isa in ALL AVX512_CORE AVX2 SSE41; do DNNL_MAX_CPU_ISA=$isa ./pre_vnni; done
//   ... ./pre_vnni rules [7bit]   random draws through each implementation family (jit conv, 1x1, jit deconvolution,
//   the forward gemm conv, ref deconvolution's gemm, inner product), u8 and s8 sources, with and without a source
//   zero point: how many draws equal each rule (docs/onednn.md, "Without VNNI: documented behaviour"); `7bit`:
//   weights in [-64, 63]
//
// Two probes per implementation (1x1 and 3x3 kernels), 16 input channels, 16 output channels, s32 destination (the
// accumulator itself), no zero points:
//   halving:    s8 source x = -128, weights -127 (odd): exact 16 * (-128) * (-127) = 260,096. A kernel that shifts
//               the source to u8 (+128) and halves the weights to stay clear of int16 saturation rounds -127 / 2
//               away, and gives 16 * (-128) * (-128) = 262,144 instead.
//   saturation: u8 source x = 255, weights 127: exact 16 * 255 * 127 = 518,160. vpmaddubsw adds the two products
//               of a channel pair in saturating int16: 2 * 255 * 127 = 64,770 -> 32,767, so 8 pairs give 262,136.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

struct Probe {
  long long acc;
  std::string implementation;
};

Probe Run(bool s8_src, int x, int w, int k) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const int c = 16, oc = 16;
  const memory::desc src_md({1, c, k, k}, s8_src ? dt::s8 : dt::u8, tag::nhwc);
  const memory::desc wei_any({oc, c, k, k}, dt::s8, tag::any), wei_user({oc, c, k, k}, dt::s8, tag::ohwi);
  const memory::desc dst_md({1, oc, 1, 1}, dt::s32, tag::nhwc);
  const convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_direct, src_md, wei_any,
                                       dst_md, {1, 1}, {0, 0}, {0, 0});
  const convolution_forward::primitive_desc pd(desc, eng);
  std::vector<uint8_t> src(static_cast<size_t>(c) * k * k, static_cast<uint8_t>(x));
  std::vector<int8_t> wei(static_cast<size_t>(oc) * c * k * k, static_cast<int8_t>(w));
  std::vector<int32_t> dst(oc, 0);
  memory src_m(src_md, eng, src.data()), wu(wei_user, eng, wei.data()), dst_m(dst_md, eng, dst.data());
  memory wei_m(pd.weights_desc(), eng);
  reorder(wu, wei_m).execute(strm, wu, wei_m);
  convolution_forward(pd).execute(strm, {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m}, {DNNL_ARG_DST, dst_m}});
  strm.wait();
  return {dst[0], pd.impl_info_str()};
}

}  // namespace

// ---- `rules`: random draws against the candidate rules ------------------------------------------------------------
// A problem: conv (3x3, pad 1), 1x1, deconv (3x3, stride 2), a dilated deconv (the gemm behind ref_deconvolution),
// gemm (a dilated conv through the forward gemm, reached with next_impl), ip (7 channels) and ip3 (a 3x3 source).
struct Problem {
  std::string kind;
  int c = 7, k = 5, h = 5, w = 5, kh = 3, kw = 3, s = 1, p = 1, d = 1;
  bool deconv() const { return kind == "deconv" || kind == "ddeconv"; }
  bool ip() const { return kind.rfind("ip", 0) == 0; }
  int oh() const {
    if (ip()) return 1;
    return deconv() ? (h - 1) * s - 2 * p + d * (kh - 1) + 1 : (h + 2 * p - (d * (kh - 1) + 1)) / s + 1;
  }
  int ow() const { return kind == "ip" || kind == "ip3" ? 1 : oh(); }
};
Problem MakeProblem(const std::string& kind) {
  Problem p;
  p.kind = kind;
  if (kind == "1x1") p.kh = p.kw = 1, p.p = 0;
  if (kind == "deconv") p.s = 2;
  if (kind == "ddeconv") p.s = 2, p.d = 2;
  if (kind == "gemm") p.d = 2, p.p = 2;
  if (kind == "ip") p.h = p.w = p.kh = p.kw = 1, p.p = 0, p.c = 37;
  if (kind == "ip3") p.h = p.w = p.kh = p.kw = 3, p.p = 0, p.c = 5;
  return p;
}

// The source pixel tap (ky, kx) of output (oy, ox) reads, or -1.
int SourceIndex(const Problem& p, int o, int t) {
  if (p.ip()) return t;
  const long shifted = p.deconv() ? static_cast<long>(o) + p.p - static_cast<long>(t) * p.d : 0;
  if (p.deconv()) return shifted < 0 || shifted % p.s != 0 || shifted / p.s >= p.h ? -1 : static_cast<int>(shifted / p.s);
  const long i = static_cast<long>(o) * p.s - p.p + static_cast<long>(t) * p.d;
  return i < 0 || i >= p.h ? -1 : static_cast<int>(i);
}
long Sat16(long v) { return std::min(32767L, std::max(-32768L, v)); }

enum Rule { kExact, kHalved, kPairsPerTap, kPairsFlattened, kPairsShiftedWeights, kRules };
const char* kRuleNames[kRules] = {"exact", "halved_weights", "int16_pairs_per_tap", "int16_pairs_flattened",
                                  "int16_pairs_shifted_weights"};

// Every rule's accumulator for one output: the products in (ky, kx, c) order, u the code as u8, s as s8.
void Rules(const Problem& p, const std::vector<uint8_t>& x, const std::vector<int8_t>& w, bool s8, int zp, int oy,
           int ox, int k, long out[kRules]) {
  std::vector<long> u_w, s_w_shifted, valid;
  long exact = 0, halved = 0;
  for (int ky = 0; ky < p.kh; ++ky)
    for (int kx = 0; kx < p.kw; ++kx) {
      const int iy = SourceIndex(p, oy, ky), ix = SourceIndex(p, ox, kx);
      for (int c = 0; c < p.c; ++c) {
        const long wv = w[((static_cast<size_t>(k) * p.kh + ky) * p.kw + kx) * p.c + c];
        const bool in = iy >= 0 && ix >= 0;
        const uint8_t byte = in ? x[(static_cast<size_t>(iy) * p.w + ix) * p.c + c] : 0;
        const long code = s8 ? static_cast<int8_t>(byte) : byte, u = in ? code + (s8 ? 128 : 0) : 0;
        u_w.push_back(u * wv);
        s_w_shifted.push_back(in ? (wv + 128) * (u - 128) : 0);
        valid.push_back(in);
        if (in) exact += (code - zp) * wv, halved += (code - zp) * 2 * std::lrint(std::nearbyint(wv / 2.0));
      }
    }
  const auto losses = [&](const std::vector<long>& products, bool per_tap) {
    long loss = 0;
    const size_t step = per_tap ? static_cast<size_t>(p.c) : products.size();
    for (size_t tap = 0; tap < products.size(); tap += step)
      for (size_t i = tap; i < tap + step; i += 2) {
        const long q = products[i] + (i + 1 < tap + step ? products[i + 1] : 0);
        loss += Sat16(q) - q;
      }
    return loss;
  };
  out[kExact] = exact;
  out[kHalved] = halved;
  out[kPairsPerTap] = exact + losses(u_w, true);
  out[kPairsFlattened] = exact + losses(u_w, false);
  out[kPairsShiftedWeights] = exact + losses(s_w_shifted, true);
}

// One draw through primitive descriptor `pd` advanced to the implementation whose name starts with `want`
// (next_impl); false when none. PrimitiveDesc is the primitive's own descriptor type (a concrete type: its iterator).
template <typename Primitive, typename PrimitiveDesc>
bool Execute(PrimitiveDesc& pd, const dnnl::engine& eng, const std::string& want, const dnnl::memory::desc& src,
             const dnnl::memory::desc& wei_user,
             const std::vector<uint8_t>& x, const std::vector<int8_t>& w, int zp, std::vector<int32_t>& y,
             std::string* impl) {
  using namespace dnnl;
  while (std::string(pd.impl_info_str()).rfind(want, 0) != 0) {
    if (!pd.next_impl()) return false;
  }
  *impl = pd.impl_info_str();
  stream strm(eng);
  std::vector<uint8_t> src_bytes = x;
  std::vector<int8_t> weights = w;
  memory sm(src, eng, src_bytes.data()), wu(wei_user, eng, weights.data()), wm(pd.weights_desc(), eng);
  memory dm(pd.dst_desc(), eng, y.data());
  reorder(wu, wm).execute(strm, wu, wm);
  int32_t z = zp;
  memory zm({{1}, memory::data_type::s32, memory::format_tag::x}, eng, &z);
  Primitive(pd).execute(strm, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm},
                               {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zm}});
  strm.wait();
  return true;
}

bool RunProblem(const Problem& p, const std::string& want, bool s8, int zp, const std::vector<uint8_t>& x,
                const std::vector<int8_t>& w, std::vector<int32_t>& y, std::string* impl) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  const memory::desc src({1, p.c, p.h, p.w}, s8 ? dt::s8 : dt::u8, tag::nhwc);
  const memory::desc wei_any({p.k, p.c, p.kh, p.kw}, dt::s8, tag::any), wei_user({p.k, p.c, p.kh, p.kw}, dt::s8, tag::ohwi);
  const memory::desc dst({1, p.k, p.oh(), p.ow()}, dt::s32, tag::nhwc), ip_dst({1, p.k}, dt::s32, tag::nc);
  const memory::dims strides = {p.s, p.s}, dilates = {p.d - 1, p.d - 1}, padding = {p.p, p.p};
  primitive_attr attr;
  if (zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  try {
    if (p.ip()) {
      inner_product_forward::primitive_desc pd(
          inner_product_forward::desc(prop_kind::forward_inference, src, wei_any, ip_dst), attr, eng);
      return Execute<inner_product_forward>(pd, eng, want, src, wei_user, x, w, zp, y, impl);
    }
    if (p.deconv()) {
      deconvolution_forward::primitive_desc pd(
          deconvolution_forward::desc(prop_kind::forward_inference, algorithm::deconvolution_direct, src, wei_any, dst,
                                      strides, dilates, padding, padding),
          attr, eng);
      return Execute<deconvolution_forward>(pd, eng, want, src, wei_user, x, w, zp, y, impl);
    }
    convolution_forward::primitive_desc pd(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src, wei_any, dst, strides,
                                  dilates, padding, padding),
        attr, eng);
    return Execute<convolution_forward>(pd, eng, want, src, wei_user, x, w, zp, y, impl);
  } catch (const error& e) {
    if (std::getenv("PRE_VNNI_VERBOSE")) std::printf("%s: %s\n", p.kind.c_str(), e.what());
    return false;
  }
}

// The rule docs/onednn.md gives each family below VNNI (with VNNI: exact). 7-bit weights on a u8 source never
// saturate a pair: there the pair rules and the exact sum coincide.
Rule Documented(const std::string& kind, bool s8) {
  if (kind == "ip3" || (kind == "gemm" && !s8)) return kPairsFlattened;
  if (kind == "ddeconv" || kind == "ip") return kPairsPerTap;
  return s8 ? kHalved : kPairsPerTap;
}
bool Vnni() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx2_vnni || isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
         isa == dnnl::cpu_isa::avx512_core_amx;
}

// Exit 0 when every family's every draw equals its documented rule (exact with VNNI), 1 otherwise.
int RulesMode(bool seven_bit) {
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  if (cap != nullptr) {  // a cap this CPU does not reach dispatches elsewhere: nothing to check for it
    std::string wanted(cap);
    for (char& c : wanted) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::pair<dnnl::cpu_isa, const char*> names[] = {
        {dnnl::cpu_isa::sse41, "sse41"}, {dnnl::cpu_isa::avx, "avx"}, {dnnl::cpu_isa::avx2, "avx2"},
        {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"}, {dnnl::cpu_isa::avx512_core, "avx512_core"},
        {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"}, {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
        {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"}};
    for (const auto& [isa, name] : names) {
      if (wanted == name && dnnl::get_effective_cpu_isa() != isa) {
        std::printf("skipped: DNNL_MAX_CPU_ISA=%s is not reachable on this CPU\n", cap);
        return 77;
      }
    }
  }
  bool all_documented = true;
  const std::pair<const char*, const char*> families[] = {
      {"conv", "jit"}, {"1x1", "jit"}, {"deconv", "jit"}, {"ddeconv", "x64:gemm"}, {"gemm", "x64:gemm"},
      {"ip", "x64:gemm"}, {"ip3", "x64:gemm"}};
  for (const auto& [kind, want] : families)
    for (bool s8 : {false, true})
      for (int zp : {0, 3}) {
        const Problem p = MakeProblem(kind);
        if (p.ip() && zp != 0) continue;  // 2.6's inner product has no zero points
        std::mt19937 rng(12345);
        int equal[kRules] = {0}, draws = 0;
        std::string impl;
        for (int t = 0; t < 200; ++t) {
          std::vector<uint8_t> x(static_cast<size_t>(p.c) * p.h * p.w);
          std::vector<int8_t> w(static_cast<size_t>(p.k) * p.c * p.kh * p.kw);
          for (uint8_t& v : x) v = static_cast<uint8_t>(rng());
          for (int8_t& v : w) v = static_cast<int8_t>(seven_bit ? static_cast<int>(rng() % 128) - 64 : static_cast<int>(rng() & 255) - 128);
          std::vector<int32_t> y(static_cast<size_t>(p.k) * p.oh() * p.ow());
          if (!RunProblem(p, want, s8, zp, x, w, y, &impl)) break;
          ++draws;
          bool all[kRules] = {true, true, true, true, true};
          for (int oy = 0; oy < p.oh(); ++oy)
            for (int ox = 0; ox < p.ow(); ++ox)
              for (int k = 0; k < p.k; ++k) {
                long acc[kRules];
                Rules(p, x, w, s8, zp, oy, ox, k, acc);
                for (int r = 0; r < kRules; ++r) all[r] = all[r] && acc[r] == y[(static_cast<size_t>(oy) * p.ow() + ox) * p.k + k];
              }
          for (int r = 0; r < kRules; ++r) equal[r] += all[r];
        }
        if (draws == 0) continue;
        const Rule expected = Vnni() ? kExact : Documented(kind, s8);
        const bool documented = equal[expected] == draws;
        all_documented = all_documented && documented;
        std::printf("%-10s %-34s %-7s %s zp %d:", cap ? cap : "(no cap)", impl.c_str(), kind, s8 ? "s8" : "u8", zp);
        for (int r = 0; r < kRules; ++r) std::printf(" %s %d", kRuleNames[r], equal[r]);
        std::printf(" (of %d draws)%s\n", draws, documented ? "" : "  NOT THE DOCUMENTED RULE");
      }
  std::printf(all_documented ? "every draw follows its documented rule\n" : "some draw does not follow its documented rule\n");
  return all_documented ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "rules") return RulesMode(argc > 2 && std::string(argv[2]) == "7bit");
  const char* isa = std::getenv("DNNL_MAX_CPU_ISA");
  for (int k : {1, 3}) {
    const Probe halving = Run(true, -128, -127, k);
    const Probe saturation = Run(false, 255, 127, k);
    const long long exact_h = 16LL * k * k * (-128) * (-127), exact_s = 16LL * k * k * 255 * 127;
    std::printf("%-12s kernel %dx%d  s8: %-32s %9lld (exact %lld)%s   u8: %-32s %9lld (exact %lld)%s\n",
                isa ? isa : "(no cap)", k, k, halving.implementation.c_str(), halving.acc, exact_h,
                halving.acc == exact_h ? "" : "  HALVED WEIGHTS", saturation.implementation.c_str(), saturation.acc,
                exact_s, saturation.acc == exact_s ? "" : "  INT16 SATURATED");
  }
  return 0;
}
