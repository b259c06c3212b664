#include "fusediff/fused/onednn_kernel.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "fusediff/model/errors.h"
#include "onednn_patterns.h"

namespace fusediff::fused::onednn {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;

struct Eltwise {
  algorithm alg;
  float alpha = 0.0f;
  float beta = 0.0f;
};

// The one eltwise algorithm (oneDNN 2.6) that computes each activation as docs/activations.md defines it.
std::optional<Eltwise> MapActivation(const Activation& a, std::string* why) {
  switch (a.kind) {
    case ActivationKind::relu: return Eltwise{algorithm::eltwise_relu, 0.0f, 0.0f};
    case ActivationKind::relu6: return Eltwise{algorithm::eltwise_clip, 0.0f, 6.0f};  // clip(x, 0, 6)
    case ActivationKind::leaky_relu: return Eltwise{algorithm::eltwise_relu, a.alpha, 0.0f};  // alpha: negative slope
    case ActivationKind::hard_swish: return Eltwise{algorithm::eltwise_hardswish, 0.0f, 0.0f};
    case ActivationKind::gelu_erf: return Eltwise{algorithm::eltwise_gelu_erf, 0.0f, 0.0f};
    case ActivationKind::gelu_tanh: return Eltwise{algorithm::eltwise_gelu_tanh, 0.0f, 0.0f};
    case ActivationKind::sigmoid: return Eltwise{algorithm::eltwise_logistic, 0.0f, 0.0f};
    case ActivationKind::tanh: return Eltwise{algorithm::eltwise_tanh, 0.0f, 0.0f};
    case ActivationKind::silu: return Eltwise{algorithm::eltwise_swish, 1.0f, 0.0f};  // x * sigmoid(alpha x)
    case ActivationKind::elu: return Eltwise{algorithm::eltwise_elu, a.alpha, 0.0f};
    case ActivationKind::softplus: return Eltwise{algorithm::eltwise_soft_relu, 0.0f, 0.0f};  // log(1 + e^x)
    case ActivationKind::mish: return Eltwise{algorithm::eltwise_mish, 0.0f, 0.0f};
    case ActivationKind::hard_sigmoid:
      *why = "oneDNN 2.6 has no hardsigmoid eltwise algorithm (it arrived in 3.0), and one eltwise post-op cannot "
             "express relu6(x + 3) / 6";
      return std::nullopt;
  }
  *why = "unknown activation";
  return std::nullopt;
}

// oneDNN's 8-bit types saturate to the full range: a narrow type (int8 in [-127, 127]) is not expressible.
std::optional<DataType> EightBitType(const QuantType& t) {
  if (t.narrow) return std::nullopt;
  if (t.scalar == ScalarType::int8) return DataType::s8;
  if (t.scalar == ScalarType::uint8) return DataType::u8;
  return std::nullopt;
}

using detail::Poison;
using detail::Scratchpad;

std::string DescribeError(const dnnl::error& e, const std::string& what) {
  return "oneDNN rejected " + what + ": " + e.what() + " (status " + std::to_string(static_cast<int>(e.status)) +
         (e.status == dnnl_unimplemented ? ", unimplemented" : "") + ")";
}

}  // namespace

std::string LibraryVersion() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (commit " +
         std::string(v->hash) + ")";
}

std::string EffectiveIsa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "isa#" + std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa()));
  }
}

