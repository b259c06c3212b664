// Input families for a model: generated (counter-based, one stream per family, set and input) or read from files.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "fusediff/bisect/bisect.h"
#include "fusediff/generators/counter_rng.h"
#include "fusediff/model/errors.h"

namespace fusediff::bisect {

namespace {

// The real range an input can hold without saturating its QuantizeLinear, or [-1, 1] when it has none.
struct Range {
  double lo = -1, hi = 1, step = 0;  // step: the input's quantization step (0: not quantized)
  int32_t zero_point = 0, qmin = 0, qmax = 0;
};

Range RangeOf(const std::optional<onnx_io::TensorQuant>& q) {
  Range r;
  if (!q) return r;
  const bool wide = q->type == onnx_io::DType::int16;
  r.qmin = q->type == onnx_io::DType::uint8 ? 0 : wide ? -32768 : -128;
  r.qmax = q->type == onnx_io::DType::uint8 ? 255 : wide ? 32767 : 127;
  r.step = q->scale;
  r.zero_point = q->zero_point;
  r.lo = q->scale * (r.qmin - q->zero_point);
  r.hi = q->scale * (r.qmax - q->zero_point);
  return r;
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
    const int64_t code = rng.uniform_int(r.qmin, r.qmax - 1);
    return r.step * (static_cast<double>(code - r.zero_point) + 0.5);
  }
  const int64_t beyond = rng.uniform_int(-1, 2);  // one step inside, at, one and two past
  return pick == 2 ? r.step * static_cast<double>(r.qmax - r.zero_point + beyond)
                   : r.step * static_cast<double>(r.qmin - r.zero_point - beyond);
}

std::vector<int64_t> ConcreteDims(const onnx_io::ValueInfo& v) {
  std::vector<int64_t> dims = v.dims;
  for (int64_t& d : dims) d = d < 0 ? 1 : d;
  return dims;
}

}  // namespace

const std::vector<std::string>& InputFamilies() {
  static const std::vector<std::string> families = {"normal",   "uniform",  "zero",    "small",
                                                    "large",    "positive", "negative", "aimed"};
  return families;
}

std::vector<InputSet> GenerateInputs(const onnx_io::ModelInfo& model, int per_family, uint64_t seed) {
  std::vector<InputSet> sets;
  const auto& families = InputFamilies();
  for (size_t f = 0; f < families.size(); ++f) {
    for (int s = 0; s < per_family; ++s) {
      InputSet set;
      set.family = families[f];
      for (size_t i = 0; i < model.inputs.size(); ++i) {
        const onnx_io::ValueInfo& v = model.inputs[i];
        const Range r = RangeOf(model.input_quant[i]);
        generators::CounterRng rng(seed, 0x0b15ec7 + f * 4096 + i, static_cast<uint32_t>(s),
                                   generators::StreamPurpose::input);
        const std::vector<int64_t> dims = ConcreteDims(v);
        size_t n = 1;
        for (int64_t d : dims) n *= static_cast<size_t>(d);
        if (v.type == onnx_io::DType::float32) {
          std::vector<float> values(n);
          for (float& x : values) x = static_cast<float>(Draw(families[f], rng, r));
          set.feeds.push_back(onnx_io::Tensor::FromFloats(v.name, dims, values));
        } else if (v.type == onnx_io::DType::int8 || v.type == onnx_io::DType::uint8) {
          // Codes: the family over the code range itself (its quantization step is one code).
          Range codes;
          codes.qmin = v.type == onnx_io::DType::uint8 ? 0 : -128;
          codes.qmax = v.type == onnx_io::DType::uint8 ? 255 : 127;
          codes.lo = codes.qmin;
          codes.hi = codes.qmax;
          codes.step = 1;
          std::vector<int32_t> values(n);
          for (int32_t& x : values) {
            x = static_cast<int32_t>(std::clamp(std::nearbyint(Draw(families[f], rng, codes)), double(codes.qmin),
                                                double(codes.qmax)));
          }
          set.feeds.push_back(onnx_io::Tensor::FromCodes(v.name, v.type, dims, values));
        } else {
          throw InputError(model.path + ": input '" + v.name + "' of type " + onnx_io::to_string(v.type) +
                           ": fusediff generates float32, int8 and uint8 inputs only (give --inputs)");
        }
      }
      sets.push_back(std::move(set));
    }
  }
  return sets;
}

