// `fusediff bisect MODEL.onnx`: which ONNX Runtime transformer moves the outputs. Part of fusediff-bisect (bisect_main.cpp):
// nothing here may reach oneDNN, MPFR or OpenSSL (export-onnx, which needs the reference, is cli_export_onnx.cpp).
#include <fmt/format.h>
#include <stdlib.h>

#include <chrono>
#include <algorithm>
#include <map>
#include <optional>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>

#include "command.h"
#include "fusediff/bisect/bisect.h"
#include "fusediff/bisect/bisect_report.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {

struct BisectArgs {
  std::string model, json, junit, html, work_dir, optimizer_list, int_range;
  std::vector<std::string> inputs, shapes, session_config, dim_shapes;
  int generate = 4;
  uint64_t seed = 1;
  double perf_weight = 0.0, threshold = 0.5;
  int max_pairs = 10, warmup = 3, repeats = 15, dependency_budget = 100;
  uint64_t max_bytes = kDefaultMaxBytes;
  std::optional<double> rtol, atol, expected_rtol, expected_atol;
  bool no_bounds = false;
};

int64_t Integer(const std::string& text, const std::string& field) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw InputError(field + ": '" + text + "' is not an integer");
  return v;
}

// --shape NAME=D0,D1,... (and --shapes NAME=V1,V2,..., `flag`)
std::map<std::string, std::vector<int64_t>> ParseShapes(const std::vector<std::string>& given,
                                                        const std::string& flag = "--shape") {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& g : given) {
    const size_t eq = g.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError(flag + ": '" + g + "': expected NAME=D0,D1,...");
    std::vector<int64_t> dims;
    std::stringstream s(g.substr(eq + 1));
    std::string d;
    while (std::getline(s, d, ',')) {
      dims.push_back(Integer(d, flag + " " + g.substr(0, eq)));
      if (dims.back() < 0) throw InputError(flag + " " + g.substr(0, eq) + ": dimension " + d + " is negative");
    }
    shapes[g.substr(0, eq)] = dims;
  }
  return shapes;
}

// --session-config KEY=VALUE, repeated. The disabled-optimizer key is the bisect's own.
std::vector<std::pair<std::string, std::string>> ParseSessionConfig(const std::vector<std::string>& given) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& g : given) {
    const size_t eq = g.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--session-config: '" + g + "': expected KEY=VALUE");
    if (g.substr(0, eq) == fused::ort::kDisableOptimizersKey) {
      throw InputError("--session-config: " + std::string(fused::ort::kDisableOptimizersKey) +
                       " is what the bisect sets itself");
    }
    out.emplace_back(g.substr(0, eq), g.substr(eq + 1));
  }
  return out;
}

// --int-range LO:HI, the half-open [LO, HI).
bisect::IntRange ParseIntRange(const std::string& text) {
  bisect::IntRange r;
  if (text.empty()) return r;
  const size_t colon = text.find(':');
  if (colon == std::string::npos) throw InputError("--int-range: '" + text + "': expected LO:HI");
  r.lo = Integer(text.substr(0, colon), "--int-range LO");
  r.hi = Integer(text.substr(colon + 1), "--int-range HI");
  if (r.hi <= r.lo) throw InputError("--int-range: HI must be greater than LO (the range is [LO, HI))");
  return r;
}

// A scratch folder for the optimized models, removed when the bisect ends (unless --work-dir names one).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& given) {
    if (!given.empty()) {
      path_ = given;
      return;
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "fusediff-bisect-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a scratch folder in /tmp");
    path_ = tmpl;
    owned_ = true;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (owned_) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--optimizer-list: cannot read '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void CheckArgs(const BisectArgs& a) {
  if (!a.json.empty()) CheckOutputPath(a.json, "--json");
  if (!a.junit.empty()) CheckOutputPath(a.junit, "--junit");
  if (!a.html.empty()) CheckOutputPath(a.html, "--html");
  if (a.generate < 1 || a.generate > 1000) throw InputError("--generate: expected 1 to 1000 sets per family");
  if (a.repeats < 1 || a.warmup < 0) throw InputError("--repeats must be >= 1 and --warmup >= 0");
  if (!(a.threshold >= 0)) throw InputError("--threshold: expected a non-negative number of output steps");
  if (a.dependency_budget < 0) throw InputError("--dependency-budget: expected a number of sessions >= 0");
  for (const auto& [name, v] : {std::pair{"--rtol", a.rtol}, {"--atol", a.atol}, {"--expected-rtol", a.expected_rtol},
                                {"--expected-atol", a.expected_atol}}) {
    if (v && !(*v >= 0)) throw InputError(std::string(name) + ": expected a number >= 0");
  }
  if (!a.dim_shapes.empty() && !a.inputs.empty()) {
    throw InputError("--shapes: the inputs are generated per shape; it does not combine with --inputs");
  }
}

