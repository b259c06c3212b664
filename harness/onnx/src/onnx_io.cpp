#include "fusediff/onnx/onnx_io.h"

#include <onnx/onnx_pb.h>  // defines ONNX_API, then onnx-ml.pb.h

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <limits>
#include <type_traits>

#include <Eigen/Core>  // Eigen::half, Eigen::bfloat16: binary16 and bfloat16 conversions (round to nearest even)

#include "fusediff/model/errors.h"

namespace fusediff::onnx_io {

namespace {

std::string CannotOpen(const std::string& path) {
  return path + (errno == ENOENT ? ": no such file" : ": cannot be read (" + std::string(std::strerror(errno)) + ")");
}

// One open, fstat and read: a bisect reads every session's saved model back.
std::string ReadBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(CannotOpen(path));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != bytes.size()) throw InputError(path + ": cannot be read (it changed while being read)");
  return bytes;
}

// One row per supported type: its ONNX number, ONNX Runtime's JS name, size and NumPy descr.
struct TypeRow {
  DType type;
  const char* name;
  size_t size;
  const char* npy;
};
constexpr TypeRow kTypes[] = {
    {DType::float32, "float32", 4, "<f4"},   {DType::uint8, "uint8", 1, "|u1"},
    {DType::int8, "int8", 1, "|i1"},         {DType::uint16, "uint16", 2, "<u2"},
    {DType::int16, "int16", 2, "<i2"},       {DType::int32, "int32", 4, "<i4"},
    {DType::int64, "int64", 8, "<i8"},       {DType::bool_, "bool", 1, "|b1"},
    {DType::float16, "float16", 2, "<f2"},   {DType::float64, "float64", 8, "<f8"},
    {DType::uint32, "uint32", 4, "<u4"},     {DType::uint64, "uint64", 8, "<u8"},
    {DType::bfloat16, "bfloat16", 2, "|V2"},
};

const TypeRow* RowOf(int32_t t) {
  for (const TypeRow& r : kTypes) {
    if (static_cast<int32_t>(r.type) == t) return &r;
  }
  return nullptr;
}

const TypeRow& RowOf(DType t) { return *RowOf(static_cast<int32_t>(t)); }

std::string SupportedNames() {
  std::string names;
  for (const TypeRow& r : kTypes) names += (names.empty() ? "" : ", ") + std::string(r.name);
  return names;
}

DType FromProto(int32_t t, const std::string& what) {
  if (RowOf(t) != nullptr) return static_cast<DType>(t);
  const std::string name = onnx::TensorProto::DataType_IsValid(t)
                               ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
                               : std::to_string(t);
  ThrowUnsupported(what, t == onnx::TensorProto::STRING ? "string type" : "element type",
                   "element type " + name + " (fusediff reads " + SupportedNames() + ")");
}

// The values a TensorProto keeps outside raw_data, in the field the ONNX spec assigns to each type (onnx.proto,
// TensorProto): float_data, double_data, int64_data, uint64_data (uint32 and uint64), else int32_data (the 8- and
// 16-bit types, float16 and bfloat16 as their bits, int32, bool). Each value's low bytes are the element
// (little-endian); a float or double is copied whole.
template <typename Field>
void CopyField(const Field& field, Tensor& t, const std::string& what) {
  const size_t n = t.elements();
  if (static_cast<size_t>(field.size()) != n) {
    throw InputError(what + ": holds " + std::to_string(field.size()) + " values, the dims need " + std::to_string(n));
  }
  const size_t size = element_size(t.type);
  for (size_t i = 0; i < n; ++i) {
    const auto v = field.Get(static_cast<int>(i));
    if constexpr (std::is_floating_point_v<std::remove_const_t<decltype(v)>>) {
      std::memcpy(t.bytes.data() + size * i, &v, sizeof v);
    } else {
      const uint64_t u = static_cast<uint64_t>(v);
      std::memcpy(t.bytes.data() + size * i, &u, size);
    }
  }
}

