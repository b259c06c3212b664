// Input families for a model: generated (counter-based, one stream per family, set and input) or read from files.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>

#include "fusediff/bisect/bisect.h"
#include "fusediff/generators/counter_rng.h"
#include "fusediff/model/errors.h"

namespace fusediff::bisect {

namespace {

using onnx_io::DType;

// The real range an input can hold without saturating its QuantizeLinear, or [-1, 1] when it has none; for an
// integer input, its codes [qmin, qmax] with a step of one.
struct Range {
  double lo = -1, hi = 1, step = 0;  // step: the input's quantization step (0: not quantized)
  int64_t zero_point = 0, qmin = 0, qmax = 0;
};

Range RangeOf(const std::optional<onnx_io::TensorQuant>& q) {
  Range r;
  if (!q) return r;
  r.qmin = static_cast<int64_t>(onnx_io::lowest(q->type));
  r.qmax = static_cast<int64_t>(onnx_io::highest(q->type));
  r.step = q->scale;
  r.zero_point = q->zero_point;
  r.lo = q->scale * static_cast<double>(r.qmin - q->zero_point);
  r.hi = q->scale * static_cast<double>(r.qmax - q->zero_point);
  return r;
}

Range Codes(int64_t lo, int64_t hi) {  // the integers [lo, hi]
  Range r;
  r.qmin = lo;
  r.qmax = hi;
  r.lo = static_cast<double>(lo);
  r.hi = static_cast<double>(hi);
  r.step = 1;
  return r;
}

bool NamesAMask(const std::string& name) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower.find("mask") != std::string::npos;
}

// The generated range of input i and where it comes from (IntRange is half-open, Range closed).
std::pair<Range, std::string> IntegerRange(const onnx_io::ModelInfo& model, size_t i, const IntRange& fallback) {
  const onnx_io::ValueInfo& v = model.inputs[i];
  if (v.type == DType::bool_) return {Codes(0, 1), "bool"};
  if (i < model.input_range.size() && model.input_range[i] && model.input_range[i]->hi > model.input_range[i]->lo) {
    const onnx_io::IndexRange& g = *model.input_range[i];
    return {Codes(g.lo, g.hi - 1), "the model's: " + g.source};
  }
  if (NamesAMask(v.name)) return {Codes(0, 1), "a mask (its name holds \"mask\")"};
  if (v.type == DType::int8 || v.type == DType::uint8) {
    return {Codes(static_cast<int64_t>(onnx_io::lowest(v.type)), static_cast<int64_t>(onnx_io::highest(v.type))),
            "every code of " + onnx_io::to_string(v.type)};
  }
  const int64_t lo = std::max(fallback.lo, static_cast<int64_t>(std::max(onnx_io::lowest(v.type), -9.2e18)));
  const int64_t hi = std::min(fallback.hi - 1, static_cast<int64_t>(std::min(onnx_io::highest(v.type), 9.2e18)));
  return {Codes(lo, std::max(lo, hi)), "the default (--int-range " + std::to_string(fallback.lo) + ":" +
                                           std::to_string(fallback.hi) + ")"};
}

double Normal(generators::CounterRng& rng) {
  // Box-Muller on two 53-bit uniforms; u1 in (0, 1].
  const double u1 = 1.0 - rng.uniform01();
  const double u2 = rng.uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double Uniform(generators::CounterRng& rng, double lo, double hi) { return lo + (hi - lo) * rng.uniform01(); }

// One real value of `family` for an input of range r.
double Draw(const std::string& family, generators::CounterRng& rng, const Range& r) {
  const double half = std::max(std::fabs(r.lo), std::fabs(r.hi));
  if (family == "normal") return Normal(rng) * half / 3.0;
  if (family == "uniform") return Uniform(rng, r.lo, r.hi);
  if (family == "zero") return 0.0;
  if (family == "small") return Uniform(rng, -1, 1) * (r.step > 0 ? 4 * r.step : 1e-3);
  if (family == "large") {
    const double v = Uniform(rng, 1.0, 4.0) * half;
    return rng.chance(1, 2) ? v : -v;
  }
  if (family == "positive") return Uniform(rng, 0, std::max(r.hi, 0.0));
  if (family == "negative") return Uniform(rng, std::min(r.lo, 0.0), 0);
  // aimed: half on a rounding tie of the input's quantization (code + 1/2), a quarter at or past each end.
  if (r.step == 0) return Uniform(rng, r.lo, r.hi);
  const uint32_t pick = static_cast<uint32_t>(rng.uniform_int(0, 3));
  if (pick <= 1) {
    const int64_t code = rng.uniform_int(r.qmin, std::max(r.qmin, r.qmax - 1));
    return r.step * (static_cast<double>(code - r.zero_point) + 0.5);
  }
  const int64_t beyond = rng.uniform_int(-1, 2);  // one step inside, at, one and two past
  return pick == 2 ? r.step * static_cast<double>(r.qmax - r.zero_point + beyond)
                   : r.step * static_cast<double>(r.qmin - r.zero_point - beyond);
}

// Input i's dims: --shape's, else the declared ones with each symbolic dimension its --shapes value (by name) or 1.
std::vector<int64_t> ConcreteDims(const onnx_io::ModelInfo& model, size_t i, const InputOptions& o) {
  const onnx_io::ValueInfo& v = model.inputs[i];
  const auto given = o.shapes.find(v.name);
  if (given != o.shapes.end()) return given->second;
  std::vector<int64_t> dims = v.dims;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] >= 0) continue;
    const std::string param = i < model.input_dim_params.size() && k < model.input_dim_params[i].size()
                                  ? model.input_dim_params[i][k] : "";
    const auto value = o.dim_values.find(param);
    dims[k] = !param.empty() && value != o.dim_values.end() ? value->second : 1;
  }
  return dims;
}

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

