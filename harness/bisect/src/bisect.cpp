#include "fusediff/bisect/bisect.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "fusediff/model/errors.h"

namespace fusediff::bisect {

extern const char* const kPinnedOptimizersJson;  // optimizers_data.cpp, generated from data/

std::vector<std::string> OptimizerList::names() const {
  std::vector<std::string> out;
  for (const auto& o : optimizers) out.push_back(o.name);
  return out;
}

OptimizerList ParseOptimizerList(const std::string& json_text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(origin + ": not JSON (" + e.what() + ")");
  }
  if (j.value("format", "") != "fusediff-ort-optimizers/1") {
    throw InputError(origin + ": format: expected \"fusediff-ort-optimizers/1\"");
  }
  OptimizerList list;
  list.onnxruntime = j.value("onnxruntime", "");
  list.source = j.value("source", "");
  list.source_commit = j.value("source_commit", "");
  if (!j.contains("optimizers") || !j["optimizers"].is_array() || j["optimizers"].empty()) {
    throw InputError(origin + ": optimizers: expected a non-empty array");
  }
  std::set<std::string> seen;
  for (const auto& o : j["optimizers"]) {
    if (!o.contains("name") || !o["name"].is_string() || o["name"].get<std::string>().empty()) {
      throw InputError(origin + ": optimizers: every entry needs a non-empty \"name\"");
    }
    Optimizer opt{o["name"].get<std::string>(), o.value("kind", ""), o.value("level", "")};
    if (opt.name.find_first_of(";, ") != std::string::npos) {
      throw InputError(origin + ": optimizer name '" + opt.name + "' holds a separator");
    }
    if (!seen.insert(opt.name).second) throw InputError(origin + ": optimizer '" + opt.name + "' is listed twice");
    list.optimizers.push_back(std::move(opt));
  }
  return list;
}

const OptimizerList& PinnedOptimizers() {
  static const OptimizerList list =
      ParseOptimizerList(kPinnedOptimizersJson, "harness/bisect/data/onnxruntime-1.30.0-optimizers.json");
  return list;
}

Perf Summarize(std::vector<double> ms) {
  Perf p;
  p.repeats = static_cast<int>(ms.size());
  if (ms.empty()) return p;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {  // linear interpolation between order statistics
    const double pos = q * static_cast<double>(ms.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, ms.size() - 1);
    return ms[lo] + (ms[hi] - ms[lo]) * (pos - static_cast<double>(lo));
  };
  p.median_ms = at(0.5);
  p.q1_ms = at(0.25);
  p.q3_ms = at(0.75);
  p.min_ms = ms.front();
  p.max_ms = ms.back();
  return p;
}

std::map<std::string, int64_t> NodeDelta(const std::map<std::string, int64_t>& baseline,
                                         const std::map<std::string, int64_t>& step) {
  std::map<std::string, int64_t> delta;
  for (const auto& [op, n] : step) {
    const auto it = baseline.find(op);
    const int64_t d = n - (it == baseline.end() ? 0 : it->second);
    if (d != 0) delta[op] = d;
  }
  for (const auto& [op, n] : baseline) {
    if (!step.count(op)) delta[op] = -n;
  }
  return delta;
}

namespace {
// Equality of two values read from the same output type (NaN equals NaN of the same bits only through
// both being NaN: a NaN where the baseline had a number is a difference).
bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The fast path of every comparison: most sessions reproduce the baseline bit for bit, and equal bits are Same.
bool Identical(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}
}  // namespace