Tensor FromProtoTensor(const onnx::TensorProto& p, const std::string& what) {
  Tensor t;
  t.name = p.name();
  t.type = FromProto(p.data_type(), what);
  if (p.data_location() == onnx::TensorProto::EXTERNAL) ThrowUnsupported(what, "external data", "the tensor's data is in another file");
  if (p.has_segment()) ThrowUnsupported(what, "segmented tensor", "the tensor is one segment of a larger one");
  for (int64_t d : p.dims()) {
    if (d < 0) throw InputError(what + ": negative dimension " + std::to_string(d));
    t.dims.push_back(d);
  }
  const std::optional<uint64_t> size = ByteSize(t.type, t.dims);
  if (!size) throw InputError(what + ": its dims overflow 64 bits");
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    if (raw.size() != *size) {
      throw InputError(what + ": raw_data holds " + std::to_string(raw.size()) + " bytes, the dims need " +
                       std::to_string(*size));
    }
    t.bytes.assign(raw.begin(), raw.end());
    return t;
  }
  t.bytes.resize(*size);
  switch (t.type) {
    case DType::float32: CopyField(p.float_data(), t, what); break;
    case DType::float64: CopyField(p.double_data(), t, what); break;
    case DType::int64: CopyField(p.int64_data(), t, what); break;
    case DType::uint32: case DType::uint64: CopyField(p.uint64_data(), t, what); break;
    default: CopyField(p.int32_data(), t, what); break;
  }
  return t;
}

onnx::TensorProto ToProto(const Tensor& t) {
  onnx::TensorProto p;
  p.set_name(t.name);
  p.set_data_type(static_cast<int32_t>(t.type));
  for (int64_t d : t.dims) p.add_dims(d);
  p.set_raw_data(std::string(t.bytes.begin(), t.bytes.end()));
  return p;
}

std::vector<int64_t> DimsOf(const onnx::ValueInfoProto& v) {
  std::vector<int64_t> dims;
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return dims;
  for (const auto& d : v.type().tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

std::vector<std::string> DimParamsOf(const onnx::ValueInfoProto& v) {
  std::vector<std::string> params;
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return params;
  for (const auto& d : v.type().tensor_type().shape().dim()) params.push_back(d.has_dim_param() ? d.dim_param() : "");
  return params;
}

// A scalar initializer's value (scale or zero point), or nullopt when it is not a scalar constant.
std::optional<Tensor> ScalarInitializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& init : g.initializer()) {
    if (init.name() != name) continue;
    if (RowOf(init.data_type()) == nullptr || init.data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
    Tensor t = FromProtoTensor(init, "initializer " + name);
    if (t.elements() != 1) return std::nullopt;
    return t;
  }
  return std::nullopt;
}

std::optional<TensorQuant> QuantOf(const onnx::GraphProto& g, const onnx::NodeProto& n, bool codes) {
  if (n.input_size() < 2) return std::nullopt;
  const auto scale = ScalarInitializer(g, n.input(1));
  if (!scale) return std::nullopt;
  TensorQuant q;
  q.scale = scale->value(0);
  q.codes = codes;
  q.type = DType::uint8;  // ONNX: no zero point means uint8 and 0
  if (n.input_size() >= 3 && !n.input(2).empty()) {
    const auto zp = ScalarInitializer(g, n.input(2));
    if (!zp) return std::nullopt;
    q.zero_point = static_cast<int32_t>(zp->value(0));
    q.type = zp->type;
  }
  return q;
}

}  // namespace

bool is_supported_dtype(int32_t onnx_type) { return RowOf(onnx_type) != nullptr; }

std::string to_string(DType t) { return RowOf(t).name; }

DType parse_dtype(const std::string& text, const std::string& field) {
  for (const TypeRow& r : kTypes) {
    if (text == r.name) return r.type;
  }
  throw InputError(field + ": '" + text + "' is not a supported type (" + SupportedNames() + ")");
}

size_t element_size(DType t) { return RowOf(t).size; }

bool is_float(DType t) {
  return t == DType::float32 || t == DType::float64 || t == DType::float16 || t == DType::bfloat16;
}

double lowest(DType t) {
  switch (t) {
    case DType::float32: return std::numeric_limits<float>::lowest();
    case DType::float64: return std::numeric_limits<double>::lowest();
    case DType::float16: return -65504.0;
    case DType::bfloat16: return -static_cast<double>(Eigen::NumTraits<Eigen::bfloat16>::highest());
    case DType::int8: return -128;
    case DType::int16: return -32768;
    case DType::int32: return std::numeric_limits<int32_t>::min();
    case DType::int64: return static_cast<double>(std::numeric_limits<int64_t>::min());
    default: return 0;  // the unsigned types and bool
  }
}

