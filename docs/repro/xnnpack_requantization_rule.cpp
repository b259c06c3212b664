// Standalone program: the requantization XNNPACK's quantized fully connected operators compute (Debian
// libxnnpack-dev 0.0~git20220216.ae108ef, upstream commit ae108ef49aa5623b896fc93d4298c49d1750d9ba), the rule
// fusediff declares for its conv / deconv / FC (requant f32_half_even, docs/xnnpack.md "Requantization"):
//   s = fl32(fl32(input_scale * kernel_scale) / output_scale)           binary32, left to right
//   y = clamp(rne(fl32(fl32(acc) * s)) + zo, output_min, output_max)    rne: cvtps2dq, ties to even
// Source lines: src/operators/fully-connected-nc.c:299, 379 (the scale, as convolution-nhwc.c:625, 740, 857);
// src/qs8-gemm/gen/4x16c8-minmax-fp32-avx512skx.c:140 cvtepi32_ps, :145 mul_ps, :150 min_ps with
// output_max_less_zero_point, :155 cvtps_epi32, :160 packs + adds zo, :166 max_epi8(output_min); params
// src/params-init.c:387-406 (qs8), :126-148 (qu8). Plain C++ against xnnpack.h; no fusediff code.
//
// A fully connected layer with one input, x - zx = 1 and w - zw = 1, has acc = bias + 1: the program picks the
// accumulators (anywhere in the output range, on and next to .5 ties, beyond 2^24 where fl32(acc) rounds, near
// +-2^31) and compares every output with the rule and with the exact product acc * s rounded once, which differs.
//
// Build and run (xnnpack.h includes <pthreadpool.h>, which Debian does not ship: the module's one-line typedef):
//   g++ -std=c++17 -O1 -ffp-contract=off -Ifused/xnnpack/private
//       docs/repro/xnnpack_requantization_rule.cpp -lXNNPACK -o requant_rule && ./requant_rule
// Expected output (exit 0 when every output follows the rule, 1 otherwise, 2 on an XNNPACK error):
//   fully_connected_nc_qs8: 38400/38400 outputs follow the rule (the exact product rounded once: 38092)
//   fully_connected_nc_qu8: 38400/38400 outputs follow the rule (the exact product rounded once: 38284)
//   ties at s = 1/2: acc -3 1 3 5 -> -2 0 2 2 (half to even)
//   rule holds: y = clamp(rne(fl32(fl32(acc) s)) + zo) on 76800 outputs
#include <xnnpack.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

std::mt19937_64 rng(28);
int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
double Real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

int Rule(int32_t acc, float s, int zo, int lo, int hi) {
  const float t = static_cast<float>(acc) * s;  // fl32(acc), then one binary32 product
  return static_cast<int>(std::clamp<long>(lrintf(t) + zo, lo, hi));
}
int ExactOnce(int32_t acc, float s, int zo, int lo, int hi) {
  return static_cast<int>(std::clamp<long>(std::lrint(static_cast<double>(acc) * s) + zo, lo, hi));
}

int32_t PickAccumulator(float s, int lo, int hi) {
  switch (Int(0, 3)) {
    case 0: return static_cast<int32_t>(std::llround(Real(lo - 4, hi + 4) / s));
    case 1: return static_cast<int32_t>(std::llround((std::floor(Real(lo - 2, hi + 2)) + 0.5) / s)) + Int(-1, 1);
    case 2: return static_cast<int32_t>(Real(16777216.0, 2147483000.0)) * (Int(0, 1) ? 1 : -1);
    default: return Int(-300, 300);
  }
}

