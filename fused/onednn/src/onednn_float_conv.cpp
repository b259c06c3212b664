// oneDNN's float convolutions as fused paths (docs/onednn.md, "bf16 convolutions"): a bf16 convolution (bf16
// source and weights, f32 accumulation, f32 bias) with an eltwise post-op into a bf16 or f32 destination, and an
// f32 convolution under fpmath_mode bf16; each beside its unfused graph (the convolution writes u in the declared
// type, a separate eltwise primitive reads it). The draw's codes become binary32 tensors by FloatConv's rules
// (model/convention.h) here, on the host FPU; the bf16 conversion of the operands is oneDNN's own (a reorder).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/errors.h"
#include "onednn_patterns.h"

namespace fusediff::fused::onednn::detail {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;

DataType DnnlType(FloatFormat f) { return f == FloatFormat::bf16 ? DataType::bf16 : DataType::f32; }

// A host buffer of f32 or bf16 elements.
struct FloatBuffer {
  FloatFormat format = FloatFormat::f32;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  void resize(FloatFormat f, size_t n) {
    format = f;
    if (f == FloatFormat::f32) f32.assign(n, 0.0f);
    else bf16.assign(n, 0);
  }
  void* data() { return format == FloatFormat::f32 ? static_cast<void*>(f32.data()) : static_cast<void*>(bf16.data()); }
  uint32_t bits(size_t i) const {
    if (format == FloatFormat::bf16) return bf16[i];
    uint32_t b;
    std::memcpy(&b, &f32[i], sizeof b);
    return b;
  }
};

class FloatConvPath final : public FusedPath {
 public:
  FloatConvPath(const Convention& graph, bool unfused, EltwiseAlgorithm eltwise)
      : fc_(graph.float_conv), unfused_(unfused), eltwise_(eltwise),
        out_(graph.output.float_value->format), u_(graph.intermediate.stored.format) {}

  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override;
  std::vector<std::string> implementations() const override { return implementations_; }
  RunInfo last_run() const override {
    RunInfo info;
    info.implementation = last_;
    return info;
  }
  bool repeatable() const override { return true; }
  WeightRange weight_range() const override { return WeightRange::full; }
  int32_t max_batch() const override { return 16; }  // as the int8 path: a primitive costs ~10^4 outputs
  bool concurrent() const override { return false; }

