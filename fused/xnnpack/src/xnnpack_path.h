#pragma once
// XNNPACK's paths (xnnpack_backend.h) for the patterns it can express, and the convention they declare.
#include <memory>
#include <string>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/fused_path.h"

namespace fusediff::fused::xnnpack {

inline constexpr std::string_view kFused = "xnnpack";
inline constexpr std::string_view kUnfused = "xnnpack_unfused";

// Whether XNNPACK runs the activation as a table operator (sigmoid, tanh, elu, leaky_relu), not as the producer's
// output clamp (relu, relu6).
bool IsTableActivation(ActivationKind kind);
// The convention XNNPACK's operators compute for a graph convention (docs/xnnpack.md): the fp32 requantization
// (f32_half_even), the clamp on codes, and the tables of PostOpArithmetic::binary32_libm.
Convention XnnpackConvention(const Convention& graph);
// The path for a case: null with *why where XNNPACK cannot express it.
std::unique_ptr<FusedPath> CreateXnnpackPath(const CaseSpec& spec, std::string* why);

}  // namespace fusediff::fused::xnnpack
