#include "fusediff/bisect/bisect.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <numeric>
#include <nlohmann/json.hpp>
#include <set>

#include "fusediff/bisect/bounds.h"
#include "fusediff/generators/counter_rng.h"
#include "fusediff/model/errors.h"
#include "memory_file.h"

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

namespace {
// Uniform in [0, n) from 32-bit draws without bias (Lemire, "Fast random integer generation in an interval", ACM
// TOMACS 2019): a bootstrap draws thousands.
size_t DrawIndex(generators::CounterRng& rng, uint32_t n) {
  uint64_t m = static_cast<uint64_t>(rng.next_u32()) * n;
  if (static_cast<uint32_t>(m) < n) {
    const uint32_t floor = static_cast<uint32_t>(-n) % n;
    while (static_cast<uint32_t>(m) < floor) m = static_cast<uint64_t>(rng.next_u32()) * n;
  }
  return static_cast<size_t>(m >> 32);
}
}  // namespace

namespace {

// The median of a resample given as multiplicities of the pooled samples, walking their sorted order: no sorting
// per resample (a bootstrap takes a thousand).
double WeightedMedian(const std::vector<double>& sorted, const std::vector<size_t>& order,
                      const std::vector<uint32_t>& count, size_t total) {
  const size_t lo = (total - 1) / 2, hi = total / 2;
  size_t seen = 0;
  double lo_value = 0;
  for (size_t k = 0; k < sorted.size(); ++k) {
    const size_t next = seen + count[order[k]];
    if (lo >= seen && lo < next) lo_value = sorted[k];
    if (hi >= seen && hi < next) return (lo_value + sorted[k]) / 2;
    seen = next;
  }
  return lo_value;
}

// The pooled samples' values in sorted order, and where each came from.
void SortedPool(const std::vector<double>& pooled, std::vector<double>& sorted, std::vector<size_t>& order) {
  order.resize(pooled.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pooled[a] < pooled[b]; });
  sorted.resize(pooled.size());
  for (size_t k = 0; k < order.size(); ++k) sorted[k] = pooled[order[k]];
}

}  // namespace