 private:
  FloatConv fc_;
  bool unfused_;
  EltwiseAlgorithm eltwise_;
  FloatFormat out_, u_;
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::vector<std::string> implementations_;
  std::string last_;
};

bool FloatConvPath::Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) {
  const ConvCase& conv = draw.conv;
  conv.validate();
  if (draw.input.size() != conv.input_elements() || y.size() != conv.output_elements()) {
    throw InputError("oneDNN float conv: input or output has the wrong size");
  }
  auto reject = [rejected](std::string reason) {
    if (rejected) *rejected = std::move(reason);
    return false;
  };
  if (fc_.pow2_scales) {
    // The exact-sum draws: every product (x - zx) w and every partial sum, in units of sx' sw'[k], is an integer
    // below 2^24, so binary32 holds each exactly in any summation order. Beyond, they are not exact-sum draws.
    for (int32_t k = 0; k < conv.output_channels(); ++k) {
      if (conv.accumulator_bound(k) >= (int64_t{1} << 24)) {
        return reject("exact-sum draws: output channel " + std::to_string(k) +
                      "'s accumulator can reach 2^24, where binary32 partial sums may round");
      }
    }
  }
  // The graph's binary32 tensors (FloatConv): x = fl32(sx' (x - zx)), w = fl32(sw'[k] w), b = fl32(fl32(b) fl32(sx' sw')).
  const float sx = float_conv_scale(fc_, conv.input_quant().scale);
  const int32_t zx = conv.input_quant().zero_point;
  std::vector<float> x(draw.input.size()), w(conv.weights().size()), b(static_cast<size_t>(conv.output_channels()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = sx * static_cast<float>(draw.input[i] - zx);
  const size_t per_channel = w.size() / b.size();
  for (size_t k = 0; k < b.size(); ++k) {
    const float sw = float_conv_scale(fc_, conv.weight_scales()[k]);
    for (size_t i = 0; i < per_channel; ++i) w[k * per_channel + i] = sw * static_cast<float>(conv.weights()[k * per_channel + i]);
    b[k] = static_cast<float>(conv.bias()[k]) * (sx * sw);
  }

  const int32_t n = conv.batch(), c = conv.input_channels(), k = conv.output_channels();
  const memory::dims src_dims = {n, c, conv.input_height(), conv.input_width()};
  const memory::dims wei_dims = {k, c, conv.kernel_height(), conv.kernel_width()};
  const memory::dims dst_dims = {n, k, conv.output_height(), conv.output_width()};
  const DataType operand_type = DnnlType(fc_.operands);
  const FloatFormat dst_format = unfused_ ? u_ : out_;
  const memory::desc src_user(src_dims, DataType::f32, Tag::nhwc), src_md(src_dims, operand_type, Tag::nhwc);
  const memory::desc wei_user(wei_dims, DataType::f32, Tag::ohwi), wei_any(wei_dims, operand_type, Tag::any);
  const memory::desc bias_md({k}, DataType::f32, Tag::x);
  const memory::desc dst_md(dst_dims, DnnlType(dst_format), Tag::nhwc);
  const memory::desc out_md(dst_dims, DnnlType(out_), Tag::nhwc);
  const memory::dims strides = {conv.stride_height(), conv.stride_width()};
  const memory::dims dilates = {conv.dilation_height() - 1, conv.dilation_width() - 1};
  const memory::dims pad_l = {conv.padding_top(), conv.padding_left()};
  dnnl::primitive_attr attr;
  if (fc_.fpmath_bf16) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
  if (!unfused_) {
    dnnl::post_ops post_ops;
    post_ops.append_eltwise(1.0f, eltwise_.alg, eltwise_.alpha, eltwise_.beta);
    attr.set_post_ops(post_ops);
  }
  const std::string problem = std::string(conv.op() == ConvOp::conv2d ? "convolution" : "deconvolution") + " " +
                              format_float_conv(fc_) + " mb" + std::to_string(n) + "ic" + std::to_string(c) + "oc" +
                              std::to_string(k) + "_ih" + std::to_string(conv.input_height()) + "iw" +
                              std::to_string(conv.input_width()) + "_kh" + std::to_string(conv.kernel_height()) + "kw" +
                              std::to_string(conv.kernel_width());
  try {
    dnnl::primitive primitive;
    memory::desc weights_md;
    std::string implementation;
    if (conv.op() == ConvOp::conv2d) {
      const memory::dims pad_r = {conv.padding_bottom(), conv.padding_right()};
      const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                 src_md, wei_any, bias_md, dst_md, strides, dilates, pad_l, pad_r);
      const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine_);
      primitive = dnnl::convolution_forward(pd);
      weights_md = pd.weights_desc();
      implementation = pd.impl_info_str();
    } else {
      // Output padding extends the far end: oneDNN derives it from the destination size, as a smaller pad_r.
      const memory::dims pad_r = {conv.padding_bottom() - conv.output_padding_height(),
                                  conv.padding_right() - conv.output_padding_width()};
      const dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                                   dnnl::algorithm::deconvolution_direct, src_md, wei_any, bias_md,
                                                   dst_md, strides, dilates, pad_l, pad_r);
      const dnnl::deconvolution_forward::primitive_desc pd(desc, attr, engine_);
      primitive = dnnl::deconvolution_forward(pd);
      weights_md = pd.weights_desc();
      implementation = pd.impl_info_str();
    }
    // Operands into the convolution's types and layouts by oneDNN's reorders (its own f32 -> bf16 conversion).
    memory src_user_mem(src_user, engine_, x.data()), wei_user_mem(wei_user, engine_, w.data());
    memory src_mem = src_user_mem, wei_mem = wei_user_mem;
    if (src_md != src_user) {
      src_mem = memory(src_md, engine_);
      dnnl::reorder(src_user_mem, src_mem).execute(stream_, src_user_mem, src_mem);
    }
    if (weights_md != wei_user) {
      wei_mem = memory(weights_md, engine_);
      dnnl::reorder(wei_user_mem, wei_mem).execute(stream_, wei_user_mem, wei_mem);
    }
    memory bias_mem(bias_md, engine_, b.data());
    FloatBuffer dst, out;
    dst.resize(dst_format, conv.output_elements());
    memory dst_mem(dst_md, engine_, dst.data());
    primitive.execute(stream_, {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_BIAS, bias_mem},
                                {DNNL_ARG_DST, dst_mem}});
    stream_.wait();
    std::string run = "conv: " + implementation;
    const FloatBuffer* result = &dst;
    if (unfused_) {
      // The graph's eltwise node reads u as stored (bf16 or f32) and writes y in the same type.
      const dnnl::eltwise_forward::desc eltwise_desc(dnnl::prop_kind::forward_inference, eltwise_.alg, dst_md,
                                                     eltwise_.alpha, eltwise_.beta);
      const dnnl::eltwise_forward::primitive_desc eltwise_pd(eltwise_desc, engine_);
      out.resize(out_, conv.output_elements());
      memory out_mem(out_md, engine_, out.data());
      dnnl::eltwise_forward(eltwise_pd).execute(stream_, {{DNNL_ARG_SRC, dst_mem}, {DNNL_ARG_DST, out_mem}});
      stream_.wait();
      run += std::string("; eltwise: ") + eltwise_pd.impl_info_str();
      result = &out;
    }
    for (size_t i = 0; i < y.size(); ++i) y[i] = float_order_code(result->bits(i), out_);
    last_ = run;
    if (std::find(implementations_.begin(), implementations_.end(), run) == implementations_.end()) {
      implementations_.push_back(run);
    }
    return true;
  } catch (const dnnl::error& e) {
    return reject(DescribeDnnlError(e, problem));
  }
}

}  // namespace

