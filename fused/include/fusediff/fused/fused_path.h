#pragma once
// The built-in backend: the fixed-point kernels as one backend module (model/backend.h), and their fused paths.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusediff/model/backend.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/fused_path.h"
#include "fusediff/model/pattern.h"

namespace fusediff::fused {

// The interface lives in the model (model/fused_path.h), beside the backend registry; these names stay for the
// paths defined here and in the library backends.
using fusediff::CodeSteps;
using fusediff::FusedPath;
using fusediff::PairedRun;
using fusediff::RunInfo;

// The built-in fixed-point paths: conv2d+act through fused_kernel.h (the case's table kind, its external table,
// its mutant), every other pattern through pattern_kernel.h. Null with *unsupported_reason set where they cannot
// run the case; InputError for an invalid one.
std::unique_ptr<FusedPath> CreateBuiltInPath(const CaseSpec& spec, std::string* unsupported_reason);

// The built-in backend module: path "builtin", words lut, lut_interp and pwl (the table kind), every stage kind and
// pattern, the graph's own convention, the table tolerances (model/tolerance.h). Register it with RegisterBackend.
const Backend& BuiltInBackend();

}  // namespace fusediff::fused
