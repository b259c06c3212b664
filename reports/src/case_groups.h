#pragma once
// The summary lines of the terminal outputs (run, gate, compare): the cases that need no line of their own are
// counted per pattern and fused path.
#include <string>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/pattern.h"

namespace fusediff::reports {

// "conv2d+act lut_interp", "fc+act lut".
inline std::string CaseGroup(const CaseSpec& spec) {
  return pattern_name(spec.pattern) + " " + std::string(fused_path_name(spec));
}

}  // namespace fusediff::reports
