// Standalone program: what XNNPACK's 8-bit pooling operators compute (Debian libxnnpack-dev 0.0~git20220216.ae108ef,
// upstream commit ae108ef49aa5623b896fc93d4298c49d1750d9ba), with and without padding (docs/xnnpack.md, "Average
// pooling", "Max pooling"). Plain C++ against xnnpack.h; no fusediff code.
//
// average_pooling2d_nhwc_qu8 (src/operators/average-pooling-nhwc.c):
//   padding taps read a buffer of zx (:185-194), so acc = sum over the in-bounds taps of (x - zx) (a padding tap adds 0)
//   s = fl32(si / fl32(so (float)(KH KW)))       (:221: the divisor is the whole window, padding counted)
//   a window smaller than the padded input: the 9x / 9p8x kernels (no pixelwise kernel for qu8, :673-681),
//     M = (bits(s) & 0x7FFFFF) | 0x800000, sh = 150 - (bits(s) >> 23) (s = M 2^-sh exactly; params-init.c:1440-1480)
//     y = clamp(sign(acc) ((|acc| M + 2^(sh-1)) >> sh) + zo, min, max)      qu8-avgpool/9x-minmax-sse2-c8.c:142-186
//   a window equal to the padded input: the global kernel (:480-505),
//     y = clamp(rne(fl32(fl32(acc) s)) + zo, min, max)
// max_pooling2d_nhwc_s8/u8 without dilation: clamp(max over the in-bounds taps, min, max); out-of-range taps are
//   clamped to the border (src/indirection.c:313-322), inside any window with an in-bounds tap. (With dilation it
//   reads past the input: docs/repro/xnnpack_maxpool_dilation_overread.cpp.)
//
// Build and run (xnnpack.h includes <pthreadpool.h>, which Debian does not ship: the module's one-line typedef):
//   g++ -std=c++17 -O1 -ffp-contract=off -Ifused/xnnpack/private
//       docs/repro/xnnpack_pool_rules.cpp -lXNNPACK -o pool_rules && ./pool_rules
// Expected output (exit 0 when every output follows its rule, 1 otherwise, 2 on an XNNPACK error):
//   average_pooling2d_nhwc_qu8: 32437/32437 outputs follow the rule (21119 of them in windows with padding, 12 via
//     the global path)
//   padding counted: a 2x2 input of code 8 (zx 0, scales 1), 2x2 window, padding 1, stride 1 -> corner 2, edge 4,
//     centre 8 (TFLite, which divides by the in-bounds taps: 8 8 8)
//   max_pooling2d_nhwc_s8: 30365/30365 outputs follow the rule
//   max_pooling2d_nhwc_u8: 33778/33778 outputs follow the rule
//   rule holds: 96580/96580 pooling outputs
#include <xnnpack.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

std::mt19937_64 rng(28);
int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
double Real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

int FixedPointHalfAway(int32_t acc, float s, int zo, int lo, int hi) {
  uint32_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  const uint64_t m = (bits & 0x7FFFFF) | 0x800000;
  const uint32_t sh = 150 - (bits >> 23);
  const auto magnitude = static_cast<int64_t>((static_cast<uint64_t>(std::llabs(acc)) * m + (UINT64_C(1) << (sh - 1))) >> sh);
  return static_cast<int>(std::clamp<int64_t>((acc < 0 ? -magnitude : magnitude) + zo, lo, hi));
}
int Fp32HalfEven(int32_t acc, float s, int zo, int lo, int hi) {
  return static_cast<int>(std::clamp<long>(lrintf(static_cast<float>(acc) * s) + zo, lo, hi));
}

void Check(xnn_status st, const char* what) {
  if (st == xnn_status_success) return;
  std::printf("XNNPACK error: %s status %d\n", what, static_cast<int>(st));
  std::exit(2);
}

struct Geometry {
  int H, W, C, K, S, pt, pr, pb, pl;
  int OH() const { return (H + pt + pb - K) / S + 1; }
  int OW() const { return (W + pl + pr - K) / S + 1; }
};

