// Checked calls of XNNPACK's quantized operators (xnnpack_ops.h).
#include "xnnpack_ops.h"

#include <xnnpack.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

namespace fusediff::fused::xnnpack {

namespace {
std::string StatusName(xnn_status s) {
  switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
  }
  return "status " + std::to_string(static_cast<int>(s));
}

bool Check(xnn_status s, const std::string& what, std::string* why) {
  if (s == xnn_status_success) return true;
  if (why) *why = "XNNPACK " + what + ": " + StatusName(s);
  return false;
}

// Deletes an operator when it goes out of scope (the producers are created once per draw).
struct OperatorGuard {
  xnn_operator_t op = nullptr;
  ~OperatorGuard() {
    if (op) xnn_delete_operator(op);
  }
};

// The codes of `input` (quantization in) in the output's type: an int8 and a uint8 code of one real value differ by
// 128, as do their zero points, so x - zx, the only thing a producer reads, is unchanged.
void ConvertInput(std::span<const int32_t> input, const QuantParams& in, bool to_signed, Code8& x, int32_t* zx) {
  const bool from_signed = in.type.scalar == ScalarType::int8;
  const int32_t shift = from_signed == to_signed ? 0 : (to_signed ? -128 : 128);
  x.is_signed = to_signed;
  x.resize(input.size());
  for (size_t i = 0; i < input.size(); ++i) x.set(i, input[i] + shift);
  *zx = in.zero_point + shift;
}

// The operator's weight codes: int8 as drawn (qs8, qc8); uint8 as w + 128 with kernel zero point 128 (qu8), the same
// w - zw.
std::vector<uint8_t> KernelBytes(std::span<const int8_t> w, bool is_signed) {
  std::vector<uint8_t> bytes(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    bytes[i] = is_signed ? static_cast<uint8_t>(w[i]) : static_cast<uint8_t>(int32_t{w[i]} + 128);
  }
  return bytes;
}

// The shape of one producer operator: which XNNPACK operator, its output channels and where its output starts.
struct ProducerCall {
  const ConvCase* conv;
  bool fc;
  bool is_signed;
  int32_t zx;
  float sx;
  const ProducerOutput* out;
};

// One producer operator's arguments: output channels [k0, k0 + count) of the draw, weight scale sw (channel k0's),
// writing every K-th code from output code k0. Each value also in the operator type's own C type.
struct OperatorArgs {
  const ProducerCall* call;
  size_t count, C, K, batch;
  std::vector<uint8_t> kernel;  // the operator's weight codes
  const int32_t* bias;
  float sw;
  int8_t zx8, zo8, lo8, hi8;
  uint8_t zxu, zou, lou, hiu;
  const int8_t* ks;
  const int8_t* xs;
  const uint8_t* xu;
  int8_t* ys;
  uint8_t* yu;
};

OperatorArgs MakeArgs(const ProducerCall& c, size_t k0, size_t count, const Code8& x, Code8& y) {
  const ConvCase& v = *c.conv;
  const ProducerOutput& o = *c.out;
  const size_t taps = static_cast<size_t>(v.kernel_height()) * v.kernel_width() * v.input_channels();
  OperatorArgs a{&c,
                 count,
                 static_cast<size_t>(v.input_channels()),
                 static_cast<size_t>(v.output_channels()),
                 static_cast<size_t>(v.batch()),
                 KernelBytes(std::span<const int8_t>(v.weights()).subspan(k0 * taps, count * taps), c.is_signed),
                 v.bias().data() + k0,
                 v.weight_scales()[k0],
                 static_cast<int8_t>(c.zx),
                 static_cast<int8_t>(o.q.zero_point),
                 static_cast<int8_t>(o.lo),
                 static_cast<int8_t>(o.hi),
                 static_cast<uint8_t>(c.zx),
                 static_cast<uint8_t>(o.q.zero_point),
                 static_cast<uint8_t>(o.lo),
                 static_cast<uint8_t>(o.hi),
                 nullptr,
                 reinterpret_cast<const int8_t*>(x.bytes.data()),
                 x.bytes.data(),
                 reinterpret_cast<int8_t*>(y.bytes.data() + k0),
                 y.bytes.data() + k0};
  a.ks = reinterpret_cast<const int8_t*>(a.kernel.data());
  return a;
}

// acc[n, k] = bias[k] + sum_c (x[n, c] - zx) w[k, c]: kernel [K][C], one row per image (a 1x1 image).
bool RunFullyConnected(const OperatorArgs& a, std::string* why) {
  const ProducerCall& c = *a.call;
  const float so = c.out->q.scale;
  const size_t rows = a.batch * static_cast<size_t>(c.conv->input_height()) * c.conv->input_width();
  OperatorGuard g;
  if (c.is_signed) {
    return Check(xnn_create_fully_connected_nc_qs8(a.C, a.count, a.C, a.K, a.zx8, c.sx, a.sw, a.ks, a.bias, a.zo8, so,
                                                   a.lo8, a.hi8, 0, &g.op),
                 "create fully_connected_nc_qs8", why) &&
           Check(xnn_setup_fully_connected_nc_qs8(g.op, rows, a.xs, a.ys, nullptr), "setup fully_connected_nc_qs8",
                 why) &&
           Check(xnn_run_operator(g.op, nullptr), "run fully_connected_nc_qs8", why);
  }
  return Check(xnn_create_fully_connected_nc_qu8(a.C, a.count, a.C, a.K, a.zxu, c.sx, 128, a.sw, a.kernel.data(),
                                                 a.bias, a.zou, so, a.lou, a.hiu, 0, &g.op),
               "create fully_connected_nc_qu8", why) &&
         Check(xnn_setup_fully_connected_nc_qu8(g.op, rows, a.xu, a.yu, nullptr), "setup fully_connected_nc_qu8",
               why) &&
         Check(xnn_run_operator(g.op, nullptr), "run fully_connected_nc_qu8", why);
}

// The convolution's geometry as XNNPACK takes it (padding top, right, bottom, left).
struct Geometry {
  uint32_t pt, pr, pb, pl, kh, kw, sh, sw, dh, dw;
  size_t H, W;
};
Geometry GeometryOf(const ConvCase& v) {
  const auto u = [](int32_t value) { return static_cast<uint32_t>(value); };
  return Geometry{u(v.padding_top()),
                  u(v.padding_right()),
                  u(v.padding_bottom()),
                  u(v.padding_left()),
                  u(v.kernel_height()),
                  u(v.kernel_width()),
                  u(v.stride_height()),
                  u(v.stride_width()),
                  u(v.dilation_height()),
                  u(v.dilation_width()),
                  static_cast<size_t>(v.input_height()),
                  static_cast<size_t>(v.input_width())};
}

// The transposed convolution; the output padding is XNNPACK's adjustment (checked below the stride by the caller).
bool RunDeconvolution(const OperatorArgs& a, std::string* why) {
  const ProducerCall& c = *a.call;
  const Geometry e = GeometryOf(*c.conv);
  const float so = c.out->q.scale;
  const auto ah = static_cast<uint32_t>(c.conv->output_padding_height());
  const auto aw = static_cast<uint32_t>(c.conv->output_padding_width());
  OperatorGuard g;
  if (c.is_signed) {
    return Check(xnn_create_deconvolution2d_nhwc_qs8(e.pt, e.pr, e.pb, e.pl, e.kh, e.kw, e.sh, e.sw, e.dh, e.dw, 1, a.C,
                                                     a.count, a.C, a.K, a.zx8, c.sx, a.sw, a.ks, a.bias, a.zo8, so,
                                                     a.lo8, a.hi8, 0, &g.op),
                 "create deconvolution2d_nhwc_qs8", why) &&
           Check(xnn_setup_deconvolution2d_nhwc_qs8(g.op, a.batch, e.H, e.W, ah, aw, a.xs, a.ys, nullptr),
                 "setup deconvolution2d_nhwc_qs8", why) &&
           Check(xnn_run_operator(g.op, nullptr), "run deconvolution2d_nhwc_qs8", why);
  }
  return Check(xnn_create_deconvolution2d_nhwc_qu8(e.pt, e.pr, e.pb, e.pl, e.kh, e.kw, e.sh, e.sw, e.dh, e.dw, 1, a.C,
                                                   a.count, a.C, a.K, a.zxu, c.sx, 128, a.sw, a.kernel.data(), a.bias,
                                                   a.zou, so, a.lou, a.hiu, 0, &g.op),
               "create deconvolution2d_nhwc_qu8", why) &&
         Check(xnn_setup_deconvolution2d_nhwc_qu8(g.op, a.batch, e.H, e.W, ah, aw, a.xu, a.yu, nullptr),
               "setup deconvolution2d_nhwc_qu8", why) &&
         Check(xnn_run_operator(g.op, nullptr), "run deconvolution2d_nhwc_qu8", why);
}

// The convolution: qc8 with `per_channel_scales` (every channel at once), else qs8 / qu8 with one scale.
bool RunConvolution(const OperatorArgs& a, std::span<const float> per_channel_scales, std::string* why) {
  const ProducerCall& c = *a.call;
  const Geometry e = GeometryOf(*c.conv);
  const float so = c.out->q.scale;
  OperatorGuard g;
  if (!per_channel_scales.empty()) {
    return Check(xnn_create_convolution2d_nhwc_qc8(e.pt, e.pr, e.pb, e.pl, e.kh, e.kw, e.sh, e.sw, e.dh, e.dw, 1, a.C,
                                                   a.count, a.C, a.K, a.zx8, c.sx, per_channel_scales.data(), a.ks,
                                                   a.bias, a.zo8, so, a.lo8, a.hi8, 0, &g.op),
                 "create convolution2d_nhwc_qc8", why) &&
           Check(xnn_setup_convolution2d_nhwc_qc8(g.op, a.batch, e.H, e.W, a.xs, a.ys, nullptr),
                 "setup convolution2d_nhwc_qc8", why) &&
           Check(xnn_run_operator(g.op, nullptr), "run convolution2d_nhwc_qc8", why);
  }
  if (c.is_signed) {
    return Check(xnn_create_convolution2d_nhwc_qs8(e.pt, e.pr, e.pb, e.pl, e.kh, e.kw, e.sh, e.sw, e.dh, e.dw, 1, a.C,
                                                   a.count, a.C, a.K, a.zx8, c.sx, a.sw, a.ks, a.bias, a.zo8, so, a.lo8,
                                                   a.hi8, 0, &g.op),
                 "create convolution2d_nhwc_qs8", why) &&
           Check(xnn_setup_convolution2d_nhwc_qs8(g.op, a.batch, e.H, e.W, a.xs, a.ys, nullptr),
                 "setup convolution2d_nhwc_qs8", why) &&
           Check(xnn_run_operator(g.op, nullptr), "run convolution2d_nhwc_qs8", why);
  }
  return Check(xnn_create_convolution2d_nhwc_qu8(e.pt, e.pr, e.pb, e.pl, e.kh, e.kw, e.sh, e.sw, e.dh, e.dw, 1, a.C,
                                                 a.count, a.C, a.K, a.zxu, c.sx, 128, a.sw, a.kernel.data(), a.bias,
                                                 a.zou, so, a.lou, a.hiu, 0, &g.op),
               "create convolution2d_nhwc_qu8", why) &&
         Check(xnn_setup_convolution2d_nhwc_qu8(g.op, a.batch, e.H, e.W, a.xu, a.yu, nullptr),
               "setup convolution2d_nhwc_qu8", why) &&
         Check(xnn_run_operator(g.op, nullptr), "run convolution2d_nhwc_qu8", why);
}

// One producer operator over output channels [k0, k0 + count) (`per_channel_scales`: the qc8 convolution).
bool RunOne(const ProducerCall& c, size_t k0, size_t count, std::span<const float> per_channel_scales, const Code8& x,
            Code8& y, std::string* why) {
  const OperatorArgs a = MakeArgs(c, k0, count, x, y);
  if (c.fc) return RunFullyConnected(a, why);
  if (c.conv->op() == ConvOp::conv_transpose2d) return RunDeconvolution(a, why);
  return RunConvolution(a, per_channel_scales, why);
}
}  // namespace

