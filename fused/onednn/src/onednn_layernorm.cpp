// oneDNN 2.6's f32 layer_normalization_forward in the patterns fc+layernorm+act and fc+add+layernorm (issue 30;
// docs/onednn.md, "Layer normalization"). Both paths keep every boundary of the graph as codes:
//   FC:        inner product, s8/u8 source, into u's codes (output scales fl32(fl32(sx sw[k]) / su), the source zero
//              point folded into the s32 bias, zu an eltwise_linear post-op): requant f32_zero_point_first, as the
//              unfused fc+act graph (onednn_patterns.cpp);
//   add:       (fc+add+layernorm) reorders dequantize u and r, binary add in f32, a reorder quantizes s: the add rule
//              onednn_unfused (binary32_unfused, model/pattern.h);
//   norm:      a reorder dequantizes the codes it reads (x = fl32(s (q - z))); then
//                onednn:          layer_normalization_forward, use_scale | use_shift (gamma, beta inside the kernel);
//                onednn_unfused:  layer_normalization_forward without scale or shift, binary mul by gamma, binary
//                                 add of beta (each one binary32 rounding);
//              then QuantizeLinear (the stage's declared rule: the exact quotient rounded half to even), here;
//              where the graph declares bf16 boundaries around the norm (ln_in_float, ln_out_float), a reorder
//              stores x in bf16 and the bf16 primitive (use_scale | use_shift, f32 statistics) writes y in bf16,
//              read back exactly (DispatchedLayerNormBf16);
//   act:       (fc+layernorm+act) dequantize, eltwise, quantize reorders: binary32 post-ops (docs/onednn.md).
// The norm's order is declared per implementation and ISA (DispatchedLayerNorm; docs/summation-orders.md): the suite
// declares the one oneDNN dispatches to, read from impl_info_str() and get_effective_cpu_isa().
#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <unordered_map>

#include "fusediff/fused/float16.h"
#include "fusediff/fused/stages.h"
#include "fusediff/model/errors.h"
#include "onednn_patterns.h"

