// oneDNN 2.6 post-op chains for the patterns, each beside its unfused oneDNN graph (docs/onednn.md, "Post-op
// chains"). What each computes, in oneDNN's binary32 order (src/cpu/x64 int8 conv kernels, jit_uni_postops_injector):
//   conv2d+add+act, sum:    d = fl32(fl32(acc) * fl32(sx sw[k]));  d = fl32(d + sr (r - zr)) (prev read from dst as
//                           the sum's s8/u8 type, vsubps zr, vfmadd231ps sr);  d = fl32(f(d) * fl32(1/sy));
//                           d = fl32(d + zy); saturate; round half to even. The residual r lives in dst beforehand.
//   conv2d+add+act, binary: the same with d = fl32(d + src1), src1 = fl32(sr (r - zr)) an f32 tensor.
//   fc+act:                 inner product (2.6 has no zero points on it): the source zero point folded into the s32
//                           bias (b - zx sum_c w[k, c], as frameworks compensate), the output scale, the eltwise,
//                           then the destination zero point as an eltwise_linear post-op (fl32(1 x + zy): the vaddps
//                           of the convolution's zero point); saturate; round half to even.
// The unfused graphs keep every boundary as a tensor of codes, each node its own primitive: the producer into u
// (output scale fl32(fl32(sx sw)/su) and zero point zu, as onednn_kernel.cpp), reorders that dequantize
// (scale, source zero point) and quantize (fl32(1/s), destination zero point), the binary add in f32, eltwise in
// f32, max pooling on the output codes. 2.6 has no pooling post-op: conv+pool is measured unfused only.
#include "onednn_patterns.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <unordered_map>
#include <utility>
#include <vector>

#include <omp.h>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::onednn {

bool BrgconvEmptyKernelRow(const BrgconvGeometry& g) {
  const int64_t dh = g.dilate_h + 1;
  const auto div_up = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    const int64_t iih = oh * g.stride_h - g.t_pad;  // BRGEMM_CONV_KER_HEADER (jit_brgemm_conv.cpp:1339-1344)
    const int64_t kh_s = div_up(std::max<int64_t>(0, -iih), dh);
    const int64_t kh_f = g.kh - div_up(std::max<int64_t>(0, iih - g.ih + (g.kh - 1) * dh + 1), dh);
    if (kh_f <= kh_s) return true;
  }
  return false;
}

bool BrgconvEmptyKernelRangeCrashes(const std::string& implementation, bool sum_and_eltwise, const BrgconvGeometry& g,
                                    size_t scratchpad_bytes, int threads) {
  constexpr size_t kPage = 4096;  // P4K: the batch's perf alignment and its per-thread rounding (sizeof element 32)
  // The code is the same from v2.6 to v2.7.2; v2.7.3 (4761ee91b3, d28f2c1757) and v3.0 (2402005dc5) changed it.
  const dnnl_version_t* v = dnnl_version();
  const bool affected = v->major == 2 && (v->minor == 6 || (v->minor == 7 && v->patch <= 2));
  return affected && implementation.rfind("brgconv:avx512_core", 0) == 0 && implementation.find("amx") == std::string::npos &&
         sum_and_eltwise && BrgconvEmptyKernelRow(g) && threads > 0 &&
         scratchpad_bytes == (static_cast<size_t>(threads) + 1) * kPage;
}

int OneDnnMaxThreads() { return omp_get_max_threads(); }

}  // namespace fusediff::fused::onednn

namespace fusediff::fused::onednn::detail {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;
using Args = std::unordered_map<int, memory>;

enum class Chain { sum, binary, inner_product, max_pool };

class PatternPath final : public FusedPath {
 public:
  PatternPath(Chain chain, OneDnnVariant variant, const CaseSpec& spec, EltwiseAlgorithm eltwise, Quant u, Quant y,
              Quant residual, Quant sum)
      : chain_(chain), variant_(variant), spec_(spec), eltwise_(eltwise), u_(u), y_(y), residual_(residual),
        sum_(sum) {}

  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override;
  std::vector<std::string> implementations() const override { return implementations_; }
  RunInfo last_run() const override { return {last_implementation_, last_formulation_, {}, {}, {}, withheld_}; }
  bool repeatable() const override { return true; }
  void set_repetition(uint32_t r) override { repetition_ = r; }
  WeightRange weight_range() const override { return WeightRange::full; }
  // Every dimension applies to the chains but the inner product's zero points (2.6 has none on it: the source's is
  // folded into the bias, the destination's is an eltwise_linear post-op whatever the formulation). The paired
  // output-padding comparison runs on the conv2d+act path only (onednn_kernel.cpp).
  bool draws_formulations() const override { return true; }
  int32_t max_batch() const override { return 16; }  // as OneDnnPath: more samples per primitive built
  bool concurrent() const override { return false; }