std::vector<uint8_t> AveragePool(const Geometry& g, const std::vector<uint8_t>& x, int zx, float si, int zo, float so,
                                 int lo, int hi) {
  std::vector<uint8_t> y(static_cast<size_t>(g.OH() * g.OW() * g.C) + XNN_EXTRA_BYTES);
  xnn_operator_t op = nullptr;
  Check(xnn_create_average_pooling2d_nhwc_qu8(g.pt, g.pr, g.pb, g.pl, g.K, g.K, g.S, g.S, g.C, g.C, g.C, zx, si, zo,
                                              so, lo, hi, 0, &op),
        "create average_pooling2d_nhwc_qu8");
  Check(xnn_setup_average_pooling2d_nhwc_qu8(op, 1, g.H, g.W, x.data(), y.data(), nullptr), "setup");
  Check(xnn_run_operator(op, nullptr), "run");
  xnn_delete_operator(op);
  return y;
}

// Random geometries (padding 0..2 on each side, below the window), scales and clamps; every output against the rule.
long AverageOutputs(long* ok) {
  long n = 0, padded = 0, global = 0;
  for (int t = 0; t < 300; ++t) {
    Geometry g{Int(2, 8), Int(2, 8), Int(1, 19), Int(2, 4), Int(1, 3), Int(0, 2), Int(0, 2), Int(0, 2), Int(0, 2)};
    g.pt = std::min(g.pt, g.K - 1), g.pr = std::min(g.pr, g.K - 1), g.pb = std::min(g.pb, g.K - 1), g.pl = std::min(g.pl, g.K - 1);
    if (g.H + g.pt + g.pb < g.K || g.W + g.pl + g.pr < g.K) continue;
    const bool is_global = g.H + g.pt + g.pb == g.K && g.W + g.pl + g.pr == g.K;
    const float si = static_cast<float>(std::exp2(Real(-8, 0)));
    const float so = t % 5 == 0 ? si : si * static_cast<float>(std::exp2(Real(-2, 2)));  // si = so: many .5 ties
    const int zx = Int(0, 255), zo = Int(0, 255), lo = t % 3 == 0 ? Int(0, 80) : 0, hi = t % 3 == 0 ? Int(170, 255) : 255;
    std::vector<uint8_t> x(static_cast<size_t>(g.H * g.W * g.C) + XNN_EXTRA_BYTES);
    for (uint8_t& v : x) v = static_cast<uint8_t>(Int(0, 255));
    const std::vector<uint8_t> y = AveragePool(g, x, zx, si, zo, so, lo, hi);
    const float s = si / (so * static_cast<float>(g.K * g.K));
    for (int oy = 0; oy < g.OH(); ++oy)
      for (int ox = 0; ox < g.OW(); ++ox)
        for (int c = 0; c < g.C; ++c, ++n) {
          int32_t acc = 0, taps = 0;
          for (int ky = 0; ky < g.K; ++ky)
            for (int kx = 0; kx < g.K; ++kx) {
              const int iy = oy * g.S + ky - g.pt, ix = ox * g.S + kx - g.pl;
              if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
              acc += x[static_cast<size_t>((iy * g.W + ix) * g.C + c)] - zx;
              ++taps;
            }
          const int want = is_global ? Fp32HalfEven(acc, s, zo, lo, hi) : FixedPointHalfAway(acc, s, zo, lo, hi);
          *ok += y[static_cast<size_t>((oy * g.OW() + ox) * g.C + c)] == want;
          padded += taps < g.K * g.K;
          global += is_global;
        }
  }
  std::printf("average_pooling2d_nhwc_qu8: %ld/%ld outputs follow the rule (%ld of them in windows with padding, %ld "
              "via the global path)\n",
              *ok, n, padded, global);
  return n;
}

