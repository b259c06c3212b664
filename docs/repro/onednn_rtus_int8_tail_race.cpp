// Standalone reproduction: oneDNN 2.6.3's int8 1x1 convolution with a stride (jit_uni_int8_1x1 at avx2 and sse41),
// on an nhwc source whose channel count is not a multiple of the copy width (16 bytes at avx2, 8 at sse41), returns
// different outputs from run to run on the same input when it runs on two or more threads (docs/onednn.md, "The
// strided int8 1x1 convolution races below AVX-512"). Plain C++ against dnnl.hpp; no fusediff code.
//
// Cause (oneDNN v2.6.3 src/cpu/x64/jit_uni_1x1_conv_utils.hpp): a strided 1x1 convolution first copies the source
// pixels it reads into a per-thread workspace ("reduce to unit stride", rtus_driver_t). For nhwc the workspace holds
// is * ic bytes per thread, packed (rtus_prepare_space_info, lines 121-122), and loop_is_nspc copies each pixel's ic
// bytes in steps of load_store_size = 16 bytes (avx2; 8 at sse41), the remainder with load_store_tail_size, which
// for one-byte types is max_load_store_bytes = 16 (8), not the remainder (lines 376-382). Below avx512_core there is
// no opmask (the tail mask is built only for avx512_core, lines 313-328; store_reg then stores store_size bytes,
// lines 354-366), so the tail store (lines 417-421) writes 16 - ic mod 16 bytes past the pixel. Within a thread the
// next pixel's copy overwrites them; after a thread's last pixel they land in the next thread's workspace
// (jit_uni_x8s8s32x_1x1_convolution.cpp:279-286: rp.ws = rtus_space + ithr * space_per_thread_ + ...), which that
// thread may already have filled: its first pixel's channels then hold another pixel's bytes, whether they do
// depends on timing. At avx512_core the tail store is masked and nothing is written past the pixel.
//
// Build and run (Debian libdnnl-dev 2.6.3):
//   g++ -std=c++17 -O2 docs/repro/onednn_rtus_int8_tail_race.cpp -ldnnl -o rtus_race
//   OMP_NUM_THREADS=2 ./rtus_race          # at avx2 (DNNL_MAX_CPU_ISA=AVX2 on a newer CPU)
// It runs one convolution (N8 H8 W2 C7 -> K6, 1x1, stride 2x1, s8 source and weights, s32 bias, s8 destination)
// 2,000 times over freshly poisoned destinations and counts the runs whose output differs from the first run's and
// from the single-threaded one. Exit 0 when some differ (the defect), 1 when every run agrees (a fixed oneDNN, or a
// race that never fired), 2 on a oneDNN error, 77 when the implementation is not jit_uni_int8_1x1 below avx512_core
// or fewer than two threads (or hardware threads) run (nothing to show). Measured on an AMD EPYC (avx2, 2 threads):
// 256 to 1,981 of 1,999 runs differ at ic 7 (the count follows the timing), 491 at ic 8, the first differing output
// in the second thread's share; none at ic 16 (no tail) or on one thread; none seen at sse41 (ic 7 and 8).
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using dnnl::memory;

struct Conv {
  int n = 8, ih = 8, iw = 2, ic = 7, oc = 6, stride_h = 2;
  int oh() const { return (ih - 1) / stride_h + 1; }
  size_t outputs() const { return size_t(n) * oh() * iw * oc; }
};

// Every output of `runs` executions, each over a destination poisoned with a run-dependent byte.
std::vector<std::vector<int8_t>> Run(const Conv& c, int runs, std::string* impl) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::desc src({c.n, c.ic, c.ih, c.iw}, memory::data_type::s8, memory::format_tag::nhwc);
  const memory::desc wei({c.oc, c.ic, 1, 1}, memory::data_type::s8, memory::format_tag::any);
  const memory::desc bia({c.oc}, memory::data_type::s32, memory::format_tag::x);
  const memory::desc dst({c.n, c.oc, c.oh(), c.iw}, memory::data_type::s8, memory::format_tag::nhwc);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                          wei, bia, dst, {c.stride_h, 1}, {0, 0}, {0, 0});
  dnnl::primitive_attr attr;
  attr.set_output_scales(2, std::vector<float>(size_t(c.oc), 0.004f));
  const dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
  *impl = pd.impl_info_str();
  std::mt19937 rng(1);
  std::vector<int8_t> x(size_t(c.n) * c.ic * c.ih * c.iw), w(size_t(c.oc) * c.ic);
  std::vector<int32_t> b(size_t(c.oc));
  for (int8_t& v : x) v = int8_t(int(rng() % 256) - 128);
  for (int8_t& v : w) v = int8_t(int(rng() % 256) - 128);
  for (int32_t& v : b) v = int32_t(rng() % 20000) - 10000;
  memory xs(src, eng, x.data()), bs(bia, eng, b.data());
  memory plain({{c.oc, c.ic, 1, 1}, memory::data_type::s8, memory::format_tag::oihw}, eng, w.data());
  memory ws(pd.weights_desc(), eng);
  dnnl::reorder(plain, ws).execute(s, plain, ws);
  const dnnl::convolution_forward conv(pd);
  std::vector<std::vector<int8_t>> out;
  for (int run = 0; run < runs; ++run) {
    std::vector<int8_t> y(c.outputs(), int8_t(run * 37 + 11));
    memory ys(dst, eng, y.data());
    conv.execute(s, {{DNNL_ARG_SRC, xs}, {DNNL_ARG_WEIGHTS, ws}, {DNNL_ARG_BIAS, bs}, {DNNL_ARG_DST, ys}});
    s.wait();
    out.push_back(std::move(y));
  }
  return out;
}

// The threads oneDNN's OpenMP runtime uses: OMP_NUM_THREADS where set, else one per hardware thread.
int Threads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env != nullptr && std::atoi(env) > 0) return std::atoi(env);
  return int(std::thread::hardware_concurrency());
}

}  // namespace

int main(int argc, char** argv) {
  Conv c;
  if (argc > 1) c.ic = std::atoi(argv[1]);
  try {
    std::string impl;
    const std::vector<std::vector<int8_t>> runs = Run(c, 2000, &impl);
    std::printf("oneDNN %s, ic %d, stride %d, %d threads\n", impl.c_str(), c.ic, c.stride_h, Threads());
    if (impl.rfind("jit_uni_int8_1x1:", 0) != 0 || Threads() < 2 || std::thread::hardware_concurrency() < 2) {
      std::printf("skipped: implementation %s, %d threads (the race needs jit_uni_int8_1x1 and two threads)\n",
                  impl.c_str(), Threads());
      return 77;
    }
    int differ = 0;
    size_t first_element = 0;
    for (size_t r = 1; r < runs.size(); ++r) {
      bool d = false;
      for (size_t i = 0; i < runs[r].size(); ++i) {
        if (runs[r][i] == runs[0][i]) continue;
        if (differ == 0 && !d) first_element = i;
        d = true;
      }
      differ += d ? 1 : 0;
    }
    std::printf("%d of %zu runs differ from the first (first differing output: element %zu)\n", differ,
                runs.size() - 1, first_element);
    if (differ > 0) {
      std::printf("defect: the strided int8 1x1 convolution's outputs change from run to run\n");
      return 0;
    }
    std::printf("every run agrees\n");
    return 1;
  } catch (const dnnl::error& e) {
    std::printf("oneDNN error: %s\n", e.what());
    return 2;
  }
}