bool Initialize(std::string* why) {
  static std::once_flag once;
  static xnn_status status = xnn_status_uninitialized;
  std::call_once(once, [] { status = xnn_initialize(nullptr); });
  return Check(status, "initialize", why);
}

void Code8::resize(size_t n) {
  size = n;
  bytes.assign(n + XNN_EXTRA_BYTES, 0);
}

float RequantScale(float sx, float sw, float so) {
  // One binary32 rounding per operation, as the C expression `input_scale * kernel_scale / output_scale`.
  const float product = sx * sw;
  return product / so;
}

bool RunProducer(const ConvCase& conv, bool fc, std::span<const int32_t> input, const ProducerOutput& output,
                 Code8& out, std::string* implementation, std::string* rejected) {
  if (!Initialize(rejected)) return false;
  const bool is_signed = output.q.type.scalar == ScalarType::int8;
  const std::vector<float>& sw = conv.weight_scales();
  const bool common = std::all_of(sw.begin(), sw.end(), [&](float s) { return s == sw.front(); });
  const bool transposed = conv.op() == ConvOp::conv_transpose2d;
  // XNNPACK's qc8 exists for conv2d only (no deconvolution or fully connected qc8 at ae108ef).
  const bool qc8 = !common && is_signed && !fc && !transposed;
  const float sx = conv.input_quant().scale;
  for (float s : sw) {
    const float m = RequantScale(sx, s, output.q.scale);
    // convolution-nhwc.c:626, 741, 858; deconvolution-nhwc.c:333, 428; fully-connected-nc.c:300, 380.
    if (!(m < 256.0f)) {
      if (rejected) *rejected = "XNNPACK refuses a requantization scale >= 256 (unsupported parameter)";
      return false;
    }
    // params-init.c:394 (qs8) and :148 (qu8) assert it; qc8 stores the scale without the assert.
    if (!qc8 && m < 0x1p-32f) {
      if (rejected) *rejected = "XNNPACK asserts a requantization scale >= 2^-32 (it would abort the process)";
      return false;
    }
  }
  if (transposed &&
      (conv.output_padding_height() >= conv.stride_height() || conv.output_padding_width() >= conv.stride_width())) {
    // deconvolution-nhwc.c:967-979: "adjustment must be smaller than stride" (invalid parameter at setup).
    if (rejected) *rejected = "XNNPACK's deconvolution takes an output adjustment below the stride only";
    return false;
  }
  Code8 x;
  int32_t zx = 0;
  ConvertInput(input, conv.input_quant(), is_signed, x, &zx);
  out.is_signed = is_signed;
  out.resize(conv.output_elements());
  const ProducerCall call{&conv, fc, is_signed, zx, sx, &output};
  const size_t K = static_cast<size_t>(conv.output_channels());
  const std::string type = fc           ? (is_signed ? "fully_connected_nc_qs8" : "fully_connected_nc_qu8")
                           : transposed ? (is_signed ? "deconvolution2d_nhwc_qs8" : "deconvolution2d_nhwc_qu8")
                           : qc8        ? "convolution2d_nhwc_qc8"
                                        : (is_signed ? "convolution2d_nhwc_qs8" : "convolution2d_nhwc_qu8");
  if (common || qc8) {
    if (implementation) *implementation = type;
    return RunOne(call, 0, K, qc8 ? std::span<const float>(sw) : std::span<const float>(), x, out, rejected);
  }
  // Per-channel scales without a per-channel operator: one operator per output channel, each its channel's scale.
  if (implementation) *implementation = type + " per output channel";
  for (size_t k = 0; k < K; ++k) {
    if (!RunOne(call, k, 1, {}, x, out, rejected)) return false;
  }
  return true;
}

