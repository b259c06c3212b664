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

// The element types fusediff reads and writes (ONNX TensorProto.DataType values; ONNX Runtime's C API uses the same
// numbers). Everything else (string, complex, the 8- and 4-bit float and integer types) is an unsupported feature.
enum class DType : int32_t {
  float32 = 1, uint8 = 2, int8 = 3, uint16 = 4, int16 = 5, int32 = 6, int64 = 7, bool_ = 9, float16 = 10,
  float64 = 11, uint32 = 12, uint64 = 13, bfloat16 = 16
};
bool is_supported_dtype(int32_t onnx_type);  // one of the above
std::string to_string(DType t);         // "float32", "bool", "bfloat16", ... (ONNX Runtime's JS names)
DType parse_dtype(const std::string& text, const std::string& field);
size_t element_size(DType t);
bool is_float(DType t);                 // float16, bfloat16, float32, float64
// The type's representable range as doubles (integers and bool; floats: +-their largest finite value).
double lowest(DType t);
double highest(DType t);

// A model or tensor that uses something fusediff does not bisect (a string or sequence type, a training op, external
// data). The message reads "PATH: unsupported feature [REASON]: DETAIL"; REASON is one of a few fixed words
// (scripts/corpus.sh tabulates by it). Exit code 2 like every InputError.
[[noreturn]] void ThrowUnsupported(const std::string& where, const std::string& reason, const std::string& detail);

struct Tensor {
  std::string name;
  DType type = DType::float32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // little-endian, row-major

  size_t elements() const;
  // Element i as a double: exact for every type but 64-bit integers beyond 2^53 (compare those with bits()).
  double value(size_t i) const;
  // Element i's bits, zero-extended (integers and bool: equal bits are equal values).
  uint64_t bits(size_t i) const;
  static Tensor FromFloats(std::string name, std::vector<int64_t> dims, const std::vector<float>& values);
  static Tensor FromCodes(std::string name, DType type, std::vector<int64_t> dims, const std::vector<int32_t>& codes);
  static Tensor FromInt64(std::string name, std::vector<int64_t> dims, const std::vector<int64_t>& values);
  // Any type from doubles: floats rounded to nearest even (through binary32 for float16 and bfloat16), integers
  // and bool from values that must already be integers within the type's range.
  static Tensor FromValues(std::string name, DType type, std::vector<int64_t> dims, const std::vector<double>& values);
};

// The element count of `dims` and its size in bytes for `type`, or nullopt where the product overflows 64 bits.
std::optional<uint64_t> ByteSize(DType type, const std::vector<int64_t>& dims);
std::string DimsText(const std::vector<int64_t>& dims);  // "[1,3,8,8]"

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

// The values an integer input may hold, where the model says: the indices of a Gather over a constant table take
// [0, rows) (negative indices count from the end; fusediff generates the non-negative ones).
struct IndexRange {
  int64_t lo = 0, hi = 0;  // [lo, hi)
  std::string source;      // "Gather(table 'emb' of 1000 rows)"
};

struct ModelInfo {
  std::string path;
  int64_t opset = 0;  // the default domain's
  std::vector<ValueInfo> inputs;   // graph inputs that are not initializers
  std::vector<ValueInfo> outputs;
  std::vector<std::optional<TensorQuant>> output_quant;  // per output
  std::vector<std::optional<TensorQuant>> input_quant;   // per input
  std::vector<std::optional<IndexRange>> input_range;    // per input
  // per input, per dimension: its symbolic name ("N"), empty where the dimension is a number or unnamed
  std::vector<std::vector<std::string>> input_dim_params;
  std::map<std::string, int64_t> node_counts;            // op type ("com.microsoft.QLinearConv" off the default domain)
  std::vector<std::string> nodes;                        // "OpType(output0)" in graph order
  std::vector<std::string> produced;                     // every node output's name, in graph order
  // The graph's content (nodes with their inputs, outputs and attributes; initializers with their types, shapes
  // and bytes), names of nodes aside, as a SHA-free 64-bit digest: two graphs with equal digests are the same
  // graph. A transformer that only retypes tensors (QDQS8ToU8Transformer) changes it but no op count.
  uint64_t graph_digest = 0;
};

// A model a user gives: throws InputError for a file that is missing or not an ONNX model, a graph without nodes
// or outputs, and an unsupported feature (ThrowUnsupported). A model may have no inputs.
ModelInfo ReadModel(const std::string& path);
// The same from a model file's bytes (`path` names it in errors), and the bytes of a model file: a caller that reads
// many saved models parses each distinct content once. ONNX Runtime may save a graph without nodes (everything
// folded into initializers): ParseModel accepts it.
// `untyped_outputs`: accept graph outputs declared without a type (a model fusediff gave extra outputs to, saved back
// by ONNX Runtime); they are listed as float32.
ModelInfo ParseModel(const std::string& bytes, const std::string& path, bool untyped_outputs = false);
std::string ReadModelBytes(const std::string& path);

// A model's graph as data: what fusediff evaluates itself (the rounding-error bounds of a bisect) and the tensors a
// bisect fetches at fusion boundaries.
struct NodeAttribute {
  std::string name;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::optional<Tensor> t;  // a TENSOR attribute (Constant's value) of a supported type
};
struct GraphNode {
  std::string op;  // "Conv", or "com.microsoft.Gelu" off the default domain (ModelInfo::node_counts' names)
  std::vector<std::string> inputs, outputs;  // an omitted optional input is ""
  std::vector<NodeAttribute> attributes;
  const NodeAttribute* Find(const std::string& name) const;  // null where absent
};
struct GraphContent {
  int64_t opset = 0;
  std::vector<ValueInfo> inputs, outputs;  // inputs: those that are not initializers
  std::vector<GraphNode> nodes;            // in the file's order (ONNX requires a topological one)
  std::map<std::string, Tensor> initializers;  // of the supported types (others are left out: evaluators refuse them)
};
// Throws InputError where `bytes` is not an ONNX model.
GraphContent ParseGraph(const std::string& bytes, const std::string& path);
// The quantization of each named tensor as a QDQ graph gives it (the output of a QuantizeLinear: codes; of a
// DequantizeLinear: real values of its scale; else nullopt), as ModelInfo::output_quant does for outputs.
std::vector<std::optional<TensorQuant>> TensorQuants(const std::string& bytes, const std::vector<std::string>& names,
                                                     const std::string& path);
// The model with `names` appended to its graph outputs (declared without a type: ONNX Runtime infers it). Throws
// InputError where `bytes` is not an ONNX model.
std::string WithExtraOutputs(const std::string& bytes, const std::vector<std::string>& names, const std::string& path);

Tensor ReadTensorPb(const std::string& path);
std::string SerializeTensorPb(const Tensor& t);  // the bytes of a .pb file (callers write them atomically)
// A .npy file (format 1.0, 2.0 or 3.0, little-endian, C order); its name is the file's stem unless given. bfloat16,
// which NumPy lacks, is written as 2-byte void ('|V2') and read back from it.
Tensor ReadNpy(const std::string& path, const std::string& name);
std::string SerializeNpy(const Tensor& t);
// Raw little-endian bytes of `type` in `dims` (a .raw or .bin file); the size must match.
Tensor ReadRaw(const std::string& path, const std::string& name, DType type, const std::vector<int64_t>& dims);
// A file by extension (.pb or .npy). Throws InputError for anything else.
Tensor ReadTensorFile(const std::string& path);
// The size of a file in bytes (InputError when it cannot be read): checked against a memory budget before reading.
uint64_t FileSize(const std::string& path);

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