namespace fusediff::fused::onednn {

namespace {

using dnnl::memory;
using DataType = memory::data_type;
using Tag = memory::format_tag;

// AVX2 and above: mayiuse(avx2) in oneDNN, where simple_layer_normalization takes the x64 jit kernel
// (simple_layer_normalization_kernels.cpp:209-221 at v2.6.3).
bool JitLayerNormIsa(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  for (const I i : {I::avx2, I::avx2_vnni, I::avx512_mic, I::avx512_mic_4ops, I::avx512_core, I::avx512_core_vnni,
                    I::avx512_core_bf16, I::avx512_core_amx}) {
    if (isa == i) return true;
  }
  return false;
}

// Where oneDNN converts binary32 to bf16 with vcvtneps2bf16 (mayiuse(avx512_core_bf16)), flushing subnormals.
bool ConvertsBf16Natively(dnnl::cpu_isa isa) {
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

dnnl::normalization_flags Flags(bool scale_shift) {
  return scale_shift ? dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift
                     : dnnl::normalization_flags::none;
}

}  // namespace

LayerNormDispatch DispatchedLayerNorm(bool scale_shift) {
  LayerNormDispatch d;
  d.isa = EffectiveIsa();
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const memory::desc data({2, 8}, DataType::f32, Tag::ab);  // plain rows: any length takes the same implementation
  const memory::desc stat({2}, DataType::f32, Tag::a);
  const dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, data, stat, 1e-5f,
                                                     Flags(scale_shift));
  d.implementation = dnnl::layer_normalization_forward::primitive_desc(desc, engine).impl_info_str();
  if (d.implementation == "simple_layer_normalization:any") {
    d.name = JitLayerNormIsa(dnnl::get_effective_cpu_isa()) ? "onednn_jit" : "onednn_cpp";
  } else if (d.implementation == "lnorm_ref:any") {
    d.name = "onednn_ref";
  } else {
    return d;  // no declaration: the path refuses the case
  }
  d.order = named_normalization_order(d.name, "oneDNN layer norm");
  if (!scale_shift) {
    // Every implementation then stores p = fl32(fl32(x - mu) r) with r = fl32(1 / s) (jit: vsubps, vmulps,
    // jit_uni_layer_normalization_kernels.cpp:289-290; C++: sm = 1.0f * inv_sqrtvar, simple_layer_normalization_
    // kernels.cpp:89-92; ref: sm = 1.0f / sqrt_variance, ref_layer_normalization.cpp:120-126, + 0), and the binary
    // mul and add round once each: centered_times_inv without fma.
    d.order.output = NormalizationOutput::centered_times_inv;
    d.order.output_contraction = Contraction::none;
    d.name += "+binary_mul_add";
  }
  d.declared = true;
  return d;
}

LayerNormBf16Dispatch DispatchedLayerNormBf16() {
  LayerNormBf16Dispatch d;
  d.norm.isa = EffectiveIsa();
  d.boundary = ConvertsBf16Natively(dnnl::get_effective_cpu_isa()) ? flush_subnormals_float_boundary(FloatFormat::bf16)
                                                                    : FloatBoundary{FloatFormat::bf16};
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const memory::desc data({2, 8}, DataType::bf16, Tag::ab);
  const memory::desc stat({2}, DataType::f32, Tag::a);
  const dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, data, stat, 1e-5f,
                                                     Flags(true));
  try {
    d.norm.implementation = dnnl::layer_normalization_forward::primitive_desc(desc, engine).impl_info_str();
  } catch (const dnnl::error&) {  // below avx512_core: no implementation takes bf16
    d.norm.implementation = "no bf16 layer norm at " + d.norm.isa + " (oneDNN offers bf16 from avx512_core)";
    return d;
  }
  if (d.norm.implementation == "simple_layer_normalization:any") {
    d.norm.name = "onednn_jit_bf16";
  } else if (d.norm.implementation == "lnorm_ref:any") {
    d.norm.name = "onednn_ref";
  } else {
    return d;
  }
  d.norm.order = named_normalization_order(d.norm.name, "oneDNN bf16 layer norm");
  d.norm.declared = true;
  return d;
}

namespace detail {
namespace {

using Args = std::unordered_map<int, memory>;

class LayerNormPath final : public FusedPath {
 public:
  LayerNormPath(const CaseSpec& spec, OneDnnVariant variant, LayerNormDispatch dispatch, Quant u, Quant residual,
                Quant sum, Quant norm_out, std::optional<EltwiseAlgorithm> eltwise, Quant y, bool bf16)
      : spec_(spec), variant_(variant), dispatch_(std::move(dispatch)), u_(u), residual_(residual), sum_(sum),
        norm_out_(norm_out), eltwise_(eltwise), y_(y), bf16_(bf16) {}

  bool Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) override;
  std::vector<std::string> implementations() const override { return implementations_; }
  RunInfo last_run() const override { return {last_implementation_, {}, {}, {}, {}, {}}; }
  bool repeatable() const override { return true; }
  void set_repetition(uint32_t r) override { repetition_ = r; }
  WeightRange weight_range() const override { return WeightRange::full; }
  int32_t max_batch() const override { return 16; }  // rows per primitive built
  bool concurrent() const override { return false; }

 private:
  bool unfused() const { return variant_ == OneDnnVariant::unfused; }
  // Each returns a memory over a host buffer this path owns until the next Run.
  memory InnerProduct(const ConvCase& conv, std::span<const int32_t> input, std::string& impl, std::string* rejected);
  memory CodesMemory(const memory::dims& dims, DataType type);
  memory Floats(const memory::dims& dims);
  memory Dequantize(memory& codes, const Quant& q, std::string& impl);
  memory Quantize(memory& values, const Quant& q, std::string& impl);
  memory Binary(dnnl::algorithm alg, memory& a, memory& b, std::string& impl);
  memory Normalize(memory& x, const StageOperands& ln, std::string& impl);
  memory ToBf16(memory& values, std::string& impl);
  memory FromBf16(memory& values);
  void note(const std::string& implementation) {
    last_implementation_ = implementation;
    if (std::find(implementations_.begin(), implementations_.end(), implementation) == implementations_.end()) {
      implementations_.push_back(implementation);
    }
  }