double highest(DType t) {
  switch (t) {
    case DType::float32: return std::numeric_limits<float>::max();
    case DType::float64: return std::numeric_limits<double>::max();
    case DType::float16: return 65504.0;
    case DType::bfloat16: return static_cast<double>(Eigen::NumTraits<Eigen::bfloat16>::highest());
    case DType::uint8: return 255;
    case DType::int8: return 127;
    case DType::uint16: return 65535;
    case DType::int16: return 32767;
    case DType::uint32: return std::numeric_limits<uint32_t>::max();
    case DType::int32: return std::numeric_limits<int32_t>::max();
    case DType::uint64: return static_cast<double>(std::numeric_limits<uint64_t>::max());
    case DType::int64: return static_cast<double>(std::numeric_limits<int64_t>::max());
    case DType::bool_: return 1;
  }
  return 0;
}

void ThrowUnsupported(const std::string& where, const std::string& reason, const std::string& detail) {
  throw InputError(where + ": unsupported feature [" + reason + "]: " + detail);
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t k = 0; k < dims.size(); ++k) {
    if (k > 0) text += ',';
    text += std::to_string(dims[k]);
  }
  return text + "]";
}

std::optional<uint64_t> ByteSize(DType type, const std::vector<int64_t>& dims) {
  uint64_t n = element_size(type);
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

size_t Tensor::elements() const {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

namespace {
template <typename T>
T Load(const std::vector<uint8_t>& bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + sizeof(T) * i, sizeof(T));
  return v;
}
}  // namespace

double Tensor::value(size_t i) const {
  switch (type) {
    case DType::float32: return Load<float>(bytes, i);
    case DType::float64: return Load<double>(bytes, i);
    case DType::float16: return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(Load<uint16_t>(bytes, i)));
    case DType::bfloat16: return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(Load<uint16_t>(bytes, i)));
    case DType::int8: return Load<int8_t>(bytes, i);
    case DType::uint8: case DType::bool_: return Load<uint8_t>(bytes, i);
    case DType::int16: return Load<int16_t>(bytes, i);
    case DType::uint16: return Load<uint16_t>(bytes, i);
    case DType::int32: return Load<int32_t>(bytes, i);
    case DType::uint32: return Load<uint32_t>(bytes, i);
    case DType::int64: return static_cast<double>(Load<int64_t>(bytes, i));
    case DType::uint64: return static_cast<double>(Load<uint64_t>(bytes, i));
  }
  return 0;
}

uint64_t Tensor::bits(size_t i) const {
  const size_t size = element_size(type);
  uint64_t u = 0;
  std::memcpy(&u, bytes.data() + size * i, size);  // little-endian: the low bytes
  return u;
}

Tensor Tensor::FromValues(std::string name, DType type, std::vector<int64_t> dims, const std::vector<double>& values) {
  Tensor t{std::move(name), type, std::move(dims), {}};
  const size_t size = element_size(type);
  t.bytes.resize(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* dst = t.bytes.data() + size * i;
    const double v = values[i];
    auto store = [&](auto x) { std::memcpy(dst, &x, sizeof x); };
    switch (type) {
      case DType::float32: store(static_cast<float>(v)); break;
      case DType::float64: store(v); break;
      case DType::float16: store(Eigen::numext::bit_cast<uint16_t>(Eigen::half(static_cast<float>(v)))); break;
      case DType::bfloat16: store(Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(static_cast<float>(v)))); break;
      case DType::int8: store(static_cast<int8_t>(v)); break;
      case DType::uint8: case DType::bool_: store(static_cast<uint8_t>(v)); break;
      case DType::int16: store(static_cast<int16_t>(v)); break;
      case DType::uint16: store(static_cast<uint16_t>(v)); break;
      case DType::int32: store(static_cast<int32_t>(v)); break;
      case DType::uint32: store(static_cast<uint32_t>(v)); break;
      case DType::int64: store(static_cast<int64_t>(v)); break;
      case DType::uint64: store(static_cast<uint64_t>(v)); break;
    }
  }
  return t;
}