// Every option but the scratch folder, parsed before the runtime starts: bad input exits 2 first.
bisect::BisectOptions OptionsOf(const BisectArgs& a) {
  bisect::BisectOptions options;
  options.input_paths = a.inputs;
  options.shapes = ParseShapes(a.shapes);
  options.session_config = ParseSessionConfig(a.session_config);
  options.int_range = ParseIntRange(a.int_range);
  options.max_bytes = a.max_bytes;
  options.dependency_budget = a.dependency_budget;
  options.rtol = a.rtol;
  options.atol = a.atol;
  options.expected_rtol = a.expected_rtol;
  options.expected_atol = a.expected_atol;
  options.bounds = !a.no_bounds;
  if (!a.work_dir.empty()) options.repro_dir = (std::filesystem::path(a.work_dir) / "reproductions").string();
  options.generate = a.generate;
  options.seed = a.seed;
  options.perf_weight = a.perf_weight;
  options.threshold = a.threshold;
  options.max_pairs = a.max_pairs;
  options.warmup = a.warmup;
  options.repeats = a.repeats;
  options.keep_optimized_models = !a.work_dir.empty();
  return options;
}

// --shapes NAME=V1,V2 (repeatable): every combination of the named symbolic dimensions' values, each a dimension
// of a model input. Without --shapes one empty combination: the bisect as always.
std::vector<std::map<std::string, int64_t>> DimCombinations(const std::vector<std::string>& given,
                                                            const onnx_io::ModelInfo& model) {
  std::vector<std::map<std::string, int64_t>> combos{{}};
  for (const auto& [name, values] : ParseShapes(given, "--shapes")) {
    bool symbolic = false;
    for (const auto& params : model.input_dim_params) symbolic |= std::count(params.begin(), params.end(), name) > 0;
    if (!symbolic) throw InputError("--shapes: '" + name + "' is not a symbolic dimension of any input of " + model.path);
    if (values.empty()) throw InputError("--shapes " + name + ": no values");
    std::vector<std::map<std::string, int64_t>> next;
    for (const auto& c : combos) {
      for (int64_t v : values) {
        if (v < 1) throw InputError("--shapes " + name + ": " + std::to_string(v) + " is not a positive size");
        auto with = c;
        with[name] = v;
        next.push_back(with);
      }
    }
    combos = std::move(next);
  }
  return combos;
}

// One bisect per shape on one runtime; the runtime's start and close are counted in the first and the last.
std::vector<bisect::BisectResult> RunBisects(const BisectArgs& a, bisect::BisectOptions options,
                                             const std::vector<std::map<std::string, int64_t>>& shapes) {
  const auto start = std::chrono::steady_clock::now();
  const std::unique_ptr<fused::ort::Runtime> runtime = fused::ort::StartRuntime();
  const double start_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double start_inside = runtime->ort_seconds();
  ScratchDir scratch(a.work_dir);
  options.work_dir = scratch.path();
  std::vector<bisect::BisectResult> results;
  for (const auto& shape : shapes) {
    options.dim_values = shape;
    results.push_back(bisect::Bisect(*runtime, a.model, options));
  }
  results.front().runtime_start_seconds = start_seconds;
  results.front().runtime_start_inside_ort_seconds = start_inside;
  // The runtime's teardown is part of the bisect's wall time: closed here, timed, before the reports are written.
  const double before_close = runtime->ort_seconds();
  const auto close = std::chrono::steady_clock::now();
  runtime->Close();
  results.back().runtime_close_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - close).count();
  results.back().runtime_close_inside_ort_seconds = runtime->ort_seconds() - before_close;
  return results;
}

int DoBisect(const BisectArgs& a, const CommandContext& context) {
  CheckArgs(a);
  CheckFileWithinBudget(a.model, a.max_bytes);  // the model is read whole
  bisect::OptimizerList custom;
  bisect::BisectOptions options = OptionsOf(a);
  if (!a.optimizer_list.empty()) {
    custom = bisect::ParseOptimizerList(ReadText(a.optimizer_list), a.optimizer_list);
    options.optimizers = &custom;
  }
  const onnx_io::ModelInfo model = onnx_io::ReadModel(a.model);  // a malformed model is refused before the runtime starts
  const auto shapes = DimCombinations(a.dim_shapes, model);
  const std::vector<bisect::BisectResult> results = RunBisects(a, options, shapes);
  const Provenance provenance = driver::BuildProvenance(JoinCommandLine(context.args));
  const bisect::BisectReportOptions ro{a.threshold, a.perf_weight, a.seed, a.max_bytes};
  bool blacklist = false;
  for (const auto& r : results) blacklist |= !r.blacklist.empty();
  if (a.dim_shapes.empty()) {
    const bisect::BisectResult& r = results.front();
    context.out << bisect::ToText(r);
    if (!a.json.empty()) reports::WriteFileAtomically(a.json, bisect::ToJson(r, provenance, ro).dump(2) + "\n");
    if (!a.junit.empty()) reports::WriteFileAtomically(a.junit, bisect::ToJUnit(r));
    if (!a.html.empty()) reports::WriteFileAtomically(a.html, bisect::ToHtml(r));
    return blacklist ? kExitFail : kExitPass;
  }
  const bisect::ShapeResults per_shape = bisect::PerShape(shapes, results);
  context.out << bisect::ToText(per_shape);
  if (!a.json.empty()) reports::WriteFileAtomically(a.json, bisect::ToJson(per_shape, provenance, ro).dump(2) + "\n");
  if (!a.junit.empty()) reports::WriteFileAtomically(a.junit, bisect::ToJUnit(per_shape));
  if (!a.html.empty()) reports::WriteFileAtomically(a.html, bisect::ToHtml(per_shape));
  return blacklist ? kExitFail : kExitPass;
}

}  // namespace