  CaseSpec spec_;
  OneDnnVariant variant_;
  LayerNormDispatch dispatch_;
  Quant u_, residual_, sum_, norm_out_;
  std::optional<EltwiseAlgorithm> eltwise_;
  Quant y_;
  bool bf16_ = false;  // the graph's bf16 boundaries around the norm: the bf16 primitive
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::vector<std::string> implementations_;
  std::string last_implementation_;
  uint32_t repetition_ = 0;
  std::vector<std::vector<float>> floats_;
  std::vector<Codes> codes_;
};

memory LayerNormPath::CodesMemory(const memory::dims& dims, DataType type) {
  const memory::desc md(dims, type, Tag::ab);
  codes_.emplace_back(type, md.get_size());
  codes_.back().poison(repetition_);
  return memory(md, engine_, codes_.back().data());
}

memory LayerNormPath::Floats(const memory::dims& dims) {
  const memory::desc md(dims, DataType::f32, dims.size() == 1 ? Tag::a : Tag::ab);
  floats_.emplace_back(md.get_size() / sizeof(float), 0.0f);
  Poison(floats_.back().data(), floats_.back().size() * sizeof(float), repetition_);
  return memory(md, engine_, floats_.back().data());
}

// u = sat(rne(fl32(fl32(acc) fl32(fl32(sx sw[k]) / su)) + zu)), as the unfused fc+act graph's inner product.
memory LayerNormPath::InnerProduct(const ConvCase& conv, std::span<const int32_t> input, std::string& impl,
                                   std::string* rejected) {
  const int32_t n = conv.batch(), c = conv.input_channels(), k = conv.output_channels();
  const bool u8 = conv.input_quant().type.scalar == ScalarType::uint8;
  const int32_t zx = conv.input_quant().zero_point;
  const int64_t max_source = u8 ? 255 : 128;
  // 2.6's inner product has no source zero point: folded into the s32 bias, exact while below 2^24 (the bias is
  // added in binary32, as onednn_patterns.cpp checks).
  std::vector<int32_t> bias = conv.bias();
  for (int32_t ch = 0; ch < k; ++ch) {
    int64_t weight_sum = 0, weight_abs = 0;
    for (int32_t i = 0; i < c; ++i) {
      const int64_t w = conv.weights()[static_cast<size_t>(ch) * static_cast<size_t>(c) + static_cast<size_t>(i)];
      weight_sum += w;
      weight_abs += std::abs(w);
    }
    const int64_t folded = int64_t{bias[static_cast<size_t>(ch)]} - int64_t{zx} * weight_sum;
    if (std::abs(folded) >= (int64_t{1} << 24) || weight_abs * max_source >= (int64_t{1} << 24)) {
      Reject(rejected, "output " + std::to_string(ch) + ": the bias with the folded source zero point or the raw "
                       "accumulator can reach 2^24, where oneDNN's binary32 bias addition may differ from fl32(acc)");
      return {};
    }
    bias[static_cast<size_t>(ch)] = static_cast<int32_t>(folded);
  }
  std::vector<float> scales(static_cast<size_t>(k));
  for (int32_t ch = 0; ch < k; ++ch) {
    scales[static_cast<size_t>(ch)] = conv.input_quant().scale * conv.weight_scales()[static_cast<size_t>(ch)] / u_.scale;
  }
  dnnl::primitive_attr attr = FormulationAttributes(scales, false, false, false);
  if (u_.zero_point != 0) {
    dnnl::post_ops post_ops;  // d + zu: the inner product has no destination zero point in 2.6
    post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f, static_cast<float>(u_.zero_point));
    attr.set_post_ops(post_ops);
  }
  const DataType src_type = u8 ? DataType::u8 : DataType::s8;
  const memory::desc src_md({n, c}, src_type, Tag::nc), wei_any({k, c}, DataType::s8, Tag::any),
      wei_user({k, c}, DataType::s8, Tag::oi), bias_md({k}, DataType::s32, Tag::x), dst_md({n, k}, u_.type, Tag::nc);
  const dnnl::inner_product_forward::desc desc(dnnl::prop_kind::forward_inference, src_md, wei_any, bias_md, dst_md);
  const dnnl::inner_product_forward::primitive_desc pd(desc, attr, engine_);
  std::vector<uint8_t> src = SourceBytes(conv, input, {0, 0}, u8, 0, zx);
  std::vector<int8_t> weights = conv.weights();
  memory wei_user_mem(wei_user, engine_, weights.data());
  DeconvolutionWeights owned;
  memory wei_mem = WeightsMemory(conv, false, pd.weights_desc(), wei_user_mem, engine_, stream_, &owned);
  memory u = CodesMemory({n, k}, u_.type);
  const Scratchpad scratchpad(pd.scratchpad_desc(), engine_, repetition_);
  dnnl::inner_product_forward(pd).execute(
      stream_, {{DNNL_ARG_SRC, memory(src_md, engine_, src.data())}, {DNNL_ARG_WEIGHTS, wei_mem},
                {DNNL_ARG_BIAS, memory(bias_md, engine_, bias.data())}, {DNNL_ARG_DST, u},
                {DNNL_ARG_SCRATCHPAD, scratchpad.memory}});
  stream_.wait();
  impl += "ip: " + std::string(pd.impl_info_str());
  return u;
}