Tensor Tensor::FromFloats(std::string name, std::vector<int64_t> dims, const std::vector<float>& values) {
  return FromValues(std::move(name), DType::float32, std::move(dims), std::vector<double>(values.begin(), values.end()));
}

Tensor Tensor::FromCodes(std::string name, DType type, std::vector<int64_t> dims, const std::vector<int32_t>& codes) {
  return FromValues(std::move(name), type, std::move(dims), std::vector<double>(codes.begin(), codes.end()));
}

Tensor Tensor::FromInt64(std::string name, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  Tensor t{std::move(name), DType::int64, std::move(dims), {}};
  t.bytes.resize(values.size() * 8);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::string ReadModelBytes(const std::string& path) { return ReadBytes(path); }

ModelInfo ReadModel(const std::string& path) {
  ModelInfo info = ParseModel(ReadBytes(path), path);
  if (info.nodes.empty()) throw InputError(path + ": the graph has no nodes");
  if (info.outputs.empty()) throw InputError(path + ": the graph has no outputs");
  return info;
}

namespace {

// A graph input's or output's declared tensor type, or the unsupported feature it uses instead.
ValueInfo TensorValue(const onnx::ValueInfoProto& v, const std::string& path, const char* role) {
  const std::string what = std::string(role) + " '" + v.name() + "'";
  const onnx::TypeProto& t = v.type();
  if (t.has_sequence_type()) ThrowUnsupported(path, "sequence type", what + " is a sequence (fusediff bisects tensors)");
  if (t.has_map_type()) ThrowUnsupported(path, "map type", what + " is a map (fusediff bisects tensors)");
  if (t.has_optional_type()) ThrowUnsupported(path, "optional type", what + " is an optional (fusediff bisects tensors)");
  if (t.has_sparse_tensor_type()) ThrowUnsupported(path, "sparse tensor", what + " is a sparse tensor");
  if (!t.has_tensor_type()) throw InputError(path + ": " + what + " has no type");
  return {v.name(), FromProto(t.tensor_type().elem_type(), path + ": " + what), DimsOf(v)};
}

std::string OpName(const onnx::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
}

// [0, rows) for an input that indexes a Gather over a constant table (the smallest table where it indexes several).
std::optional<IndexRange> GatherRange(const onnx::GraphProto& g, const std::string& input) {
  std::optional<IndexRange> range;
  for (const auto& n : g.node()) {
    if (OpName(n) != "Gather" || n.input_size() < 2 || n.input(1) != input) continue;
    int64_t axis = 0;
    for (const auto& a : n.attribute()) {
      if (a.name() == "axis") axis = a.i();
    }
    for (const auto& init : g.initializer()) {
      if (init.name() != n.input(0)) continue;
      const int64_t rank = init.dims_size();
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) break;
      const int64_t rows = init.dims(static_cast<int>(axis));
      if (!range || rows < range->hi) {
        range = IndexRange{0, rows, "Gather(table '" + init.name() + "' of " + std::to_string(rows) + " rows)"};
      }
    }
  }
  return range;
}

std::optional<TensorQuant> ProducedQuant(const onnx::GraphProto& g,
                                         const std::map<std::string, const onnx::NodeProto*>& producer,
                                         const std::string& name) {
  const auto p = producer.find(name);
  if (p != producer.end() && p->second->op_type() == "QuantizeLinear") return QuantOf(g, *p->second, true);
  if (p != producer.end() && p->second->op_type() == "DequantizeLinear") return QuantOf(g, *p->second, false);
  return std::nullopt;
}

uint64_t Digest(const onnx::GraphProto& g) {
  onnx::GraphProto content = g;
  content.clear_name();
  content.clear_doc_string();
  for (auto& n : *content.mutable_node()) {
    n.clear_name();
    n.clear_doc_string();
  }
  // Initializers and nodes in a canonical order: a transformer may re-emit them in another order.
  std::vector<std::string> parts;
  for (const auto& init : content.initializer()) parts.push_back("I" + init.SerializeAsString());
  for (const auto& n : content.node()) parts.push_back("N" + n.SerializeAsString());
  std::sort(parts.begin(), parts.end());
  uint64_t digest = 1469598103934665603ull;  // FNV-1a over the sorted parts
  for (const auto& part : parts) {
    for (unsigned char ch : part) digest = (digest ^ ch) * 1099511628211ull;
    digest = (digest ^ 0xff) * 1099511628211ull;
  }
  return digest;
}

}  // namespace