namespace {
// Why a draw's bias or bias-free accumulator is out of the range where oneDNN's binary32 bias addition equals
// fl32(acc); empty when every channel is in range.
// The declared conventions round fl32(acc) once. oneDNN's kernels convert acc - bias and bias to binary32
// separately and add them there: the same value while both stay below 2^24 (each converts exactly, the sum
// rounds once). Beyond, the library's answer depends on its order of operations, which no convention declares.
// (An f32 bias holds the same integers: below 2^24 they are exact floats, and the kernels add either kind of
// bias in f32 to fl32(acc - bias) before the output scale, e.g. jit_avx512_core_x8s8s32x_conv_kernel.cpp
// store_output in 2.6.3: cvt2ps(bias), vcvtdq2ps(acc), vaddps, vmulps(scale).)
std::string BiasRangeReason(const ConvCase& conv) {
  for (int32_t ch = 0; ch < conv.output_channels(); ++ch) {
    const int64_t bias = std::abs(int64_t{conv.bias()[static_cast<size_t>(ch)]});
    if (bias >= (int64_t{1} << 24) || conv.accumulator_bound(ch) - bias >= (int64_t{1} << 24)) {
      return "output channel " + std::to_string(ch) + ": |bias| or the bias-free accumulator can reach "
             "2^24, where oneDNN's binary32 bias addition may differ from fl32(acc)";
    }
  }
  return {};
}

// Output scales per output channel: fl32(sx*sw[k]) for the fused kernel, fl32(fl32(sx*sw[k]) / su) for the
// unfused graph's convolution into u.
std::vector<float> OutputScales(const ConvCase& conv, bool unfused, float su) {
  std::vector<float> scales(static_cast<size_t>(conv.output_channels()));
  for (size_t ch = 0; ch < scales.size(); ++ch) {
    const float product = conv.input_quant().scale * conv.weight_scales()[ch];  // fl32(sx*sw)
    scales[ch] = unfused ? product / su : product;
  }
  return scales;
}

// oneDNN's name of a problem, for its error messages ("convolution u8 mb1ic3oc8_ih5iw5_kh3kw3").
std::string ProblemName(const ConvCase& conv, bool u8, int32_t in_h, int32_t in_w) {
  return std::string(conv.op() == ConvOp::conv2d ? "convolution" : "deconvolution") + " " + (u8 ? "u8" : "s8") +
         " mb" + std::to_string(conv.batch()) + "ic" + std::to_string(conv.input_channels()) + "oc" +
         std::to_string(conv.output_channels()) + "_ih" + std::to_string(in_h) + "iw" + std::to_string(in_w) +
         "_kh" + std::to_string(conv.kernel_height()) + "kw" + std::to_string(conv.kernel_width());
}
// What one convolution call passes oneDNN (OneDnnKernel::Run builds it, Impl::Execute runs it).
struct ConvCall {
  memory::desc src_md, wei_user, bias_md, dst_md;
  detail::ConvPrimitive made;
  std::pair<int32_t, int32_t> extension;  // the output-padding extension's rows and columns
  bool u8 = false;                        // the source type passed
  bool f32_bias = false;
  bool src_zp_attr = false, dst_zp_attr = false;
  int32_t shift = 0;  // what the draw's codes move by into the type passed
  int32_t src_zero_point = 0, dst_zero_point = 0;
};
}  // namespace

struct OneDnnKernel::Impl {
  Convention graph;
  OneDnnVariant variant = OneDnnVariant::fused;
  Eltwise eltwise{algorithm::eltwise_relu};
  DataType output_type = DataType::s8;
  DataType intermediate_type = DataType::s8;  // onednn_unfused
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<std::string> implementations;
  std::string last_implementation;
  uint32_t repetition = 0;  // the poison pattern of the next Run (set_repetition)

