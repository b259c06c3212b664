// Standalone program: what XNNPACK's add_nd_qs8/qu8 and multiply_nd_qs8/qu8 compute (Debian libxnnpack-dev
// 0.0~git20220216.ae108ef, upstream commit ae108ef49aa5623b896fc93d4298c49d1750d9ba), on all 256 x 256 input pairs.
// The add is the rule fusediff declares as AddRule::fixed_point_half_up (docs/xnnpack.md, "Add"):
//   ra = fl32(sa / so), rb = fl32(sb / so), each in [2^-10, 2^8)       binary-elementwise-nd.c:209, 217 (qs8); 287, 295
//   shift = 20 - (binary32 exponent of max(ra, rb))                    params-init.c:4073-4080
//   ma = lrintf(ra 2^shift), mb = lrintf(rb 2^shift)                   :4085-4086
//   y = clamp(((ma (a - za) + mb (b - zb) + 2^(shift-1)) >> shift) + zo, min, max)
//                                                    qs8-vadd/gen/minmax-avx512skx-mul32-ld128-x16.c:39-51 (>>: floor)
// The multiply (no fusediff pattern uses it; docs/xnnpack.md lists it):
//   s = fl32(fl32(sa sb) / so) in [2^-16, 2^8)                         binary-elementwise-nd.c:446-448
//   y = clamp(rne(fl32((float)((a - za)(b - zb)) s)) + zo, min, max)   qs8-vmul/gen/minmax-fp32-avx-mul16-ld64-x16.c
// Both element-wise (vadd / vmul kernels) and with a broadcast scalar (vaddc / vmulc). Plain C++ against xnnpack.h;
// no fusediff code.
//
// Build and run (xnnpack.h includes <pthreadpool.h>, which Debian does not ship: the module's one-line typedef):
//   g++ -std=c++17 -O1 -ffp-contract=off -Ifused/xnnpack/private
//       docs/repro/xnnpack_add_multiply_rule.cpp -lXNNPACK -o add_rule && ./add_rule
// Expected output (exit 0 when every output follows its rule, 1 otherwise, 2 on an XNNPACK error):
//   add_nd_qs8: 393216/393216 outputs follow the rule (the exact sum rounded once: 393215)
//   add_nd_qu8: 393216/393216 outputs follow the rule (the exact sum rounded once: 393209)
//   multiply_nd_qs8: 393216/393216 outputs follow the rule
//   multiply_nd_qu8: 393216/393216 outputs follow the rule
//   example add_nd_qs8, sa 0.05 sb 0.07 so 0.1, za -118 zb 124 zo 0, a 0 b 9 (real sum / so -21.4999991): -21
//   rule holds: 1572864/1572864 add and multiply outputs
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

std::mt19937_64 rng(4);
int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
double Real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

struct Quant {
  float sa, sb, so;
  int za, zb, zo;
};

int AddRule(int a, int b, const Quant& q, int lo, int hi) {
  const float ra = q.sa / q.so, rb = q.sb / q.so, m = std::max(ra, rb);
  uint32_t bits;
  std::memcpy(&bits, &m, sizeof bits);
  const int shift = 20 - (static_cast<int>(bits >> 23) - 127);
  const auto ma = static_cast<int32_t>(lrintf(std::ldexp(ra, shift))), mb = static_cast<int32_t>(lrintf(std::ldexp(rb, shift)));
  const int32_t acc = ma * (a - q.za) + mb * (b - q.zb) + (INT32_C(1) << (shift - 1));
  return std::clamp((acc >> shift) + q.zo, lo, hi);
}
int MulRule(int a, int b, const Quant& q, int lo, int hi) {
  const float s = q.sa * q.sb / q.so;
  const float t = static_cast<float>((a - q.za) * (b - q.zb)) * s;
  return static_cast<int>(std::clamp<long>(lrintf(t) + q.zo, lo, hi));
}
int ExactAdd(int a, int b, const Quant& q, int lo, int hi) {
  const double t = (static_cast<double>(q.sa) * (a - q.za) + static_cast<double>(q.sb) * (b - q.zb)) / q.so;
  return static_cast<int>(std::clamp<long>(std::lround(t) + q.zo, lo, hi));
}