// Every generated set together within the budget; the message names the input that goes over it.
void CheckGeneratedSize(const onnx_io::ModelInfo& model, const InputOptions& o, size_t sets) {
  uint64_t per_set = 0;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const onnx_io::ValueInfo& v = model.inputs[i];
    const std::vector<int64_t> dims = ConcreteDims(model, i, o);
    const std::optional<uint64_t> size = onnx_io::ByteSize(v.type, dims);
    uint64_t total = 0;
    const bool over = !size || (o.max_bytes > 0 && (__builtin_add_overflow(per_set, *size, &total) ||
                                                    __builtin_mul_overflow(total, uint64_t{sets}, &total) ||
                                                    total > o.max_bytes));
    if (over) {
      throw InputError(model.path + ": input '" + v.name + "' (" + onnx_io::to_string(v.type) + " " +
                       onnx_io::DimsText(dims) + ") needs " + (size ? Bytes(*size) : "more than 2^64 bytes") +
                       " per set, " + std::to_string(sets) + " sets: over --max-bytes " + Bytes(o.max_bytes));
    }
    per_set += *size;
  }
}

onnx_io::Tensor GenerateOne(const onnx_io::ModelInfo& model, size_t i, const std::string& family,
                            generators::CounterRng& rng, const InputOptions& o) {
  const onnx_io::ValueInfo& v = model.inputs[i];
  const std::vector<int64_t> dims = ConcreteDims(model, i, o);
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  std::vector<double> values(n);
  if (onnx_io::is_float(v.type)) {
    const Range r = RangeOf(i < model.input_quant.size() ? model.input_quant[i] : std::nullopt);
    for (double& x : values) x = Draw(family, rng, r);
    if (v.type == DType::float32) {  // rounded to binary32 exactly as before (one rounding, not through double)
      std::vector<float> f(n);
      for (size_t k = 0; k < n; ++k) f[k] = static_cast<float>(values[k]);
      return onnx_io::Tensor::FromFloats(v.name, dims, f);
    }
    return onnx_io::Tensor::FromValues(v.name, v.type, dims, values);
  }
  // Integers and bool: the family over the input's range itself (its quantization step is one).
  const Range codes = IntegerRange(model, i, o.int_range).first;
  for (double& x : values) {
    x = std::clamp(std::nearbyint(Draw(family, rng, codes)), codes.lo, codes.hi);
  }
  return onnx_io::Tensor::FromValues(v.name, v.type, dims, values);
}

}  // namespace