ModelInfo ParseModel(const std::string& bytes, const std::string& path, bool untyped_outputs) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes) || !m.has_graph()) throw InputError(path + ": not an ONNX model (ModelProto)");
  ModelInfo info;
  info.path = path;
  for (const auto& op : m.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") info.opset = op.version();
  }
  const onnx::GraphProto& g = m.graph();
  std::map<std::string, const onnx::NodeProto*> producer;
  std::map<std::string, const onnx::NodeProto*> consumer;  // the first consumer
  for (const auto& n : g.node()) {
    const std::string op = OpName(n);
    // ONNX's training operators (onnx/defs/training: Gradient, Adagrad, Momentum, Adam) have no inference kernels.
    if (n.domain() == "ai.onnx.preview.training") ThrowUnsupported(path, "training op", op + " (a training operator)");
    ++info.node_counts[op];
    info.nodes.push_back(op + "(" + (n.output_size() > 0 ? n.output(0) : std::string()) + ")");
    for (const auto& o : n.output()) {
      if (!o.empty()) info.produced.push_back(o);
    }
    for (const auto& o : n.output()) producer[o] = &n;
    for (const auto& i : n.input()) consumer.emplace(i, &n);
  }
  std::map<std::string, bool> initializer;
  for (const auto& init : g.initializer()) initializer[init.name()] = true;
  for (const auto& v : g.input()) {
    if (initializer.count(v.name())) continue;
    info.inputs.push_back(TensorValue(v, path, "input"));
    const auto c = consumer.find(v.name());
    info.input_quant.push_back(c != consumer.end() && c->second->op_type() == "QuantizeLinear"
                                   ? QuantOf(g, *c->second, false)
                                   : std::nullopt);
    info.input_range.push_back(GatherRange(g, v.name()));
    info.input_dim_params.push_back(DimParamsOf(v));
  }
  for (const auto& v : g.output()) {
    if (untyped_outputs && !v.has_type()) {
      info.outputs.push_back({v.name(), DType::float32, {}});
      info.output_quant.push_back(std::nullopt);
      continue;
    }
    info.outputs.push_back(TensorValue(v, path, "output"));
    info.output_quant.push_back(ProducedQuant(g, producer, v.name()));
  }
  info.graph_digest = Digest(g);
  return info;
}

namespace {

NodeAttribute ReadAttribute(const onnx::AttributeProto& a, const std::string& path) {
  NodeAttribute out;
  out.name = a.name();
  out.i = a.i();
  out.f = a.f();
  out.s = a.s();
  out.ints.assign(a.ints().begin(), a.ints().end());
  out.floats.assign(a.floats().begin(), a.floats().end());
  if (a.has_t() && is_supported_dtype(a.t().data_type()) && a.t().data_location() != onnx::TensorProto::EXTERNAL) {
    out.t = FromProtoTensor(a.t(), path + ": attribute " + a.name());
  }
  return out;
}

onnx::ModelProto ParseProto(const std::string& bytes, const std::string& path) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes) || !m.has_graph()) throw InputError(path + ": not an ONNX model (ModelProto)");
  return m;
}

}  // namespace

const NodeAttribute* GraphNode::Find(const std::string& name) const {
  for (const NodeAttribute& a : attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

GraphContent ParseGraph(const std::string& bytes, const std::string& path) {
  const onnx::ModelProto m = ParseProto(bytes, path);
  GraphContent g;
  for (const auto& op : m.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") g.opset = op.version();
  }
  for (const auto& init : m.graph().initializer()) {
    // A type fusediff does not read stays out: whatever consumes it is not evaluated.
    if (!is_supported_dtype(init.data_type()) || init.data_location() == onnx::TensorProto::EXTERNAL || init.has_segment()) continue;
    g.initializers.emplace(init.name(), FromProtoTensor(init, path + ": initializer " + init.name()));
  }
  for (const auto& v : m.graph().input()) {
    if (!g.initializers.count(v.name())) g.inputs.push_back(TensorValue(v, path, "input"));
  }
  for (const auto& v : m.graph().output()) g.outputs.push_back(TensorValue(v, path, "output"));
  for (const auto& n : m.graph().node()) {
    GraphNode node;
    node.op = OpName(n);
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) node.attributes.push_back(ReadAttribute(a, path));
    g.nodes.push_back(std::move(node));
  }
  return g;
}

std::vector<std::optional<TensorQuant>> TensorQuants(const std::string& bytes, const std::vector<std::string>& names,
                                                     const std::string& path) {
  const onnx::ModelProto m = ParseProto(bytes, path);
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : m.graph().node()) {
    for (const auto& o : n.output()) producer[o] = &n;
  }
  std::vector<std::optional<TensorQuant>> out;
  for (const auto& name : names) out.push_back(ProducedQuant(m.graph(), producer, name));
  return out;
}