ElementwiseOp::~ElementwiseOp() {
  if (op_) xnn_delete_operator(static_cast<xnn_operator_t>(op_));
}

namespace {
enum OpKind { kClamp = 1, kSigmoid, kTanh, kElu, kLeaky, kAdd };

// sigmoid and tanh: one output quantization each, and the same create signature.
struct FixedOutputTable {
  ActivationKind kind;
  OpKind op_kind;
  const char* name_s8;
  const char* name_u8;
  float scale;
  const char* scale_text;
  int32_t zero_point_s8, zero_point_u8;
  decltype(&xnn_create_sigmoid_nc_qs8) create_s8;
  decltype(&xnn_create_sigmoid_nc_qu8) create_u8;
};
// sigmoid: lut-elementwise-nc.c:243-255, 280-292; tanh: :321-333, 358-369.
const FixedOutputTable kFixedOutputTables[] = {
    {ActivationKind::sigmoid, kSigmoid, "sigmoid_nc_qs8", "sigmoid_nc_qu8", 0x1p-8f, "1/256", -128, 0,
     xnn_create_sigmoid_nc_qs8, xnn_create_sigmoid_nc_qu8},
    {ActivationKind::tanh, kTanh, "tanh_nc_qs8", "tanh_nc_qu8", 0x1p-7f, "1/128", 0, 128, xnn_create_tanh_nc_qs8,
     xnn_create_tanh_nc_qu8}};

const FixedOutputTable* FindFixedOutputTable(ActivationKind kind) {
  for (const FixedOutputTable& t : kFixedOutputTables) {
    if (t.kind == kind) return &t;
  }
  return nullptr;
}
}  // namespace

