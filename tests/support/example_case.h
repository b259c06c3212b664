#pragma once
// One conv2d+act case (gelu_erf on the built-in int8 lut path, mutant use-output-scale) for the tests that need
// some case rather than a particular one: the model's replay and sample-key tests and the oneDNN backend's.
#include "fusediff/model/case_spec.h"

namespace fusediff::test_support {

inline CaseSpec ExampleCase() {
  CaseSpec s;
  s.name = "gelu_erf.int8.lut.conv";
  s.convention.activation = make_activation(ActivationKind::gelu_erf);
  s.convention.intermediate.q = QuantParams{QuantType{ScalarType::int8}, 0.0470588244f, -1};
  s.convention.output.q = QuantParams{QuantType{ScalarType::int8, true}, 0.0242352933f, -121};
  s.convention.output.zero_point_order = ZeroPointOrder::before_rounding;
  s.mutant = Mutant::use_output_scale;
  return s;
}

}  // namespace fusediff::test_support