// y[i] = a[i] op b[i] over all pairs (a = i >> 8, b = i & 255 as bytes); `broadcast`: 256 runs of a row op a scalar.
std::vector<uint8_t> Run(bool mul, bool u8, const Quant& q, bool broadcast) {
  std::vector<uint8_t> a(65536 + XNN_EXTRA_BYTES), b(65536 + XNN_EXTRA_BYTES), y(65536 + XNN_EXTRA_BYTES);
  for (int i = 0; i < 65536; ++i) a[i] = static_cast<uint8_t>(i >> 8), b[i] = static_cast<uint8_t>(i);
  xnn_operator_t op = nullptr;
  const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  xnn_status st;
  if (u8) {
    st = (mul ? xnn_create_multiply_nd_qu8 : xnn_create_add_nd_qu8)(q.za, q.sa, q.zb, q.sb, q.zo, q.so, lo, hi, 0, &op);
  } else {
    st = (mul ? xnn_create_multiply_nd_qs8 : xnn_create_add_nd_qs8)(q.za, q.sa, q.zb, q.sb, q.zo, q.so, lo, hi, 0, &op);
  }
  const auto setup = [&](size_t na, const size_t* sa, size_t nb, const size_t* sb, const uint8_t* pa,
                         const uint8_t* pb, uint8_t* py) {
    if (u8) return (mul ? xnn_setup_multiply_nd_qu8 : xnn_setup_add_nd_qu8)(op, na, sa, nb, sb, pa, pb, py, nullptr);
    return (mul ? xnn_setup_multiply_nd_qs8 : xnn_setup_add_nd_qs8)(op, na, sa, nb, sb, reinterpret_cast<const int8_t*>(pa),
                                                                    reinterpret_cast<const int8_t*>(pb),
                                                                    reinterpret_cast<int8_t*>(py), nullptr);
  };
  const size_t all[1] = {65536}, row[1] = {256}, one[1] = {1};
  if (!broadcast) {
    if (!st) st = setup(1, all, 1, all, a.data(), b.data(), y.data());
    if (!st) st = xnn_run_operator(op, nullptr);
  }
  for (int r = 0; broadcast && r < 256 && !st; ++r) {  // the b row against the scalar a = r (the reversed kernels)
    st = setup(1, one, 1, row, a.data() + 256 * r, b.data() + 256 * r, y.data() + 256 * r);
    if (!st) st = xnn_run_operator(op, nullptr);
  }
  xnn_delete_operator(op);
  if (st != xnn_status_success) {
    std::printf("XNNPACK error: status %d\n", static_cast<int>(st));
    std::exit(2);
  }
  return y;
}

}  // namespace

int main() {
  if (xnn_initialize(nullptr) != xnn_status_success) return 2;
  long total = 0, total_ok = 0;
  for (const bool mul : {false, true}) {
    for (const bool u8 : {false, true}) {
      const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
      long n = 0, ok = 0, exact = 0;
      for (int trial = 0; trial < 6; ++trial) {
        Quant q{static_cast<float>(std::exp2(Real(-8, -2))), static_cast<float>(std::exp2(Real(-8, -2))), 0,
                Int(lo, hi), Int(lo, hi), Int(lo, hi)};
        q.so = mul ? q.sa * q.sb * static_cast<float>(std::exp2(Real(-4, 4)))
                   : std::max(q.sa, q.sb) * static_cast<float>(std::exp2(Real(-4, 2)));
        const std::vector<uint8_t> y = Run(mul, u8, q, trial % 2 == 1);
        for (int i = 0; i < 65536; ++i, ++n) {
          const int a = u8 ? (i >> 8) : static_cast<int8_t>(i >> 8), b = u8 ? (i & 255) : static_cast<int8_t>(i & 255);
          const int got = u8 ? y[i] : static_cast<int8_t>(y[i]);
          ok += got == (mul ? MulRule(a, b, q, lo, hi) : AddRule(a, b, q, lo, hi));
          exact += !mul && got == ExactAdd(a, b, q, lo, hi);
        }
      }
      std::printf("%s_nd_%s: %ld/%ld outputs follow the rule", mul ? "multiply" : "add", u8 ? "qu8" : "qs8", ok, n);
      if (!mul) std::printf(" (the exact sum rounded once: %ld)", exact);
      std::printf("\n");
      total += n;
      total_ok += ok;
    }
  }
  const Quant q{0.05f, 0.07f, 0.1f, -118, 124, 0};
  const std::vector<uint8_t> y = Run(false, false, q, false);
  std::printf("example add_nd_qs8, sa 0.05 sb 0.07 so 0.1, za -118 zb 124 zo 0, a 0 b 9 (real sum / so %.7f): %d\n",
              (static_cast<double>(q.sa) * (0 - q.za) + static_cast<double>(q.sb) * (9 - q.zb)) / q.so,
              static_cast<int8_t>(y[(0 << 8) | 9]));
  if (total_ok == total) {
    std::printf("rule holds: %ld/%ld add and multiply outputs\n", total_ok, total);
    return 0;
  }
  std::printf("rule broken: %ld of %ld outputs differ\n", total - total_ok, total);
  return 1;
}