memory LayerNormPath::Dequantize(memory& codes, const Quant& q, std::string& impl) {
  memory values = Floats(codes.get_desc().dims());
  dnnl::primitive_attr attr;  // v = fl32(s (q - z)): vsubps, vmulps
  attr.set_output_scales(0, {q.scale});
  attr.set_zero_points(DNNL_ARG_SRC, 0, {q.zero_point});
  const dnnl::reorder::primitive_desc pd(engine_, codes.get_desc(), engine_, values.get_desc(), attr);
  dnnl::reorder(pd).execute(stream_, codes, values);
  impl += "; dequantize: " + std::string(pd.impl_info_str());
  return values;
}

memory LayerNormPath::Quantize(memory& values, const Quant& q, std::string& impl) {
  memory codes = CodesMemory(values.get_desc().dims(), q.type);
  dnnl::primitive_attr attr;  // q = sat(rne(fl32(fl32(v fl32(1/s)) + z)))
  attr.set_output_scales(0, {1.0f / q.scale});
  attr.set_zero_points(DNNL_ARG_DST, 0, {q.zero_point});
  const dnnl::reorder::primitive_desc pd(engine_, values.get_desc(), engine_, codes.get_desc(), attr);
  dnnl::reorder(pd).execute(stream_, values, codes);
  impl += "; quantize: " + std::string(pd.impl_info_str());
  return codes;
}

// a (op) b in binary32, b broadcast over a's rows where it has one.
memory LayerNormPath::Binary(dnnl::algorithm alg, memory& a, memory& b, std::string& impl) {
  memory out = Floats(a.get_desc().dims());
  const dnnl::binary::desc desc(alg, a.get_desc(), b.get_desc(), out.get_desc());
  const dnnl::binary::primitive_desc pd(desc, engine_);
  dnnl::binary(pd).execute(stream_, {{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, out}});
  impl += std::string(alg == dnnl::algorithm::binary_add ? "; add: " : "; mul: ") + pd.impl_info_str();
  return out;
}

// x stored in bf16 by oneDNN's reorder (nearest even; the ISA's subnormal rule: DispatchedLayerNormBf16).
memory LayerNormPath::ToBf16(memory& values, std::string& impl) {
  memory out = CodesMemory(values.get_desc().dims(), DataType::bf16);
  const dnnl::reorder::primitive_desc pd(engine_, values.get_desc(), engine_, out.get_desc());
  dnnl::reorder(pd).execute(stream_, values, out);
  impl += "; to bf16: " + std::string(pd.impl_info_str());
  return out;
}

