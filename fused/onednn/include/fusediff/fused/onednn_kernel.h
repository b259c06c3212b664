#pragma once
// A real library's fused kernel under test: oneDNN 2.x int8 convolution (or deconvolution) with per-output-channel
// output scales, source and destination zero points, an s32 bias and one eltwise post-op; and, for comparison, the
// same graph unfused in oneDNN (conv to the 8-bit intermediate, dequantize, eltwise, quantize). Built only with
// FUSEDIFF_WITH_ONEDNN. Depends on the model and oneDNN only.
//
// oneDNN 2.x order of computation (doc/primitives/convolution.md, "Data Types" and attributes; conventions.md):
//   d = fl32(acc_s32 - bias) + fl32(bias)   (zero point compensated in s32; the sum rounded in binary32, which is
//                                     fl32(acc) exactly while both terms stay below 2^24: Run rejects draws beyond)
//   d = fl32(d * output_scale[k])     (per output channel)
//   d = fl32(eltwise_scale * F(d))    (the eltwise post-op: F = f in binary32, oneDNN's own approximation)
//   d = fl32(d + dst_zero_point), saturated, rounded to nearest even (cvtps2dq under the default MXCSR)
// (a product, then a sum: no kernel it dispatches fuses them; docs/onednn.md, "Exact binary32 post-ops")
// The mapping that makes the activation see real values (conventions.md): output_scale[k] = fl32(sx * sw[k]),
// eltwise_scale = fl32(1 / sy), dst_zero_point = zy. So the fused kernel declares the graph's convention with
// an f32 intermediate, v = fl32(fl32(acc) * fl32(sx*sw[k])), and binary32 post-ops (PostOpArithmetic::binary32):
// y = sat(round_half_even(fl32(fl32(F(v) * fl32(1/sy)) + zy))).
// The unfused path: conv with output_scale[k] = fl32(fl32(sx*sw[k]) / su), dst zero point zu into the 8-bit
// intermediate (requant f32_zero_point_first), a reorder to f32 with scale su and source zero point zu, eltwise
// forward in f32, a reorder to the output type with scale fl32(1/sy) and destination zero point zy.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusediff/model/activation.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/formulation.h"
#include "fusediff/model/summation_order.h"
#include "fusediff/fused/fused_path.h"

namespace fusediff::fused::onednn {

// "2.6.3 (commit N/A)", from dnnl_version().
std::string LibraryVersion();
// The ISA oneDNN dispatches to on this CPU (dnnl::get_effective_cpu_isa), e.g. "avx512_core_bf16".
std::string EffectiveIsa();

// oneDNN's two paths: the fused primitive with post-ops ("onednn") and the graph unfused, node by node
// ("onednn_unfused").
enum class OneDnnVariant { fused, unfused };
// The path a case names (its CaseSpec::backend, one of OneDnnBackend's paths).
OneDnnVariant VariantOf(const CaseSpec& spec);

class OneDnnKernel {
 public:
  // `graph` is the case's (quantize-then-activate) convention, `variant` fused or unfused. Returns nullptr
  // and sets *unsupported_reason when oneDNN cannot express the convention the path declares (the activation,
  // the output type or rounding, the unfused intermediate); throws InputError for an invalid convention.
  static std::unique_ptr<OneDnnKernel> Create(const Convention& graph, OneDnnVariant variant, std::string* unsupported_reason);
  ~OneDnnKernel();

  // Runs one draw through oneDNN, passed as `formulation` says (model/formulation.h): y[output_index] = output
  // code. Returns false and sets *unsupported_reason (oneDNN's error and status, with the problem) when oneDNN
  // rejects this draw's shape or types. The destination, the intermediates and a user-managed scratchpad are
  // filled with poison pattern set_repetition(r) before oneDNN runs.
  bool Run(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y,
           std::string* unsupported_reason, const Formulation& formulation = {});
  void set_repetition(uint32_t r);

  // The implementations oneDNN chose so far, distinct, in first-use order ("jit_int8:avx512_core_vnni", ...).
  const std::vector<std::string>& implementations() const;
  // The implementation(s) of the last successful Run.
  const std::string& last_implementation() const;