std::vector<OutputDelta> CompareOutputs(const onnx_io::ModelInfo& model, const Outputs& baseline,
                                        const Outputs& step) {
  std::vector<OutputDelta> out;
  for (size_t o = 0; o < baseline.values.size(); ++o) {
    OutputDelta d;
    d.output = model.outputs[o].name;
    const auto& q = model.output_quant[o];
    const std::vector<double>& b = baseline.values[o];
    const std::vector<double>& s = step.values[o];
    d.elements = b.size();
    const bool identical = Identical(b, s);
    if (q) {
      d.unit = "lsb";
      d.step = q->codes ? 1.0 : q->scale;
      if (identical) {
        out.push_back(std::move(d));
        continue;
      }
    }
    double max_base = 0;
    for (double v : b) max_base = std::max(max_base, std::fabs(v));
    if (!q) {
      // A float output without a quantization: one unit is one binary32 ulp at the output's largest magnitude.
      d.unit = "f32_ulp_of_max";
      const float m = static_cast<float>(max_base > 0 ? max_base : 1.0);
      d.step = static_cast<double>(std::nextafter(m, INFINITY) - m);
    }
    const bool lsb = d.unit == "lsb";
    // Counts of the deltas within +-kDense units in an array (the usual case), the others in the map directly.
    constexpr int64_t kDense = 64;
    std::vector<uint64_t> dense(lsb && !identical ? 2 * kDense + 1 : 0, 0);
    for (size_t i = 0; i < (identical ? 0 : b.size()); ++i) {
      if (Same(b[i], s[i])) continue;
      ++d.differing;
      const double delta = s[i] - b[i];
      const double units = std::isfinite(delta) ? delta / d.step : INFINITY;
      d.max_units = std::max(d.max_units, std::fabs(units));
      d.max_abs = std::max(d.max_abs, std::fabs(delta));
      if (max_base > 0) d.max_rel = std::max(d.max_rel, std::fabs(delta) / max_base);
      if (lsb && std::isfinite(units)) {
        const int64_t k = static_cast<int64_t>(std::llround(units));
        if (k >= -kDense && k <= kDense) {
          ++dense[static_cast<size_t>(k + kDense)];
        } else {
          ++d.histogram[k];
        }
      }
    }
    for (size_t k = 0; k < dense.size(); ++k) {
      if (dense[k] != 0) d.histogram[static_cast<int64_t>(k) - kDense] += dense[k];
    }
    out.push_back(std::move(d));
  }
  return out;
}

Diff Differences(const Outputs& baseline, const Outputs& step) {
  // Counted first, then filled: one allocation, not a dozen regrowths of a vector of thousands of entries.
  std::vector<bool> differs(baseline.values.size());
  size_t count = 0;
  for (size_t o = 0; o < baseline.values.size(); ++o) {
    differs[o] = !Identical(baseline.values[o], step.values[o]);
    for (size_t i = 0; differs[o] && i < baseline.values[o].size(); ++i) {
      count += !Same(baseline.values[o][i], step.values[o][i]);
    }
  }
  Diff diff;
  diff.reserve(count);
  for (size_t o = 0; o < baseline.values.size(); ++o) {
    for (size_t i = 0; differs[o] && i < baseline.values[o].size(); ++i) {
      if (!Same(baseline.values[o][i], step.values[o][i])) diff.push_back({{o, i}, step.values[o][i]});
    }
  }
  return diff;
}

bool Explains(const std::vector<const Diff*>& singles, const Diff& all_on) {
  // The union of the singles, merged in key order (each Diff is sorted and has one entry a key): it explains all-on
  // when it is all-on itself (every element moved by all-on moved by a single to the same value, every element a
  // single moves moved by all-on, and no two singles disagreeing on an element).
  size_t total = 0;
  for (const Diff* s : singles) total += s->size();
  Diff merged;
  merged.reserve(total);
  const auto by_key = [](const auto& x, const auto& y) { return x.first < y.first; };
  for (const Diff* s : singles) {
    const size_t middle = merged.size();
    merged.insert(merged.end(), s->begin(), s->end());
    std::inplace_merge(merged.begin(), merged.begin() + static_cast<std::ptrdiff_t>(middle), merged.end(), by_key);
  }
  size_t k = 0;  // into all_on
  for (size_t i = 0; i < merged.size();) {
    size_t j = i + 1;
    for (; j < merged.size() && merged[j].first == merged[i].first; ++j) {
      if (!Same(merged[j].second, merged[i].second)) return false;  // two singles disagree on an element
    }
    if (k == all_on.size() || all_on[k].first != merged[i].first || !Same(all_on[k].second, merged[i].second)) {
      return false;  // a single moves what all-on leaves, or to another value
    }
    ++k;
    i = j;
  }
  return k == all_on.size();  // all-on moves nothing more
}

