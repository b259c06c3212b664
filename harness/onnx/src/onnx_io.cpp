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

#include "fusediff/model/errors.h"

namespace fusediff::onnx_io {

namespace {

// One open, fstat and read: a bisect reads every session's saved model back.
std::string ReadBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + (errno == ENOENT ? ": no such file" : ": cannot be read (" + std::string(std::strerror(errno)) + ")"));
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

bool IsSupported(int32_t t) { return t == 1 || t == 2 || t == 3 || t == 5 || t == 6 || t == 7; }

DType FromProto(int32_t t, const std::string& what) {
  if (!IsSupported(t)) {
    throw InputError(what + ": element type " + std::to_string(t) +
                     " is not supported (float32, uint8, int8, int16, int32, int64)");
  }
  return static_cast<DType>(t);
}

Tensor FromProtoTensor(const onnx::TensorProto& p, const std::string& what) {
  Tensor t;
  t.name = p.name();
  t.type = FromProto(p.data_type(), what);
  for (int64_t d : p.dims()) {
    if (d < 0) throw InputError(what + ": negative dimension " + std::to_string(d));
    t.dims.push_back(d);
  }
  const size_t n = t.elements();
  const size_t size = element_size(t.type);
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    if (raw.size() != n * size) {
      throw InputError(what + ": raw_data holds " + std::to_string(raw.size()) + " bytes, the dims need " +
                       std::to_string(n * size));
    }
    t.bytes.assign(raw.begin(), raw.end());
    return t;
  }
  t.bytes.resize(n * size);
  auto fail = [&](size_t have) {
    throw InputError(what + ": holds " + std::to_string(have) + " values, the dims need " + std::to_string(n));
  };
  switch (t.type) {
    case DType::float32:
      if (static_cast<size_t>(p.float_data_size()) != n) fail(static_cast<size_t>(p.float_data_size()));
      std::memcpy(t.bytes.data(), p.float_data().data(), n * 4);
      break;
    case DType::int64:
      if (static_cast<size_t>(p.int64_data_size()) != n) fail(static_cast<size_t>(p.int64_data_size()));
      std::memcpy(t.bytes.data(), p.int64_data().data(), n * 8);
      break;
    default: {  // int8, uint8, int16, int32 live in int32_data
      if (static_cast<size_t>(p.int32_data_size()) != n) fail(static_cast<size_t>(p.int32_data_size()));
      for (size_t i = 0; i < n; ++i) {
        const int32_t v = p.int32_data(static_cast<int>(i));
        if (t.type == DType::int32) {
          std::memcpy(t.bytes.data() + 4 * i, &v, 4);
        } else if (t.type == DType::int16) {
          const int16_t w = static_cast<int16_t>(v);
          std::memcpy(t.bytes.data() + 2 * i, &w, 2);
        } else if (t.type == DType::int8) {
          t.bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(v));
        } else {
          t.bytes[i] = static_cast<uint8_t>(v);
        }
      }
    }
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

// A scalar initializer's value (scale or zero point), or nullopt when it is not a scalar constant.
std::optional<Tensor> ScalarInitializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& init : g.initializer()) {
    if (init.name() != name) continue;
    if (!IsSupported(init.data_type())) return std::nullopt;
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

std::string to_string(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::uint8: return "uint8";
    case DType::int8: return "int8";
    case DType::int16: return "int16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
  }
  return "?";
}

DType parse_dtype(const std::string& text, const std::string& field) {
  for (DType t : {DType::float32, DType::uint8, DType::int8, DType::int16, DType::int32, DType::int64}) {
    if (text == to_string(t)) return t;
  }
  throw InputError(field + ": '" + text + "' is not a supported type (float32, uint8, int8, int16, int32, int64)");
}

size_t element_size(DType t) {
  switch (t) {
    case DType::float32: case DType::int32: return 4;
    case DType::int64: return 8;
    case DType::int16: return 2;
    default: return 1;
  }
}