// bf16 values read as binary32 (exact: the bits become binary32's upper half).
memory LayerNormPath::FromBf16(memory& values) {
  stream_.wait();
  memory out = Floats(values.get_desc().dims());
  const uint8_t* bytes = static_cast<const uint8_t*>(values.get_data_handle());
  float* f = static_cast<float*>(out.get_data_handle());
  const size_t n = values.get_desc().get_size() / 2;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h = 0;
    std::memcpy(&h, bytes + 2 * i, 2);
    f[i] = FromBf16Bits(h);
  }
  return out;
}

memory LayerNormPath::Normalize(memory& x_f32, const StageOperands& ln, std::string& impl) {
  const Stage* stage = find_stage(spec_.pattern, StageKind::layernorm);
  memory x = bf16_ ? ToBf16(x_f32, impl) : x_f32;
  const memory::dims dims = x.get_desc().dims();
  const memory::desc stat({dims[0]}, DataType::f32, Tag::a), channel({1, dims[1]}, DataType::f32, Tag::ab);
  const dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, x.get_desc(), stat,
                                                     stage->ln_eps, Flags(!unfused()));
  const dnnl::layer_normalization_forward::primitive_desc pd(desc, engine_);
  memory y = bf16_ ? CodesMemory(dims, DataType::bf16) : Floats(dims);
  std::vector<float> gamma = ln.gamma, beta = ln.beta;
  memory gamma_mem(channel, engine_, gamma.data()), beta_mem(channel, engine_, beta.data());
  Args args{{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}};
  if (!unfused()) {
    const memory::desc vec({dims[1]}, DataType::f32, Tag::a);
    args.insert({DNNL_ARG_SCALE, memory(vec, engine_, gamma.data())});
    args.insert({DNNL_ARG_SHIFT, memory(vec, engine_, beta.data())});
  }
  dnnl::layer_normalization_forward(pd).execute(stream_, args);
  impl += "; lnorm: " + std::string(pd.impl_info_str()) + " at " + dispatch_.isa + " (declared " + dispatch_.name + ")";
  stream_.wait();  // gamma and beta live on this frame
  if (bf16_) return FromBf16(y);
  if (!unfused()) return y;
  memory scaled = Binary(dnnl::algorithm::binary_mul, y, gamma_mem, impl);
  memory shifted = Binary(dnnl::algorithm::binary_add, scaled, beta_mem, impl);
  stream_.wait();  // gamma and beta live on this frame
  return shifted;
}

