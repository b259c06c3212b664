#pragma once
// Shared by the oneDNN test files: the graph's convention as oneDNN can express it.
#include "fusediff/model/activation.h"
#include "fusediff/model/convention.h"

namespace fusediff::test_support {

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
