// How far oneDNN's eltwise forward (f32) is from the exact activation, per algorithm: the table of docs/onednn.md
// ("The eltwise's own approximation of f"). Not a benchmark and not a test: a measurement, printed as Markdown.
//
//   build/bench/eltwise_error [--step S] [--activation NAME]
//   build/bench/eltwise_error --activation NAME --at X [--output-scale SY --zero-point ZY]
//
// --at: one input only: oneDNN's F(X), the exact f(X) (MPFR, 30 digits) and fl32(f(X)), and with an output scale
// the two values of t = fl32(fl32(e fl32(1/SY)) + ZY) for e = F and e = fl32(f) (reference::Binary32OutputValue).
//
// Inputs: every S-th binary32 value (by bit pattern) in [-16, 16], both signs, and every 2^16-th finite binary32
// beyond (S = 1: every value in [-16, 16]). For each input x: F = oneDNN's result, f = the exact activation by the
// reference's double filter (|f_d - f| <= 2^-36 |f| + 2^-1000 max(1, |x|): the ulp figures below are correct to
// about 2^-12 ulp), and at the worst inputs f again in MPFR (reference::ActivationDecimal, 40 digits).
// Reported: max |F - f| in ulps of f (the binary32 ulp at |f|) and max relative error |F - f| / |f|, both over
// |f| >= 2^-16, and where; max absolute error |F - f| over [-16, 16] and where (what moves t = F/sy + zy); how
// many inputs give F != fl32(f) (not correctly rounded), and for the exactly emulated algorithms how many differ
// from reference::Binary32Activation bit for bit.
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/activation.h"
#include "fusediff/reference/reference.h"

namespace {

using fusediff::Activation;
using fusediff::ActivationKind;

// Ulp and relative figures only where f is at least this large: below, binary32's exponent range and the
// algorithms' flush to zero (F = 0 for f ~ 1e-30) make relative figures meaningless; the absolute column covers it.
constexpr double kSignificant = 0x1p-16;

double Ulp32(double f) {
  const double a = std::fabs(f);
  if (a < 0x1p-126) return 0x1p-149;
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 1 - 23);
}

std::string ExactDecimal(float x) {
  char buffer[200];
  std::snprintf(buffer, sizeof buffer, "%.120e", static_cast<double>(x));  // exact: x is dyadic, glibc prints all
  return buffer;
}

struct Worst {
  double value = -1;
  float x = 0;
  float fused = 0;
  double exact = 0;
};