Command AddBisectCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "bisect", "Which ONNX Runtime graph transformer moves a model's outputs: baseline, one on, leave one out, pairs, "
                "blacklist (exit 0 none over threshold, 1 blacklist non-empty, 2 bad input)");
  auto a = std::make_shared<BisectArgs>();
  cmd->add_option("model", a->model, "The ONNX model")->required();
  cmd->add_option("--inputs", a->inputs,
                  "Input files (.pb, .npy, raw .raw/.bin with --shape) or folders (ONNX test-data layout: input_K.pb "
                  "binds by name, or unnamed to the K-th non-initializer input; output_K.pb is checked)");
  cmd->add_option("--shape", a->shapes, "NAME=D0,D1,...: the shape of a raw input file or of a generated input");
  cmd->add_option("--shapes", a->dim_shapes,
                  "NAME=V1,V2,...: bisect once per value of the symbolic dimension NAME of the model's inputs (repeat "
                  "for more dimensions: every combination); the report gives each shape's decisions and the fusions "
                  "whose decision changes with shape");
  cmd->add_option("--session-config", a->session_config,
                  "KEY=VALUE: a session config entry every session gets (e.g. optimization.enable_gelu_approximation=1)");
  cmd->add_option("--int-range", a->int_range,
                  "LO:HI: generated integer inputs the model gives no range for take [LO, HI) (default 0:16; a "
                  "Gather's indices take its table's rows, a *mask* input 0 or 1)");
  cmd->add_option("--max-bytes", a->max_bytes,
                  "Refuse a model, inputs, outputs and kept outputs beyond this many bytes (default " +
                      std::to_string(kDefaultMaxBytes) + " = 4 GiB; 0: no limit)");
  cmd->add_option("--dependency-budget", a->dependency_budget,
                  "Sessions per refused step in the search for the transformers it needs (default 100)");
  cmd->add_option("--atol", a->atol,
                  "Waive, labelled \"waived by tolerance\", an output whose every element beyond its criterion has "
                  "|delta| <= atol or <= rtol |baseline| (Polygraphy's semantics; the one not given: 1e-5). Default: none");
  cmd->add_option("--rtol", a->rtol, "The waiver's relative tolerance (with --atol; Polygraphy's semantics)");
  cmd->add_flag("--no-bounds", a->no_bounds,
               "Judge float outputs by --threshold in their ulps instead of their rounding-error bound");
  cmd->add_option("--expected-rtol", a->expected_rtol,
                  "Expected-output check: relative tolerance (default: data.json, else 1e-3)");
  cmd->add_option("--expected-atol", a->expected_atol,
                  "Expected-output check: absolute tolerance (default: data.json, else 1e-7)");
  cmd->add_option("--generate", a->generate, "Generated input sets per family (default 4)");
  cmd->add_option("--seed", a->seed, "Seed of the generated inputs");
  cmd->add_option("--perf-weight", a->perf_weight, "w in loss = max|delta| - w * time saved / baseline (default 0)");
  cmd->add_option("--threshold", a->threshold,
                  "Blacklist a transformer whose loss exceeds this in an output's units (QDQ, integer, and float outputs "
                  "without a rounding-error bound; default 0.5). Float outputs with a bound: r > 1");
  cmd->add_option("--max-pairs", a->max_pairs, "At most this many pair sessions (default 10)");
  cmd->add_option("--warmup", a->warmup, "Unmeasured runs before timing (default 3)");
  cmd->add_option("--repeats", a->repeats, "Timed runs per measured session (default 15)");
  cmd->add_option("--json", a->json, "Write fusediff-bisect/3 JSON (with --shapes: fusediff-bisect-shapes/1, one per shape)");
  cmd->add_option("--junit", a->junit, "Write JUnit XML (one test case per transformer)");
  cmd->add_option("--html", a->html, "Write the HTML section (table and delta-acc vs delta-perf plot)");
  cmd->add_option("--work-dir", a->work_dir,
                  "Keep the optimized models ONNX Runtime saves in this folder, and reproductions of refused sessions "
                  "in its reproductions/ (without it: a fusediff-repro-XXXXXX folder in the temporary directory)");
  cmd->add_option("--optimizer-list", a->optimizer_list,
                  "A fusediff-ort-optimizers/1 list instead of the pinned one (checked for completeness)");
  return Command{cmd, [a](const CommandContext& context) { return DoBisect(*a, context); }};
}

}  // namespace fusediff::cli