std::unique_ptr<ElementwiseOp> ElementwiseOp::Clamp(bool is_signed, int32_t lo, int32_t hi, std::string* why) {
  if (!Initialize(why)) return nullptr;
  auto e = std::make_unique<ElementwiseOp>();
  e->kind_ = kClamp;
  e->is_signed_ = is_signed;
  e->name_ = is_signed ? "clamp_nc_s8" : "clamp_nc_u8";
  xnn_operator_t op = nullptr;
  const xnn_status s =
      is_signed ? xnn_create_clamp_nc_s8(1, 1, 1, static_cast<int8_t>(lo), static_cast<int8_t>(hi), 0, &op)
                : xnn_create_clamp_nc_u8(1, 1, 1, static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), 0, &op);
  e->op_ = op;
  if (!Check(s, "create " + e->name_, why)) return nullptr;
  return e;
}

std::unique_ptr<ElementwiseOp> ElementwiseOp::Table(const Activation& a, const QuantParams& in, const QuantParams& out,
                                                    std::string* why) {
  if (!Initialize(why)) return nullptr;
  const bool s8 = in.type.scalar == ScalarType::int8;
  if (out.type.scalar != in.type.scalar) {
    if (why)
      *why = "XNNPACK's table operators keep the type (" + to_string(in.type) + " in, " + to_string(out.type) + " out)";
    return nullptr;
  }
  auto e = std::make_unique<ElementwiseOp>();
  e->is_signed_ = s8;
  const int32_t lo = out.type.qmin(), hi = out.type.qmax();
  const auto zx8 = static_cast<int8_t>(in.zero_point), zo8 = static_cast<int8_t>(out.zero_point);
  const auto zxu = static_cast<uint8_t>(in.zero_point), zou = static_cast<uint8_t>(out.zero_point);
  const auto lo8 = static_cast<int8_t>(lo), hi8 = static_cast<int8_t>(hi);
  const auto lou = static_cast<uint8_t>(lo), hiu = static_cast<uint8_t>(hi);
  xnn_operator_t op = nullptr;
  xnn_status s = xnn_status_success;
  if (const FixedOutputTable* t = FindFixedOutputTable(a.kind)) {
    e->kind_ = t->op_kind;
    e->name_ = s8 ? t->name_s8 : t->name_u8;
    const int32_t zo = s8 ? t->zero_point_s8 : t->zero_point_u8;
    if (out.scale != t->scale || out.zero_point != zo) {
      if (why) *why = "XNNPACK's " + e->name_ + " takes output scale " + t->scale_text + " with zero point " +
                      std::to_string(zo) + " only";
      return nullptr;
    }
    s = s8 ? t->create_s8(1, 1, 1, zx8, in.scale, zo8, out.scale, lo8, hi8, 0, &op)
           : t->create_u8(1, 1, 1, zxu, in.scale, zou, out.scale, lou, hiu, 0, &op);
  } else if (a.kind == ActivationKind::elu && s8) {
    e->kind_ = kElu;
    e->name_ = "elu_nc_qs8";
    s = xnn_create_elu_nc_qs8(1, 1, 1, a.alpha, zx8, in.scale, zo8, out.scale, lo8, hi8, 0, &op);
  } else if (a.kind == ActivationKind::leaky_relu && !s8) {
    e->kind_ = kLeaky;
    e->name_ = "leaky_relu_nc_qu8";
    s = xnn_create_leaky_relu_nc_qu8(1, 1, 1, a.alpha, zxu, in.scale, zou, out.scale, lou, hiu, 0, &op);
  } else {
    if (why) *why = a.kind == ActivationKind::elu          ? "XNNPACK has elu_nc_qs8 only (no qu8 elu at ae108ef)"
                    : a.kind == ActivationKind::leaky_relu ? "XNNPACK has leaky_relu_nc_qu8 only (no qs8 leaky relu at ae108ef)"
                                                           : "XNNPACK has no 8-bit operator for " + std::string(to_string(a.kind));
    return nullptr;
  }
  e->op_ = op;
  if (!Check(s, "create " + e->name_, why)) return nullptr;
  return e;
}