const std::vector<std::string>& InputFamilies() {
  static const std::vector<std::string> families = {"normal",   "uniform",  "zero",    "small",
                                                    "large",    "positive", "negative", "aimed"};
  return families;
}

std::string InputRangeNote(const onnx_io::ModelInfo& model, size_t input, const IntRange& fallback) {
  const onnx_io::ValueInfo& v = model.inputs[input];
  if (onnx_io::is_float(v.type) || v.type == DType::bool_) return "";
  if ((v.type == DType::int8 || v.type == DType::uint8) &&
      !(input < model.input_range.size() && model.input_range[input]) && !NamesAMask(v.name)) {
    return "";
  }
  const auto [r, why] = IntegerRange(model, input, fallback);
  return "input '" + v.name + "' (" + onnx_io::to_string(v.type) + "): [" + std::to_string(r.qmin) + ", " +
         std::to_string(r.qmax) + "], " + why;
}

std::vector<InputSet> GenerateInputs(const onnx_io::ModelInfo& model, const InputOptions& o) {
  if (model.inputs.empty()) return {InputSet{"none", {}, "", {}}};  // nothing to vary: one run per session
  const auto& families = InputFamilies();
  CheckGeneratedSize(model, o, families.size() * static_cast<size_t>(o.per_family));
  std::vector<InputSet> sets;
  for (size_t f = 0; f < families.size(); ++f) {
    for (int s = 0; s < o.per_family; ++s) {
      InputSet set;
      set.family = families[f];
      for (size_t i = 0; i < model.inputs.size(); ++i) {
        generators::CounterRng rng(o.seed, 0x0b15ec7 + f * 4096 + i, static_cast<uint32_t>(s),
                                   generators::StreamPurpose::input);
        set.feeds.push_back(GenerateOne(model, i, families[f], rng, o));
      }
      sets.push_back(std::move(set));
    }
  }
  return sets;
}

std::vector<InputSet> GenerateInputs(const onnx_io::ModelInfo& model, int per_family, uint64_t seed) {
  InputOptions o;
  o.per_family = per_family;
  o.seed = seed;
  return GenerateInputs(model, o);
}

namespace {

std::string Quoted(const std::vector<onnx_io::ValueInfo>& values) {
  std::string names;
  for (const auto& v : values) names += (names.empty() ? "'" : ", '") + v.name + "'";
  return names.empty() ? "none" : names;
}

// K of "input_K.pb" / "output_K.npy" (prefix "input_" or "output_"), or nullopt.
std::optional<size_t> PositionIn(const std::filesystem::path& file, const std::string& prefix) {
  const std::string stem = file.stem().string();
  if (stem.rfind(prefix, 0) != 0 || stem.size() == prefix.size() || stem.size() > prefix.size() + 6) return std::nullopt;
  size_t k = 0;
  for (size_t c = prefix.size(); c < stem.size(); ++c) {
    if (!std::isdigit(static_cast<unsigned char>(stem[c]))) return std::nullopt;
    k = 10 * k + static_cast<size_t>(stem[c] - '0');
  }
  return k;
}

// Which of `values` a tensor read from `file` binds to: by its name, or (unnamed) by the file's position K.
size_t Bind(const std::vector<onnx_io::ValueInfo>& values, const std::string& name, const std::filesystem::path& file,
            const std::string& prefix, const char* role) {
  if (!name.empty()) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].name == name) return i;
    }
    throw InputError(file.string() + ": tensor '" + name + "' names no model " + role + " (model " + role + "s: " +
                     Quoted(values) + ")");
  }
  const std::optional<size_t> k = PositionIn(file, prefix);
  if (!k) {
    throw InputError(file.string() + ": the tensor has no name: name it, or call the file " + prefix +
                     "K to bind it to the K-th model " + role);
  }
  if (*k >= values.size()) {
    throw InputError(file.string() + ": an unnamed tensor binds by position to model " + role + " " +
                     std::to_string(*k) + ", but the model has " + std::to_string(values.size()) + " (" +
                     Quoted(values) + ")");
  }
  return *k;
}