  // Runs the convolution `call` describes on the draw, then (unfused) the graph's remaining nodes; y gets the
  // output codes. Returns the implementations after the convolution's ("" fused; "; dequantize: ..." unfused).
  // Every buffer oneDNN writes is poisoned with the repetition's pattern first. Throws dnnl::error.
  std::string Execute(const ConvCase& conv, std::span<const int32_t> input, const ConvCall& call, std::span<int32_t> y) {
    std::vector<uint8_t> src = detail::SourceBytes(conv, input, call.extension, call.u8, call.shift, call.src_zero_point);
    std::vector<int8_t> weights = conv.weights();
    std::vector<int32_t> bias = conv.bias();
    std::vector<float> bias_f32(bias.begin(), bias.end());  // exact: |bias| < 2^24 (checked by Run)
    int32_t src_zero_point = call.src_zero_point;
    int32_t dst_zero_point = call.dst_zero_point;
    detail::Codes dst(call.dst_md.data_type(), conv.output_elements());
    dst.poison(repetition);
    memory src_mem(call.src_md, engine, src.data());
    memory wei_user_mem(call.wei_user, engine, weights.data());
    detail::DeconvolutionWeights owned;  // a deconvolution's weights: fusediff's buffer with a known tail
    memory wei_mem = detail::WeightsMemory(conv, conv.op() == ConvOp::conv_transpose2d, call.made.weights_md, wei_user_mem,
                                           engine, stream, &owned);
    memory bias_mem(call.bias_md, engine, call.f32_bias ? static_cast<void*>(bias_f32.data()) : bias.data());
    memory dst_mem(call.dst_md, engine, dst.data());
    const memory::desc zp_md({1}, DataType::s32, Tag::x);
    memory src_zp(zp_md, engine, &src_zero_point), dst_zp(zp_md, engine, &dst_zero_point);
    const Scratchpad scratchpad(call.made.scratchpad_md, engine, repetition);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_mem},
                                            {DNNL_ARG_WEIGHTS, wei_mem},
                                            {DNNL_ARG_BIAS, bias_mem},
                                            {DNNL_ARG_DST, dst_mem},
                                            {DNNL_ARG_SCRATCHPAD, scratchpad.memory}};
    if (call.src_zp_attr) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, src_zp});
    if (call.dst_zp_attr) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, dst_zp});
    call.made.primitive.execute(stream, args);
    stream.wait();
    if (variant == OneDnnVariant::unfused) return RunUnfusedNodes(call.dst_md, dst_mem, y);
    for (size_t i = 0; i < y.size(); ++i) y[i] = dst.at(i);
    return {};
  }

  // The unfused graph's nodes after the convolution into u (`conv_out`, described by `dst_md`): dequantize, the
  // eltwise and quantize, each its own oneDNN primitive, every buffer poisoned alike; y gets the output codes.
  // Returns the implementations, "; dequantize: ...; eltwise: ...; quantize: ...". Throws dnnl::error.
  std::string RunUnfusedNodes(const memory::desc& dst_md, const memory& conv_out, std::span<int32_t> y) {
    // The unfused graph's remaining nodes, each its own oneDNN primitive, every buffer poisoned alike.
    const memory::desc f32_md(dst_md.dims(), DataType::f32, Tag::nhwc);
    const memory::desc out_md(dst_md.dims(), output_type, Tag::nhwc);
    std::vector<float> dequantized(y.size()), activated(y.size());
    Poison(dequantized.data(), dequantized.size() * sizeof(float), repetition);
    Poison(activated.data(), activated.size() * sizeof(float), repetition);
    detail::Codes out(output_type, y.size());
    out.poison(repetition);
    memory deq_mem(f32_md, engine, dequantized.data()), act_mem(f32_md, engine, activated.data());
    memory out_mem(out_md, engine, out.data());

    dnnl::primitive_attr dequantize_attr;  // v = su * (u - zu)
    dequantize_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dequantize_attr.set_output_scales(0, {graph.intermediate.q.scale});
    dequantize_attr.set_zero_points(DNNL_ARG_SRC, 0, {graph.intermediate.q.zero_point});
    const dnnl::reorder::primitive_desc dequantize_pd(engine, dst_md, engine, f32_md, dequantize_attr);
    const dnnl::eltwise_forward::desc eltwise_desc(dnnl::prop_kind::forward_inference, eltwise.alg, f32_md,
                                                   eltwise.alpha, eltwise.beta);
    dnnl::primitive_attr eltwise_attr;
    eltwise_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::eltwise_forward::primitive_desc eltwise_pd(eltwise_desc, eltwise_attr, engine);
    dnnl::primitive_attr quantize_attr;  // y = sat(round_half_even(f / sy + zy))
    quantize_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    quantize_attr.set_output_scales(0, {1.0f / graph.output.q.scale});
    quantize_attr.set_zero_points(DNNL_ARG_DST, 0, {graph.output.q.zero_point});
    const dnnl::reorder::primitive_desc quantize_pd(engine, f32_md, engine, out_md, quantize_attr);

    const Scratchpad dequantize_scratch(dequantize_pd.scratchpad_desc(), engine, repetition);
    const Scratchpad eltwise_scratch(eltwise_pd.scratchpad_desc(), engine, repetition);
    const Scratchpad quantize_scratch(quantize_pd.scratchpad_desc(), engine, repetition);
    dnnl::reorder(dequantize_pd).execute(stream, {{DNNL_ARG_FROM, conv_out}, {DNNL_ARG_TO, deq_mem},
                                                    {DNNL_ARG_SCRATCHPAD, dequantize_scratch.memory}});
    dnnl::eltwise_forward(eltwise_pd).execute(stream, {{DNNL_ARG_SRC, deq_mem}, {DNNL_ARG_DST, act_mem},
                                                         {DNNL_ARG_SCRATCHPAD, eltwise_scratch.memory}});
    dnnl::reorder(quantize_pd).execute(stream, {{DNNL_ARG_FROM, act_mem}, {DNNL_ARG_TO, out_mem},
                                                  {DNNL_ARG_SCRATCHPAD, quantize_scratch.memory}});
    stream.wait();
    for (size_t i = 0; i < y.size(); ++i) y[i] = out.at(i);
    return std::string("; dequantize: ") + dequantize_pd.impl_info_str() + "; eltwise: " + eltwise_pd.impl_info_str() +
           "; quantize: " + quantize_pd.impl_info_str();
  }

  void note(const std::string& implementation) {
    last_implementation = implementation;
    if (std::find(implementations.begin(), implementations.end(), implementation) == implementations.end()) {
      implementations.push_back(implementation);
    }
  }
};

