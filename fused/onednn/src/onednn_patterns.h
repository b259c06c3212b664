#pragma once
// oneDNN paths for the patterns beyond conv2d+act (onednn_patterns.cpp), and the pieces of onednn_kernel.cpp they
// share. Internal to fused/onednn.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fusediff/fused/fused_path.h"
#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/case_spec.h"

namespace fusediff::fused::onednn::detail {

// An 8-bit boundary as oneDNN takes it: its data type (u8 or s8), scale and zero point.
struct Quant {
  dnnl::memory::data_type type = dnnl::memory::data_type::s8;
  float scale = 1.0f;
  int32_t zero_point = 0;
};

// A draw the path will not run: *why (when asked for) gets the reason; returns false for `return Reject(...)`.
inline bool Reject(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return false;
}

// A case the path cannot run: *why gets the reason; returns no path.
inline std::unique_ptr<FusedPath> Unsupported(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return nullptr;
}

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

// The producer primitive of a Conv2D or ConvTranspose2D draw (weights `weights_any`, to be laid out by oneDNN),
// what it asks for and which implementation it chose. A transposed convolution's output padding is passed as a
// smaller bottom/right padding (PyTorch's mapping; negative where the output padding exceeds the padding, which
// oneDNN accepts while > -stride), plus `extension`'s stride multiples (model/formulation.h output_padding_extension). Throws
// dnnl::error where oneDNN refuses the problem.
struct ConvPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc weights_md, scratchpad_md;
  std::string implementation;
};
ConvPrimitive CreateConvPrimitive(const ConvCase& conv, std::pair<int32_t, int32_t> extension,
                                  const dnnl::memory::desc& src, const dnnl::memory::desc& weights_any,
                                  const dnnl::memory::desc& bias, const dnnl::memory::desc& dst,
                                  const dnnl::primitive_attr& attr, const dnnl::engine& engine);

// The source buffer a primitive reads (onednn_weights.cpp), as bytes (two's complement for s8): the draw's codes
// moved by `shift` into the type passed, the output-padding extension's rows/columns holding `zero_point`, then
// kSourceTailBytes of source_tail_code (fused/onednn_defects.h): oneDNN 2.6's jit_uni_deconv reads past the input on
// some rows (docs/onednn.md), and a known tail makes that read a function of the draw.
std::vector<uint8_t> SourceBytes(const ConvCase& conv, std::span<const int32_t> input,
                                 std::pair<int32_t, int32_t> extension, bool u8, int32_t shift, int32_t zero_point);

// A deconvolution's weights in a buffer fusediff owns (onednn_weights.cpp), so that what oneDNN 2.6's int8 jit
// deconvolution reads past the real kernel rows on stride-hole rows (docs/onednn.md, "Stride-hole rows read past
// the weights") is known instead of heap contents: the real weights reordered into `weights_md`, then a tail. Where
// weights_md is a plain blocked layout fusediff knows (OIhw4i16o4i, OIhw2i8o4i, OIhw4o4i, ...) with one ic and one
// oc block, the buffer is the kernel extended to stride_height rows in that layout: rows kernel_height ..
// stride_height - 1 hold stride_hole_tail_weight(o, c, h, kx) at exactly the offsets the kernel reads, 0 at
// padded-channel places (`tail_rows_placed`), and the first weights_md.get_size() bytes are the real blocked
// weights. Otherwise (another layout, compensation data, more blocks) the tail's byte t is
// stride_hole_tail_weight(0, 0, 0, t): never 0, so a read there still shows, but the model cannot place it.
struct DeconvolutionWeights {
  std::vector<uint8_t> storage;  // the buffer, 64-byte aligned within
  dnnl::memory memory;           // weights_md over it, holding the draw's weights
  size_t size = 0;               // weights_md.get_size()
  size_t tail = 0;               // bytes after `size` that fusediff wrote
  bool tail_rows_placed = false;
};
DeconvolutionWeights OwnDeconvolutionWeights(const ConvCase& conv, const dnnl::memory::desc& weights_md,
                                             const dnnl::engine& engine, dnnl::stream& stream);
// The weights memory of a primitive that asked for `weights_md`, from the draw's OHWI weights in `user`: for a
// deconvolution always OwnDeconvolutionWeights (kept alive in *owned until the primitive has run); otherwise `user`
// itself when oneDNN takes its layout, else oneDNN's reorder of it into a buffer oneDNN allocates.
dnnl::memory WeightsMemory(const ConvCase& conv, bool deconvolution, const dnnl::memory::desc& weights_md,
                           const dnnl::memory& user, const dnnl::engine& engine, dnnl::stream& stream,
                           DeconvolutionWeights* owned);
// Poison pattern r over a buffer the library is to overwrite (destination, scratchpad, intermediates): byte i is
// 0xA5 + 0x4B r + 0x1F i mod 256, different for every repetition r < 256 at every byte (0x4B is odd), so output
// that reads memory it never wrote differs between repetitions (--repeat).
void Poison(void* data, size_t bytes, uint32_t r);
// A host buffer of 8-bit codes (u8, or s8 in two's complement) for a memory object of that type.
struct Codes {
  dnnl::memory::data_type type = dnnl::memory::data_type::s8;
  std::vector<uint8_t> bytes;
  Codes(dnnl::memory::data_type t, size_t n) : type(t), bytes(n, 0) {}
  void set(size_t i, int32_t code) { bytes[i] = static_cast<uint8_t>(code); }
  int32_t at(size_t i) const {
    return type == dnnl::memory::data_type::u8 ? int32_t{bytes[i]} : int32_t{static_cast<int8_t>(bytes[i])};
  }
  void* data() { return bytes.data(); }
  void poison(uint32_t r) { Poison(bytes.data(), bytes.size(), r); }
};
// The attributes a formulation passes (model/formulation.h): a user-managed scratchpad (poisoned per repetition),
// one common output scale or one per output channel, and the runtime s32 zero-point attributes that are present.
dnnl::primitive_attr FormulationAttributes(const std::vector<float>& scales, bool common, bool src_zero_point,
                                           bool dst_zero_point);
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

// oneDNN's layer normalization in fc+layernorm+act and fc+add+layernorm (onednn_layernorm.cpp): every boundary kept
// as codes, the norm fused with gamma and beta (onednn) or followed by a binary mul and add (onednn_unfused). Null with
// *unsupported_reason for another pattern, fusion or mutant, or a convention oneDNN cannot express.
std::unique_ptr<FusedPath> CreateLayerNormPath(const CaseSpec& spec, std::string* unsupported_reason);

// oneDNN's float convolutions (onednn_float_conv.cpp): spec.convention.float_conv enabled, conv2d+act, a float
// output. Null with *unsupported_reason where oneDNN or this CPU cannot run them (NativeBf16).
std::unique_ptr<FusedPath> CreateFloatConvPath(const CaseSpec& spec, std::string* unsupported_reason);
// Whether oneDNN dispatches to an ISA with a native bf16 dot product (avx512_core_bf16 or avx512_core_amx, honouring
// ONEDNN_MAX_CPU_ISA); false with the reason otherwise.
bool NativeBf16(std::string* why);

}  // namespace fusediff::fused::onednn::detail
