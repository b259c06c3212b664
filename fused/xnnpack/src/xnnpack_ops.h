#pragma once
// Thin, checked calls of XNNPACK's quantized operators (xnnpack.h at ae108ef). Every tensor is a byte buffer holding
// 8-bit codes of one type (int8 or uint8, `Code8`), with XNN_EXTRA_BYTES of slack past its end: XNNPACK may read up to
// 16 bytes past every input (xnnpack.h:22-25). Each call refuses, with the reason, what XNNPACK would reject or abort
// on (its asserts are compiled in: a requantization scale below 2^-32 aborts the process, params-init.c:394) before
// calling it; an error status it still returns is reported the same way.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusediff/model/activation.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/quant.h"

namespace fusediff::fused::xnnpack {

// Initializes XNNPACK once per process (xnn_initialize; every call below does it first); false with *why where it
// cannot run on this CPU.
bool Initialize(std::string* why);

// A tensor of 8-bit codes: int8 (qs8/s8 operators) or uint8 (qu8/u8).
struct Code8 {
  bool is_signed = true;
  std::vector<uint8_t> bytes;  // size() + 16 slack bytes
  size_t size = 0;
  void resize(size_t n);
  void set(size_t i, int32_t code) { bytes[i] = static_cast<uint8_t>(code); }
  int32_t get(size_t i) const {
    return is_signed ? static_cast<int32_t>(static_cast<int8_t>(bytes[i])) : static_cast<int32_t>(bytes[i]);
  }
};

// The producer's output: quantization (scale, zero point; type int8 or uint8) and the clamp on its codes.
struct ProducerOutput {
  QuantParams q;
  int32_t lo = 0, hi = 0;
};

// One convolution (conv2d: convolution2d_nhwc; conv_transpose2d: deconvolution2d_nhwc) or fully connected layer
// (fully_connected_nc; `fc`, the case a 1x1 conv of a 1x1 image), created, its weights packed, set up and run on
// `input` (codes of conv.input_quant(), converted exactly to the output's type), writing `out` (NHWK). Per-tensor
// weight scales take the qs8 / qu8 operator; per-channel ones the qc8 convolution (int8 conv2d), else one operator
// per output channel writing every K-th code (the same kernels, each with its channel's scale). `implementation`
// names what ran. False with *rejected where XNNPACK refuses the draw.
bool RunProducer(const ConvCase& conv, bool fc, std::span<const int32_t> input, const ProducerOutput& output,
                 Code8& out, std::string* implementation, std::string* rejected);

// The elementwise operators after a producer, created once per case.
class ElementwiseOp {
 public:
  ElementwiseOp() = default;
  ElementwiseOp(const ElementwiseOp&) = delete;
  ElementwiseOp& operator=(const ElementwiseOp&) = delete;
  ~ElementwiseOp();
  // clamp_nc_s8 / clamp_nc_u8: min(max(x, lo), hi), lo < hi.
  static std::unique_ptr<ElementwiseOp> Clamp(bool is_signed, int32_t lo, int32_t hi, std::string* why);
  // The table operators: sigmoid_nc / tanh_nc (qs8, qu8), elu_nc_qs8, leaky_relu_nc_qu8 (alpha: elu's alpha, the
  // leaky slope), from input quantization `in` to `out` over the output type's range. Null with *why for an
  // activation or type XNNPACK has no operator for, or a quantization it refuses.
  static std::unique_ptr<ElementwiseOp> Table(const Activation& a, const QuantParams& in, const QuantParams& out,
                                              std::string* why);
  // add_nd_qs8 / add_nd_qu8 of a (quantization qa) and b (qb) into `out`, clamped to [lo, hi]. Null with *why where
  // XNNPACK refuses the quantization (each input-to-output scale ratio in [2^-10, 2^8):
  // binary-elementwise-nd.c:209-223).
  static std::unique_ptr<ElementwiseOp> Add(const QuantParams& qa, const QuantParams& qb, const QuantParams& out,
                                            int32_t lo, int32_t hi, std::string* why);
  // Runs on `in.size` codes (channels 1) into out (resized to match). False with *why on an error status.
  bool Run(const Code8& in, Code8& out, std::string* why) const;
  // The add: a and b of one shape (no broadcast).
  bool Run(const Code8& a, const Code8& b, Code8& out, std::string* why) const;
  const std::string& name() const { return name_; }

 private:
  void* op_ = nullptr;  // xnn_operator_t
  int kind_ = 0;
  bool is_signed_ = true;
  std::string name_;
};

// An NHWC tensor's shape.
struct Shape4 {
  size_t n = 0, h = 0, w = 0, c = 0;
  size_t elements() const { return n * h * w * c; }
};
// Square pooling windows (kernel, stride, padding on every side), created per draw (the channel count is a creation
// parameter). max_pooling2d_nhwc_s8 / u8: the codes' maximum, clamped to [lo, hi]. average_pooling2d_nhwc_qu8
// (uint8 only) from `in` to `out` quantization. *out_shape: the pooled shape. False with *why where XNNPACK refuses.
bool RunMaxPool(const Code8& x, const Shape4& s, int32_t kernel, int32_t stride, int32_t padding, int32_t lo,
                int32_t hi, Code8& y, Shape4* out_shape, std::string* why);
bool RunAveragePool(const Code8& x, const Shape4& s, int32_t kernel, int32_t stride, int32_t padding,
                    const QuantParams& in, const QuantParams& out, Code8& y, Shape4* out_shape, std::string* why);

// The requantization scale XNNPACK forms for a producer (convolution-nhwc.c:625, 740, 857;
// fully-connected-nc.c:299, 379): fl32(fl32(sx * sw) / so), left to right in binary32.
float RequantScale(float sx, float sw, float so);

}  // namespace fusediff::fused::xnnpack