 private:
  struct Impl;
  explicit OneDnnKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// oneDNN's eltwise forward primitive (f32, forward_inference) of the activation's algorithm (the one the fused and
// unfused paths use) over x, into y (same size): the library's own approximation of f, for measuring it
// (bench/eltwise_error.cpp) and for the bit-exactness tests. Returns false with the reason when the activation
// has no algorithm; *implementation gets oneDNN's implementation string.
bool EltwiseForward(const Activation& activation, std::span<const float> x, std::span<float> y,
                    std::string* implementation, std::string* unsupported_reason);

// The fused-path interface: OneDnnKernel for conv2d+act; for conv2d+add+act (sum or binary_add post-op + eltwise)
// and fc+act (inner product + eltwise), the post-op chains of src/onednn_patterns.cpp, and their unfused graphs;
// conv2d+act+maxpool unfused only (oneDNN 2.6 has no conv+pool fusion: the fused case is unsupported with that
// reason); fc+layernorm+act and fc+add+layernorm through layer_normalization_forward (src/onednn_layernorm.cpp). Draws use the whole s8 weight range; one draw at a time (oneDNN parallelises each primitive itself).
std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* unsupported_reason);

// oneDNN 2.6's f32 layer_normalization_forward as it dispatches here (honouring DNNL_MAX_CPU_ISA, never the host's
// CPU flags): the implementation it reports for plain rows (impl_info_str) and the order declared for it
// (docs/summation-orders.md): simple_layer_normalization at AVX2 and above (get_effective_cpu_isa) onednn_jit,
// below AVX2 onednn_cpp, lnorm_ref onednn_ref. `scale_shift` true: use_scale | use_shift (gamma, beta inside the
// kernel); false: no scale or shift, then a binary mul and a binary add (the unfused graph), whose output is
// centered_times_inv without fma in every implementation (name + "+binary_mul_add"). `declared` false: another
// implementation, with no declared order.
struct LayerNormDispatch {
  std::string implementation;
  std::string isa;   // EffectiveIsa()
  std::string name;  // the named order, e.g. "onednn_jit"
  NormalizationOrder order;
  bool declared = false;
};
LayerNormDispatch DispatchedLayerNorm(bool scale_shift);

// oneDNN 2.6.3's bf16 layer_normalization_forward (bf16 src and dst, f32 mean and variance, use_scale | use_shift)
// as it dispatches here, and the graph's float boundaries it runs (docs/summation-orders.md, "bf16"): order
// onednn_jit_bf16 (simple_layer_normalization) or onednn_ref (lnorm_ref); x and y each rounded once from binary32 to
// bf16, nearest even, by vcvtneps2bf16 where mayiuse(avx512_core_bf16) (binary32 subnormals flushed to +-0), else by
// bf16_emulation_t (subnormals kept): the norm's y store (jit_uni_layer_normalization_kernels.cpp:140-162) and the
// f32 -> bf16 reorder of x (jit_uni_reorder.cpp:284-289, 571-576) test the same ISA. Below avx512_core oneDNN has
// no bf16 layer norm (platform::has_data_type_support): `norm.declared` false, `norm.implementation` saying so.
struct LayerNormBf16Dispatch {
  LayerNormDispatch norm;
  FloatBoundary boundary;  // of x before the norm and of y after it
};
LayerNormBf16Dispatch DispatchedLayerNormBf16();

// oneDNN 2.6.3's brgconv dies with SIGSEGV on an output row whose kernel rows all fall in the padding (docs/onednn.md,
// "brgconv: an empty kernel range crashes"; docs/repro/onednn_brgconv_empty_kernel_range.cpp). Its conditions, from
// the library's source, on what fusediff sees before executing (oneDNN's geometry: dilate_h 0 is dense):
//   - the linked oneDNN is 2.6.0 .. 2.7.2 (the same code; changed in 2.7.3 and 3.0);
//   - the implementation is brgconv:avx512_core* without AMX (brgemm_convolution_fwd_t, exec_vpad / exec_base);
//   - the post-ops hold a sum and an eltwise: the row's post-op kernel then has alpha = 0 (jit_brgemm_conv.cpp
//     add_po_kernel) and its eltwise injector runs without loading its table (jit_brgemm_post_ops.hpp);
//   - some output row has an empty kh range (BrgconvEmptyKernelRow: BRGEMM_CONV_KER_HEADER's kh_f <= kh_s), so
//     ker_vpad / ker_base call that kernel over the whole row (perform_outwork);
//   - no accumulation buffer (jcp.use_buffer false, else alpha = 1): the scratchpad is the brgemm batch alone,
//     (threads + 1) x 4096 bytes (init_scratchpad books the buffer, and compensation, as further entries; a batch of
//     at most 128 elements per thread, every fusediff draw's); `threads`: oneDNN's dnnl_get_max_threads() when the
//     primitive descriptor was created.
struct BrgconvGeometry {
  int64_t ih = 1, oh = 1, kh = 1, stride_h = 1, dilate_h = 0, t_pad = 0;
};
bool BrgconvEmptyKernelRow(const BrgconvGeometry& g);
bool BrgconvEmptyKernelRangeCrashes(const std::string& implementation, bool sum_and_eltwise, const BrgconvGeometry& g,
                                    size_t scratchpad_bytes, int threads);
// The thread count oneDNN sizes its primitives for (omp_get_max_threads(): Debian's libdnnl uses OpenMP).
int OneDnnMaxThreads();

// The oneDNN backend module (model/backend.h): paths onednn and onednn_unfused (one word each, sharing their draws),
// their declared conventions and tolerances, oneDNN's provenance, its known-defect ledger (known_defects.json) and
// its dispatch control (ONEDNN_MAX_CPU_ISA). Register it with RegisterBackend.
const Backend& OneDnnBackend();

}  // namespace fusediff::fused::onednn