bool ExactlyEmulated(ActivationKind k) {
  return k == ActivationKind::relu || k == ActivationKind::leaky_relu || k == ActivationKind::relu6 ||
         k == ActivationKind::hard_swish;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t step = 256;
  std::string only;
  const char* at = nullptr;
  float output_scale = 0;
  int32_t zero_point = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--step") == 0 && i + 1 < argc) {
      step = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--activation") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--at") == 0 && i + 1 < argc) {
      at = argv[++i];
    } else if (std::strcmp(argv[i], "--output-scale") == 0 && i + 1 < argc) {
      output_scale = std::strtof(argv[++i], nullptr);
    } else if (std::strcmp(argv[i], "--zero-point") == 0 && i + 1 < argc) {
      zero_point = static_cast<int32_t>(std::strtol(argv[++i], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: eltwise_error [--step S] [--activation NAME] [--at X [--output-scale SY "
                           "--zero-point ZY]]\n");
      return 2;
    }
  }
  if (at != nullptr) {
    const float x = std::strtof(at, nullptr);
    for (ActivationKind kind : fusediff::kAllActivations) {
      if (!only.empty() && only != fusediff::to_string(kind)) continue;
      const Activation a = fusediff::make_activation(kind);
      std::vector<float> in{x}, out(1);
      std::string implementation, why;
      if (!fusediff::fused::onednn::EltwiseForward(a, in, out, &implementation, &why)) continue;
      const float rounded = fusediff::reference::Binary32Activation(a, x);
      std::printf("%s at x = %.9g (%a), %s:\n  oneDNN F(x)  = %.9g (%a)\n  fl32(f(x))   = %.9g (%a)\n"
                  "  exact f(x)   = %s\n  F - fl32(f)  = %.0f ulp\n",
                  std::string(fusediff::to_string(kind)).c_str(), static_cast<double>(x), static_cast<double>(x),
                  implementation.c_str(), static_cast<double>(out[0]), static_cast<double>(out[0]),
                  static_cast<double>(rounded), static_cast<double>(rounded),
                  fusediff::reference::ActivationDecimal(a, ExactDecimal(x), 30).c_str(),
                  (static_cast<double>(out[0]) - rounded) / Ulp32(rounded));
      if (output_scale > 0) {
        const float t_fused = fusediff::reference::Binary32OutputValue(out[0], output_scale, zero_point);
        const float t_rule = fusediff::reference::Binary32OutputValue(rounded, output_scale, zero_point);
        std::printf("  t from F     = %.9g -> %.0f\n  t from fl32(f) = %.9g -> %.0f\n", static_cast<double>(t_fused),
                    std::nearbyint(static_cast<double>(t_fused)), static_cast<double>(t_rule),
                    std::nearbyint(static_cast<double>(t_rule)));
      }
    }
    return 0;
  }
  if (step == 0) step = 1;
  const uint32_t sixteen = std::bit_cast<uint32_t>(16.0f);
  std::vector<float> inputs;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b = 0; b <= sixteen; b += step) inputs.push_back(std::bit_cast<float>(b | sign));
    for (uint32_t b = sixteen + 65536; b < 0x7F800000u; b += 65536) inputs.push_back(std::bit_cast<float>(b | sign));
  }
  std::printf("oneDNN %s, ISA %s; %zu inputs (every %u-th binary32 in [-16, 16], every 65536-th beyond)\n\n",
              fusediff::fused::onednn::LibraryVersion().c_str(), fusediff::fused::onednn::EffectiveIsa().c_str(),
              inputs.size(), step);
  std::printf("| activation | implementation | max ulp error (abs f >= 2^-16) | max relative error (abs f >= 2^-16) | "
              "max absolute error (abs x <= 16) | F != fl32(f) | F vs the binary32 rule |\n|---|---|---|---|---|---|---|\n");
  std::vector<float> fused(inputs.size());
  for (ActivationKind kind : fusediff::kAllActivations) {
    const Activation a = fusediff::make_activation(kind);
    if (!only.empty() && only != fusediff::to_string(kind)) continue;
    std::string implementation, why;
    if (!fusediff::fused::onednn::EltwiseForward(a, inputs, fused, &implementation, &why)) {
      std::printf("| %s | unsupported: %s |||||||\n", std::string(fusediff::to_string(kind)).c_str(), why.c_str());
      continue;
    }
    Worst absolute, ulps, relative;
    uint64_t not_rounded = 0, undecided = 0, rule_mismatch = 0, compared = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const float x = inputs[i], F = fused[i];
      const fusediff::reference::FilterEvaluation fe = fusediff::reference::ActivationFilter(a, x);
      if (!fe.usable || !std::isfinite(F)) continue;
      ++compared;
      const double err = std::fabs(static_cast<double>(F) - fe.f);
      if (err > absolute.value && std::fabs(x) <= 16) absolute = Worst{err, x, F, fe.f};
      if (std::fabs(fe.f) >= kSignificant) {
        const double u = err / Ulp32(fe.f);
        if (u > ulps.value) ulps = Worst{u, x, F, fe.f};
        const double r = err / std::fabs(fe.f);
        if (r > relative.value) relative = Worst{r, x, F, fe.f};
      }
      // fl32(f) from the enclosure: decided when both ends round alike (the host's double -> float is RNE).
      const float lo = static_cast<float>(fe.f - 2 * fe.bound), hi = static_cast<float>(fe.f + 2 * fe.bound);
      if (lo != hi) {
        ++undecided;
      } else if (lo != F) {
        ++not_rounded;
      }
      if (ExactlyEmulated(kind)) {
        const float e = fusediff::reference::Binary32Activation(a, x);
        rule_mismatch += !(e == F);
      }
    }
    // The worst inputs once more, with f in MPFR (40 digits).
    const auto mpfr = [&](const Worst& w, bool in_ulps) -> std::string {
      if (w.value <= 0) return "0";
      const std::string f = fusediff::reference::ActivationDecimal(a, ExactDecimal(w.x), 40);
      const double exact = std::strtod(f.c_str(), nullptr);
      const double err = std::fabs(static_cast<double>(w.fused) - exact);
      char buffer[160];
      std::snprintf(buffer, sizeof buffer, in_ulps ? "%.2f ulp at x = %.9g (F %.9g, f %.9g)" : "%.3g at x = %.9g (F %.9g, f %.9g)",
                    in_ulps ? err / Ulp32(exact) : err, static_cast<double>(w.x), static_cast<double>(w.fused), exact);
      return buffer;
    };
    char rel[96];
    std::snprintf(rel, sizeof rel, "%.3g at x = %.9g", relative.value, static_cast<double>(relative.x));
    std::printf("| %s | %s | %s | %s | %s | %" PRIu64 " of %" PRIu64 " (%" PRIu64 " undecided) | %s |\n",
                std::string(fusediff::to_string(kind)).c_str(), implementation.c_str(), mpfr(ulps, true).c_str(),
                relative.value > 0 ? rel : "0", mpfr(absolute, false).c_str(), not_rounded, compared, undecided,
                ExactlyEmulated(kind) ? (std::to_string(rule_mismatch) + " differ").c_str() : "-");
  }
  return 0;
}
