// Standalone program: how XNNPACK's 8-bit table operators build their 256-entry tables (Debian libxnnpack-dev
// 0.0~git20220216.ae108ef, upstream commit ae108ef49aa5623b896fc93d4298c49d1750d9ba), read back by running each
// operator on all 256 input codes: the rule fusediff declares as post_ops binary32_libm (docs/xnnpack.md,
// "Activation tables"). Everything binary32, with this system's libm (glibc):
//   inv = fl32(1 / output_scale)                                           lut-elementwise-nc.c:111
//   x   = fl32((float)(i - zx) * input_scale)                              :113
//   q   = clamp(lrintf(fl32(F(x) * inv)) + zo, output_min, output_max)    :115-118 (lrintf: ties to even)
//   sigmoid  x < 0 ? 1/(1 + expf(-x)) : 1 - 1/(1 + expf(x))                :226-228
//   tanh     tanhf(x)                                                      :304-306
//   elu      x < 0 ? alpha expm1f(x) : x                                   :138-141
//   leaky    x < 0 ? x slope : x                                           :174-177
// (src/operators/lut-elementwise-nc.c; the lookup is x8_lut_ukernel__avx512skx_vpshufb_x64, init.c:3695). Plain C++
// against xnnpack.h; no fusediff code.
//
// Random tables of each operator, every code, against the rule; then "hard" codes, where the same formula in double
// rounds to another code, to show the tables are built in binary32 and not in double.
//
// Build and run (xnnpack.h includes <pthreadpool.h>, which Debian does not ship: the module's one-line typedef):
//   g++ -std=c++17 -O1 -ffp-contract=off -Ifused/xnnpack/private
//       docs/repro/xnnpack_table_rule.cpp -lXNNPACK -o table_rule && ./table_rule
// Expected output (exit 0 when every entry follows the rule, 1 otherwise, 2 on an XNNPACK error):
//   sigmoid_nc_qs8: 25600/25600 entries follow the rule
//   ... (one line per operator)
//   hard codes (binary32 and double disagree): 16 codes, the library gives the binary32 one on 16, the double one on 0
//   rule holds: 153616/153616 table entries are the binary32 glibc lrintf rule
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

enum Op { kSigmoidS8, kSigmoidU8, kTanhS8, kTanhU8, kEluS8, kLeakyU8 };
const char* const kName[] = {"sigmoid_nc_qs8", "sigmoid_nc_qu8", "tanh_nc_qs8",
                             "tanh_nc_qu8",    "elu_nc_qs8",     "leaky_relu_nc_qu8"};
bool Unsigned(Op op) { return op == kSigmoidU8 || op == kTanhU8 || op == kLeakyU8; }

struct Table {
  Op op;
  float si, so, p;  // p: elu's alpha, leaky's slope
  int zx, zo;
};

float F32(Op op, float x, float p) {
  switch (op) {
    case kSigmoidS8:
    case kSigmoidU8: return std::signbit(x) ? 1.0f / (1.0f + expf(-x)) : 1.0f - 1.0f / (1.0f + expf(x));
    case kTanhS8:
    case kTanhU8: return tanhf(x);
    case kEluS8: return std::signbit(x) ? p * expm1f(x) : x;
    default: return std::signbit(x) ? x * p : x;
  }
}
double F64(Op op, double x, double p) {
  switch (op) {
    case kSigmoidS8:
    case kSigmoidU8: return 1.0 / (1.0 + std::exp(-x));
    case kTanhS8:
    case kTanhU8: return std::tanh(x);
    case kEluS8: return x < 0 ? p * std::expm1(x) : x;
    default: return x < 0 ? x * p : x;
  }
}
int Rule32(const Table& t, int code, int lo, int hi) {
  const float x = static_cast<float>(code - t.zx) * t.si;
  return static_cast<int>(std::clamp<long>(lrintf(F32(t.op, x, t.p) * (1.0f / t.so)) + t.zo, lo, hi));
}
int Rule64(const Table& t, int code, int lo, int hi) {
  const double x = static_cast<double>(code - t.zx) * t.si;
  return static_cast<int>(std::clamp<long>(std::lrint(F64(t.op, x, t.p) / t.so) + t.zo, lo, hi));
}