std::unique_ptr<ElementwiseOp> ElementwiseOp::Add(const QuantParams& qa, const QuantParams& qb, const QuantParams& out,
                                                  int32_t lo, int32_t hi, std::string* why) {
  if (!Initialize(why)) return nullptr;
  const bool s8 = out.type.scalar == ScalarType::int8;
  if (qa.type.scalar != out.type.scalar || qb.type.scalar != out.type.scalar) {
    if (why) *why = "XNNPACK's add_nd takes its inputs and output in one 8-bit type";
    return nullptr;
  }
  auto e = std::make_unique<ElementwiseOp>();
  e->kind_ = kAdd;
  e->is_signed_ = s8;
  e->name_ = s8 ? "add_nd_qs8" : "add_nd_qu8";
  xnn_operator_t op = nullptr;
  const xnn_status s =
      s8 ? xnn_create_add_nd_qs8(static_cast<int8_t>(qa.zero_point), qa.scale, static_cast<int8_t>(qb.zero_point),
                                 qb.scale, static_cast<int8_t>(out.zero_point), out.scale, static_cast<int8_t>(lo),
                                 static_cast<int8_t>(hi), 0, &op)
         : xnn_create_add_nd_qu8(static_cast<uint8_t>(qa.zero_point), qa.scale, static_cast<uint8_t>(qb.zero_point),
                                 qb.scale, static_cast<uint8_t>(out.zero_point), out.scale, static_cast<uint8_t>(lo),
                                 static_cast<uint8_t>(hi), 0, &op);
  e->op_ = op;
  if (!Check(s, "create " + e->name_, why)) return nullptr;
  return e;
}