// One FC operator of `n` output channels whose accumulators are `acc`, run on one row; its outputs.
std::vector<int> RunFc(bool qs8, const std::vector<int32_t>& acc, float sx, float sw, float so, int zx, int zo, int lo,
                       int hi) {
  const size_t n = acc.size();
  std::vector<int32_t> bias(n);
  for (size_t c = 0; c < n; ++c) bias[c] = acc[c] - 1;
  std::vector<uint8_t> x(1 + XNN_EXTRA_BYTES), y(n + XNN_EXTRA_BYTES);
  xnn_operator_t op = nullptr;
  xnn_status st;
  if (qs8) {
    const std::vector<int8_t> w(n, 1);
    x[0] = static_cast<uint8_t>(zx + 1);
    st = xnn_create_fully_connected_nc_qs8(1, n, 1, n, static_cast<int8_t>(zx), sx, sw, w.data(), bias.data(),
                                           static_cast<int8_t>(zo), so, static_cast<int8_t>(lo),
                                           static_cast<int8_t>(hi), 0, &op);
    if (st == xnn_status_success)
      st = xnn_setup_fully_connected_nc_qs8(op, 1, reinterpret_cast<const int8_t*>(x.data()),
                                            reinterpret_cast<int8_t*>(y.data()), nullptr);
  } else {
    const int zw = Int(0, 254);
    const std::vector<uint8_t> w(n, static_cast<uint8_t>(zw + 1));
    x[0] = static_cast<uint8_t>(zx + 1);
    st = xnn_create_fully_connected_nc_qu8(1, n, 1, n, static_cast<uint8_t>(zx), sx, static_cast<uint8_t>(zw), sw,
                                           w.data(), bias.data(), static_cast<uint8_t>(zo), so,
                                           static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), 0, &op);
    if (st == xnn_status_success) st = xnn_setup_fully_connected_nc_qu8(op, 1, x.data(), y.data(), nullptr);
  }
  if (st == xnn_status_success) st = xnn_run_operator(op, nullptr);
  xnn_delete_operator(op);
  if (st != xnn_status_success) {
    std::printf("XNNPACK error: status %d\n", static_cast<int>(st));
    std::exit(2);
  }
  std::vector<int> out(n);
  for (size_t c = 0; c < n; ++c) out[c] = qs8 ? static_cast<int8_t>(y[c]) : y[c];
  return out;
}

}  // namespace

int main() {
  if (xnn_initialize(nullptr) != xnn_status_success) return 2;
  long total = 0, total_ok = 0;
  for (const bool qs8 : {true, false}) {
    const int lo = qs8 ? -128 : 0, hi = qs8 ? 127 : 255;
    long n = 0, ok = 0, exact = 0;
    for (int trial = 0; trial < 150; ++trial) {
      const float sx = static_cast<float>(std::exp2(Real(-12, 0))), sw = static_cast<float>(std::exp2(Real(-10, 0)));
      const float so = static_cast<float>(std::exp2(Real(-10, 4)));
      const float s = sx * sw / so;  // the operator's own expression, in binary32
      if (!(s < 4.0f && s >= 0x1p-24f)) {  // XNNPACK asserts s >= 2^-32 (params-init.c:394): stay well inside
        --trial;
        continue;
      }
      const int zx = Int(lo, hi - 1), zo = Int(lo, hi);
      std::vector<int32_t> acc(256);
      for (int32_t& a : acc) a = PickAccumulator(s, lo, hi);
      const std::vector<int> y = RunFc(qs8, acc, sx, sw, so, zx, zo, lo, hi);
      for (size_t c = 0; c < acc.size(); ++c, ++n) {
        ok += y[c] == Rule(acc[c], s, zo, lo, hi);
        exact += y[c] == ExactOnce(acc[c], s, zo, lo, hi);
      }
    }
    std::printf("fully_connected_nc_%s: %ld/%ld outputs follow the rule (the exact product rounded once: %ld)\n",
                qs8 ? "qs8" : "qu8", ok, n, exact);
    total += n;
    total_ok += ok;
  }
  const std::vector<int> ties = RunFc(true, {-3, 1, 3, 5}, 0.5f, 1.0f, 1.0f, 0, 0, -128, 127);
  std::printf("ties at s = 1/2: acc -3 1 3 5 -> %d %d %d %d (half to even)\n", ties[0], ties[1], ties[2], ties[3]);
  const bool even = ties == std::vector<int>{-2, 0, 2, 2};
  if (total_ok == total && even) {
    std::printf("rule holds: y = clamp(rne(fl32(fl32(acc) s)) + zo) on %ld outputs\n", total);
    return 0;
  }
  std::printf("rule broken: %ld of %ld outputs differ%s\n", total - total_ok, total, even ? "" : "; ties not to even");
  return 1;
}