 private:
  bool unfused() const { return variant_ == OneDnnVariant::unfused; }
  void note(const std::string& implementation) {
    last_implementation_ = implementation;
    if (std::find(implementations_.begin(), implementations_.end(), implementation) == implementations_.end()) {
      implementations_.push_back(implementation);
    }
  }
  // The unfused graph's nodes after the producer, on f32 and 8-bit tensors of one shape (nhwc).
  memory Dequantize(memory& codes, float scale, int32_t zero_point, std::string& impl);
  memory Quantize(memory& values, const Quant& q, std::string& impl);
  memory Activate(memory& values, std::string& impl);

  Chain chain_;
  OneDnnVariant variant_;
  CaseSpec spec_;
  EltwiseAlgorithm eltwise_;
  Quant u_, y_, residual_, sum_;  // sum_: the add's boundary s (unfused)
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::vector<std::string> implementations_;
  std::string last_implementation_, last_formulation_;
  std::string withheld_;  // the last Run did not execute its draw: oneDNN would crash on it (RunInfo::withheld)
  uint32_t repetition_ = 0;  // the poison pattern of the next Run (Poison)
  // Host buffers behind the memories of one Run (oneDNN reads and writes them in place).
  std::vector<std::vector<float>> floats_;
  std::vector<Codes> codes_;
};

memory PatternPath::Dequantize(memory& codes, float scale, int32_t zero_point, std::string& impl) {
  const memory::desc md(codes.get_desc().dims(), DataType::f32, Tag::nhwc);
  floats_.emplace_back(md.get_size() / sizeof(float), 0.0f);
  Poison(floats_.back().data(), floats_.back().size() * sizeof(float), repetition_);
  memory values(md, engine_, floats_.back().data());
  dnnl::primitive_attr attr;  // v = scale * (q - zero_point)
  attr.set_output_scales(0, {scale});
  attr.set_zero_points(DNNL_ARG_SRC, 0, {zero_point});
  const dnnl::reorder::primitive_desc pd(engine_, codes.get_desc(), engine_, md, attr);
  dnnl::reorder(pd).execute(stream_, codes, values);
  impl += "; dequantize: " + std::string(pd.impl_info_str());
  return values;
}

memory PatternPath::Quantize(memory& values, const Quant& q, std::string& impl) {
  const memory::desc md(values.get_desc().dims(), q.type, Tag::nhwc);
  codes_.emplace_back(q.type, md.get_size());
  codes_.back().poison(repetition_);
  memory codes(md, engine_, codes_.back().data());
  dnnl::primitive_attr attr;  // q = sat(round_half_even(v * fl32(1/s) + zero_point))
  attr.set_output_scales(0, {1.0f / q.scale});
  attr.set_zero_points(DNNL_ARG_DST, 0, {q.zero_point});
  const dnnl::reorder::primitive_desc pd(engine_, values.get_desc(), engine_, md, attr);
  dnnl::reorder(pd).execute(stream_, values, codes);
  impl += "; quantize: " + std::string(pd.impl_info_str());
  return codes;
}

memory PatternPath::Activate(memory& values, std::string& impl) {
  const memory::desc md = values.get_desc();
  floats_.emplace_back(md.get_size() / sizeof(float), 0.0f);
  Poison(floats_.back().data(), floats_.back().size() * sizeof(float), repetition_);
  memory out(md, engine_, floats_.back().data());
  const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, eltwise_.alg, md, eltwise_.alpha,
                                         eltwise_.beta);
  const dnnl::eltwise_forward::primitive_desc pd(desc, engine_);
  dnnl::eltwise_forward(pd).execute(stream_, {{DNNL_ARG_SRC, values}, {DNNL_ARG_DST, out}});
  impl += "; eltwise: " + std::string(pd.impl_info_str());
  return out;
}