OneDnnKernel::OneDnnKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnKernel::~OneDnnKernel() = default;

const std::vector<std::string>& OneDnnKernel::implementations() const { return impl_->implementations; }
void OneDnnKernel::set_repetition(uint32_t r) { impl_->repetition = r; }
const std::string& OneDnnKernel::last_implementation() const { return impl_->last_implementation; }

std::unique_ptr<OneDnnKernel> OneDnnKernel::Create(const Convention& graph, OneDnnVariant variant,
                                                   std::string* unsupported_reason) {
  auto reject = [unsupported_reason](std::string reason) -> std::unique_ptr<OneDnnKernel> {
    if (unsupported_reason != nullptr) *unsupported_reason = std::move(reason);
    return nullptr;
  };
  validate(graph);
  auto impl = std::make_unique<Impl>();
  impl->graph = graph;
  impl->variant = variant;
  std::string why;
  const std::optional<Eltwise> eltwise = MapActivation(graph.activation, &why);
  if (!eltwise) return reject(why);
  impl->eltwise = *eltwise;
  const std::optional<DataType> out = EightBitType(graph.output.q.type);
  if (!out) {
    return reject("oneDNN's int8 convolution writes s8 or u8 saturated to the full range (or s32/f32/bf16); output "
                  "type " + to_string(graph.output.q.type) + " is not expressible");
  }
  impl->output_type = *out;
  if (graph.output.rounding != RoundingMode::half_to_even ||
      graph.output.zero_point_order != ZeroPointOrder::before_rounding) {
    return reject("oneDNN adds the destination zero point in float and then rounds half to even; the case declares " +
                  std::string(to_string(graph.output.rounding)) + " with the zero point " +
                  std::string(to_string(graph.output.zero_point_order)));
  }
  if (variant == OneDnnVariant::unfused) {
    const std::optional<DataType> mid = EightBitType(graph.intermediate.q.type);
    if (graph.intermediate.kind != IntermediateKind::quantized || !mid) {
      return reject("oneDNN's unfused graph stores the intermediate as s8 or u8 (full range); intermediate " +
                    (graph.intermediate.kind == IntermediateKind::f32 ? std::string("f32")
                                                                      : to_string(graph.intermediate.q.type)) +
                    " is not expressible");
    }
    if (graph.requant != RequantVariant::f32_zero_point_first) {
      return reject("oneDNN's int8 convolution requantizes as f32_zero_point_first; the case declares " +
                    std::string(to_string(graph.requant)));
    }
    impl->intermediate_type = *mid;
  }
  if (unsupported_reason != nullptr) unsupported_reason->clear();
  return std::unique_ptr<OneDnnKernel>(new OneDnnKernel(std::move(impl)));
}