namespace {

using Results = std::vector<std::vector<onnx_io::Tensor>>;  // [input set][output], as ONNX Runtime returns them

// What a session's saved optimized model is: its op counts and its content digest.
struct Graph {
  std::map<std::string, int64_t> counts;
  uint64_t digest = 0;
};

// Where ONNX Runtime saves each session's optimized model, and its reading back. Kept (BisectOptions::
// keep_optimized_models): one file per session in the work folder. Otherwise one anonymous in-memory file (memfd) that
// every session saves over through its /proc/<pid>/fd path: no file system, so no ext4 write-back when ORT truncates
// and rewrites the file (its replace-by-truncate heuristic: about 0.2 ms a session on ext4), no file left behind.
// Where memfd is not available: one file in the work folder, removed after each read.
class SavedModels {
 public:
  explicit SavedModels(const BisectOptions& options) : options_(options) {
    if (options.keep_optimized_models) return;
    memfd_ = ::memfd_create("fusediff-optimized-model", MFD_CLOEXEC);
    if (memfd_ >= 0) memfd_path_ = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(memfd_);
  }
  ~SavedModels() {
    if (memfd_ >= 0) ::close(memfd_);
  }
  SavedModels(const SavedModels&) = delete;
  SavedModels& operator=(const SavedModels&) = delete;

  std::string PathFor(const std::string& tag) {
    if (!memfd_path_.empty()) return memfd_path_;
    const std::string file =
        options_.keep_optimized_models ? std::to_string(counter_++) + "_" + FileSafe(tag) + ".onnx" : "optimized.onnx";
    return (std::filesystem::path(options_.work_dir) / file).string();
  }

  // The bytes ONNX Runtime saved at `path` (from PathFor), into `bytes`.
  void Read(const std::string& path, std::string& bytes) {
    if (memfd_path_.empty()) {
      bytes = onnx_io::ReadModelBytes(path);
      if (!options_.keep_optimized_models) std::filesystem::remove(path);
      return;
    }
    // One pread into a buffer kept at its size (the model's size rarely changes); a full buffer grows and reads on.
    size_t done = 0;
    for (;;) {
      if (buffer_.size() == done) buffer_.resize(std::max<size_t>(2 * buffer_.size(), 64 * 1024));
      const ssize_t n = ::pread(memfd_, buffer_.data() + done, buffer_.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error("the optimized model's memfd: " + std::string(std::strerror(errno)));
      done += static_cast<size_t>(n);
      if (n == 0 || done < buffer_.size()) break;  // a regular file reads short only at its end
    }
    bytes.assign(buffer_.data(), done);
    if (bytes.empty()) throw InputError(path + ": ONNX Runtime saved no optimized model");
  }

 private:
  static std::string FileSafe(const std::string& s) {
    std::string out;
    for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    return out;
  }

  const BisectOptions& options_;
  int memfd_ = -1;
  std::string memfd_path_;
  std::vector<char> buffer_;
  int counter_ = 0;
};

class Session {
 public:
  Session(fused::ort::Runtime& rt, double& seconds, SavedModels& saved) : rt_(rt), seconds_(seconds), saved_(saved) {}