bool ElementwiseOp::Run(const Code8& a, const Code8& b, Code8& out, std::string* why) const {
  out.is_signed = is_signed_;
  out.resize(a.size);
  auto op = static_cast<xnn_operator_t>(op_);
  const size_t shape[1] = {a.size};
  const xnn_status s =
      is_signed_
          ? xnn_setup_add_nd_qs8(op, 1, shape, 1, shape, reinterpret_cast<const int8_t*>(a.bytes.data()),
                                 reinterpret_cast<const int8_t*>(b.bytes.data()),
                                 reinterpret_cast<int8_t*>(out.bytes.data()), nullptr)
          : xnn_setup_add_nd_qu8(op, 1, shape, 1, shape, a.bytes.data(), b.bytes.data(), out.bytes.data(), nullptr);
  return Check(s, "setup " + name_, why) && Check(xnn_run_operator(op, nullptr), "run " + name_, why);
}

namespace {
// floor((in + 2 padding - kernel) / stride) + 1, or 0 when the padded input is smaller than the window.
size_t PooledExtent(size_t in, int32_t kernel, int32_t stride, int32_t padding) {
  const size_t padded = in + 2 * static_cast<size_t>(padding);
  return padded < static_cast<size_t>(kernel)
             ? 0
             : (padded - static_cast<size_t>(kernel)) / static_cast<size_t>(stride) + 1;
}
}  // namespace