bool OneDnnKernel::Run(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y,
                       std::string* unsupported_reason, const Formulation& formulation) {
  conv.validate();
  if (input.size() != conv.input_elements() || y.size() != conv.output_elements()) {
    throw InputError("OneDnnKernel::Run: input or output has the wrong size");
  }
  Impl& m = *impl_;
  const bool unfused = m.variant == OneDnnVariant::unfused;
  auto reject = [unsupported_reason](std::string reason) {
    if (unsupported_reason != nullptr) *unsupported_reason = std::move(reason);
    return false;
  };
  if (std::string why = BiasRangeReason(conv); !why.empty()) return reject(std::move(why));
  const std::optional<DataType> drawn_type = EightBitType(QuantType{conv.input_quant().type.scalar, false});
  if (!drawn_type) return reject("oneDNN's int8 convolution takes u8 or s8 sources, not " + to_string(conv.input_quant().type));
  // The source type passed (Formulation::source): a code of the other type moves by 128, its zero point too.
  const SourceAsPassed passed =
      source_as_passed(formulation, *drawn_type == DataType::u8, conv.input_quant().zero_point);
  const DataType src_type = passed.u8 ? DataType::u8 : DataType::s8;
  const int32_t shift = passed.shift;
  const int32_t src_zero_point_value = conv.input_quant().zero_point + shift;

  const auto [extend_h, extend_w] = output_padding_extension(conv, formulation.extended_input);
  const int32_t in_h = conv.input_height() + extend_h, in_w = conv.input_width() + extend_w;

  const int32_t n = conv.batch(), c = conv.input_channels(), k = conv.output_channels();
  const memory::dims src_dims = {n, c, in_h, in_w};
  const memory::dims wei_dims = {k, c, conv.kernel_height(), conv.kernel_width()};
  const memory::dims dst_dims = {n, k, conv.output_height(), conv.output_width()};
  const DataType dst_type = unfused ? m.intermediate_type : m.output_type;
  const DataType bias_type = formulation.f32_bias ? DataType::f32 : DataType::s32;
  const memory::desc src_md(src_dims, src_type, Tag::nhwc);
  const memory::desc wei_any(wei_dims, DataType::s8, Tag::any);
  const memory::desc wei_user(wei_dims, DataType::s8, Tag::ohwi);  // the model's OHWI layout
  const memory::desc bias_md({k}, bias_type, Tag::x);
  const memory::desc dst_md(dst_dims, dst_type, Tag::nhwc);

  // Output scales per output channel (mask 1 << 1: dimension 1 of dst is the channel), or one common scale
  // (mask 0) where the formulation asks and every channel's scale is the same (a draw under it always is).
  const std::vector<float> scales = OutputScales(conv, unfused, m.graph.intermediate.q.scale);
  const bool common = formulation.common_scales && std::all_of(scales.begin(), scales.end(),
                                                               [&](float v) { return v == scales.front(); });
  const int32_t dst_zero_point_value = unfused ? m.graph.intermediate.q.zero_point : m.graph.output.q.zero_point;
  // Zero-point attributes absent only where the value is 0; otherwise present (the fallback).
  const bool src_zp_attr = passed.zero_point_attribute;
  const bool dst_zp_attr = !(formulation.zero_points_absent && dst_zero_point_value == 0);
  const float inverse_sy = 1.0f / m.graph.output.q.scale;  // fl32(1/sy)
  dnnl::primitive_attr attr = detail::FormulationAttributes(scales, common, src_zp_attr, dst_zp_attr);
  if (!unfused) {
    dnnl::post_ops post_ops;
    post_ops.append_eltwise(inverse_sy, m.eltwise.alg, m.eltwise.alpha, m.eltwise.beta);
    attr.set_post_ops(post_ops);
  }

  const std::string problem = ProblemName(conv, src_type == DataType::u8, in_h, in_w);
  detail::ConvPrimitive made;
  try {
    made = detail::CreateConvPrimitive(conv, {extend_h, extend_w}, src_md, wei_any, bias_md, dst_md, attr, m.engine);
  } catch (const dnnl::error& e) {
    return reject(DescribeError(e, problem));
  }

  const ConvCall call{.src_md = src_md,
                      .wei_user = wei_user,
                      .bias_md = bias_md,
                      .dst_md = dst_md,
                      .made = made,
                      .extension = {extend_h, extend_w},
                      .u8 = src_type == DataType::u8,
                      .f32_bias = formulation.f32_bias,
                      .src_zp_attr = src_zp_attr,
                      .dst_zp_attr = dst_zp_attr,
                      .shift = shift,
                      .src_zero_point = src_zero_point_value,
                      .dst_zero_point = dst_zero_point_value};
  try {
    m.note("conv: " + made.implementation + m.Execute(conv, input, call, y));
    return true;
  } catch (const dnnl::error& e) {
    return reject(DescribeError(e, problem));
  }
}