  template <typename F>
  auto Timed(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    auto result = f();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  // Creates the session, saves its optimized model, runs every set of `feeds`; returns the outputs as ONNX Runtime
  // gave them ([set][output], valid until the next Evaluate) and the saved node counts.
  const Results& Evaluate(const fused::ort::SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& feeds,
                          Graph& node_counts, std::optional<Perf>* perf, int warmup, int repeats) {
    // The first session timed warms the process (allocator, caches, CPU clock) too: without a throwaway round the
    // baseline comes out slower than a session that changes nothing.
    const int throwaway = perf != nullptr && first_timing_ ? 10 * (warmup + repeats) : 0;
    if (perf != nullptr) first_timing_ = false;
    Timed([&] {
      rt_.Evaluate(spec, feeds, throwaway, warmup, perf != nullptr ? repeats : 0, eval_);
      return 0;
    });
    if (perf != nullptr) *perf = Summarize(eval_.ms);
    node_counts = SavedGraph(spec.optimized_model);
    return eval_.results;
  }

  // Every set's outputs as doubles, per output concatenated in set order.
  static Outputs Decode(const Results& results, const onnx_io::ModelInfo& model) {
    Outputs out;
    out.values.resize(model.outputs.size());
    out.set_elements.resize(model.outputs.size());
    for (const std::vector<onnx_io::Tensor>& result : results) {
      if (result.size() != model.outputs.size()) throw std::runtime_error("ONNX Runtime returned a different output count");
      for (size_t o = 0; o < result.size(); ++o) {
        out.set_elements[o] = result[o].elements();
        AppendValues(result[o], out.values[o]);
      }
    }
    return out;
  }

 private:
  // Most sessions save the same graph as another (every name that does not fire saves the baseline's): each distinct
  // file content is parsed once. The bytes are read into one buffer, reused.
  Graph SavedGraph(const std::string& path) {
    saved_.Read(path, bytes_);
    const auto it = parsed_.find(bytes_);
    if (it != parsed_.end()) return it->second;
    const onnx_io::ModelInfo saved = onnx_io::ParseModel(bytes_, path);
    Graph g{saved.node_counts, saved.graph_digest};
    parsed_.emplace(bytes_, g);
    return g;
  }

  // The tensor's elements as doubles (exact for every supported type), one type dispatch per tensor.
  template <typename T>
  static void AppendAs(const onnx_io::Tensor& t, std::vector<double>& out) {
    const size_t n = t.elements();
    const size_t at = out.size();
    out.resize(at + n);
    const uint8_t* bytes = t.bytes.data();
    double* dst = out.data() + at;
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
      dst[i] = static_cast<double>(v);
    }
  }
  static void AppendValues(const onnx_io::Tensor& t, std::vector<double>& out) {
    switch (t.type) {
      case onnx_io::DType::float32: return AppendAs<float>(t, out);
      case onnx_io::DType::uint8: return AppendAs<uint8_t>(t, out);
      case onnx_io::DType::int8: return AppendAs<int8_t>(t, out);
      case onnx_io::DType::int16: return AppendAs<int16_t>(t, out);
      case onnx_io::DType::int32: return AppendAs<int32_t>(t, out);
      case onnx_io::DType::int64: return AppendAs<int64_t>(t, out);
    }
  }

  fused::ort::Runtime& rt_;
  double& seconds_;
  SavedModels& saved_;
  bool first_timing_ = true;
  std::map<std::string, Graph> parsed_;
  fused::ort::Runtime::Evaluation eval_;  // the last session's, its buffers reused
  std::string bytes_;
};

// A session's outputs measured against the baseline: its deltas, its differences and its differing elements per
// input set.
struct Measured {
  bool kept = false;             // bytes and shapes kept to recognize a repeat (within Measurements' budget)
  std::string bytes;             // every output tensor's bytes, [set][output] in order, in one block
  std::vector<int64_t> shapes;   // per tensor: its type, rank and dims
  std::vector<OutputDelta> deltas;
  Diff diff;
  std::vector<uint64_t> differing_by_set;
};

// Measures each distinct output content once: most sessions reproduce the baseline or all-on bit for bit (every name
// that does not fire, every leave-one-out that does not restore). A repeat is found by comparing the bytes ONNX
// Runtime returned; only a new content is decoded and compared element by element.
class Measurements {
 public:
  Measurements(const onnx_io::ModelInfo& model, const Outputs& baseline, size_t sets)
      : model_(model), baseline_(baseline), sets_(sets) {}

  const Measured& Of(const Results& results) {
    Flatten(results, shapes_);
    for (const auto& m : seen_) {
      if (m->kept && m->shapes == shapes_ && SameBytes(m->bytes, results)) return *m;
    }
    auto m = std::make_unique<Measured>();
    const Outputs outputs = Session::Decode(results, model_);
    m->deltas = CompareOutputs(model_, baseline_, outputs);
    m->diff = Differences(baseline_, outputs);
    m->differing_by_set.assign(sets_, 0);
    for (const auto& [key, value] : m->diff) ++m->differing_by_set[key.second / outputs.set_elements[key.first]];
    size_t size = 0;
    for (const auto& set : results) {
      for (const onnx_io::Tensor& t : set) size += t.bytes.size();
    }
    if (kept_bytes_ + size <= kKeptBytes) {  // a model of large outputs and many distinct contents stays bounded
      m->kept = true;
      m->shapes = shapes_;
      m->bytes.reserve(size);
      for (const auto& set : results) {
        for (const onnx_io::Tensor& t : set) m->bytes.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
      }
      kept_bytes_ += size;
    }
    seen_.push_back(std::move(m));  // to the end: what Of returns stays valid (one-on differences are read later)
    return *seen_.back();
  }

