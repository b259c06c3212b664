#pragma once
// ONNX files in fusediff's own terms: tensors (TensorProto .pb in the ONNX test-data layout, and NumPy .npy), a
// model's interface, node list and quantization facts, and a small builder for the models `export-onnx` writes.
// Reads and writes through Debian's libonnx (onnx-ml.proto, protobuf). Bad files throw InputError naming the
// file and what was expected.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fusediff::onnx_io {

// The element types fusediff reads and writes (ONNX TensorProto.DataType values).
enum class DType : int32_t { float32 = 1, uint8 = 2, int8 = 3, int16 = 5, int32 = 6, int64 = 7 };
std::string to_string(DType t);         // "float32", "uint8", ... (ONNX Runtime's JS names)
DType parse_dtype(const std::string& text, const std::string& field);
size_t element_size(DType t);

struct Tensor {
  std::string name;
  DType type = DType::float32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // little-endian, row-major

  size_t elements() const;
  double value(size_t i) const;  // element i as a double (every supported type is exact in double)
  static Tensor FromFloats(std::string name, std::vector<int64_t> dims, const std::vector<float>& values);
  static Tensor FromCodes(std::string name, DType type, std::vector<int64_t> dims, const std::vector<int32_t>& codes);
  static Tensor FromInt64(std::string name, std::vector<int64_t> dims, const std::vector<int64_t>& values);
};

// A graph input or output with its declared type and shape (a symbolic dimension is -1).
struct ValueInfo {
  std::string name;
  DType type = DType::float32;
  std::vector<int64_t> dims;
};

// The quantization a tensor carries in a QDQ graph: an output produced by QuantizeLinear (codes) or by
// DequantizeLinear (real values; one step = scale), an input consumed by QuantizeLinear. Per-tensor only.
struct TensorQuant {
  double scale = 1.0;
  int32_t zero_point = 0;
  DType type = DType::int8;  // the code type
  bool codes = false;        // the tensor holds codes (a QuantizeLinear output) rather than real values
};

struct ModelInfo {
  std::string path;
  int64_t opset = 0;  // the default domain's
  std::vector<ValueInfo> inputs;   // graph inputs that are not initializers
  std::vector<ValueInfo> outputs;
  std::vector<std::optional<TensorQuant>> output_quant;  // per output
  std::vector<std::optional<TensorQuant>> input_quant;   // per input
  std::map<std::string, int64_t> node_counts;            // op type ("com.microsoft.QLinearConv" off the default domain)
  std::vector<std::string> nodes;                        // "OpType(output0)" in graph order
  // The graph's content (nodes with their inputs, outputs and attributes; initializers with their types, shapes
  // and bytes), names of nodes aside, as a SHA-free 64-bit digest: two graphs with equal digests are the same
  // graph. A transformer that only retypes tensors (QDQS8ToU8Transformer) changes it but no op count.
  uint64_t graph_digest = 0;
};

// Throws InputError for a file that is missing, not an ONNX model, or uses a type fusediff does not support.
ModelInfo ReadModel(const std::string& path);
// The same from a model file's bytes (`path` names it in errors), and the bytes of a model file: a caller that reads
// many saved models parses each distinct content once.
ModelInfo ParseModel(const std::string& bytes, const std::string& path);
std::string ReadModelBytes(const std::string& path);

Tensor ReadTensorPb(const std::string& path);
std::string SerializeTensorPb(const Tensor& t);  // the bytes of a .pb file (callers write them atomically)
// A .npy file (format 1.0, little-endian, C order); its name is the file's stem unless given.
Tensor ReadNpy(const std::string& path, const std::string& name);
std::string SerializeNpy(const Tensor& t);
// A file by extension (.pb or .npy). Throws InputError for anything else.
Tensor ReadTensorFile(const std::string& path);

// Builds an ONNX model node by node (ir_version 8, the default domain at `opset`, com.microsoft version 1).
class ModelBuilder {
 public:
  ModelBuilder(std::string graph_name, int64_t opset);
  ~ModelBuilder();
  ModelBuilder(const ModelBuilder&) = delete;
  ModelBuilder& operator=(const ModelBuilder&) = delete;

  void AddInput(const std::string& name, DType type, const std::vector<int64_t>& dims);
  void AddOutput(const std::string& name, DType type, const std::vector<int64_t>& dims);
  void AddInitializer(const Tensor& t);
  struct Attribute {
    std::string name;
    std::vector<int64_t> ints;         // an INTS attribute, or INT when `single`
    std::optional<float> f;            // a FLOAT attribute
    bool single = false;
    static Attribute Ints(std::string name, std::vector<int64_t> values) { return {std::move(name), std::move(values), std::nullopt, false}; }
    static Attribute Int(std::string name, int64_t value) { return {std::move(name), {value}, std::nullopt, true}; }
    static Attribute Float(std::string name, float value) { return {std::move(name), {}, value, false}; }
  };
  void AddNode(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
               const std::vector<Attribute>& attributes = {}, const std::string& domain = "");
  std::string Serialize() const;  // the bytes of the .onnx file

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusediff::onnx_io