bool PatternPath::Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) {
  const std::vector<int32_t>& r_codes = draw.operands(spec_.pattern, StageKind::add).codes;  // the residual
  const ConvCase& conv = draw.conv;
  conv.validate();
  withheld_.clear();
  const PatternGeometry out_shape = pattern_output_geometry(spec_.pattern, conv);
  if (draw.input.size() != conv.input_elements() || y.size() != out_shape.elements()) {
    throw InputError("oneDNN pattern path: input or output has the wrong size");
  }
  const bool fc = chain_ == Chain::inner_product;
  const bool add = chain_ == Chain::sum || chain_ == Chain::binary;
  if (add && r_codes.size() != conv.output_elements()) {
    throw InputError("oneDNN pattern path: the residual does not have the producer output's shape");
  }
  if (fc && (conv.input_height() != 1 || conv.input_width() != 1 || conv.kernel_height() != 1 ||
             conv.kernel_width() != 1 || conv.op() != ConvOp::conv2d)) {
    throw InputError("oneDNN pattern path: a fully connected draw is a 1x1 conv2d over a 1x1 input");
  }
  const std::optional<DataType> drawn_type = EightBitDataType(QuantType{conv.input_quant().type.scalar, false});
  if (!drawn_type) return Reject(rejected, "oneDNN's int8 primitives take u8 or s8 sources, not " + to_string(conv.input_quant().type));
  const Formulation& form = draw.formulation;
  last_formulation_.clear();
  // The source type passed (Formulation::source): a code of the other type moves by 128, its zero point too.
  const SourceAsPassed passed = source_as_passed(form, *drawn_type == DataType::u8, conv.input_quant().zero_point);
  const std::optional<DataType> src_type = passed.u8 ? DataType::u8 : DataType::s8;
  const int32_t shift = passed.shift;
  const int32_t n = conv.batch(), c = conv.input_channels(), k = conv.output_channels();
  const int32_t zx = conv.input_quant().zero_point + shift;
  const int64_t max_source = *src_type == DataType::u8 ? 255 : 128;
  const bool transposed = conv.op() == ConvOp::conv_transpose2d;
  const bool output_padding = transposed && (conv.output_padding_height() > 0 || conv.output_padding_width() > 0);
  const auto [extend_h, extend_w] = output_padding_extension(conv, form.extended_input);
  const int32_t in_h = conv.input_height() + extend_h, in_w = conv.input_width() + extend_w;

  // The declared conventions round fl32(acc) once; oneDNN converts (acc - bias) and bias separately and adds them
  // in binary32: the same while both stay below 2^24 (onednn_kernel.cpp). The inner product's bias carries the
  // folded source zero point.
  std::vector<int32_t> bias = conv.bias();
  for (int32_t ch = 0; ch < k; ++ch) {
    const size_t ich = static_cast<size_t>(ch);
    if (fc) {
      int64_t weight_sum = 0, weight_abs = 0;
      for (int32_t i = 0; i < c; ++i) {
        const int64_t w = conv.weights()[ich * static_cast<size_t>(c) + static_cast<size_t>(i)];
        weight_sum += w;
        weight_abs += std::abs(w);
      }
      const int64_t folded = int64_t{bias[ich]} - int64_t{zx} * weight_sum;
      if (std::abs(folded) >= (int64_t{1} << 24) || weight_abs * max_source >= (int64_t{1} << 24)) {
        return Reject(rejected, "output " + std::to_string(ch) + ": the bias with the folded source zero point or the "
                                "raw accumulator can reach 2^24, where oneDNN's binary32 bias addition may differ from fl32(acc)");
      }
      bias[ich] = static_cast<int32_t>(folded);
    } else {
      const int64_t b = std::abs(int64_t{bias[ich]});
      if (b >= (int64_t{1} << 24) || conv.accumulator_bound(ch) - b >= (int64_t{1} << 24)) {
        return Reject(rejected, "output channel " + std::to_string(ch) + ": |bias| or the bias-free accumulator can "
                                "reach 2^24, where oneDNN's binary32 bias addition may differ from fl32(acc)");
      }
    }
  }

  // The producer writes u (unfused) or the chain's output y (fused).
  const Quant& dst_q = unfused() ? u_ : y_;
  const memory::dims dst_dims = fc ? memory::dims{n, k} : memory::dims{n, k, conv.output_height(), conv.output_width()};
  const memory::desc src_md = fc ? memory::desc({n, c}, *src_type, Tag::nc)
                                 : memory::desc({n, c, in_h, in_w}, *src_type, Tag::nhwc);
  const memory::dims wei_dims = fc ? memory::dims{k, c} : memory::dims{k, c, conv.kernel_height(), conv.kernel_width()};
  const memory::desc wei_any(wei_dims, DataType::s8, Tag::any);
  const memory::desc wei_user(wei_dims, DataType::s8, fc ? Tag::oi : Tag::ohwi);
  const memory::desc bias_md({k}, form.f32_bias ? DataType::f32 : DataType::s32, Tag::x);
  const memory::desc dst_md(dst_dims, dst_q.type, fc ? Tag::nc : Tag::nhwc);
  const memory::desc src1_md(dst_dims, DataType::f32, fc ? Tag::nc : Tag::nhwc);

  std::vector<float> scales(static_cast<size_t>(k));
  for (int32_t ch = 0; ch < k; ++ch) {
    const float product = conv.input_quant().scale * conv.weight_scales()[static_cast<size_t>(ch)];  // fl32(sx*sw)
    scales[static_cast<size_t>(ch)] = unfused() ? product / u_.scale : product;
  }
  // One common scale (mask 0) where the formulation asks and every channel's is the same (a draw under it is).
  const bool common = form.common_scales && std::all_of(scales.begin(), scales.end(),
                                                        [&](float v) { return v == scales.front(); });
  // Zero-point attributes absent only where the value is 0; otherwise present (the fallback).
  const bool src_zp_attr = !fc && passed.zero_point_attribute;
  const bool dst_zp_attr = !fc && !(form.zero_points_absent && dst_q.zero_point == 0);
  dnnl::primitive_attr attr = FormulationAttributes(scales, common, src_zp_attr, dst_zp_attr);
  dnnl::post_ops post_ops;
  if (!unfused()) {
    if (chain_ == Chain::sum) post_ops.append_sum(residual_.scale, residual_.zero_point, residual_.type);
    if (chain_ == Chain::binary) post_ops.append_binary(algorithm::binary_add, src1_md);
    post_ops.append_eltwise(1.0f / y_.scale, eltwise_.alg, eltwise_.alpha, eltwise_.beta);
  }
  // The inner product has no destination zero point: d + zy as an eltwise_linear post-op (alpha 1, beta zy).
  if (fc && dst_q.zero_point != 0) {
    post_ops.append_eltwise(1.0f, algorithm::eltwise_linear, 1.0f, static_cast<float>(dst_q.zero_point));
  }
  if (post_ops.len() > 0) attr.set_post_ops(post_ops);

  const char* producer = fc ? "inner product" : (conv.op() == ConvOp::conv2d ? "convolution" : "deconvolution");
  const std::string problem = std::string(producer) + " " + (*src_type == DataType::u8 ? "u8" : "s8") + " mb" +
                              std::to_string(n) + "ic" + std::to_string(c) + "oc" + std::to_string(k) + "_ih" +
                              std::to_string(in_h) + "iw" + std::to_string(in_w) + "_kh" +
                              std::to_string(conv.kernel_height()) + "kw" + std::to_string(conv.kernel_width());
  ConvPrimitive made;
  try {
    if (fc) {
      const dnnl::inner_product_forward::desc desc(dnnl::prop_kind::forward_inference, src_md, wei_any, bias_md, dst_md);
      const dnnl::inner_product_forward::primitive_desc pd(desc, attr, engine_);
      made = {dnnl::inner_product_forward(pd), pd.weights_desc(), pd.scratchpad_desc(), pd.impl_info_str()};
    } else {
      made = CreateConvPrimitive(conv, {extend_h, extend_w}, src_md, wei_any, bias_md, dst_md, attr, engine_);
    }
  } catch (const dnnl::error& e) {
    return Reject(rejected, DescribeDnnlError(e, problem));
  }
  // oneDNN 2.6.3's brgconv would die with SIGSEGV on this draw (BrgconvEmptyKernelRangeCrashes): not executed; the
  // driver counts it as the ledger's entry or fails the case.
  if (chain_ == Chain::sum && !unfused() && conv.op() == ConvOp::conv2d &&
      BrgconvEmptyKernelRangeCrashes(made.implementation, true,
                                     BrgconvGeometry{in_h, conv.output_height(), conv.kernel_height(),
                                                     conv.stride_height(), conv.dilation_height() - 1,
                                                     conv.padding_top()},
                                     made.scratchpad_md.get_size(), OneDnnMaxThreads())) {
    last_implementation_ = "conv: " + made.implementation;
    last_formulation_ = format_formulation(form, output_padding);
    withheld_ = "oneDNN 2.6 brgconv dies with SIGSEGV on an output row whose kernel rows all lie in the padding, "
                "under a sum and an eltwise post-op, without an accumulation buffer (docs/onednn.md)";
    return Reject(rejected, withheld_);
  }

  floats_.clear();
  codes_.clear();
  codes_.reserve(8);
  floats_.reserve(8);
  std::vector<uint8_t> src = SourceBytes(conv, draw.input, {extend_h, extend_w}, *src_type == DataType::u8, shift, zx);
  std::vector<int8_t> weights = conv.weights();
  std::vector<float> bias_f32(bias.begin(), bias.end());  // exact: |bias| < 2^24 (checked above)
  int32_t src_zero_point = zx, dst_zero_point = dst_q.zero_point;
  Codes dst(dst_q.type, conv.output_elements());
  dst.poison(repetition_);
  // The sum post-op reads the residual from the destination, as its own 8-bit type (same size as dst's).
  if (chain_ == Chain::sum && !unfused()) {
    for (size_t i = 0; i < r_codes.size(); ++i) dst.set(i, r_codes[i]);
  }
  std::vector<float> src1;
  if (chain_ == Chain::binary && !unfused()) {
    src1.resize(conv.output_elements());
    for (size_t i = 0; i < src1.size(); ++i) {
      src1[i] = residual_.scale * static_cast<float>(r_codes[i] - residual_.zero_point);  // fl32(sr (r - zr))
    }
  }
  try {
    memory src_mem(src_md, engine_, src.data());
    memory wei_user_mem(wei_user, engine_, weights.data());
    detail::DeconvolutionWeights owned;  // a deconvolution's weights: fusediff's buffer with a known tail
    memory wei_mem = detail::WeightsMemory(conv, !fc && conv.op() == ConvOp::conv_transpose2d, made.weights_md, wei_user_mem,
                                           engine_, stream_, &owned);
    memory bias_mem(bias_md, engine_, form.f32_bias ? static_cast<void*>(bias_f32.data()) : bias.data());
    memory dst_mem(dst_md, engine_, dst.data());
    const Scratchpad scratchpad(made.scratchpad_md, engine_, repetition_);
    Args args{{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_BIAS, bias_mem}, {DNNL_ARG_DST, dst_mem},
              {DNNL_ARG_SCRATCHPAD, scratchpad.memory}};
    const memory::desc zp_md({1}, DataType::s32, Tag::x);
    if (src_zp_attr) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory(zp_md, engine_, &src_zero_point)});
    if (dst_zp_attr) args.insert({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, memory(zp_md, engine_, &dst_zero_point)});
    if (!src1.empty()) args.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, memory(src1_md, engine_, src1.data())});
    made.primitive.execute(stream_, args);
    stream_.wait();
    std::string impl = (fc ? "ip: " : "conv: ") + made.implementation;
    last_formulation_ = format_formulation(form, output_padding);
    if (!unfused()) {
      note(impl);
      for (size_t i = 0; i < y.size(); ++i) y[i] = dst.at(i);
      return true;
    }

    // The unfused graph's remaining nodes, on nhwc tensors (an FC output [N, K] as N x K x 1 x 1).
    const memory::dims tensor_dims = {n, k, fc ? 1 : conv.output_height(), fc ? 1 : conv.output_width()};
    memory u_mem(memory::desc(tensor_dims, u_.type, Tag::nhwc), engine_, dst.data());
    memory act_in = Dequantize(u_mem, u_.scale, u_.zero_point, impl);
    if (add) {
      Codes residual(residual_.type, r_codes.size());
      for (size_t i = 0; i < r_codes.size(); ++i) residual.set(i, r_codes[i]);
      memory r_mem(memory::desc(tensor_dims, residual_.type, Tag::nhwc), engine_, residual.data());
      memory r_values = Dequantize(r_mem, residual_.scale, residual_.zero_point, impl);
      const memory::desc f32_md(tensor_dims, DataType::f32, Tag::nhwc);
      floats_.emplace_back(f32_md.get_size() / sizeof(float), 0.0f);
      memory sum_values(f32_md, engine_, floats_.back().data());
      const dnnl::binary::desc binary_desc(algorithm::binary_add, f32_md, f32_md, f32_md);
      const dnnl::binary::primitive_desc binary_pd(binary_desc, engine_);
      dnnl::binary(binary_pd).execute(stream_, {{DNNL_ARG_SRC_0, act_in}, {DNNL_ARG_SRC_1, r_values}, {DNNL_ARG_DST, sum_values}});
      impl += "; add: " + std::string(binary_pd.impl_info_str());
      memory s_codes = Quantize(sum_values, sum_, impl);
      act_in = Dequantize(s_codes, sum_.scale, sum_.zero_point, impl);
    }
    memory activated = Activate(act_in, impl);
    memory y_codes = Quantize(activated, y_, impl);
    if (chain_ == Chain::max_pool) {
      const Stage* pool = find_stage(spec_.pattern, StageKind::max_pool);
      const PoolWindow& w = pool->window;
      if (out_shape.elements() == 0) {
        note(impl);
        return true;
      }
      const memory::dims pooled_dims = {n, k, out_shape.height, out_shape.width};
      const memory::desc pooled_md(pooled_dims, y_.type, Tag::nhwc);
      codes_.emplace_back(y_.type, out_shape.elements());
      codes_.back().poison(repetition_);
      Codes& pooled = codes_.back();
      memory pooled_mem(pooled_md, engine_, pooled.data());
      // The windows past the last whole one are dropped (floor): a right padding that may be negative.
      const memory::dims pad_l = {w.padding, w.padding};
      const memory::dims pad_r = {(out_shape.height - 1) * w.stride + w.kernel - conv.output_height() - w.padding,
                                  (out_shape.width - 1) * w.stride + w.kernel - conv.output_width() - w.padding};
      try {
        const dnnl::pooling_forward::desc pool_desc(dnnl::prop_kind::forward_inference, algorithm::pooling_max,
                                                    y_codes.get_desc(), pooled_md, {w.stride, w.stride},
                                                    {w.kernel, w.kernel}, pad_l, pad_r);
        const dnnl::pooling_forward::primitive_desc pool_pd(pool_desc, engine_);
        dnnl::pooling_forward(pool_pd).execute(stream_, {{DNNL_ARG_SRC, y_codes}, {DNNL_ARG_DST, pooled_mem}});
        impl += "; pool: " + std::string(pool_pd.impl_info_str());
      } catch (const dnnl::error& e) {
        return Reject(rejected, DescribeDnnlError(e, "max pooling " + std::to_string(w.kernel) + "x" +
                                                         std::to_string(w.kernel) + "/" + std::to_string(w.stride) +
                                                         " over " + std::to_string(conv.output_height()) + "x" +
                                                         std::to_string(conv.output_width())));
      }
      stream_.wait();
      note(impl);
      for (size_t i = 0; i < y.size(); ++i) y[i] = pooled.at(i);
      return true;
    }
    stream_.wait();
    note(impl);
    const Codes& out = codes_.back();
    for (size_t i = 0; i < y.size(); ++i) y[i] = out.at(i);
    return true;
  } catch (const dnnl::error& e) {
    return Reject(rejected, DescribeDnnlError(e, problem));
  }
}


}  // namespace