bool LayerNormPath::Run(const PatternDraw& draw, std::span<int32_t> y, std::string* rejected) {
  const ConvCase& conv = draw.conv;
  conv.validate();
  if (conv.input_height() != 1 || conv.input_width() != 1 || conv.kernel_height() != 1 || conv.kernel_width() != 1 ||
      conv.op() != ConvOp::conv2d) {
    throw InputError("oneDNN layer norm path: a fully connected draw is a 1x1 conv2d over a 1x1 input");
  }
  const int32_t n = conv.batch(), k = conv.output_channels();
  if (draw.input.size() != conv.input_elements() || y.size() != static_cast<size_t>(n) * static_cast<size_t>(k)) {
    throw InputError("oneDNN layer norm path: input or output has the wrong size");
  }
  if (conv.input_quant().type.scalar == ScalarType::int16) {
    return Reject(rejected, "oneDNN's int8 inner product takes u8 or s8 sources, not int16");
  }
  const StageOperands& ln = draw.operands(spec_.pattern, StageKind::layernorm);
  if (ln.gamma.size() != static_cast<size_t>(k) || ln.beta.size() != static_cast<size_t>(k)) {
    throw InputError("oneDNN layer norm path: gamma and beta need one value per feature (" + std::to_string(k) + ")");
  }
  const bool add = has_stage(spec_.pattern, StageKind::add);
  const std::vector<int32_t>& r_codes = draw.operands(spec_.pattern, StageKind::add).codes;
  if (add && r_codes.size() != y.size()) throw InputError("oneDNN layer norm path: the residual is not [N, K]");
  floats_.clear();
  codes_.clear();
  floats_.reserve(16);
  codes_.reserve(12);
  std::string impl;
  try {
    memory u = InnerProduct(conv, draw.input, impl, rejected);
    if (!u) return false;
    memory x = Dequantize(u, u_, impl);
    if (add) {
      memory r = CodesMemory({n, k}, residual_.type);
      for (size_t i = 0; i < r_codes.size(); ++i) codes_.back().set(i, r_codes[i]);
      memory r_values = Dequantize(r, residual_, impl);
      memory sum = Binary(dnnl::algorithm::binary_add, x, r_values, impl);
      memory s = Quantize(sum, sum_, impl);
      x = Dequantize(s, sum_, impl);
    }
    memory normed = Normalize(x, ln, impl);
    stream_.wait();
    const float* values = static_cast<const float*>(normed.get_data_handle());
    const Stage* stage = find_stage(spec_.pattern, StageKind::layernorm);
    if (!eltwise_) {
      for (size_t i = 0; i < y.size(); ++i) {  // the float layernorm: oneDNN's f32 destination is the output
        y[i] = stage->ln_float_out ? float_order_code(std::bit_cast<uint32_t>(values[i]), FloatFormat::f32)
                                   : QuantizeLinear(values[i], stage->out);
      }
      note(impl);
      return true;
    }
    memory q = CodesMemory({n, k}, norm_out_.type);
    Codes& q_codes = codes_.back();
    for (size_t i = 0; i < y.size(); ++i) q_codes.set(i, QuantizeLinear(values[i], stage->out));
    memory v = Dequantize(q, norm_out_, impl);
    memory e = Floats({n, k});
    const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, eltwise_->alg, v.get_desc(),
                                           eltwise_->alpha, eltwise_->beta);
    const dnnl::eltwise_forward::primitive_desc pd(desc, engine_);
    dnnl::eltwise_forward(pd).execute(stream_, {{DNNL_ARG_SRC, v}, {DNNL_ARG_DST, e}});
    impl += "; eltwise: " + std::string(pd.impl_info_str());
    memory out = Quantize(e, y_, impl);
    stream_.wait();
    const Codes& out_codes = codes_.back();
    for (size_t i = 0; i < y.size(); ++i) y[i] = out_codes.at(i);
    note(impl);
    return true;
  } catch (const dnnl::error& ex) {
    return Reject(rejected, DescribeDnnlError(ex, "layer norm chain mb" + std::to_string(n) + "ic" +
                                                      std::to_string(conv.input_channels()) + "oc" + std::to_string(k)));
  }
}


// Why oneDNN's bf16 layer norm cannot run the stage's declared float boundaries; empty when it can. The case's rules
// (and order) are the graph's: a wrong subnormal rule is a wrong declaration, which the comparison shows.
std::string Bf16BoundaryProblem(const Stage& ln, OneDnnVariant variant) {
  if (!ln.ln_in_float || !ln.ln_out_float || ln.ln_in_float->format != FloatFormat::bf16 ||
      ln.ln_out_float->format != FloatFormat::bf16) {
    return "oneDNN's bf16 layer norm rounds both x and y to bf16: the case declares ln_in_float " +
           (ln.ln_in_float ? format_float_boundary(*ln.ln_in_float) : std::string("none")) + ", ln_out_float " +
           (ln.ln_out_float ? format_float_boundary(*ln.ln_out_float) : std::string("none"));
  }
  if (variant != OneDnnVariant::fused) {
    return "oneDNN's bf16 layer norm runs with use_scale | use_shift only here (the unfused binary mul and add in bf16 "
           "are not declared)";
  }
  return {};
}

std::optional<Quant> EightBit(const QuantParams& q) {
  const std::optional<DataType> t = EightBitDataType(q.type);
  if (!t) return std::nullopt;
  return Quant{*t, q.scale, q.zero_point};
}

}  // namespace

