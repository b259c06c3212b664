#pragma once
// oneDNN paths for the patterns beyond conv2d+act (onednn_patterns.cpp), and the pieces of onednn_kernel.cpp they
// share. Internal to fused/onednn.
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// Poison pattern r over a buffer the library is to overwrite (destination, scratchpad, intermediates): byte i is
// 0xA5 + 0x4B r + 0x1F i mod 256, different for every repetition r < 256 at every byte (0x4B is odd), so output
// that reads memory it never wrote differs between repetitions (--repeat).
void Poison(void* data, size_t bytes, uint32_t r);
// A user-managed scratchpad (attr scratchpad_mode::user) for a primitive, poisoned with pattern r.
struct Scratchpad {
  std::vector<uint8_t> bytes;
  dnnl::memory memory;
  Scratchpad(const dnnl::memory::desc& desc, const dnnl::engine& engine, uint32_t r);
};

// The oneDNN paths of conv2d+add+act (sum or binary_add post-op + eltwise, and the unfused graph), fc+act (inner
// product + eltwise, and unfused) and conv2d+act+maxpool (unfused only: 2.6 has no pooling post-op). Null with
// *unsupported_reason for any other pattern, fusion or mutant, or a convention oneDNN cannot express.
std::unique_ptr<FusedPath> CreatePatternPath(const CaseSpec& spec, std::string* unsupported_reason);

}  // namespace fusediff::fused::onednn::detail