void CheckAgainst(const onnx_io::ValueInfo& v, const onnx_io::Tensor& t, const std::string& path, const char* role) {
  if (v.type != t.type) {
    throw InputError(path + ": " + role + " '" + v.name + "' is " + onnx_io::to_string(t.type) +
                     ", the model declares " + onnx_io::to_string(v.type));
  }
  bool shape_ok = v.dims.empty() || v.dims.size() == t.dims.size();
  for (size_t d = 0; shape_ok && d < v.dims.size(); ++d) shape_ok = v.dims[d] < 0 || v.dims[d] == t.dims[d];
  if (!shape_ok) {
    throw InputError(path + ": " + role + " '" + v.name + "' has shape " + onnx_io::DimsText(t.dims) +
                     ", the model declares " + onnx_io::DimsText(v.dims) + " (-1: any)");
  }
}

bool IsRaw(const std::filesystem::path& p) { return p.extension() == ".raw" || p.extension() == ".bin"; }

// Reads every file's bytes within the budget left, in order.
class Reader {
 public:
  Reader(const onnx_io::ModelInfo& model, const InputOptions& o) : model_(model), o_(o) {}

  // The model input a file binds to, and its tensor (named after that input).
  std::pair<size_t, onnx_io::Tensor> Input(const std::filesystem::path& file) {
    Budget(file);
    if (IsRaw(file)) return Raw(file);
    onnx_io::Tensor t = onnx_io::ReadTensorFile(file.string());
    const std::string name = file.extension() == ".npy" && PositionIn(file, "input_") ? std::string() : t.name;
    const size_t i = Bind(model_.inputs, name, file, "input_", "input");
    t.name = model_.inputs[i].name;
    CheckAgainst(model_.inputs[i], t, file.string(), "input");
    return {i, std::move(t)};
  }

  std::pair<size_t, onnx_io::Tensor> Output(const std::filesystem::path& file) {
    Budget(file);
    onnx_io::Tensor t = onnx_io::ReadTensorFile(file.string());
    const size_t o = Bind(model_.outputs, t.name, file, "output_", "output");
    t.name = model_.outputs[o].name;
    return {o, std::move(t)};
  }

 private:
  void Budget(const std::filesystem::path& file) {
    const uint64_t size = onnx_io::FileSize(file.string());
    if (o_.max_bytes > 0 && (size > o_.max_bytes || read_ + size > o_.max_bytes)) {
      throw InputError(file.string() + ": " + Bytes(size) + " (with the files before it " + Bytes(read_ + size) +
                       "): over --max-bytes " + Bytes(o_.max_bytes));
    }
    read_ += size;
  }

  std::pair<size_t, onnx_io::Tensor> Raw(const std::filesystem::path& file) {
    const std::string stem = file.stem().string();
    size_t i = model_.inputs.size();
    for (size_t k = 0; k < model_.inputs.size(); ++k) {
      if (model_.inputs[k].name == stem) i = k;
    }
    if (i == model_.inputs.size()) i = Bind(model_.inputs, "", file, "input_", "input");
    const onnx_io::ValueInfo& v = model_.inputs[i];
    const auto given = o_.shapes.find(v.name);
    const bool symbolic = v.dims.empty() || std::any_of(v.dims.begin(), v.dims.end(), [](int64_t d) { return d < 0; });
    if (given == o_.shapes.end() && symbolic) {
      throw InputError(file.string() + ": a raw file has no shape and input '" + v.name + "' declares " +
                       onnx_io::DimsText(v.dims) + ": give --shape " + v.name + "=D0,D1,...");
    }
    onnx_io::Tensor t = onnx_io::ReadRaw(file.string(), v.name, v.type, given != o_.shapes.end() ? given->second : v.dims);
    CheckAgainst(v, t, file.string(), "input");
    return {i, std::move(t)};
  }

  const onnx_io::ModelInfo& model_;
  const InputOptions& o_;
  uint64_t read_ = 0;
};