bool EltwiseForward(const Activation& activation, std::span<const float> x, std::span<float> y,
                    std::string* implementation, std::string* unsupported_reason) {
  if (x.size() != y.size()) throw InputError("EltwiseForward: input and output differ in size");
  std::string why;
  const std::optional<Eltwise> eltwise = MapActivation(activation, &why);
  if (!eltwise) {
    if (unsupported_reason != nullptr) *unsupported_reason = why;
    return false;
  }
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc md({static_cast<memory::dim>(x.size())}, DataType::f32, Tag::x);
  const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, eltwise->alg, md, eltwise->alpha,
                                         eltwise->beta);
  const dnnl::eltwise_forward::primitive_desc pd(desc, engine);
  memory src(md, engine, const_cast<float*>(x.data())), dst(md, engine, y.data());
  dnnl::eltwise_forward(pd).execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  stream.wait();
  if (implementation != nullptr) *implementation = pd.impl_info_str();
  return true;
}

namespace {
bool HasOutputPadding(const ConvCase& conv) {
  return conv.op() == ConvOp::conv_transpose2d && (conv.output_padding_height() > 0 || conv.output_padding_width() > 0);
}

class OneDnnPath final : public FusedPath {
 public:
  explicit OneDnnPath(std::unique_ptr<OneDnnKernel> kernel) : kernel_(std::move(kernel)) {}
  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override {
    const bool output_padding = HasOutputPadding(draw.conv);
    last_ = RunInfo{};
    // On the first repetition of a draw with output padding, both output-padding formulations run on it, so that
    // they are compared on the same draws (the drawn one's output is the path's answer).
    if (output_padding && repetition_ == 0) {
      last_.paired_dimension = "opad";
      last_.paired_values = {"negative_pad", "extended_input"};
      for (const bool extended : {false, true}) {
        if (extended == draw.formulation.extended_input) continue;
        Formulation other = draw.formulation;
        other.extended_input = extended;
        PairedRun run;
        run.y.assign(y.size(), 0);
        run.ran = kernel_->Run(draw.conv, draw.input, run.y, &run.rejected, other);
        if (run.ran) paired_implementation_ = kernel_->last_implementation();
        if (!run.ran) run.y.clear();
        paired_other_ = std::move(run);
      }
    }
    // Where oneDNN refuses the drawn negative padding, the extended input answers (it computes every such draw):
    // decided on the first repetition, kept on the others.
    Formulation used = draw.formulation;
    if (output_padding && !used.extended_input && repetition_ > 0 && fell_back_) used.extended_input = true;
    bool ran = kernel_->Run(draw.conv, draw.input, y, rejected, used);
    if (output_padding && repetition_ == 0) {
      PairedRun drawn;
      drawn.ran = ran;
      if (ran) drawn.y.assign(y.begin(), y.end());
      else if (rejected) drawn.rejected = *rejected;
      fell_back_ = !ran && !draw.formulation.extended_input && paired_other_.ran;
      if (fell_back_) {
        std::copy(paired_other_.y.begin(), paired_other_.y.end(), y.begin());
        used.extended_input = true;
        ran = true;
        // the extended input's implementation is the kernel's last one: it ran just before
      }
      last_.paired.resize(2);
      last_.paired[draw.formulation.extended_input ? 1 : 0] = std::move(drawn);
      last_.paired[draw.formulation.extended_input ? 0 : 1] = std::move(paired_other_);
    }
    if (ran) {
      last_.implementation = fell_back_ && repetition_ == 0 ? paired_implementation_ : kernel_->last_implementation();
      last_.formulation = format_formulation(used, output_padding);
    }
    return ran;
  }
  std::vector<std::string> implementations() const override { return kernel_->implementations(); }
  RunInfo last_run() const override { return last_; }
  bool repeatable() const override { return true; }
  void set_repetition(uint32_t r) override {
    repetition_ = r;
    kernel_->set_repetition(r);
  }
  WeightRange weight_range() const override { return WeightRange::full; }
  // Creating a primitive (JIT code for the shape) costs about as much as computing 10^4 outputs: batches up to 16
  // (instead of 2) put 5.7x more samples through each primitive (docs/performance.md, "oneDNN cases").
  int32_t max_batch() const override { return 16; }
  bool draws_formulations() const override { return true; }
  bool concurrent() const override { return false; }

