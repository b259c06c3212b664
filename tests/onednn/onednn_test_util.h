#pragma once
// Shared by the oneDNN test files: the graph's convention as oneDNN can express it, and the ISA a test needs.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <string>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/activation.h"
#include "fusediff/model/convention.h"

namespace fusediff::test_support {

// A test that needs oneDNN's kernels for one ISA selects it: oneDNN's maximum ISA is set before its first dispatch
// in this process (ctest runs every test in a process of its own), unless DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA
// already caps it (the per-ISA ctest runs). True when oneDNN then dispatches to exactly `isa`: a CPU without it
// (or another cap) dispatches lower or higher, and the test skips naming both.
inline bool SelectIsa(dnnl::cpu_isa isa) {
  if (std::getenv("DNNL_MAX_CPU_ISA") == nullptr && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
    try {
      dnnl::set_max_cpu_isa(isa);
    } catch (const dnnl::error&) {
      // oneDNN already dispatched in this process: the ISA stays what it is, and the check below says so.
    }
  }
  return dnnl::get_effective_cpu_isa() == isa;
}

// GTEST_SKIP unless oneDNN dispatches to `isa` (SelectIsa); NAME is the cap's name, e.g. AVX512_CORE_VNNI.
#define FUSEDIFF_REQUIRE_ISA(isa, name)                                                                  \
  do {                                                                                                  \
    if (!::fusediff::test_support::SelectIsa(isa)) {                                                    \
      GTEST_SKIP() << "needs oneDNN's " name " kernels; oneDNN dispatches to "                          \
                   << ::fusediff::fused::onednn::EffectiveIsa() << " here";                            \
    }                                                                                                   \
  } while (false)

inline const QuantType kUint8{ScalarType::uint8, false};
inline const QuantType kInt8{ScalarType::int8, false};

// Requant f32_zero_point_first, output half_to_even with the zero point added before rounding.
inline Convention OneDnnGraph(const Activation& a, QuantParams u, QuantParams y) {
  Convention c;
  c.activation = a;
  c.requant = RequantVariant::f32_zero_point_first;
  c.intermediate.q = u;
  c.intermediate.rounding = RoundingMode::half_to_even;
  c.output.q = y;
  c.output.rounding = RoundingMode::half_to_even;
  c.output.zero_point_order = ZeroPointOrder::before_rounding;
  return c;
}
inline Convention OneDnnGraph(ActivationKind kind, QuantParams u, QuantParams y) {
  return OneDnnGraph(make_activation(kind), u, y);
}

}  // namespace fusediff::test_support