long MaxOutputs(bool u8, long* ok) {
  long n = 0, good = 0;
  const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  for (int t = 0; t < 200; ++t) {
    Geometry g{Int(2, 8), Int(2, 8), Int(1, 40), Int(2, 4), Int(1, 3), Int(0, 1), Int(0, 1), Int(0, 1), Int(0, 1)};
    if (g.H + g.pt + g.pb < g.K || g.W + g.pl + g.pr < g.K) continue;
    const int qmin = t % 2 ? Int(lo, lo + 100) : lo, qmax = t % 2 ? Int(hi - 100, hi) : hi;
    std::vector<uint8_t> x(static_cast<size_t>(g.H * g.W * g.C) + XNN_EXTRA_BYTES);
    std::vector<uint8_t> y(static_cast<size_t>(g.OH() * g.OW() * g.C) + XNN_EXTRA_BYTES);
    for (uint8_t& v : x) v = static_cast<uint8_t>(Int(0, 255));
    xnn_operator_t op = nullptr;
    if (u8) {
      Check(xnn_create_max_pooling2d_nhwc_u8(g.pt, g.pr, g.pb, g.pl, g.K, g.K, g.S, g.S, 1, 1, g.C, g.C, g.C, qmin, qmax,
                                             0, &op),
            "create max_pooling2d_nhwc_u8");
      Check(xnn_setup_max_pooling2d_nhwc_u8(op, 1, g.H, g.W, x.data(), y.data(), nullptr), "setup");
    } else {
      Check(xnn_create_max_pooling2d_nhwc_s8(g.pt, g.pr, g.pb, g.pl, g.K, g.K, g.S, g.S, 1, 1, g.C, g.C, g.C, qmin, qmax,
                                             0, &op),
            "create max_pooling2d_nhwc_s8");
      Check(xnn_setup_max_pooling2d_nhwc_s8(op, 1, g.H, g.W, reinterpret_cast<const int8_t*>(x.data()),
                                            reinterpret_cast<int8_t*>(y.data()), nullptr),
            "setup");
    }
    Check(xnn_run_operator(op, nullptr), "run");
    xnn_delete_operator(op);
    const auto code = [u8](uint8_t b) { return u8 ? static_cast<int>(b) : static_cast<int>(static_cast<int8_t>(b)); };
    for (int oy = 0; oy < g.OH(); ++oy)
      for (int ox = 0; ox < g.OW(); ++ox)
        for (int c = 0; c < g.C; ++c, ++n) {
          int m = -1000;
          for (int ky = 0; ky < g.K; ++ky)
            for (int kx = 0; kx < g.K; ++kx) {
              const int iy = oy * g.S + ky - g.pt, ix = ox * g.S + kx - g.pl;
              if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) m = std::max(m, code(x[static_cast<size_t>((iy * g.W + ix) * g.C + c)]));
            }
          good += code(y[static_cast<size_t>((oy * g.OW() + ox) * g.C + c)]) == std::clamp(m, qmin, qmax);
        }
  }
  std::printf("max_pooling2d_nhwc_%s: %ld/%ld outputs follow the rule\n", u8 ? "u8" : "s8", good, n);
  *ok += good;
  return n;
}

}  // namespace

int main() {
  if (xnn_initialize(nullptr) != xnn_status_success) return 2;
  long ok = 0, n = AverageOutputs(&ok);
  const std::vector<uint8_t> demo =
      AveragePool(Geometry{2, 2, 1, 2, 1, 1, 1, 1, 1}, std::vector<uint8_t>(4 + XNN_EXTRA_BYTES, 8), 0, 1.0f, 0, 1.0f, 0, 255);
  std::printf("padding counted: a 2x2 input of code 8 (zx 0, scales 1), 2x2 window, padding 1, stride 1 -> corner %d, "
              "edge %d, centre %d (TFLite, which divides by the in-bounds taps: 8 8 8)\n",
              demo[0], demo[1], demo[4]);
  const bool counted = demo[0] == 2 && demo[1] == 4 && demo[4] == 8;
  n += MaxOutputs(false, &ok);
  n += MaxOutputs(true, &ok);
  if (ok == n && counted) {
    std::printf("rule holds: %ld/%ld pooling outputs\n", ok, n);
    return 0;
  }
  std::printf("rule broken: %ld of %ld outputs differ%s\n", n - ok, n, counted ? "" : "; padding not counted as zx");
  return 1;
}
