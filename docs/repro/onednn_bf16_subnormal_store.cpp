// Standalone reproduction: oneDNN 2.6.3 stores a binary32 subnormal result in a bf16 destination differently by
// ISA (docs/summation-orders.md, "bf16"; docs/onednn.md, "Layer normalization"). With avx512_core_bf16 the kernels
// convert with vcvtneps2bf16, which treats binary32 subnormals as zero (Intel SDM, VCVTNEPS2BF16: "input denormals
// are always treated as zero"); on avx512_core without it they use bf16_emulation_t's integer rounding, which has no
// subnormal case and keeps them. The same primitive on the same inputs then returns +-0 on one machine and the
// exact value on another. Plain C++ against dnnl.hpp; no fusediff code.
//
// Cause (v2.6.3): jit_uni_layer_normalization_kernels.cpp:76-86 (emulate_bf16_ = !mayiuse(avx512_core_bf16)) and
// 141-162 (store<bf16>: bf16_emu_->vcvtneps2bf16 or vcvtneps2bf16); jit_avx512_core_bf16cvt.hpp:103-116 (the
// emulation: (bits + 0x7FFF + lsb) >> 16, NaN and infinities fixed up by vfixupimmps with the selector of 119-135,
// nothing for subnormals). lnorm_ref's bfloat16_t stores take the same two paths (cpu/bfloat16.cpp:34-48,
// jit_avx512_core_bf16cvt.hpp:195-212).
//
// The draw: one row x = (-1, 1) in bf16, gamma = 2^-130 twice, beta = 0, eps = 0: mu = 0, var = 1, r = 1, and
// y = fma(x r, gamma, beta) = -+2^-130 exactly, a binary32 subnormal that bf16 holds exactly (8 2^-133: 0x8008,
// 0x0008).
//
// Build and run (Debian libdnnl-dev 2.6.3):
//   g++ -std=c++17 -O2 docs/repro/onednn_bf16_subnormal_store.cpp -ldnnl -o bf16_store
//   DNNL_MAX_CPU_ISA=AVX512_CORE ./bf16_store        kept:    y = 0x8008 0x0008
//   DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 ./bf16_store   flushed: y = 0x8000 0x0000 (on a CPU with avx512_bf16)
// Exit 0 when the ISA's rule shows as stated, 1 otherwise (a oneDNN that changed it), 77 below avx512_core (no bf16
// layer norm there: platform.cpp:100-104).
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::memory;

const char* IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

int main() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const bool native = isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  const bool offered = native || isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni;
  if (!offered) {
    std::printf("skipped: oneDNN 2.6.3 has no bf16 layer norm at %s\n", IsaName(isa));
    return 77;
  }
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc data({1, 2}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc channel({2}, memory::data_type::f32, memory::format_tag::a);
  const dnnl::layer_normalization_forward::desc desc(
      dnnl::prop_kind::forward_inference, data, 0.0f,
      dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
  const dnnl::layer_normalization_forward::primitive_desc pd(desc, engine);
  std::vector<uint16_t> x{0xBF80u, 0x3F80u}, y(2, 0xFFFFu);  // -1, 1 in bf16
  std::vector<float> gamma(2, 0x1p-130f), beta(2, 0.0f);
  dnnl::layer_normalization_forward(pd).execute(stream, {{DNNL_ARG_SRC, memory(data, engine, x.data())},
                                                         {DNNL_ARG_DST, memory(data, engine, y.data())},
                                                         {DNNL_ARG_SCALE, memory(channel, engine, gamma.data())},
                                                         {DNNL_ARG_SHIFT, memory(channel, engine, beta.data())}});
  stream.wait();
  std::printf("oneDNN 2.6.3 bf16 layer norm dispatched to %s (%s): y = 0x%04X 0x%04X for -+2^-130\n", IsaName(isa),
              pd.impl_info_str(), y[0], y[1]);
  const bool kept = y[0] == 0x8008u && y[1] == 0x0008u;
  const bool flushed = y[0] == 0x8000u && y[1] == 0x0000u;
  if (native) {
    std::printf(flushed ? "flushed: vcvtneps2bf16 stores the binary32 subnormal as +-0\n"
                        : "unexpected: vcvtneps2bf16 did not flush the subnormal\n");
    return flushed ? 0 : 1;
  }
  std::printf(kept ? "kept: the emulated conversion stores the subnormal exactly\n"
                   : "unexpected: the emulated conversion did not keep the subnormal\n");
  return kept ? 0 : 1;
}