RatioInterval BootstrapMedianRatio(const std::vector<std::vector<double>>& step,
                                   const std::vector<std::vector<double>>& baseline, uint64_t seed, uint64_t stream,
                                   int resamples, double level) {
  RatioInterval out;
  const size_t clusters = std::min(step.size(), baseline.size());
  std::vector<double> a, b;
  std::vector<size_t> start;  // where each cluster's rounds begin in the pool
  for (size_t c = 0; c < clusters; ++c) {
    start.push_back(a.size());
    const size_t n = std::min(step[c].size(), baseline[c].size());
    a.insert(a.end(), step[c].begin(), step[c].begin() + static_cast<std::ptrdiff_t>(n));
    b.insert(b.end(), baseline[c].begin(), baseline[c].begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (a.empty()) return out;
  start.push_back(a.size());
  std::vector<double> sa, sb;
  std::vector<size_t> oa, ob;
  SortedPool(a, sa, oa);
  SortedPool(b, sb, ob);
  std::vector<uint32_t> all(a.size(), 1), count(a.size());
  out.ratio = WeightedMedian(sa, oa, all, a.size()) / WeightedMedian(sb, ob, all, b.size());
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(resamples));
  for (int k = 0; k < resamples; ++k) {
    // Pairs (clusters) first, then rounds within each: a round's two runs stay together.
    generators::CounterRng rng(seed, stream, static_cast<uint32_t>(k), generators::StreamPurpose::bootstrap);
    std::fill(count.begin(), count.end(), 0);
    size_t total = 0;
    for (size_t c = 0; c < clusters; ++c) {
      const size_t pick = DrawIndex(rng, static_cast<uint32_t>(clusters));
      const size_t n = start[pick + 1] - start[pick];
      for (size_t i = 0; i < n; ++i) ++count[start[pick] + DrawIndex(rng, static_cast<uint32_t>(n))];
      total += n;
    }
    if (total == 0) continue;
    ratios.push_back(WeightedMedian(sa, oa, count, total) / WeightedMedian(sb, ob, count, total));
  }
  if (ratios.empty()) return out;
  std::sort(ratios.begin(), ratios.end());
  const auto at = [&](double q) {
    return ratios[std::min(ratios.size() - 1, static_cast<size_t>(std::floor(q * static_cast<double>(ratios.size()))))];
  };
  out.lo = at((1 - level) / 2);
  out.hi = at(1 - (1 - level) / 2);
  return out;
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

double UlpAt(double m, onnx_io::DType type) {
  // Precision p (significand bits) and the smallest normal exponent of each float type.
  int p = 24, emin = -126;
  if (type == onnx_io::DType::float16) p = 11, emin = -14;
  if (type == onnx_io::DType::bfloat16) p = 8;
  if (type == onnx_io::DType::float64) p = 53, emin = -1022;
  const int e = m > 0 && std::isfinite(m) ? std::max(std::ilogb(m), emin) : 0;
  return std::ldexp(1.0, e - p + 1);
}

std::string UnitOf(onnx_io::DType type, const std::optional<onnx_io::TensorQuant>& q) {
  if (q) return "lsb";
  switch (type) {
    case onnx_io::DType::float32: return "f32_ulp_of_max";
    case onnx_io::DType::float16: return "f16_ulp_of_max";
    case onnx_io::DType::bfloat16: return "bf16_ulp_of_max";
    case onnx_io::DType::float64: return "f64_ulp_of_max";
    default: return "int";
  }
}

namespace {
// Equality of two values read from the same output type (NaN equals NaN of the same bits only through
// both being NaN: a NaN where the baseline had a number is a difference).
bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Element i of output o is the same in both: integers of 64 bits by their bits, everything else by value.
bool SameAt(const Outputs& a, const Outputs& b, size_t o, size_t i) {
  if (o < a.exact.size() && !a.exact[o].empty()) return a.exact[o][i] == b.exact[o][i];
  return Same(a.values[o][i], b.values[o][i]);
}

// The fast path of every comparison: most sessions reproduce the baseline bit for bit, and equal bits are Same.
template <typename T>
bool Identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
bool IdenticalOutput(const Outputs& a, const Outputs& b, size_t o) {
  const bool exact = o < a.exact.size() && o < b.exact.size();
  return Identical(a.values[o], b.values[o]) && (!exact || Identical(a.exact[o], b.exact[o]));
}
}  // namespace

bool Criteria::Waives(double delta, double baseline) const {
  if (!atol && !rtol) return false;
  // Polygraphy's defaults (polygraphy/comparator/compare.py) for the one not given.
  const double a = atol.value_or(1e-5), r = rtol.value_or(1e-5);
  const double d = std::fabs(delta);
  return d <= a || d <= r * std::fabs(baseline);
}

namespace {

// r of one element: |delta| / (B_baseline + B_step); 0 where equal, +inf where a bound of 0 or a NaN is exceeded.
double RatioOf(double delta, double bound) {
  if (delta == 0) return 0;
  return std::isfinite(delta) && bound > 0 ? std::fabs(delta) / bound : INFINITY;
}

// Judges one differing element of output d (index i, baseline b, delta) by its criterion and the waiver.
void Judge(OutputDelta& d, const OutputBound* bound, const Criteria& c, size_t i, double b, double delta, double units) {
  bool beyond = std::fabs(units) > c.threshold;
  if (bound != nullptr) {
    const double r = RatioOf(delta, bound->baseline[i] + bound->step[i]);
    beyond = r > 1;
    if (r > d.r || d.r_delta == 0) {
      d.r = r;
      d.r_delta = std::fabs(delta);
      d.r_bound_baseline = bound->baseline[i];
      d.r_bound_step = bound->step[i];
      d.r_value = b;
      d.r_at = i;
    }
  }
  if (!beyond) return;
  ++d.beyond;
  if (c.Waives(delta, b)) ++d.waived;
}

// The criterion an output is judged by, and its bound (null where it has none).
const OutputBound* CriterionOf(OutputDelta& d, const std::vector<OutputBound>* bounds, size_t o) {
  if (d.unit == "lsb" || d.unit == "int") return nullptr;
  d.criterion = "fallback tolerance";
  if (bounds == nullptr || o >= bounds->size()) {
    d.uncovered = "no bound was computed";
    return nullptr;
  }
  d.uncovered = (*bounds)[o].uncovered;
  if (!d.uncovered.empty()) return nullptr;
  d.criterion = "bound";
  return &(*bounds)[o];
}

}  // namespace

std::vector<OutputDelta> CompareOutputs(const onnx_io::ModelInfo& model, const Outputs& baseline, const Outputs& step,
                                        const std::vector<OutputBound>* bounds, const Criteria& criteria) {
  std::vector<OutputDelta> out;
  for (size_t o = 0; o < baseline.values.size(); ++o) {
    OutputDelta d;
    d.output = model.outputs[o].name;
    const auto& q = model.output_quant[o];
    const std::vector<double>& b = baseline.values[o];
    const std::vector<double>& s = step.values[o];
    d.elements = b.size();
    d.unit = UnitOf(model.outputs[o].type, q);
    const OutputBound* bound = CriterionOf(d, bounds, o);
    const bool counted = d.unit == "lsb" || d.unit == "int";  // units with a histogram of signed deltas
    if (q) d.step = q->codes ? 1.0 : q->scale;
    const bool identical = IdenticalOutput(baseline, step, o);
    if (counted && identical) {
      out.push_back(std::move(d));
      continue;
    }
    double max_base = 0;
    for (double v : b) max_base = std::max(max_base, std::fabs(v));
    if (!counted) d.step = UlpAt(max_base > 0 ? max_base : 1.0, model.outputs[o].type);
    // Counts of the deltas within +-kDense units in an array (the usual case), the others in the map directly.
    constexpr int64_t kDense = 64;
    std::vector<uint64_t> dense(counted && !identical ? 2 * kDense + 1 : 0, 0);
    for (size_t i = 0; i < (identical ? 0 : b.size()); ++i) {
      if (SameAt(baseline, step, o, i)) continue;
      ++d.differing;
      const double delta = s[i] - b[i];
      const double units = std::isfinite(delta) ? delta / d.step : INFINITY;
      d.max_units = std::max(d.max_units, std::fabs(units));
      d.max_abs = std::max(d.max_abs, std::fabs(delta));
      if (max_base > 0) d.max_rel = std::max(d.max_rel, std::fabs(delta) / max_base);
      Judge(d, bound, criteria, i, b[i], delta, units);
      if (counted && std::isfinite(units)) {
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
    d.waived_by_tolerance = d.beyond > 0 && d.waived == d.beyond;
    out.push_back(std::move(d));
  }
  return out;
}

namespace {
  // The tensor's elements as doubles (exact for every supported type), one type dispatch per tensor.
template <typename T>
void AppendAs(const onnx_io::Tensor& t, std::vector<double>& out) {
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
void AppendValues(const onnx_io::Tensor& t, std::vector<double>& out) {
    switch (t.type) {
      case onnx_io::DType::float32: return AppendAs<float>(t, out);
      case onnx_io::DType::uint8: case onnx_io::DType::bool_: return AppendAs<uint8_t>(t, out);
      case onnx_io::DType::int8: return AppendAs<int8_t>(t, out);
      case onnx_io::DType::int16: return AppendAs<int16_t>(t, out);
      case onnx_io::DType::int32: return AppendAs<int32_t>(t, out);
      case onnx_io::DType::int64: return AppendAs<int64_t>(t, out);
      case onnx_io::DType::float64: return AppendAs<double>(t, out);
      default: {  // float16, bfloat16 and the unsigned types of 16 to 64 bits: element by element
        const size_t at = out.size();
        out.resize(at + t.elements());
        for (size_t i = 0; i < t.elements(); ++i) out[at + i] = t.value(i);
      }
    }
  }

}  // namespace

Outputs DecodeOutputs(const std::vector<std::vector<onnx_io::Tensor>>& results, size_t outputs) {
  Outputs out;
  out.values.resize(outputs);
  out.set_elements.resize(outputs);
  out.exact.resize(outputs);
  for (const std::vector<onnx_io::Tensor>& result : results) {
    if (result.size() != outputs) throw std::runtime_error("ONNX Runtime returned a different output count");
    for (size_t o = 0; o < result.size(); ++o) {
      const onnx_io::Tensor& t = result[o];
      out.set_elements[o] = t.elements();
      AppendValues(t, out.values[o]);
      if (t.type == onnx_io::DType::int64 || t.type == onnx_io::DType::uint64) {
        for (size_t i = 0; i < t.elements(); ++i) out.exact[o].push_back(t.bits(i));
      }
    }
  }
  return out;
}

Diff Differences(const Outputs& baseline, const Outputs& step) {
  // Counted first, then filled: one allocation, not a dozen regrowths of a vector of thousands of entries.
  std::vector<bool> differs(baseline.values.size());
  size_t count = 0;
  for (size_t o = 0; o < baseline.values.size(); ++o) {
    differs[o] = !IdenticalOutput(baseline, step, o);
    for (size_t i = 0; differs[o] && i < baseline.values[o].size(); ++i) count += !SameAt(baseline, step, o, i);
  }
  Diff diff;
  diff.reserve(count);
  for (size_t o = 0; o < baseline.values.size(); ++o) {
    for (size_t i = 0; differs[o] && i < baseline.values[o].size(); ++i) {
      if (!SameAt(baseline, step, o, i)) diff.push_back({{o, i}, step.values[o][i]});
    }
  }
  return diff;
}

const OutputDelta* LargestDelta(const Step& s) {
  const OutputDelta* largest = s.deltas.empty() ? nullptr : &s.deltas.front();
  for (const auto& d : s.deltas) {
    if (d.max_units == s.max_units && d.max_units > 0) largest = &d;
  }
  return largest;
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
  std::vector<std::string> produced;  // every node output, in the graph's order
};

// Where ONNX Runtime saves each session's optimized model, and its reading back. Kept (BisectOptions::
// keep_optimized_models): one file per session in the work folder. Otherwise one anonymous in-memory file (memfd) that
// every session saves over through its /proc/<pid>/fd path: no file system, so no ext4 write-back when ORT truncates
// and rewrites the file (its replace-by-truncate heuristic: about 0.2 ms a session on ext4), no file left behind.
// Where memfd is not available: one file in the work folder, removed after each read.
class SavedModels {
 public:
  explicit SavedModels(const BisectOptions& options) : options_(options) {
    if (!options.keep_optimized_models) memory_.emplace("fusediff-optimized-model");
  }

  std::string PathFor(const std::string& tag) {
    if (memory_ && memory_->valid()) return memory_->path();
    const std::string file =
        options_.keep_optimized_models ? std::to_string(counter_++) + "_" + FileSafe(tag) + ".onnx" : "optimized.onnx";
    return (std::filesystem::path(options_.work_dir) / file).string();
  }

  // The bytes ONNX Runtime saved at `path` (from PathFor), into `bytes`.
  void Read(const std::string& path, std::string& bytes) {
    if (!memory_ || !memory_->valid()) {
      bytes = onnx_io::ReadModelBytes(path);
      if (!options_.keep_optimized_models) std::filesystem::remove(path);
      return;
    }
    memory_->Read(buffer_, bytes);
    if (bytes.empty()) throw InputError(path + ": ONNX Runtime saved no optimized model");
  }

 private:
  static std::string FileSafe(const std::string& s) {
    std::string out;
    for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    return out;
  }

  const BisectOptions& options_;
  std::optional<MemoryFile> memory_;
  std::vector<char> buffer_;
  int counter_ = 0;
};

class Session {
 public:
  Session(fused::ort::Runtime& rt, double& seconds, SavedModels& saved) : rt_(rt), seconds_(seconds), saved_(saved) {}

  // Adds f's wall time to the runtime's, a refused session's included.
  template <typename F>
  void Timed(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    try {
      f();
    } catch (...) {
      seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      throw;
    }
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Creates the session, saves its optimized model, runs every set of `feeds`; returns the outputs as ONNX Runtime
  // gave them ([set][output], valid until the next Evaluate) and the saved node counts.
  const Results& Evaluate(const fused::ort::SessionSpec& spec, const std::vector<std::vector<onnx_io::Tensor>>& feeds,
                          Graph& node_counts) {
    Timed([&] { rt_.Evaluate(spec, feeds, 0, 0, 0, eval_); });
    node_counts = SavedGraph(spec.optimized_model);
    return eval_.results;
  }

  // Times the session of `spec` against the baseline's in kTimingPairs pairs of new sessions, each pair round by
  // round (Runtime::TimeAlternating) on `feeds`, the pairs created in alternating order: {step's ms per pair,
  // baseline's ms per pair}. Two sessions of one graph differ by about 1 % here (where each sits in memory): new pairs,
  // warmed alike, let that show in the interval instead of as a difference (docs/bisect.md, "Δperf"). The first
  // time, both warm up with 5 (warmup + repeats) runs each: the process warms up there too.
  static constexpr int kTimingPairs = 3;
  std::array<std::vector<std::vector<double>>, 2> TimeAgainst(const fused::ort::SessionSpec& baseline,
                                                              fused::ort::SessionSpec spec,
                                                              const std::vector<onnx_io::Tensor>& feeds, int warmup,
                                                              int repeats) {
    std::array<std::vector<std::vector<double>>, 2> ms;
    spec.optimized_model.clear();
    Timed([&] {
      for (int pair = 0; pair < kTimingPairs; ++pair) {
        std::vector<fused::ort::SessionHandle> sessions;
        try {
          sessions.push_back(rt_.Create(pair % 2 == 0 ? spec : baseline));
          sessions.push_back(rt_.Create(pair % 2 == 0 ? baseline : spec));
          auto runs = rt_.TimeAlternating(sessions, feeds, warmed_ ? warmup : 5 * (warmup + repeats), repeats);
          warmed_ = true;
          if (pair % 2 == 1) std::swap(runs[0], runs[1]);
          ms[0].push_back(std::move(runs[0]));
          ms[1].push_back(std::move(runs[1]));
        } catch (...) {
          for (const auto& h : sessions) rt_.Release(h);
          throw;
        }
        for (const auto& h : sessions) rt_.Release(h);
      }
    });
    return ms;
  }

 private:
  // Most sessions save the same graph as another (every name that does not fire saves the baseline's): each distinct
  // file content is parsed once. The bytes are read into one buffer, reused.
  Graph SavedGraph(const std::string& path) {
    saved_.Read(path, bytes_);
    const auto it = parsed_.find(bytes_);
    if (it != parsed_.end()) return it->second;
    const onnx_io::ModelInfo saved = onnx_io::ParseModel(bytes_, path, /*untyped_outputs=*/true);
    Graph g{saved.node_counts, saved.graph_digest, saved.produced};
    parsed_.emplace(bytes_, g);
    return g;
  }

  fused::ort::Runtime& rt_;
  double& seconds_;
  SavedModels& saved_;
  bool warmed_ = false;
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
  // Keeps at most `kept_bytes` of distinct output contents to recognize repeats.
  Measurements(const onnx_io::ModelInfo& model, const Outputs& baseline, size_t sets, size_t kept_bytes,
               const std::vector<OutputBound>& bounds, const Criteria& criteria)
      : model_(model), baseline_(baseline), sets_(sets), kept_limit_(kept_bytes), bounds_(bounds), criteria_(criteria) {}

  const Measured& Of(const Results& results) {
    Flatten(results, shapes_);
    for (const auto& m : seen_) {
      if (m->kept && m->shapes == shapes_ && SameBytes(m->bytes, results)) return *m;
    }
    auto m = std::make_unique<Measured>();
    const Outputs outputs = DecodeOutputs(results, model_.outputs.size());
    m->deltas = CompareOutputs(model_, baseline_, outputs, &bounds_, criteria_);
    m->diff = Differences(baseline_, outputs);
    m->differing_by_set.assign(sets_, 0);
    for (const auto& [key, value] : m->diff) ++m->differing_by_set[key.second / outputs.set_elements[key.first]];
    size_t size = 0;
    for (const auto& set : results) {
      for (const onnx_io::Tensor& t : set) size += t.bytes.size();
    }
    if (kept_bytes_ + size <= kept_limit_) {  // a model of large outputs and many distinct contents stays bounded
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
  size_t kept_limit_;
  const std::vector<OutputBound>& bounds_;
  const Criteria criteria_;
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

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string Join(const std::vector<std::string>& names, const char* separator) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

// A session tried: its measurement against the baseline, or ONNX Runtime's refusal.
struct Attempt {
  const Measured* measured = nullptr;  // null where refused
  Graph graph;
  std::string refusal, phase;
  bool built() const { return measured != nullptr; }
};

// One bisect: the sessions in order (baseline, completeness, all on, one on, leave one out, what refused steps
// need, pairs, the blacklist) and their steps.
class Bisector {
 public:
  Bisector(fused::ort::Runtime& runtime, const std::string& model_path, const BisectOptions& options)
      : runtime_(runtime), path_(model_path), options_(options),
        list_(options.optimizers != nullptr ? *options.optimizers : PinnedOptimizers()), names_(list_.names()),
        model_(onnx_io::ReadModel(model_path)), model_bytes_(onnx_io::ReadModelBytes(model_path)), saved_(options),
        session_(runtime, r_.ort_seconds, saved_) {}

  BisectResult Run() {
    const auto start = std::chrono::steady_clock::now();
    const double ort_at_start = runtime_.ort_seconds();
    Prepare();
    Baseline();
    Completeness();
    AllOn();
    for (const auto& name : names_) OneOn(name);
    for (const auto& name : names_) LeaveOneOut(name);
    for (Step& s : r_.steps) {
      if (s.kind == "one_on" && s.verdict == "refused") FindDependency(s.subject);
    }
    Pairs();
    Divergences();
    Blacklist();
    Reproductions();
    r_.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r_.inside_ort_seconds = runtime_.ort_seconds() - ort_at_start;
    return std::move(r_);
  }

 private:
  void Prepare() {
    if (options_.work_dir.empty()) throw InputError("bisect: no folder for the optimized models");
    InputOptions io{options_.generate, options_.seed, options_.int_range, options_.shapes, options_.dim_values,
                    options_.max_bytes};
    sets_ = options_.input_paths.empty() ? GenerateInputs(model_, io) : ReadInputs(model_, options_.input_paths, io);
    if (sets_.empty()) throw InputError(path_ + ": no input sets");
    std::filesystem::create_directories(options_.work_dir);
    r_.model = path_;
    r_.runtime_version = runtime_.version();
    r_.optimizer_list = "onnxruntime " + list_.onnxruntime + " (" + list_.source + " at " + list_.source_commit + ")";
    for (const InputSet& s : sets_) {
      if (!r_.sets_per_family.count(s.family)) r_.families.push_back(s.family);
      ++r_.sets_per_family[s.family];
      all_feeds_.push_back(s.feeds);
      for (const onnx_io::Tensor& t : s.feeds) input_bytes_ += t.bytes.size();
    }
    first_feeds_ = {sets_.front().feeds};
    if (options_.input_paths.empty()) {
      for (size_t i = 0; i < model_.inputs.size(); ++i) {
        const std::string note = InputRangeNote(model_, i, options_.int_range);
        if (!note.empty()) r_.input_notes.push_back(note);
      }
    }
  }

  fused::ort::SessionSpec Spec(const std::string& level, std::vector<std::string> disabled, const std::string& tag) {
    fused::ort::SessionSpec spec;
    spec.model = path_;
    spec.level = level;
    spec.disabled = std::move(disabled);
    spec.config = options_.session_config;
    spec.optimized_model = saved_.PathFor(tag);
    return spec;
  }

  // Built, and its graph is not the baseline's: worth timing.
  bool Fired(const Attempt& a) const { return a.built() && a.graph.digest != base_graph_.digest; }

  // Every set through the session. ONNX Runtime's refusal is the attempt's result.
  Attempt Try(const fused::ort::SessionSpec& spec) {
    Attempt a;
    try {
      const Results& results = session_.Evaluate(spec, all_feeds_, a.graph);
      a.measured = &measurements_->Of(results);
    } catch (const fused::ort::Refused& e) {
      a.refusal = e.what();
      a.phase = e.phase();
    }
    return a;
  }

  // The step's latency against the baseline's on the first input set, with the bootstrap interval of the median
  // ratio. A step whose saved graph is the baseline's is noise by construction; its statistics are kept beside.
  void TimeAgainstBaseline(const fused::ort::SessionSpec& spec, const Attempt& a, Step& s) {
    std::array<std::vector<std::vector<double>>, 2> ms;
    try {
      ms = session_.TimeAgainst(Spec("disabled", {}, "timing"), spec, first_feeds_.front(), options_.warmup,
                                options_.repeats);
    } catch (const fused::ort::Refused&) {
      return;  // built and ran every set a moment ago: a refusal now leaves the step untimed
    }
    const auto pooled = [](const std::vector<std::vector<double>>& pairs) {
      std::vector<double> all;
      for (const auto& p : pairs) all.insert(all.end(), p.begin(), p.end());
      return all;
    };
    s.perf = Summarize(pooled(ms[0]));
    s.baseline_perf = Summarize(pooled(ms[1]));
    const RatioInterval ci = BootstrapMedianRatio(ms[0], ms[1], options_.seed, r_.steps.size());
    s.time_saved = 1 - ci.ratio;
    s.time_saved_lo = 1 - ci.hi;
    s.time_saved_hi = 1 - ci.lo;
    s.same_graph = a.graph.digest == base_graph_.digest;
    const bool holds_zero = ci.lo <= 1 && 1 <= ci.hi;
    s.within_noise = s.same_graph || holds_zero;
    s.noise_reason = s.same_graph ? "same graph as the baseline" : (holds_zero ? "interval holds 0" : "interval excludes 0");
    if (s.same_graph) s.time_saved = 0;  // the statistics stay in the interval and the medians
  }

  // The step of an attempt; `timed`: its latency against the baseline too (where it built).
  Step MakeStep(const std::string& kind, const std::string& subject, const fused::ort::SessionSpec& spec,
                const Attempt& a, bool timed) {
    Step s;
    s.kind = kind;
    s.subject = subject;
    s.disabled = spec.disabled;
    s.level = spec.level;
    for (const auto& f : r_.families) s.differing_by_family[f] = 0;
    if (!a.built()) {
      s.verdict = "refused";
      s.refusal = a.refusal;
      s.refusal_phase = a.phase;
      ++r_.refused_steps;
      return s;
    }
    s.node_delta = NodeDelta(base_graph_.counts, a.graph.counts);
    for (const auto& [op, d] : s.node_delta) s.nodes_changed += std::llabs(d);
    s.fired = a.graph.digest != base_graph_.digest;
    s.deltas = a.measured->deltas;
    double judged_units = 0;
    for (const auto& d : s.deltas) {
      s.max_units = std::max(s.max_units, d.max_units);
      if (d.waived_by_tolerance) continue;
      if (d.criterion == "bound") s.r = std::max(s.r, d.r);
      if (d.criterion != "bound") judged_units = std::max(judged_units, d.max_units);
    }
    for (size_t k = 0; k < sets_.size(); ++k) s.differing_by_family[sets_[k].family] += a.measured->differing_by_set[k];
    if (timed) TimeAgainstBaseline(spec, a, s);
    if ((kind == "all_on" || kind == "one_on" || kind == "with_dependency") && !a.measured->diff.empty()) {
      moved_.push_back({kind, subject, spec, a.graph, MovingSets(*a.measured)});
    }
    s.loss = judged_units - options_.perf_weight * s.time_saved;
    s.over = s.loss > options_.threshold || s.r - options_.perf_weight * s.time_saved > 1;
    return s;
  }

  void Baseline() {
    const auto spec = Spec("disabled", {}, "baseline");
    const Results* results = nullptr;
    try {
      results = &session_.Evaluate(spec, all_feeds_, base_graph_);
    } catch (const fused::ort::Refused& e) {
      throw InputError(path_ + ": the engine refuses the model itself (level disabled, every transformer off; at " +
                       e.phase() + "): " + e.what());
    }
    baseline_ = DecodeOutputs(*results, model_.outputs.size());
    CheckKeptSize(*results);
    if (!options_.input_paths.empty()) {
      ExpectedTolerances(path_, options_, r_.expected);
      for (size_t k = 0; k < sets_.size(); ++k) CheckExpected(model_, sets_[k], (*results)[k], r_.expected);
    }
    // Distinct output contents kept to recognize repeats: 256 MiB, or a quarter of a smaller budget.
    const uint64_t cap = uint64_t{256} << 20;
    const size_t kept = static_cast<size_t>(options_.max_bytes == 0 ? cap : std::min(cap, options_.max_bytes / 4));
    ComputeBounds();
    measurements_ = std::make_unique<Measurements>(model_, baseline_, sets_.size(), kept, bounds_,
                                                   Criteria{options_.threshold, options_.atol, options_.rtol});
    Attempt a;
    a.graph = base_graph_;
    a.measured = &measurements_->Of(*results);
    r_.steps.push_back(MakeStep("baseline", "", spec, a, false));
  }

  // The outputs as ONNX Runtime returns them and as doubles (the baseline and one step) within --max-bytes.
  void CheckKeptSize(const Results& results) {
    uint64_t returned = 0, elements = 0, largest = 0;
    size_t largest_at = 0;
    for (const auto& set : results) {
      for (size_t o = 0; o < set.size(); ++o) {
        returned += set[o].bytes.size();
        elements += set[o].elements();
        if (set[o].bytes.size() >= largest) largest = set[o].bytes.size(), largest_at = o;
      }
    }
    const uint64_t total = input_bytes_ + returned + 16 * elements;
    if (options_.max_bytes > 0 && total > options_.max_bytes) {
      const onnx_io::Tensor& t = results.front()[largest_at];
      throw InputError(path_ + ": output '" + model_.outputs[largest_at].name + "' (" + onnx_io::to_string(t.type) + " " +
                       onnx_io::DimsText(t.dims) + ", " + std::to_string(t.bytes.size()) + " bytes a set): the inputs, " +
                       std::to_string(results.size()) + " sets of outputs and the outputs kept for comparison need " +
                       std::to_string(total) + " bytes, over --max-bytes " + std::to_string(options_.max_bytes));
    }
  }

  // Level all with every listed name disabled must be level disabled: otherwise the list is stale.
  void Completeness() {
    const auto spec = Spec("all", names_, "completeness");
    const Attempt a = Try(spec);
    if (!a.built()) {
      throw InputError(path_ + ": the engine refuses the model at level all even with all " +
                       std::to_string(names_.size()) + " listed transformers disabled (at " + a.phase +
                       "), where level disabled builds: the refusal comes from a part no name disables, so a bisect "
                       "cannot separate the transformers: " + a.refusal);
    }
    // The timing control: the baseline's graph in a session of its own, timed against the baseline.
    Step s = MakeStep("completeness", "", spec, a, true);
    r_.timing_control_agrees = !s.perf || s.noise_reason != "interval excludes 0";
    r_.steps.front().perf = s.baseline_perf;
    r_.steps.push_back(s);
    if (s.fired || s.max_units > 0 || !a.measured->diff.empty()) {
      std::string what;
      for (const auto& [op, d] : s.node_delta) what += (what.empty() ? "" : ", ") + op + (d > 0 ? " +" : " ") + std::to_string(d);
      throw InputError(path_ + ": the transformer list (" + r_.optimizer_list +
                       ") is stale for this ONNX Runtime: with all " + std::to_string(names_.size()) +
                       " names disabled, level all still differs from level disabled (nodes: " +
                       (what.empty() ? "same" : what) + "; " + std::to_string(a.measured->diff.size()) +
                       " output elements); a transformer is missing from the list, so a bisect would pin nothing");
    }
  }

  void AllOn() {
    const auto spec = Spec("all", {}, "all_on");
    all_on_ = Try(spec);
    all_index_ = r_.steps.size();
    r_.steps.push_back(MakeStep("all_on", "", spec, all_on_, true));
  }

  // Each name alone. Timed only where it fired (otherwise its session is the baseline's graph).
  void OneOn(const std::string& name) {
    const auto spec = Spec("all", AllBut(names_, {name}), "one_on_" + name);
    const Attempt a = Try(spec);
    Step s = MakeStep("one_on", name, spec, a, Fired(a));
    if (a.built()) {
      if (s.fired) fired_.push_back(name);
      if (!a.measured->diff.empty()) single_diffs_.push_back(&a.measured->diff);
      single_by_name_[name] = &a.measured->diff;
      s.verdict = !s.fired && a.measured->diff.empty() ? "not_fired" : (s.over ? "blacklist" : Kept(s));
      if (s.verdict == "blacklist") AddToBlacklist(name, MovesText(s));
    }
    r_.steps.push_back(std::move(s));
  }

  // Leave one out: the usual manual search. A name "restores" when disabling it alone brings all-on within the
  // threshold; with two independent causes, neither does. Where all-on is refused, a name whose absence makes it
  // build "restores_build".
  void LeaveOneOut(const std::string& name) {
    const auto spec = Spec("all", {name}, "leave_one_out_" + name);
    const Attempt a = Try(spec);
    Step s = MakeStep("leave_one_out", name, spec, a, false);
    if (!a.built()) {
      r_.steps.push_back(std::move(s));
      return;
    }
    if (!all_on_.built()) {
      s.verdict = "restores_build";
      if (s.fired && !Contains(fired_, name)) fired_.push_back(name);
      r_.steps.push_back(std::move(s));
      return;
    }
    // fired: the optimized model differs from all-on's (leaving it out changed the graph).
    s.node_delta = NodeDelta(all_on_.graph.counts, a.graph.counts);
    s.nodes_changed = 0;
    for (const auto& [op, d] : s.node_delta) s.nodes_changed += std::llabs(d);
    s.fired = a.graph.digest != all_on_.graph.digest;
    const Step& all_step = r_.steps[all_index_];
    s.verdict = all_step.over && !s.over ? "restores" : "no_effect";
    // A name that changes all-on's graph when left out acts there, though perhaps only after another (a fusion
    // that needs ConvBNFusion's fold first): a pair candidate like those that fire alone.
    if (s.fired && !Contains(fired_, name)) fired_.push_back(name);
    r_.steps.push_back(std::move(s));
  }

  // A refused one-on step: the smallest set of other names that, enabled too, makes the session build. Singles in
  // the list's order, then pairs among the names that act on this model (fired alone or in all-on), within the
  // budget; the first that builds is measured as a step of its own.
  void FindDependency(const std::string& name) {
    std::vector<std::vector<std::string>> candidates;
    for (const auto& n : names_) {
      if (n != name) candidates.push_back({n});
    }
    for (size_t i = 0; i < fired_.size(); ++i) {
      for (size_t j = i + 1; j < fired_.size(); ++j) {
        if (fired_[i] != name && fired_[j] != name) candidates.push_back({fired_[i], fired_[j]});
      }
    }
    int tried = 0;
    std::vector<std::string> found;
    Attempt built;
    fused::ort::SessionSpec spec;
    for (const auto& c : candidates) {
      if (tried >= options_.dependency_budget) break;
      ++tried;
      std::vector<std::string> enabled = c;
      enabled.push_back(name);
      spec = Spec("all", AllBut(names_, enabled), "with_dependency_" + name + "_" + Join(c, "_"));
      built = Try(spec);
      if (built.built()) {
        found = c;
        break;
      }
    }
    Step& refused = StepOf("one_on", name);
    refused.dependency = found;
    refused.dependency_sessions = tried;
    if (found.empty()) return;
    Step s = MakeStep("with_dependency", name + "+" + Join(found, "+"), spec, built, Fired(built));
    // Blacklisted where it moves the outputs beyond what its dependency moves alone.
    std::vector<const Diff*> alone;
    for (const auto& d : found) {
      if (single_by_name_.count(d)) alone.push_back(single_by_name_[d]);
    }
    const bool adds = alone.size() != found.size() || !Explains(alone, built.measured->diff);
    s.verdict = adds && s.over ? "blacklist" : Kept(s);
    if (s.verdict == "blacklist") AddToBlacklist(name, MovesText(s) + " with " + Join(found, "+") + " enabled");
    r_.steps.push_back(std::move(s));
  }

  // Pairs, only where the singles do not explain all-on, only among names that fired (alone, or in all-on as seen
  // by leaving them out). Nothing to explain where all-on is refused.
  void Pairs() {
    r_.explained_by_singles = !all_on_.built() || Explains(single_diffs_, all_on_.measured->diff);
    if (r_.explained_by_singles) return;
    for (size_t i = 0; i < fired_.size(); ++i) {
      for (size_t j = i + 1; j < fired_.size(); ++j) {
        if (r_.pairs_run >= options_.max_pairs) {
          ++r_.pairs_skipped;
          continue;
        }
        ++r_.pairs_run;
        const auto spec = Spec("all", AllBut(names_, {fired_[i], fired_[j]}), "pair_" + fired_[i] + "_" + fired_[j]);
        const Attempt a = Try(spec);
        Step s = MakeStep("pair", fired_[i] + "+" + fired_[j], spec, a, false);
        if (a.built() && single_by_name_.count(fired_[i]) && single_by_name_.count(fired_[j])) {
          // additive: the pair moves exactly what its two singles move; interacts: it moves something else.
          const bool additive = Explains({single_by_name_[fired_[i]], single_by_name_[fired_[j]]}, a.measured->diff);
          s.verdict = additive ? "additive" : (s.over ? "interacts_blacklist" : "interacts");
        } else if (a.built()) {
          s.verdict = s.over ? "interacts_blacklist" : "interacts";
        }
        if (s.verdict == "interacts_blacklist" && !Contains(r_.blacklist, fired_[i]) && !Contains(r_.blacklist, fired_[j])) {
          AddToBlacklist(fired_[i], "interacts with " + fired_[j]);  // the interaction needs both; one removes it
        }
        r_.steps.push_back(std::move(s));
      }
    }
  }

  // The blacklist's own session, and proof that each name on it is one ONNX Runtime knows. Where that session is
  // refused, the names it needs off are added in turn (those whose absence lets all-on build, those whose
  // dependency the blacklist disables, the refused ones without a dependency found) until it builds.
  void Blacklist() {
    auto spec = Spec("all", r_.blacklist, "blacklist");
    Attempt a = Try(spec);
    for (int stage = 0; !a.built() && stage < 3; ++stage) {
      if (!Extend(stage)) continue;
      spec = Spec("all", r_.blacklist, "blacklist");
      a = Try(spec);
    }
    for (const Step& s : r_.steps) {
      if (s.kind == "one_on" && s.verdict == "refused" && !s.dependency.empty() && !Contains(r_.blacklist, s.subject)) {
        r_.dependency_notes.push_back(s.subject + " needs " + Join(s.dependency, " and ") + " (alone it is refused)");
      }
    }
    r_.blacklist_config = std::string(fused::ort::kDisableOptimizersKey) + "=" +
                          fused::ort::DisableOptimizersValue(r_.blacklist);
    Step s = MakeStep("blacklist", "", spec, a, true);
    r_.blacklist_builds = a.built();
    r_.blacklist_refusal = a.refusal;
    r_.blacklist_within_tolerance = a.built() && !s.over;
    if (a.built()) s.verdict = r_.blacklist_within_tolerance ? "within_tolerance" : "over_threshold";
    r_.steps.push_back(std::move(s));
    for (const auto& name : r_.blacklist) {
      std::vector<std::string> without;
      for (const auto& n : r_.blacklist) {
        if (n != name) without.push_back(n);
      }
      Graph other;
      bool changes = true;  // a session refused without it: the name matters to ONNX Runtime
      try {
        session_.Evaluate(Spec("all", without, "blacklist_without_" + name), first_feeds_, other);
        changes = !a.built() || other.digest != a.graph.digest;
      } catch (const fused::ort::Refused&) {
      }
      r_.blacklist_name_effective[name] = changes;
    }
  }

  // Adds the names of one stage to the blacklist; false when it added none.
  bool Extend(int stage) {
    size_t before = r_.blacklist.size();
    for (const Step& s : r_.steps) {
      if (stage == 0 && s.kind == "leave_one_out" && s.verdict == "restores_build") {
        AddToBlacklist(s.subject, "all-on is refused with it");
      }
      if (s.kind != "one_on" || s.verdict != "refused") continue;
      const bool needs_disabled = std::any_of(s.dependency.begin(), s.dependency.end(),
                                              [&](const std::string& d) { return Contains(r_.blacklist, d); });
      if (stage == 1 && needs_disabled) AddToBlacklist(s.subject, "needs " + Join(s.dependency, " and ") + ", which the blacklist disables");
      if (stage == 2 && s.dependency.empty()) AddToBlacklist(s.subject, "refused alone, no dependency found");
    }
    return r_.blacklist.size() > before;
  }

  void AddToBlacklist(const std::string& name, const std::string& reason) {
    if (Contains(r_.blacklist, name)) return;
    r_.blacklist.push_back(name);
    r_.blacklist_reasons[name] = reason;
  }

  static std::string MovesText(const Step& s) {
    const OutputDelta* d = LargestDelta(s);
    for (const OutputDelta& b : s.deltas) {
      if (b.criterion == "bound" && b.r > 1 && !b.waived_by_tolerance) {
        return fmt::format("moves the outputs beyond the rounding-error bound (r {:.4g} on '{}')", b.r, b.output);
      }
    }
    return fmt::format("moves the outputs ({:.4g} {})", s.max_units, d != nullptr ? d->unit : "");
  }

  // A step within its criteria: kept, or kept because --atol/--rtol waived what was beyond them.
  static std::string Kept(const Step& s) {
    for (const OutputDelta& d : s.deltas) {
      if (d.waived_by_tolerance) return "waived_by_tolerance";
    }
    return "keep";
  }

  // Every float output's rounding-error bound over every input set, or why it has none (bounds.h).
  void ComputeBounds() {
    bounds_.assign(model_.outputs.size(), OutputBound{});
    if (!options_.bounds) {
      for (OutputBound& b : bounds_) b.uncovered = "--no-bounds";
      return;
    }
    std::vector<std::string> names;
    for (const auto& o : model_.outputs) names.push_back(o.name);
    const BoundEvaluator evaluator(onnx_io::ParseGraph(model_bytes_, path_));
    for (size_t k = 0; k < sets_.size(); ++k) {
      const std::vector<BoundedTensor> b = evaluator.Evaluate(sets_[k].feeds, names, EvaluationBudget());
      for (size_t o = 0; o < b.size(); ++o) AppendBound(bounds_[o], b[o], baseline_.set_elements[o]);
    }
  }

  // What one bound evaluation may hold at once: a quarter of --max-bytes (1 GiB without a limit).
  uint64_t EvaluationBudget() const { return options_.max_bytes > 0 ? options_.max_bytes / 4 : uint64_t{1} << 30; }

  static void AppendBound(OutputBound& out, const BoundedTensor& t, size_t elements) {
    if (!out.uncovered.empty()) return;
    out.uncovered = t.uncovered;
    if (out.uncovered.empty() && t.base.size() != elements) {
      out.uncovered = "the evaluated shape " + onnx_io::DimsText(t.dims) + " differs from ONNX Runtime's output";
    }
    if (!out.uncovered.empty()) {
      out.baseline.clear();
      out.step.clear();
      return;
    }
    out.baseline.insert(out.baseline.end(), t.base.begin(), t.base.end());
    out.step.insert(out.step.end(), t.legal.begin(), t.legal.end());
  }

  Step& StepOf(const std::string& kind, const std::string& subject) {
    for (Step& s : r_.steps) {
      if (s.kind == kind && s.subject == subject) return s;
    }
    throw std::logic_error("no step " + kind + " " + subject);
  }

  // The input sets a step moves the outputs on, the first kBoundarySets of them: where its difference starts is
  // looked for where it reaches the outputs, and a few sets show it (each fetch runs every set chosen).
  static constexpr size_t kBoundarySets = 4;
  static std::vector<size_t> MovingSets(const Measured& m) {
    std::vector<size_t> sets;
    for (size_t k = 0; k < m.differing_by_set.size() && sets.size() < kBoundarySets; ++k) {
      if (m.differing_by_set[k] > 0) sets.push_back(k);
    }
    return sets;
  }

  // The first divergent boundary of every step that moves the outputs (FindDivergence), on the sets it moves them
  // on; the bounds of every candidate tensor on every set chosen computed once for all of them.
  void Divergences() {
    if (moved_.empty()) return;
    const onnx_io::GraphContent graph = onnx_io::ParseGraph(model_bytes_, path_);
    const std::map<size_t, std::map<std::string, OutputBound>> bounds = BoundaryBounds(graph);
    for (const Moved& m : moved_) {
      std::map<std::string, OutputBound> step_bounds;
      std::vector<std::vector<onnx_io::Tensor>> feeds;
      for (size_t k : m.sets) {
        feeds.push_back(all_feeds_[k]);
        for (const auto& [name, b] : bounds.at(k)) Concatenate(step_bounds[name], b);
      }
      DivergenceRequest q;
      q.model = &model_;
      q.model_bytes = model_bytes_;
      q.graph = &graph;
      q.bounds = &step_bounds;
      q.criteria = Criteria{options_.threshold, options_.atol, options_.rtol};
      q.baseline_tensors = base_graph_.produced;
      q.step_tensors = m.graph.produced;
      q.step_digest = m.graph.digest;
      q.baseline = Spec("disabled", {}, "divergence_baseline");
      q.step = m.spec;
      q.step.optimized_model = saved_.PathFor("divergence_" + m.kind + "_" + m.subject);
      q.scratch = (std::filesystem::path(options_.work_dir) / "divergence.onnx").string();
      q.run = [&](const fused::ort::SessionSpec& spec, uint64_t& digest) -> const Results& {
        Graph g;
        const Results& results = session_.Evaluate(spec, feeds, g);
        digest = g.digest;
        return results;
      };
      Divergence d = FindDivergence(q);
      d.sets = m.sets.size();
      StepOf(m.kind, m.subject).divergence = std::move(d);
    }
    std::filesystem::remove((std::filesystem::path(options_.work_dir) / "divergence.onnx"));
  }

  static void Concatenate(OutputBound& into, const OutputBound& b) {
    if (!into.uncovered.empty()) return;
    if (!b.uncovered.empty()) {
      into = b;
      return;
    }
    into.baseline.insert(into.baseline.end(), b.baseline.begin(), b.baseline.end());
    into.step.insert(into.step.end(), b.step.begin(), b.step.end());
  }

  // Per input set chosen by a moving step: the bounds of the outputs and of every tensor a moving step may fetch,
  // one evaluation per set.
  std::map<size_t, std::map<std::string, OutputBound>> BoundaryBounds(const onnx_io::GraphContent& graph) {
    std::vector<std::string> names;
    for (const auto& o : model_.outputs) names.push_back(o.name);
    std::set<size_t> sets;
    for (const Moved& m : moved_) {
      sets.insert(m.sets.begin(), m.sets.end());
      for (const auto& t : BoundaryCandidates(model_, base_graph_.produced, m.graph.produced)) {
        if (std::find(names.begin(), names.end(), t) == names.end()) names.push_back(t);
      }
    }
    std::map<size_t, std::map<std::string, OutputBound>> out;
    std::unique_ptr<BoundEvaluator> evaluator;
    if (options_.bounds) evaluator = std::make_unique<BoundEvaluator>(graph);
    for (size_t k : sets) {
      std::map<std::string, OutputBound>& at = out[k];
      if (!evaluator) {
        for (const auto& t : names) at[t] = OutputBound{{}, {}, "--no-bounds"};
        continue;
      }
      const std::vector<BoundedTensor> b = evaluator->Evaluate(sets_[k].feeds, names, EvaluationBudget());
      for (size_t i = 0; i < b.size(); ++i) AppendBound(at[names[i]], b[i], b[i].value.size());
    }
    return out;
  }

  // A standalone reproduction of all-on's refusal and of each refused one-on step (at most kReproductions).
  void Reproductions() {
    constexpr int kReproductions = 20;
    int written = 0;
    for (Step& s : r_.steps) {
      if (s.verdict != "refused" || (s.kind != "all_on" && s.kind != "one_on") || written >= kReproductions) continue;
      if (r_.repro_dir.empty()) r_.repro_dir = ReproductionRoot(options_.repro_dir);
      fused::ort::SessionSpec spec;
      spec.model = path_;
      spec.level = s.level;
      spec.disabled = s.disabled;
      spec.config = options_.session_config;
      const std::string tag = std::to_string(++written) + "_" + s.kind + (s.subject.empty() ? "" : "_" + s.subject);
      s.reproduction = WriteReproduction((std::filesystem::path(r_.repro_dir) / tag).string(), spec, s.refusal_phase,
                                         s.refusal, all_feeds_, r_.runtime_version);
    }
  }

  fused::ort::Runtime& runtime_;
  const std::string path_;
  const BisectOptions& options_;
  const OptimizerList& list_;
  const std::vector<std::string> names_;
  const onnx_io::ModelInfo model_;
  const std::string model_bytes_;
  BisectResult r_;
  SavedModels saved_;
  Session session_;
  std::vector<InputSet> sets_;
  std::vector<std::vector<onnx_io::Tensor>> all_feeds_, first_feeds_;  // built once for every session
  uint64_t input_bytes_ = 0;
  Graph base_graph_;
  Outputs baseline_;
  std::vector<OutputBound> bounds_;
  std::unique_ptr<Measurements> measurements_;
  Attempt all_on_;
  size_t all_index_ = 0;
  std::vector<const Diff*> single_diffs_;
  std::map<std::string, const Diff*> single_by_name_;
  std::vector<std::string> fired_;
  struct Moved {
    std::string kind, subject;
    fused::ort::SessionSpec spec;
    Graph graph;
    std::vector<size_t> sets;  // the input sets its boundaries are fetched on
  };
  std::vector<Moved> moved_;  // the steps that move the outputs, for their first divergent boundary
};

}  // namespace

BisectResult Bisect(fused::ort::Runtime& runtime, const std::string& model_path, const BisectOptions& options) {
  return Bisector(runtime, model_path, options).Run();
}

}  // namespace fusediff::bisect