size_t Tensor::elements() const {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

double Tensor::value(size_t i) const {
  switch (type) {
    case DType::float32: { float v; std::memcpy(&v, bytes.data() + 4 * i, 4); return v; }
    case DType::int32: { int32_t v; std::memcpy(&v, bytes.data() + 4 * i, 4); return v; }
    case DType::int64: { int64_t v; std::memcpy(&v, bytes.data() + 8 * i, 8); return static_cast<double>(v); }
    case DType::int16: { int16_t v; std::memcpy(&v, bytes.data() + 2 * i, 2); return v; }
    case DType::int8: return static_cast<int8_t>(bytes[i]);
    case DType::uint8: return bytes[i];
  }
  return 0;
}

Tensor Tensor::FromFloats(std::string name, std::vector<int64_t> dims, const std::vector<float>& values) {
  Tensor t{std::move(name), DType::float32, std::move(dims), {}};
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

Tensor Tensor::FromCodes(std::string name, DType type, std::vector<int64_t> dims, const std::vector<int32_t>& codes) {
  Tensor t{std::move(name), type, std::move(dims), {}};
  t.bytes.resize(codes.size() * element_size(type));
  for (size_t i = 0; i < codes.size(); ++i) {
    if (type == DType::int32) {
      std::memcpy(t.bytes.data() + 4 * i, &codes[i], 4);
    } else if (type == DType::int16) {
      const int16_t w = static_cast<int16_t>(codes[i]);
      std::memcpy(t.bytes.data() + 2 * i, &w, 2);
    } else if (type == DType::int8) {
      t.bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(codes[i]));
    } else {
      t.bytes[i] = static_cast<uint8_t>(codes[i]);
    }
  }
  return t;
}

Tensor Tensor::FromInt64(std::string name, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  Tensor t{std::move(name), DType::int64, std::move(dims), {}};
  t.bytes.resize(values.size() * 8);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::string ReadModelBytes(const std::string& path) { return ReadBytes(path); }

ModelInfo ReadModel(const std::string& path) { return ParseModel(ReadBytes(path), path); }

ModelInfo ParseModel(const std::string& bytes, const std::string& path) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes) || !m.has_graph()) throw InputError(path + ": not an ONNX model (ModelProto)");
  if (m.graph().node_size() == 0) throw InputError(path + ": the graph has no nodes");
  ModelInfo info;
  info.path = path;
  for (const auto& op : m.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") info.opset = op.version();
  }
  const onnx::GraphProto& g = m.graph();
  std::map<std::string, const onnx::NodeProto*> producer;
  std::map<std::string, const onnx::NodeProto*> consumer;  // the first consumer
  for (const auto& n : g.node()) {
    const std::string op = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
    ++info.node_counts[op];
    info.nodes.push_back(op + "(" + (n.output_size() > 0 ? n.output(0) : std::string()) + ")");
    for (const auto& o : n.output()) producer[o] = &n;
    for (const auto& i : n.input()) consumer.emplace(i, &n);
  }
  std::map<std::string, bool> initializer;
  for (const auto& init : g.initializer()) initializer[init.name()] = true;
  for (const auto& v : g.input()) {
    if (initializer.count(v.name())) continue;
    if (!v.type().has_tensor_type()) throw InputError(path + ": input '" + v.name() + "' is not a tensor");
    info.inputs.push_back({v.name(), FromProto(v.type().tensor_type().elem_type(), path + ": input '" + v.name() + "'"),
                           DimsOf(v)});
    const auto c = consumer.find(v.name());
    info.input_quant.push_back(c != consumer.end() && c->second->op_type() == "QuantizeLinear"
                                   ? QuantOf(g, *c->second, false)
                                   : std::nullopt);
  }
  for (const auto& v : g.output()) {
    if (!v.type().has_tensor_type()) throw InputError(path + ": output '" + v.name() + "' is not a tensor");
    info.outputs.push_back({v.name(),
                            FromProto(v.type().tensor_type().elem_type(), path + ": output '" + v.name() + "'"),
                            DimsOf(v)});
    std::optional<TensorQuant> q;
    const auto p = producer.find(v.name());
    if (p != producer.end() && p->second->op_type() == "QuantizeLinear") q = QuantOf(g, *p->second, true);
    if (p != producer.end() && p->second->op_type() == "DequantizeLinear") q = QuantOf(g, *p->second, false);
    info.output_quant.push_back(q);
  }
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
  info.graph_digest = digest;
  if (info.inputs.empty()) throw InputError(path + ": the graph has no inputs besides initializers");
  if (info.outputs.empty()) throw InputError(path + ": the graph has no outputs");
  return info;
}

Tensor ReadTensorPb(const std::string& path) {
  onnx::TensorProto p;
  if (!p.ParseFromString(ReadBytes(path))) throw InputError(path + ": not an ONNX TensorProto");
  return FromProtoTensor(p, path);
}

std::string SerializeTensorPb(const Tensor& t) { return ToProto(t).SerializeAsString(); }

namespace {
std::string NpyDescr(DType t) {
  switch (t) {
    case DType::float32: return "<f4";
    case DType::uint8: return "|u1";
    case DType::int8: return "|i1";
    case DType::int16: return "<i2";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
  }
  return "";
}
}  // namespace

Tensor ReadNpy(const std::string& path, const std::string& name) {
  const std::string bytes = ReadBytes(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw InputError(path + ": not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else {
    throw InputError(path + ": .npy format version " + std::to_string(major) + " (expected 1)");
  }
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
  Tensor t;
  t.name = name;
  bool found = false;
  for (DType d : {DType::float32, DType::uint8, DType::int8, DType::int16, DType::int32, DType::int64}) {
    if (descr == NpyDescr(d) || (element_size(d) == 1 && descr.substr(1) == NpyDescr(d).substr(1))) {
      t.type = d;
      found = true;
    }
  }
  if (!found) throw InputError(path + ": .npy dtype '" + descr + "' is not supported (<f4, i1, u1, <i2, <i4, <i8)");
  if (field("fortran_order").find("False") == std::string::npos) {
    throw InputError(path + ": .npy in Fortran order (expected C order)");
  }
  const std::string shape = field("shape");
  const size_t open = shape.find('('), close = shape.find(')');
  std::string inner = shape.substr(open + 1, close - open - 1);
  std::stringstream s(inner);
  std::string item;
  while (std::getline(s, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    t.dims.push_back(std::stoll(item));
  }
  const size_t need = t.elements() * element_size(t.type);
  if (bytes.size() - offset - header_len != need) {
    throw InputError(path + ": .npy data holds " + std::to_string(bytes.size() - offset - header_len) +
                     " bytes, the shape needs " + std::to_string(need));
  }
  t.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(offset + header_len), bytes.end());
  return t;
}

std::string SerializeNpy(const Tensor& t) {
  std::string shape = "(";
  for (int64_t d : t.dims) shape += std::to_string(d) + ", ";
  if (t.dims.size() > 1) shape.erase(shape.size() - 2);
  if (t.dims.size() == 1) shape.erase(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + NpyDescr(t.type) + "', 'fortran_order': False, 'shape': " + shape + ", }";
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