 private:
  static void Flatten(const Results& results, std::vector<int64_t>& shapes) {
    shapes.clear();
    for (const auto& set : results) {
      for (const onnx_io::Tensor& t : set) {
        shapes.push_back(static_cast<int64_t>(t.type));
        shapes.push_back(static_cast<int64_t>(t.dims.size()));
        shapes.insert(shapes.end(), t.dims.begin(), t.dims.end());
      }
    }
  }
  // One contiguous block per kept content: the comparison reads few pages of it.
  static bool SameBytes(const std::string& kept, const Results& results) {
    size_t at = 0;
    for (const auto& set : results) {
      for (const onnx_io::Tensor& t : set) {
        if (t.bytes.size() > kept.size() - at ||
            (!t.bytes.empty() && std::memcmp(kept.data() + at, t.bytes.data(), t.bytes.size()) != 0)) {
          return false;
        }
        at += t.bytes.size();
      }
    }
    return at == kept.size();
  }

  const onnx_io::ModelInfo& model_;
  const Outputs& baseline_;
  size_t sets_;
  static constexpr size_t kKeptBytes = size_t{256} << 20;
  std::vector<int64_t> shapes_;  // the content looked up, reused
  size_t kept_bytes_ = 0;
  std::vector<std::unique_ptr<Measured>> seen_;
};

std::vector<std::string> AllBut(const std::vector<std::string>& names, const std::vector<std::string>& keep) {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const auto& n : names) {
    if (std::find(keep.begin(), keep.end(), n) == keep.end()) out.push_back(n);
  }
  return out;
}

}  // namespace