std::string WithExtraOutputs(const std::string& bytes, const std::vector<std::string>& names, const std::string& path) {
  onnx::ModelProto m = ParseProto(bytes, path);
  for (const auto& name : names) m.mutable_graph()->add_output()->set_name(name);
  return m.SerializeAsString();
}

Tensor ReadTensorPb(const std::string& path) {
  onnx::TensorProto p;
  if (!p.ParseFromString(ReadBytes(path))) throw InputError(path + ": not an ONNX TensorProto");
  return FromProtoTensor(p, path);
}

std::string SerializeTensorPb(const Tensor& t) { return ToProto(t).SerializeAsString(); }

namespace {

// The type a .npy descr names: the table's descr, or the same with another byte-order mark where that changes
// nothing ('=' is native, little-endian here; a 1-byte type has no byte order).
std::optional<DType> NpyType(const std::string& descr) {
  if (descr.size() < 2) return std::nullopt;
  for (const TypeRow& r : kTypes) {
    const std::string want = r.npy;
    if (descr == want) return r.type;
    const bool order_free = descr[0] == '=' || descr[0] == '<' || (r.size == 1 && descr[0] == '|');
    if (order_free && descr.substr(1) == want.substr(1)) return r.type;
  }
  return std::nullopt;
}

std::vector<int64_t> NpyShape(const std::string& text, const std::string& path) {
  const size_t open = text.find('('), close = text.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    throw InputError(path + ": .npy header: shape is not a tuple");
  }
  std::vector<int64_t> dims;
  std::stringstream s(text.substr(open + 1, close - open - 1));
  std::string item;
  while (std::getline(s, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    size_t used = 0;
    long long d = -1;
    try {
      d = std::stoll(item, &used);
    } catch (const std::exception&) {
    }
    if (d < 0 || item.find_first_not_of(' ', used) != std::string::npos) {
      throw InputError(path + ": .npy header: shape entry '" + item + "' is not a non-negative integer");
    }
    dims.push_back(d);
  }
  return dims;
}

}  // namespace

Tensor ReadNpy(const std::string& path, const std::string& name) {
  const std::string bytes = ReadBytes(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw InputError(path + ": not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  // numpy/lib/format.py: version 1.0 has a 2-byte header length, 2.0 and 3.0 (utf-8 header) a 4-byte one.
  if (major < 1 || major > 3) throw InputError(path + ": .npy format version " + std::to_string(major) + " (expected 1, 2 or 3)");
  const size_t offset = major == 1 ? 10 : 12;
  if (bytes.size() < offset) throw InputError(path + ": truncated .npy header");
  size_t header_len = 0;
  for (size_t k = offset; k-- > 8;) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[k]);
  if (bytes.size() < offset + header_len) throw InputError(path + ": truncated .npy header");
  const std::string header = bytes.substr(offset, header_len);
  auto field = [&](const std::string& key) {
    const size_t at = header.find("'" + key + "'");
    if (at == std::string::npos) throw InputError(path + ": .npy header has no '" + key + "'");
    return header.substr(header.find(':', at) + 1);
  };
  const std::string descr_text = field("descr");
  const size_t q1 = descr_text.find('\'');
  const std::string descr = descr_text.substr(q1 + 1, descr_text.find('\'', q1 + 1) - q1 - 1);
  const std::optional<DType> type = NpyType(descr);
  if (!type) {
    std::string known;
    for (const TypeRow& r : kTypes) known += (known.empty() ? "" : ", ") + std::string(r.npy);
    throw InputError(path + ": .npy dtype '" + descr + "' is not supported (" + known + ")");
  }
  if (field("fortran_order").find("False") == std::string::npos) {
    throw InputError(path + ": .npy in Fortran order (expected C order)");
  }
  Tensor t{name, *type, NpyShape(field("shape"), path), {}};
  const std::optional<uint64_t> need = ByteSize(t.type, t.dims);
  if (!need || bytes.size() - offset - header_len != *need) {
    throw InputError(path + ": .npy data holds " + std::to_string(bytes.size() - offset - header_len) +
                     " bytes, the shape needs " + (need ? std::to_string(*need) : std::string("more than 2^64")));
  }
  t.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(offset + header_len), bytes.end());
  return t;
}