bool NativeBf16(std::string* why) {
  const unsigned isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const unsigned bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  if ((isa & bf16) == bf16) return true;
  if (why) {
    *why = "oneDNN dispatches to " + EffectiveIsa() + " here, which has no native bf16 dot product (AVX512_BF16 or "
           "AMX): its bf16 convolutions would be emulated or run a reference kernel";
  }
  return false;
}

std::unique_ptr<FusedPath> CreateFloatConvPath(const CaseSpec& spec, std::string* why) {
  auto unsupported = [why](std::string reason) -> std::unique_ptr<FusedPath> {
    if (why) *why = std::move(reason);
    return nullptr;
  };
  const Convention& graph = spec.convention;
  if (!is_conv_act(spec.pattern) || spec.fusion != Fusion::keep_all) {
    return unsupported("oneDNN's float convolutions run conv2d+act kept whole only");
  }
  if (spec.mutant != Mutant::none) return unsupported("mutants are injected into the built-in fused paths only");
  if (!graph.output.float_value) {
    return unsupported("oneDNN's float convolution paths write a float destination (output.float_value bf16 or f32)");
  }
  const FloatBoundary onednn_out = flush_subnormals_float_boundary(graph.output.float_value->format);
  const FloatBoundary onednn_u = flush_subnormals_float_boundary(graph.intermediate.stored.format);
  if (graph.output.float_value->format == FloatFormat::bf16 && !(*graph.output.float_value == onednn_out)) {
    return unsupported("oneDNN stores bf16 by its own rules (" + format_float_boundary(onednn_out) + "), not " +
                       format_float_boundary(*graph.output.float_value));
  }
  const bool unfused = VariantOf(spec) == OneDnnVariant::unfused;
  if (unfused) {
    if (graph.intermediate.stored.format != graph.output.float_value->format) {
      return unsupported("oneDNN 2.6's eltwise reads and writes one data type: u stored as " +
                         std::string(to_string(graph.intermediate.stored.format)) + " cannot give a " +
                         std::string(to_string(graph.output.float_value->format)) + " output");
    }
    if (graph.intermediate.stored.format == FloatFormat::bf16 && !(graph.intermediate.stored == onednn_u)) {
      return unsupported("oneDNN stores u as bf16 by its own rules (" + format_float_boundary(onednn_u) + ")");
    }
  }
  std::string reason;
  if (!NativeBf16(&reason)) return unsupported(reason);
  const std::optional<EltwiseAlgorithm> eltwise = MapEltwise(graph.activation, why);
  if (!eltwise) return nullptr;
  return std::make_unique<FloatConvPath>(graph, unfused, *eltwise);
}

}  // namespace fusediff::fused::onednn::detail