// An input file of a folder: input_K.pb, or a .npy or raw file that is not an expected output (output_K).
bool IsInputFile(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  if (p.extension() == ".pb") return name.rfind("input_", 0) == 0;
  return (p.extension() == ".npy" || IsRaw(p)) && name.rfind("output_", 0) != 0;
}

// Files in an order that follows K numerically (input_2 before input_10), then by name.
std::vector<std::filesystem::path> Sorted(std::vector<std::filesystem::path> files) {
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    const auto ka = PositionIn(a, a.stem().string().rfind("output_", 0) == 0 ? "output_" : "input_");
    const auto kb = PositionIn(b, b.stem().string().rfind("output_", 0) == 0 ? "output_" : "input_");
    if (ka && kb && *ka != *kb) return *ka < *kb;
    return a.filename() < b.filename();
  });
  return files;
}

// One set from a folder of input_K / output_K files (or .npy / raw files named after the inputs).
InputSet ReadFolder(const onnx_io::ModelInfo& model, const std::filesystem::path& folder, Reader& reader) {
  std::vector<std::filesystem::path> inputs, outputs;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    if (!e.is_regular_file()) continue;
    if (IsInputFile(e.path())) inputs.push_back(e.path());
    if (e.path().filename().string().rfind("output_", 0) == 0 && e.path().extension() == ".pb") outputs.push_back(e.path());
  }
  if (inputs.empty() && !model.inputs.empty()) throw InputError(folder.string() + ": no input_*.pb, .npy or raw files");
  InputSet set;
  set.family = "file";
  set.where = folder.string();
  std::vector<std::optional<onnx_io::Tensor>> feeds(model.inputs.size());
  for (const auto& f : Sorted(inputs)) {
    auto [i, t] = reader.Input(f);
    if (feeds[i]) throw InputError(f.string() + ": a second tensor for model input '" + model.inputs[i].name + "'");
    feeds[i] = std::move(t);
  }
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (!feeds[i]) throw InputError(folder.string() + ": no tensor for model input '" + model.inputs[i].name + "'");
    set.feeds.push_back(std::move(*feeds[i]));
  }
  if (!outputs.empty()) set.expected.resize(model.outputs.size());
  for (const auto& f : Sorted(outputs)) {
    auto [o, t] = reader.Output(f);
    set.expected[o] = std::move(t);
  }
  return set;
}

}  // namespace

std::vector<InputSet> ReadInputs(const onnx_io::ModelInfo& model, const std::vector<std::string>& paths,
                                 const InputOptions& options) {
  Reader reader(model, options);
  std::vector<InputSet> sets;
  std::vector<std::optional<onnx_io::Tensor>> loose(model.inputs.size());
  std::string loose_where;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      // ONNX test-data layout: DIR/test_data_set_N/input_K.pb (or DIR itself holding the files).
      std::vector<std::filesystem::path> folders;
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) folders.push_back(e.path());
      }
      std::sort(folders.begin(), folders.end());
      if (folders.empty()) folders.push_back(p);
      for (const auto& folder : folders) sets.push_back(ReadFolder(model, folder, reader));
      continue;
    }
    auto [i, t] = reader.Input(p);
    if (loose[i]) throw InputError(p + ": a second tensor for model input '" + model.inputs[i].name + "'");
    loose[i] = std::move(t);
    loose_where = p;
  }
  if (!loose_where.empty()) {
    InputSet set{"file", {}, loose_where, {}};
    for (size_t i = 0; i < loose.size(); ++i) {
      if (!loose[i]) throw InputError(loose_where + ": no tensor for model input '" + model.inputs[i].name + "'");
      set.feeds.push_back(std::move(*loose[i]));
    }
    sets.push_back(std::move(set));
  }
  if (sets.empty()) throw InputError("--inputs: no input files");
  return sets;
}

std::vector<InputSet> ReadInputs(const onnx_io::ModelInfo& model, const std::vector<std::string>& paths) {
  return ReadInputs(model, paths, InputOptions{});
}

}  // namespace fusediff::bisect