bool RunMaxPool(const Code8& x, const Shape4& s, int32_t kernel, int32_t stride, int32_t padding, int32_t lo,
                int32_t hi, Code8& y, Shape4* out_shape, std::string* why) {
  if (!Initialize(why)) return false;
  *out_shape = Shape4{s.n, PooledExtent(s.h, kernel, stride, padding), PooledExtent(s.w, kernel, stride, padding), s.c};
  if (out_shape->elements() == 0) {
    if (why) *why = "the pool's padded input is smaller than its window";
    return false;
  }
  y.is_signed = x.is_signed;
  y.resize(out_shape->elements());
  const auto p = static_cast<uint32_t>(padding), k = static_cast<uint32_t>(kernel), st = static_cast<uint32_t>(stride);
  OperatorGuard g;
  if (x.is_signed) {
    return Check(xnn_create_max_pooling2d_nhwc_s8(p, p, p, p, k, k, st, st, 1, 1, s.c, s.c, s.c,
                                                  static_cast<int8_t>(lo), static_cast<int8_t>(hi), 0, &g.op),
                 "create max_pooling2d_nhwc_s8", why) &&
           Check(xnn_setup_max_pooling2d_nhwc_s8(g.op, s.n, s.h, s.w, reinterpret_cast<const int8_t*>(x.bytes.data()),
                                                 reinterpret_cast<int8_t*>(y.bytes.data()), nullptr),
                 "setup max_pooling2d_nhwc_s8", why) &&
           Check(xnn_run_operator(g.op, nullptr), "run max_pooling2d_nhwc_s8", why);
  }
  return Check(xnn_create_max_pooling2d_nhwc_u8(p, p, p, p, k, k, st, st, 1, 1, s.c, s.c, s.c, static_cast<uint8_t>(lo),
                                                static_cast<uint8_t>(hi), 0, &g.op),
               "create max_pooling2d_nhwc_u8", why) &&
         Check(xnn_setup_max_pooling2d_nhwc_u8(g.op, s.n, s.h, s.w, x.bytes.data(), y.bytes.data(), nullptr),
               "setup max_pooling2d_nhwc_u8", why) &&
         Check(xnn_run_operator(g.op, nullptr), "run max_pooling2d_nhwc_u8", why);
}