std::unique_ptr<FusedPath> CreatePatternPath(const CaseSpec& spec, std::string* why) {
  const std::string name = pattern_name(spec.pattern);
  const bool unfused = VariantOf(spec) == OneDnnVariant::unfused;
  if (has_stage(spec.pattern, StageKind::layernorm)) return CreateLayerNormPath(spec, why);
  if (spec.fusion != Fusion::keep_all) {
    return Unsupported(why, "oneDNN's paths declare their own arithmetic (fusion keep_all), not " +
                                std::string(to_string(spec.fusion)));
  }
  if (spec.mutant != Mutant::none) return Unsupported(why, "mutants are injected into the built-in fused paths only");
  Chain chain;
  if (name == "conv2d+add+act") {
    chain = find_stage(spec.pattern, StageKind::add)->f32_add_rule == AddRule::f32_two_roundings ? Chain::binary : Chain::sum;
  } else if (name == "fc+act") {
    chain = Chain::inner_product;
  } else if (name == "conv2d+act+maxpool" || name == "conv2d+act+avgpool") {
    if (!unfused) {
      return Unsupported(why, "oneDNN 2.6 has no conv+pool fusion: pooling is its own primitive, never a post-op "
                              "(post-ops are eltwise, sum, binary, depthwise conv, prelu); measured through the unfused "
                              "graph only (--fused onednn_unfused)");
    }
    if (name == "conv2d+act+avgpool") {
      return Unsupported(why, "the unfused oneDNN graph with an average pool is not wired: no graph pool rule (tflite, "
                              "ort_qlinear, ort_global) declares oneDNN's int8 pooling_avg arithmetic yet");
    }
    chain = Chain::max_pool;
  } else {
    return Unsupported(why, "oneDNN runs conv2d+act, conv2d+add+act, fc+act, fc+layernorm+act, fc+add+layernorm and "
                            "(unfused) conv2d+act+maxpool here, not " + name);
  }
  const Convention& graph = spec.convention;
  std::optional<EltwiseAlgorithm> eltwise = MapEltwise(graph.activation, why);
  if (!eltwise) return nullptr;
  Quant u, y, residual, sum;
  const std::optional<DataType> out = EightBitDataType(graph.output.q.type);
  if (!out) {
    return Unsupported(why, "oneDNN's int8 primitives write s8 or u8 saturated to the full range here; output type " +
                                to_string(graph.output.q.type) + " is not expressible");
  }
  y = Quant{*out, graph.output.q.scale, graph.output.q.zero_point};
  if (graph.output.rounding != RoundingMode::half_to_even || graph.output.zero_point_order != ZeroPointOrder::before_rounding) {
    return Unsupported(why, "oneDNN adds the destination zero point in float and then rounds half to even; the case "
                            "declares " + std::string(to_string(graph.output.rounding)) + " with the zero point " +
                            std::string(to_string(graph.output.zero_point_order)));
  }
  if (unfused) {
    const std::optional<DataType> mid = EightBitDataType(graph.intermediate.q.type);
    if (graph.intermediate.kind != IntermediateKind::quantized || !mid) {
      return Unsupported(why, "oneDNN's unfused graph stores the intermediate as s8 or u8 (full range)");
    }
    if (graph.requant != RequantVariant::f32_zero_point_first) {
      return Unsupported(why, "oneDNN's int8 primitives requantize as f32_zero_point_first; the case declares " +
                                  std::string(to_string(graph.requant)));
    }
    u = Quant{*mid, graph.intermediate.q.scale, graph.intermediate.q.zero_point};
  }
  if (const Stage* add = find_stage(spec.pattern, StageKind::add)) {
    const std::optional<DataType> r = EightBitDataType(add->residual.type);
    if (!r) return Unsupported(why, "oneDNN reads the residual as s8 or u8 (full range), not " + to_string(add->residual.type));
    residual = Quant{*r, add->residual.scale, add->residual.zero_point};
    if (unfused) {
      const std::optional<DataType> s = EightBitDataType(add->out.type);
      if (!s) return Unsupported(why, "oneDNN's unfused add writes s as s8 or u8 (full range), not " + to_string(add->out.type));
      if (add->add_rule != AddRule::binary32_unfused) {
        return Unsupported(why, "oneDNN's unfused add (dequantizing reorders, binary add, quantizing reorder, in "
                                "binary32) computes the add rule onednn_unfused, not " + std::string(to_string(add->add_rule)));
      }
      sum = Quant{*s, add->out.scale, add->out.zero_point};
    }
  }
  if (why != nullptr) why->clear();
  return std::make_unique<PatternPath>(chain, VariantOf(spec), spec, *eltwise, u, y, residual, sum);
}

}  // namespace fusediff::fused::onednn::detail