// The operator's output for all 256 codes (index: the code's byte), over the full output range.
std::vector<int> ReadBack(const Table& t) {
  const bool u8 = Unsigned(t.op);
  const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  std::vector<uint8_t> x(256 + XNN_EXTRA_BYTES), y(256 + XNN_EXTRA_BYTES);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<uint8_t>(i);
  const auto* xs = reinterpret_cast<const int8_t*>(x.data());
  auto* ys = reinterpret_cast<int8_t*>(y.data());
  const auto zx8 = static_cast<int8_t>(t.zx), zo8 = static_cast<int8_t>(t.zo);
  const auto zxu = static_cast<uint8_t>(t.zx), zou = static_cast<uint8_t>(t.zo);
  xnn_operator_t op = nullptr;
  xnn_status st = xnn_status_success;
  switch (t.op) {
    case kSigmoidS8:
      st = xnn_create_sigmoid_nc_qs8(1, 1, 1, zx8, t.si, zo8, t.so, lo, hi, 0, &op);
      if (!st) st = xnn_setup_sigmoid_nc_qs8(op, 256, xs, ys, nullptr);
      break;
    case kSigmoidU8:
      st = xnn_create_sigmoid_nc_qu8(1, 1, 1, zxu, t.si, zou, t.so, lo, hi, 0, &op);
      if (!st) st = xnn_setup_sigmoid_nc_qu8(op, 256, x.data(), y.data(), nullptr);
      break;
    case kTanhS8:
      st = xnn_create_tanh_nc_qs8(1, 1, 1, zx8, t.si, zo8, t.so, lo, hi, 0, &op);
      if (!st) st = xnn_setup_tanh_nc_qs8(op, 256, xs, ys, nullptr);
      break;
    case kTanhU8:
      st = xnn_create_tanh_nc_qu8(1, 1, 1, zxu, t.si, zou, t.so, lo, hi, 0, &op);
      if (!st) st = xnn_setup_tanh_nc_qu8(op, 256, x.data(), y.data(), nullptr);
      break;
    case kEluS8:
      st = xnn_create_elu_nc_qs8(1, 1, 1, t.p, zx8, t.si, zo8, t.so, lo, hi, 0, &op);
      if (!st) st = xnn_setup_elu_nc_qs8(op, 256, xs, ys, nullptr);
      break;
    case kLeakyU8:
      st = xnn_create_leaky_relu_nc_qu8(1, 1, 1, t.p, zxu, t.si, zou, t.so, lo, hi, 0, &op);
      if (!st) st = xnn_setup_leaky_relu_nc_qu8(op, 256, x.data(), y.data(), nullptr);
      break;
  }
  if (!st) st = xnn_run_operator(op, nullptr);
  xnn_delete_operator(op);
  if (st != xnn_status_success) {
    std::printf("XNNPACK error: %s status %d\n", kName[t.op], static_cast<int>(st));
    std::exit(2);
  }
  std::vector<int> out(256);
  for (int i = 0; i < 256; ++i) out[i] = u8 ? y[i] : static_cast<int8_t>(y[i]);
  return out;
}

// A table of `op` with random parameters in the operator's domain (sigmoid and tanh take one output quantization).
Table RandomTable(Op op) {
  const bool u8 = Unsigned(op);
  const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  Table t{op, static_cast<float>(std::exp2(Real(-9, 0))), 0, 0, Int(lo, hi), 0};
  switch (op) {
    case kSigmoidS8: t.so = 0x1p-8f, t.zo = -128; break;
    case kSigmoidU8: t.so = 0x1p-8f, t.zo = 0; break;
    case kTanhS8: t.so = 0x1p-7f, t.zo = 0; break;
    case kTanhU8: t.so = 0x1p-7f, t.zo = 128; break;
    case kEluS8: t.so = static_cast<float>(std::exp2(Real(-8, -3))), t.zo = Int(lo, hi), t.p = Real(0.05, 2); break;
    case kLeakyU8: t.so = t.si * static_cast<float>(std::exp2(Real(-3, 3))), t.zo = Int(lo, hi), t.p = Real(0.01, 1); break;
  }
  return t;
}

}  // namespace

int main() {
  if (xnn_initialize(nullptr) != xnn_status_success) return 2;
  long total = 0, total_ok = 0;
  for (int o = kSigmoidS8; o <= kLeakyU8; ++o) {
    const Op op = static_cast<Op>(o);
    const int lo = Unsigned(op) ? 0 : -128, hi = Unsigned(op) ? 255 : 127;
    long n = 0, ok = 0;
    for (int trial = 0; trial < 100; ++trial) {
      const Table t = RandomTable(op);
      const std::vector<int> got = ReadBack(t);
      for (int i = 0; i < 256; ++i, ++n) {
        const int code = Unsigned(op) ? i : static_cast<int8_t>(i);
        ok += got[i] == Rule32(t, code, lo, hi);
      }
    }
    std::printf("%s: %ld/%ld entries follow the rule\n", kName[op], ok, n);
    total += n;
    total_ok += ok;
  }
  // Codes where binary32 and double round differently (sigmoid, tanh, elu): which one does the library give?
  long hard = 0, hard32 = 0, hard64 = 0;
  for (int o = kSigmoidS8; o <= kEluS8; ++o) {
    const Op op = static_cast<Op>(o);
    const int lo = Unsigned(op) ? 0 : -128, hi = Unsigned(op) ? 255 : 127;
    for (int found = 0, tries = 0; found < 4 && tries < 2000000; ++tries) {
      Table t = RandomTable(op);
      if (op == kEluS8) t.so = 0x1p-6f, t.zo = 0, t.p = 1.0f;
      const int code = Int(lo, hi);
      const int q32 = Rule32(t, code, -100000, 100000), q64 = Rule64(t, code, -100000, 100000);
      if (q32 == q64 || q32 < lo || q32 > hi) continue;
      ++found;
      const int got = ReadBack(t)[static_cast<uint8_t>(code)];
      ++hard;
      hard32 += got == q32;
      hard64 += got == q64;
    }
  }
  std::printf("hard codes (binary32 and double disagree): %ld codes, the library gives the binary32 one on %ld, the "
              "double one on %ld\n",
              hard, hard32, hard64);
  total += hard;
  total_ok += hard32;
  if (total_ok == total) {
    std::printf("rule holds: %ld/%ld table entries are the binary32 glibc lrintf rule\n", total_ok, total);
    return 0;
  }
  std::printf("rule broken: %ld of %ld table entries differ\n", total - total_ok, total);
  return 1;
}