 private:
  std::unique_ptr<OneDnnKernel> kernel_;
  RunInfo last_;
  PairedRun paired_other_;
  std::string paired_implementation_;  // the implementation that ran paired_other_
  bool fell_back_ = false;             // this draw's negative padding was refused: the extended input answers
  uint32_t repetition_ = 0;
};
}  // namespace

std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* unsupported_reason) {
  // bf16 convolutions and f32 ones under fpmath_mode bf16: onednn_float_conv.cpp.
  if (spec.convention.float_conv.enabled) return detail::CreateFloatConvPath(spec, unsupported_reason);
  // The post-op chains of the other patterns, and their unfused graphs: onednn_patterns.cpp.
  if (!is_conv_act(spec.pattern)) return detail::CreatePatternPath(spec, unsupported_reason);
  if (spec.fusion != Fusion::keep_all) {
    if (unsupported_reason) {
      *unsupported_reason = "oneDNN's conv2d+act declares its own arithmetic (fusion keep_all), not " +
                            std::string(to_string(spec.fusion));
    }
    return nullptr;
  }
  if (spec.mutant != Mutant::none) {
    if (unsupported_reason) *unsupported_reason = "mutants are injected into the built-in fused paths only";
    return nullptr;
  }
  std::unique_ptr<OneDnnKernel> kernel = OneDnnKernel::Create(spec.convention, VariantOf(spec), unsupported_reason);
  if (!kernel) return nullptr;
  return std::make_unique<OneDnnPath>(std::move(kernel));
}

namespace detail {
std::optional<EltwiseAlgorithm> MapEltwise(const Activation& a, std::string* why) {
  const std::optional<Eltwise> e = MapActivation(a, why);
  if (!e) return std::nullopt;
  return EltwiseAlgorithm{e->alg, e->alpha, e->beta};
}
std::optional<dnnl::memory::data_type> EightBitDataType(const QuantType& t) { return EightBitType(t); }
std::string DescribeDnnlError(const dnnl::error& e, const std::string& what) { return DescribeError(e, what); }
void Poison(void* data, size_t bytes, uint32_t r) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(0xA5u + 0x4Bu * r + 0x1Fu * static_cast<uint32_t>(i));
}
dnnl::primitive_attr FormulationAttributes(const std::vector<float>& scales, bool common, bool src_zero_point,
                                           bool dst_zero_point) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // our own poisoned buffer (set_repetition)
  if (common) attr.set_output_scales(0, {scales.front()});
  else attr.set_output_scales(1 << 1, scales);  // dimension 1 of dst is the channel
  if (src_zero_point) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (dst_zero_point) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  return attr;
}
Scratchpad::Scratchpad(const dnnl::memory::desc& desc, const dnnl::engine& engine, uint32_t r)
    : bytes(std::max<size_t>(desc.get_size(), 1)) {
  Poison(bytes.data(), bytes.size(), r);
  memory = dnnl::memory(desc, engine, bytes.data());
}
}  // namespace detail

}  // namespace fusediff::fused::onednn