BisectResult Bisect(fused::ort::Runtime& runtime, const std::string& model_path, const BisectOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const double ort_at_start = runtime.ort_seconds();
  const OptimizerList& list = options.optimizers != nullptr ? *options.optimizers : PinnedOptimizers();
  const onnx_io::ModelInfo model = onnx_io::ReadModel(model_path);
  const std::vector<InputSet> sets = options.input_paths.empty() ? GenerateInputs(model, options.generate, options.seed)
                                                                 : ReadInputs(model, options.input_paths);
  if (options.work_dir.empty()) throw InputError("bisect: no folder for the optimized models");
  if (sets.empty()) throw InputError(model_path + ": no input sets");
  std::filesystem::create_directories(options.work_dir);

  BisectResult r;
  r.model = model_path;
  r.runtime_version = runtime.version();
  r.optimizer_list = "onnxruntime " + list.onnxruntime + " (" + list.source + " at " + list.source_commit + ")";
  for (const InputSet& s : sets) {
    if (!r.sets_per_family.count(s.family)) r.families.push_back(s.family);
    ++r.sets_per_family[s.family];
  }
  SavedModels saved(options);
  Session session(runtime, r.ort_seconds, saved);
  std::vector<std::vector<onnx_io::Tensor>> all_feeds;  // every set, built once for every session
  for (const InputSet& set : sets) all_feeds.push_back(set.feeds);
  const std::vector<std::vector<onnx_io::Tensor>> first_feeds = {sets.front().feeds};
  const std::vector<std::string> names = list.names();

  Graph base_nodes;
  std::optional<Perf> base_perf;
  auto spec_for = [&](const std::string& level, std::vector<std::string> disabled, const std::string& tag) {
    fused::ort::SessionSpec spec;
    spec.model = model_path;
    spec.level = level;
    spec.disabled = std::move(disabled);
    spec.optimized_model = saved.PathFor(tag);
    return spec;
  };

  const Results& base_results = session.Evaluate(spec_for("disabled", {}, "baseline"), all_feeds, base_nodes, &base_perf,
                                                 options.warmup, options.repeats);
  const Outputs baseline = Session::Decode(base_results, model);
  Measurements measurements(model, baseline, sets.size());
  const Measured& base_measured = measurements.Of(base_results);
  auto make_step = [&](const std::string& kind, const std::string& subject, const fused::ort::SessionSpec& spec,
                       const Measured& m, const Graph& nodes, const std::optional<Perf>& perf) {
    Step s;
    s.kind = kind;
    s.subject = subject;
    s.disabled = spec.disabled;
    s.level = spec.level;
    s.node_delta = NodeDelta(base_nodes.counts, nodes.counts);
    for (const auto& [op, d] : s.node_delta) s.nodes_changed += std::llabs(d);
    s.fired = nodes.digest != base_nodes.digest;
    s.deltas = m.deltas;
    for (const auto& d : s.deltas) s.max_units = std::max(s.max_units, d.max_units);
    for (const auto& f : r.families) s.differing_by_family[f] = 0;
    for (size_t k = 0; k < sets.size(); ++k) s.differing_by_family[sets[k].family] += m.differing_by_set[k];
    s.perf = perf;
    if (perf && base_perf && base_perf->median_ms > 0) {
      s.time_saved = (base_perf->median_ms - perf->median_ms) / base_perf->median_ms;
      s.within_noise = std::fabs(base_perf->median_ms - perf->median_ms) <=
                       (base_perf->q3_ms - base_perf->q1_ms) + (perf->q3_ms - perf->q1_ms);
    }
    s.loss = s.max_units - options.perf_weight * s.time_saved;
    return s;
  };
  {
    Step b = make_step("baseline", "", spec_for("disabled", {}, "baseline"), base_measured, base_nodes, base_perf);
    r.steps.push_back(b);
  }

  // The completeness check: every listed name disabled at level all must be level disabled.
  {
    const auto spec = spec_for("all", names, "completeness");
    Graph nodes;
    const Measured& out = measurements.Of(session.Evaluate(spec, all_feeds, nodes, nullptr, 0, 0));
    Step s = make_step("completeness", "", spec, out, nodes, std::nullopt);
    r.steps.push_back(s);
    if (s.fired || s.max_units > 0 || !out.diff.empty()) {
      std::string what;
      for (const auto& [op, d] : s.node_delta) what += (what.empty() ? "" : ", ") + op + (d > 0 ? " +" : " ") + std::to_string(d);
      throw InputError(model_path + ": the transformer list (" + r.optimizer_list +
                       ") is stale for this ONNX Runtime: with all " + std::to_string(names.size()) +
                       " names disabled, level all still differs from level disabled (nodes: " +
                       (what.empty() ? "same" : what) + "; " + std::to_string(out.diff.size()) +
                       " output elements); a transformer is missing from the list, so a bisect would pin nothing");
    }
  }

  Graph all_nodes;
  std::optional<Perf> all_perf;
  const auto all_spec = spec_for("all", {}, "all_on");
  const Measured& all_on =
      measurements.Of(session.Evaluate(all_spec, all_feeds, all_nodes, &all_perf, options.warmup, options.repeats));
  r.steps.push_back(make_step("all_on", "", all_spec, all_on, all_nodes, all_perf));
  const Diff& all_diff = all_on.diff;

  // One on: each name alone. Timed only where it fired (otherwise its session is the baseline's graph).
  std::vector<const Diff*> single_diffs;
  std::map<std::string, const Diff*> single_by_name;
  std::vector<std::string> fired;
  for (const auto& name : names) {
    const auto spec = spec_for("all", AllBut(names, {name}), "one_on_" + name);
    Graph nodes;
    const Measured& out = measurements.Of(session.Evaluate(spec, all_feeds, nodes, nullptr, 0, 0));
    std::optional<Perf> perf;
    if (nodes.digest != base_nodes.digest) {  // timed in a session of its own, on the set that is timed
      Graph again;
      session.Evaluate(spec, first_feeds, again, &perf, options.warmup, options.repeats);
    }
    Step s = make_step("one_on", name, spec, out, nodes, perf);
    const Diff& diff = out.diff;
    if (s.fired) fired.push_back(name);
    if (!diff.empty()) single_diffs.push_back(&diff);
    single_by_name[name] = &diff;
    s.verdict = !s.fired && diff.empty() ? "not_fired" : (s.loss > options.threshold ? "blacklist" : "keep");
    if (s.verdict == "blacklist") r.blacklist.push_back(name);
    r.steps.push_back(std::move(s));
  }

  // Leave one out: the usual manual search. A name "restores" when disabling it alone brings all-on within the
  // threshold; with two independent causes, neither does.
  for (const auto& name : names) {
    const auto spec = spec_for("all", {name}, "leave_one_out_" + name);
    Graph nodes;
    const Measured& out = measurements.Of(session.Evaluate(spec, all_feeds, nodes, nullptr, 0, 0));
    Step s = make_step("leave_one_out", name, spec, out, nodes, std::nullopt);
    // fired: the optimized model differs from all-on's (leaving it out changed the graph).
    s.node_delta = NodeDelta(all_nodes.counts, nodes.counts);
    s.nodes_changed = 0;
    for (const auto& [op, d] : s.node_delta) s.nodes_changed += std::llabs(d);
    s.fired = nodes.digest != all_nodes.digest;
    const Step& all_step = r.steps[2];
    s.verdict = all_step.max_units > options.threshold && s.max_units <= options.threshold ? "restores" : "no_effect";
    // A name that changes all-on's graph when left out acts there, though perhaps only after another (a fusion
    // that needs ConvBNFusion's fold first): a pair candidate like those that fire alone.
    if (s.fired && std::find(fired.begin(), fired.end(), name) == fired.end()) fired.push_back(name);
    r.steps.push_back(std::move(s));
  }

  // Pairs, only where the singles do not explain all-on, only among names that fired (alone, or in all-on as seen
  // by leaving them out).
  r.explained_by_singles = Explains(single_diffs, all_diff);
  if (!r.explained_by_singles) {
    for (size_t i = 0; i < fired.size(); ++i) {
      for (size_t j = i + 1; j < fired.size(); ++j) {
        if (r.pairs_run >= options.max_pairs) {
          ++r.pairs_skipped;
          continue;
        }
        ++r.pairs_run;
        const auto spec = spec_for("all", AllBut(names, {fired[i], fired[j]}), "pair_" + fired[i] + "_" + fired[j]);
        Graph nodes;
        const Measured& out = measurements.Of(session.Evaluate(spec, all_feeds, nodes, nullptr, 0, 0));
        Step s = make_step("pair", fired[i] + "+" + fired[j], spec, out, nodes, std::nullopt);
        // additive: the pair moves exactly what its two singles move; interacts: it moves something else.
        const bool additive = Explains({single_by_name[fired[i]], single_by_name[fired[j]]}, out.diff);
        s.verdict = additive ? "additive" : (s.loss > options.threshold ? "interacts_blacklist" : "interacts");
        if (s.verdict == "interacts_blacklist" &&
            std::find(r.blacklist.begin(), r.blacklist.end(), fired[i]) == r.blacklist.end() &&
            std::find(r.blacklist.begin(), r.blacklist.end(), fired[j]) == r.blacklist.end()) {
          r.blacklist.push_back(fired[i]);  // the interaction needs both; disabling one removes it
        }
        r.steps.push_back(std::move(s));
      }
    }
  }

  r.blacklist_config = std::string(fused::ort::kDisableOptimizersKey) + "=" +
                       fused::ort::DisableOptimizersValue(r.blacklist);
  // The blacklist re-run, and proof that each blacklisted name is one ORT knows: leaving it out of the blacklist
  // changes the saved optimized model.
  {
    const auto spec = spec_for("all", r.blacklist, "blacklist");
    Graph nodes;
    std::optional<Perf> perf;
    const Measured& out =
        measurements.Of(session.Evaluate(spec, all_feeds, nodes, &perf, options.warmup, options.repeats));
    Step s = make_step("blacklist", "", spec, out, nodes, perf);
    r.blacklist_within_tolerance = s.max_units <= options.threshold;
    s.verdict = r.blacklist_within_tolerance ? "within_tolerance" : "over_threshold";
    r.steps.push_back(std::move(s));
    for (const auto& name : r.blacklist) {
      std::vector<std::string> without;
      for (const auto& n : r.blacklist) {
        if (n != name) without.push_back(n);
      }
      Graph other;
      session.Evaluate(spec_for("all", without, "blacklist_without_" + name), first_feeds, other, nullptr, 0, 0);
      r.blacklist_name_effective[name] = other.digest != nodes.digest;
    }
  }
  r.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.inside_ort_seconds = runtime.ort_seconds() - ort_at_start;
  return r;
}

}  // namespace fusediff::bisect