Tensor ReadRaw(const std::string& path, const std::string& name, DType type, const std::vector<int64_t>& dims) {
  const std::optional<uint64_t> need = ByteSize(type, dims);
  const uint64_t have = FileSize(path);
  if (!need || have != *need) {
    throw InputError(path + ": holds " + std::to_string(have) + " bytes, " + to_string(type) + " " + DimsText(dims) +
                     " needs " + (need ? std::to_string(*need) : std::string("more than 2^64")));
  }
  const std::string bytes = ReadBytes(path);
  return Tensor{name, type, dims, std::vector<uint8_t>(bytes.begin(), bytes.end())};
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(CannotOpen(path));
  if (!S_ISREG(st.st_mode)) throw InputError(path + ": not a regular file");
  return static_cast<uint64_t>(st.st_size);
}

std::string SerializeNpy(const Tensor& t) {
  std::string shape = "(";
  for (int64_t d : t.dims) shape += std::to_string(d) + ", ";
  if (t.dims.size() > 1) shape.erase(shape.size() - 2);
  if (t.dims.size() == 1) shape.erase(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + std::string(RowOf(t.type).npy) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(t.bytes.begin(), t.bytes.end());
  return out;
}

Tensor ReadTensorFile(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.extension() == ".pb") return ReadTensorPb(path);
  if (p.extension() == ".npy") return ReadNpy(path, p.stem().string());
  throw InputError(path + ": an input file must be .pb (ONNX TensorProto) or .npy");
}

struct ModelBuilder::Impl {
  onnx::ModelProto model;
};

ModelBuilder::ModelBuilder(std::string graph_name, int64_t opset) : impl_(std::make_unique<Impl>()) {
  impl_->model.set_ir_version(8);
  impl_->model.set_producer_name("fusediff");
  auto* def = impl_->model.add_opset_import();
  def->set_domain("");
  def->set_version(opset);
  auto* ms = impl_->model.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  impl_->model.mutable_graph()->set_name(std::move(graph_name));
}

ModelBuilder::~ModelBuilder() = default;

namespace {
void SetValueInfo(onnx::ValueInfoProto* v, const std::string& name, DType type, const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(type));
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}
}  // namespace

void ModelBuilder::AddInput(const std::string& name, DType type, const std::vector<int64_t>& dims) {
  SetValueInfo(impl_->model.mutable_graph()->add_input(), name, type, dims);
}

void ModelBuilder::AddOutput(const std::string& name, DType type, const std::vector<int64_t>& dims) {
  SetValueInfo(impl_->model.mutable_graph()->add_output(), name, type, dims);
}

void ModelBuilder::AddInitializer(const Tensor& t) { *impl_->model.mutable_graph()->add_initializer() = ToProto(t); }

void ModelBuilder::AddNode(const std::string& op, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const std::vector<Attribute>& attributes,
                           const std::string& domain) {
  auto* n = impl_->model.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(outputs.empty() ? op : outputs[0] + "_node");
  if (!domain.empty()) n->set_domain(domain);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  for (const auto& a : attributes) {
    auto* attr = n->add_attribute();
    attr->set_name(a.name);
    if (a.f) {
      attr->set_type(onnx::AttributeProto::FLOAT);
      attr->set_f(*a.f);
    } else if (a.single) {
      attr->set_type(onnx::AttributeProto::INT);
      attr->set_i(a.ints.at(0));
    } else {
      attr->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) attr->add_ints(v);
    }
  }
}

std::string ModelBuilder::Serialize() const { return impl_->model.SerializeAsString(); }

}  // namespace fusediff::onnx_io