bool RunAveragePool(const Code8& x, const Shape4& s, int32_t kernel, int32_t stride, int32_t padding,
                    const QuantParams& in, const QuantParams& out, Code8& y, Shape4* out_shape, std::string* why) {
  if (!Initialize(why)) return false;
  *out_shape = Shape4{s.n, PooledExtent(s.h, kernel, stride, padding), PooledExtent(s.w, kernel, stride, padding), s.c};
  if (out_shape->elements() == 0) {
    if (why) *why = "the pool's padded input is smaller than its window";
    return false;
  }
  // average-pooling-nhwc.c:480: a window covering the whole padded input takes the global kernel, which rounds the
  // binary32 product half to even, not the fixed-point rule the case declares.
  if (s.h + 2 * static_cast<size_t>(padding) == static_cast<size_t>(kernel) &&
      s.w + 2 * static_cast<size_t>(padding) == static_cast<size_t>(kernel)) {
    if (why)
      *why = "XNNPACK's average pooling takes its global path (fp32, half to even) on a window covering the input";
    return false;
  }
  y.is_signed = false;
  y.resize(out_shape->elements());
  const auto p = static_cast<uint32_t>(padding), k = static_cast<uint32_t>(kernel), st = static_cast<uint32_t>(stride);
  OperatorGuard g;
  return Check(xnn_create_average_pooling2d_nhwc_qu8(
                   p, p, p, p, k, k, st, st, s.c, s.c, s.c, static_cast<uint8_t>(in.zero_point), in.scale,
                   static_cast<uint8_t>(out.zero_point), out.scale, static_cast<uint8_t>(out.type.qmin()),
                   static_cast<uint8_t>(out.type.qmax()), 0, &g.op),
               "create average_pooling2d_nhwc_qu8", why) &&
         Check(xnn_setup_average_pooling2d_nhwc_qu8(g.op, s.n, s.h, s.w, x.bytes.data(), y.bytes.data(), nullptr),
               "setup average_pooling2d_nhwc_qu8", why) &&
         Check(xnn_run_operator(g.op, nullptr), "run average_pooling2d_nhwc_qu8", why);
}

bool ElementwiseOp::Run(const Code8& in, Code8& out, std::string* why) const {
  out.is_signed = is_signed_;
  out.resize(in.size);
  auto op = static_cast<xnn_operator_t>(op_);
  const auto* xs = reinterpret_cast<const int8_t*>(in.bytes.data());
  auto* ys = reinterpret_cast<int8_t*>(out.bytes.data());
  const uint8_t* xu = in.bytes.data();
  uint8_t* yu = out.bytes.data();
  xnn_status s = xnn_status_success;
  switch (kind_) {
    case kClamp:
      s = is_signed_ ? xnn_setup_clamp_nc_s8(op, in.size, xs, ys, nullptr)
                     : xnn_setup_clamp_nc_u8(op, in.size, xu, yu, nullptr);
      break;
    case kSigmoid:
      s = is_signed_ ? xnn_setup_sigmoid_nc_qs8(op, in.size, xs, ys, nullptr)
                     : xnn_setup_sigmoid_nc_qu8(op, in.size, xu, yu, nullptr);
      break;
    case kTanh:
      s = is_signed_ ? xnn_setup_tanh_nc_qs8(op, in.size, xs, ys, nullptr)
                     : xnn_setup_tanh_nc_qu8(op, in.size, xu, yu, nullptr);
      break;
    case kElu: s = xnn_setup_elu_nc_qs8(op, in.size, xs, ys, nullptr); break;
    case kLeaky: s = xnn_setup_leaky_relu_nc_qu8(op, in.size, xu, yu, nullptr); break;
    default: s = xnn_status_invalid_state; break;
  }
  return Check(s, "setup " + name_, why) && Check(xnn_run_operator(op, nullptr), "run " + name_, why);
}

}  // namespace fusediff::fused::xnnpack