std::unique_ptr<FusedPath> CreateLayerNormPath(const CaseSpec& spec, std::string* why) {
  const OneDnnVariant variant = VariantOf(spec);
  const std::string name = pattern_name(spec.pattern);
  if (name != "fc+layernorm+act" && name != "fc+add+layernorm") {
    return Unsupported(why, "oneDNN's layer norm path runs fc+layernorm+act and fc+add+layernorm, not " + name);
  }
  if (spec.fusion != Fusion::keep_all) {
    return Unsupported(why, "oneDNN's layer norm paths keep every boundary (fusion keep_all), not " +
                                std::string(to_string(spec.fusion)));
  }
  if (spec.mutant != Mutant::none) return Unsupported(why, "mutants are injected into the built-in fused paths only");
  const Convention& graph = spec.convention;
  const Stage& ln = *find_stage(spec.pattern, StageKind::layernorm);
  if (ln.ln_arithmetic != LayerNormArithmetic::f32) {
    return Unsupported(why, "oneDNN 2.6 normalizes in f32 (no int8 layer norm); the case declares " +
                                std::string(to_string(ln.ln_arithmetic)));
  }
  const bool bf16 = ln.ln_in_float || ln.ln_out_float;
  if (bf16 && ln.ln_float_out) {
    return Unsupported(why, "oneDNN's bf16 layer norm path writes codes; its float output (ln_float_out) is f32 only");
  }
  LayerNormDispatch dispatch;
  if (bf16) {
    const std::string problem = Bf16BoundaryProblem(ln, variant);
    if (!problem.empty()) return Unsupported(why, problem);
    dispatch = DispatchedLayerNormBf16().norm;
    if (!dispatch.declared) return Unsupported(why, "oneDNN's bf16 layer norm: " + dispatch.implementation);
  } else {
    dispatch = DispatchedLayerNorm(variant == OneDnnVariant::fused);
  }
  if (!dispatch.declared) {
    return Unsupported(why, "oneDNN runs its layer norm as " + dispatch.implementation +
                                ", whose summation order is not declared (docs/summation-orders.md)");
  }
  if (graph.intermediate.kind != IntermediateKind::quantized || graph.requant != RequantVariant::f32_zero_point_first) {
    return Unsupported(why, "oneDNN's inner product writes u as 8-bit codes, requant f32_zero_point_first");
  }
  const std::optional<Quant> u = EightBit(graph.intermediate.q);
  if (!u) return Unsupported(why, "oneDNN's inner product writes u as s8 or u8 (full range)");
  Quant residual, sum;
  if (const Stage* add = find_stage(spec.pattern, StageKind::add)) {
    const std::optional<Quant> r = EightBit(add->residual), s = EightBit(add->out);
    if (!r || !s) return Unsupported(why, "oneDNN's unfused add reads r and writes s as s8 or u8 (full range)");
    if (add->add_rule != AddRule::binary32_unfused) {
      return Unsupported(why, "oneDNN's add (dequantizing reorders, binary add, quantizing reorder) computes the add "
                              "rule onednn_unfused, not " + std::string(to_string(add->add_rule)));
    }
    residual = *r;
    sum = *s;
  }
  Quant norm_out, y;
  std::optional<EltwiseAlgorithm> eltwise;
  if (has_stage(spec.pattern, StageKind::activation)) {
    const std::optional<Quant> q = EightBit(ln.out), out = EightBit(graph.output.q);
    if (!q || !out) return Unsupported(why, "oneDNN's reorders read the norm's codes and write y as s8 or u8 (full range)");
    if (graph.output.rounding != RoundingMode::half_to_even ||
        graph.output.zero_point_order != ZeroPointOrder::before_rounding) {
      return Unsupported(why, "oneDNN's quantizing reorder adds the zero point in float and rounds half to even");
    }
    eltwise = MapEltwise(graph.activation, why);
    if (!eltwise) return nullptr;
    norm_out = *q;
    y = *out;
  }
  if (why != nullptr) why->clear();
  return std::make_unique<LayerNormPath>(spec, variant, std::move(dispatch), *u, residual, sum, norm_out, eltwise, y,
                                         bf16);
}

}  // namespace detail
}  // namespace fusediff::fused::onednn