namespace {

void CheckAgainst(const onnx_io::ModelInfo& model, const onnx_io::Tensor& t, const std::string& path) {
  for (const auto& v : model.inputs) {
    if (v.name != t.name) continue;
    if (v.type != t.type) {
      throw InputError(path + ": input '" + t.name + "' is " + onnx_io::to_string(t.type) + ", the model expects " +
                       onnx_io::to_string(v.type));
    }
    bool shape_ok = v.dims.empty() || v.dims.size() == t.dims.size();
    for (size_t d = 0; shape_ok && d < v.dims.size(); ++d) shape_ok = v.dims[d] < 0 || v.dims[d] == t.dims[d];
    if (!shape_ok) throw InputError(path + ": input '" + t.name + "' has a shape the model does not accept");
    return;
  }
  std::string names;
  for (const auto& v : model.inputs) names += (names.empty() ? "" : ", ") + v.name;
  throw InputError(path + ": tensor '" + t.name + "' names no model input (inputs: " + names + ")");
}

InputSet Complete(const onnx_io::ModelInfo& model, std::map<std::string, onnx_io::Tensor> by_name,
                  const std::string& where) {
  InputSet set;
  set.family = "file";
  for (const auto& v : model.inputs) {
    const auto it = by_name.find(v.name);
    if (it == by_name.end()) throw InputError(where + ": no tensor for model input '" + v.name + "'");
    set.feeds.push_back(it->second);
  }
  return set;
}

}  // namespace

std::vector<InputSet> ReadInputs(const onnx_io::ModelInfo& model, const std::vector<std::string>& paths) {
  std::vector<InputSet> sets;
  std::map<std::string, onnx_io::Tensor> loose;
  std::string loose_where;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      // ONNX test-data layout: DIR/test_data_set_N/input_K.pb (or DIR itself holding input files).
      std::vector<std::filesystem::path> folders;
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) folders.push_back(e.path());
      }
      std::sort(folders.begin(), folders.end());
      if (folders.empty()) folders.push_back(p);
      for (const auto& folder : folders) {
        std::map<std::string, onnx_io::Tensor> by_name;
        std::vector<std::filesystem::path> files;
        for (const auto& e : std::filesystem::directory_iterator(folder)) {
          const std::string name = e.path().filename().string();
          if (e.is_regular_file() && name.rfind("input_", 0) == 0 && e.path().extension() == ".pb") files.push_back(e.path());
          if (e.is_regular_file() && e.path().extension() == ".npy") files.push_back(e.path());
        }
        std::sort(files.begin(), files.end());
        if (files.empty()) throw InputError(folder.string() + ": no input_*.pb or .npy files");
        for (const auto& f : files) {
          onnx_io::Tensor t = onnx_io::ReadTensorFile(f.string());
          CheckAgainst(model, t, f.string());
          by_name[t.name] = std::move(t);
        }
        sets.push_back(Complete(model, std::move(by_name), folder.string()));
      }
    } else {
      onnx_io::Tensor t = onnx_io::ReadTensorFile(p);
      CheckAgainst(model, t, p);
      loose_where = p;
      loose[t.name] = std::move(t);
    }
  }
  if (!loose.empty()) sets.push_back(Complete(model, std::move(loose), loose_where));
  if (sets.empty()) throw InputError("--inputs: no input files");
  return sets;
}

}  // namespace fusediff::bisect
