// Standalone probe: what oneDNN 2.6.3's int8 convolutions compute without VNNI (docs/onednn.md, "On a CPU without
// VNNI"). Plain C++ against dnnl.hpp; no fusediff code.
//
// Build and run (Debian libdnnl-dev 2.6.3), once per ISA cap:
//   g++ -std=c++17 -O2 docs/repro/onednn_pre_vnni_int8.cpp -ldnnl -o pre_vnni && for isa in ALL AVX512_CORE AVX2 SSE41; do DNNL_MAX_CPU_ISA=$isa ./pre_vnni; done
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

int main() {
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
