#pragma once
// oneDNN paths for the patterns beyond conv2d+act (onednn_patterns.cpp), and the pieces of onednn_kernel.cpp they
// share. Internal to fused/onednn.
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>
#include <string>

#include "fusediff/fused/fused_path.h"
#include "fusediff/model/case_spec.h"

namespace fusediff::fused::onednn::detail {

struct EltwiseAlgorithm {
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  float alpha = 0.0f;
  float beta = 0.0f;
};

// The one eltwise algorithm of each activation (onednn_kernel.cpp MapActivation); nullopt with *why otherwise.
std::optional<EltwiseAlgorithm> MapEltwise(const Activation& a, std::string* why);
// u8 / s8 for a full-range 8-bit type; nullopt otherwise (oneDNN saturates to the full range).
std::optional<dnnl::memory::data_type> EightBitDataType(const QuantType& t);
// "oneDNN rejected WHAT: MESSAGE (status N[, unimplemented])".
std::string DescribeDnnlError(const dnnl::error& e, const std::string& what);

// The oneDNN paths of conv2d+add+act (sum or binary_add post-op + eltwise, and the unfused graph), fc+act (inner
// product + eltwise, and unfused) and conv2d+act+maxpool (unfused only: 2.6 has no pooling post-op). Null with
// *unsupported_reason for any other pattern, fusion or mutant, or a convention oneDNN cannot express.
std::unique_ptr<FusedPath> CreatePatternPath(const CaseSpec& spec, std::string* unsupported_reason);

// oneDNN's float convolutions (onednn_float_conv.cpp): spec.convention.float_conv enabled, conv2d+act, a float
// output. Null with *unsupported_reason where oneDNN or this CPU cannot run them (NativeBf16).
std::unique_ptr<FusedPath> CreateFloatConvPath(const CaseSpec& spec, std::string* unsupported_reason);
// Whether oneDNN dispatches to an ISA with a native bf16 dot product (avx512_core_bf16 or avx512_core_amx, honouring
// ONEDNN_MAX_CPU_ISA); false with the reason otherwise.
bool NativeBf16(std::string* why);

}  // namespace fusediff::fused::onednn::detail
