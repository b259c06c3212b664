#pragma once
// `fusediff bisect`: which of ONNX Runtime's graph transformers and rewrite rules moves a model's outputs, by how
// many output steps, and what it buys in latency. Sessions: baseline (level disabled), all on, each one on alone
// (all others disabled), each left out, pairs where the singles do not explain all-on, and the blacklist re-run.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/bisect/bounds.h"
#include "fusediff/fused/ort_runtime.h"
#include "fusediff/model/memory_budget.h"
#include "fusediff/onnx/onnx_io.h"

namespace fusediff::bisect {


// One graph transformer or rewrite rule of the pinned ONNX Runtime.
struct Optimizer {
  std::string name;
  std::string kind;   // transformer | rewrite_rule
  std::string level;  // basic | extended | layout | unlisted_in_source
};
struct OptimizerList {
  std::string onnxruntime;  // the version the list is for
  std::string source, source_commit;
  std::vector<Optimizer> optimizers;
  std::vector<std::string> names() const;
};
// Throws InputError naming `origin` for a malformed list.
OptimizerList ParseOptimizerList(const std::string& json_text, const std::string& origin);
// harness/bisect/data/onnxruntime-1.30.0-optimizers.json, embedded at build time.
const OptimizerList& PinnedOptimizers();

// ---- inputs -----------------------------------------------------------------------------------------------------
// One set of feeds for every model input, and the family that generated it ("file" for files). Sets read from an
// ONNX test-data folder also carry its expected outputs (output_K.pb), in the model's output order.
struct InputSet {
  std::string family;
  std::vector<onnx_io::Tensor> feeds;
  std::string where;                        // the folder or file it came from (files only)
  std::vector<std::optional<onnx_io::Tensor>> expected;  // empty, or per model output (nullopt: no file for it)
};

// The values generated for an integer input that is not a quantized code: [lo, hi).
struct IntRange {
  int64_t lo = 0, hi = 16;
};

struct InputOptions {
  int per_family = 4;
  uint64_t seed = 1;
  IntRange int_range;  // --int-range: integer inputs the model says nothing about
  // --shape NAME=DIMS: the shape of a raw input file (.raw, .bin), or of a generated input with symbolic dimensions.
  std::map<std::string, std::vector<int64_t>> shapes;
  // --shapes N=8: the value of each named symbolic dimension in generated inputs (the others are 1).
  std::map<std::string, int64_t> dim_values;
  uint64_t max_bytes = 0;  // every input set together; 0: no limit
};

// normal, uniform, zero, small, large, positive, negative, aimed (QDQ inputs: quantization ties and saturation).
const std::vector<std::string>& InputFamilies();
// `per_family` sets of each family; counter-based: the same seed gives the same bytes. Floats of every width from the
// input's quantization range (or [-1, 1]); int8 and uint8 over their codes; the other integers within their range
// (InputRangeOf); bool 0 or 1. A model without inputs gets one empty set. Throws InputError where the sets would
// exceed max_bytes, naming the input and its size.
std::vector<InputSet> GenerateInputs(const onnx_io::ModelInfo& model, const InputOptions& options);
std::vector<InputSet> GenerateInputs(const onnx_io::ModelInfo& model, int per_family, uint64_t seed);
// The range an integer input is generated in and why: the model's (a Gather's table), a mask (its name holds
// "mask": 0 or 1), or the stated default (--int-range). Empty for floats, int8/uint8 codes and bool.
std::string InputRangeNote(const onnx_io::ModelInfo& model, size_t input, const IntRange& fallback);
// Files (.pb / .npy / .raw with --shape) or folders of them (ONNX test-data layout: test_data_set_*/input_K.pb and
// output_K.pb), one set per test_data_set folder. A named tensor binds to the model input of that name; an unnamed
// one (ONNX's backend test data) binds by position: input_K.pb to the K-th input that is not an initializer, as
// ONNX's test runner does (onnx/backend/test/runner, _add_model_test). A .npy or raw file binds by its stem (or
// input_K). Throws InputError for a file that binds to no input, a missing input, or a type or shape that does not
// match; every file's size is checked against max_bytes before it is read.
std::vector<InputSet> ReadInputs(const onnx_io::ModelInfo& model, const std::vector<std::string>& paths,
                                 const InputOptions& options);
std::vector<InputSet> ReadInputs(const onnx_io::ModelInfo& model, const std::vector<std::string>& paths);

// ---- measurements -----------------------------------------------------------------------------------------------
// The outputs of one session over every input set, per output tensor concatenated in input-set order.
struct Outputs {
  std::vector<std::vector<double>> values;  // [output][element over all sets]
  std::vector<size_t> set_elements;         // [output] elements per input set
  // [output] the bits of a 64-bit integer output's elements (empty for the others, which doubles hold exactly):
  // integers are compared for exact equality.
  std::vector<std::vector<uint64_t>> exact;
};

// Every set's outputs (as ONNX Runtime returns them: [set][output]) as doubles, per output concatenated in set
// order (64-bit integers also as their bits).
Outputs DecodeOutputs(const std::vector<std::vector<onnx_io::Tensor>>& results, size_t outputs);

struct OutputDelta {
  std::string output;
  // "lsb": a QDQ output (codes, or real values of a known scale); "int": an integer or bool output, equal or not
  // (one unit = 1); floats: "f32_ulp_of_max" (also f16, bf16, f64): one ulp of the output's type at its largest
  // baseline magnitude.
  std::string unit;
  double step = 1.0;        // one unit in the output's own values
  uint64_t elements = 0;
  uint64_t differing = 0;
  double max_units = 0;     // max |delta| / step
  double max_abs = 0;
  double max_rel = 0;       // max |delta| / max(|baseline|) over the output
  std::map<int64_t, uint64_t> histogram;  // signed delta in units (rounded), differing elements only (lsb and int)
  // How the output is judged: "bound" (a float output with a rigorous rounding-error bound: r > 1 is beyond what any
  // legal evaluation order gives), "fallback tolerance" (a float output without one: --threshold in its ulps, named
  // with `uncovered`), "threshold" (QDQ and integer outputs: --threshold in their units).
  std::string criterion = "threshold";
  std::string uncovered;    // why a float output has no bound
  // "bound": r = |delta| / (B_baseline + B_step) per element, the largest, and at that element |delta|, both bounds,
  // the flat index (over the sets) and the baseline's value.
  double r = 0, r_delta = 0, r_bound_baseline = 0, r_bound_step = 0, r_value = 0;
  uint64_t r_at = 0;
  uint64_t beyond = 0;      // elements over their criterion (r > 1, or units over --threshold)
  uint64_t waived = 0;      // of which within --atol/--rtol (Polygraphy: |delta| <= atol or <= rtol |baseline|)
  bool waived_by_tolerance = false;  // every element beyond its criterion was within --atol/--rtol
};

// The rounding-error bound of each output over every input set (bounds.h): per output, the elements of every set
// in set order, or why there is none.
struct OutputBound {
  std::vector<double> baseline, step;  // B_baseline (the graph as written), B_step (any legal rewrite)
  std::string uncovered;               // non-empty: no bound
};

// What a comparison judges by: --threshold for unbounded outputs, and the waiver --atol/--rtol (both absent: none).
struct Criteria {
  double threshold = 0.5;
  std::optional<double> atol, rtol;
  bool Waives(double delta, double baseline) const;  // Polygraphy: fails only beyond both atol and rtol |baseline|
};

struct Perf {
  int repeats = 0;
  double median_ms = 0, q1_ms = 0, q3_ms = 0, min_ms = 0, max_ms = 0;
};
Perf Summarize(std::vector<double> ms);

// The median ratio step / baseline of latency samples timed in clusters (a pair of sessions, one of each, timed round
// by round: step[c][i] and baseline[c][i] ran in round i of pair c), with a percentile bootstrap interval: each of
// `resamples` resamplings draws pairs, then rounds within each, by Philox (generators::CounterRng) from (seed,
// stream), so one seed gives the same interval for the same samples. Drawing pairs carries the difference between
// two sessions of one graph (where each sits in memory) into the interval.
struct RatioInterval {
  double ratio = 1, lo = 1, hi = 1;
};
RatioInterval BootstrapMedianRatio(const std::vector<std::vector<double>>& step,
                                   const std::vector<std::vector<double>>& baseline, uint64_t seed, uint64_t stream,
                                   int resamples = 1000, double level = 0.95);

// Node counts of an optimized model against the baseline's: op type -> count difference (non-zero only).
std::map<std::string, int64_t> NodeDelta(const std::map<std::string, int64_t>& baseline,
                                         const std::map<std::string, int64_t>& step);
// One comparison, output by output, of a session's outputs with the baseline's; with bounds (one per output), the
// float outputs that have one are judged by r.
std::vector<OutputDelta> CompareOutputs(const onnx_io::ModelInfo& model, const Outputs& baseline, const Outputs& step,
                                        const std::vector<OutputBound>* bounds = nullptr,
                                        const Criteria& criteria = Criteria{});
// One unit of a float output of `type` at magnitude m: the type's ulp there (its smallest subnormal step below).
double UlpAt(double m, onnx_io::DType type);
// The unit an output is compared in (OutputDelta::unit) for its type and quantization.
std::string UnitOf(onnx_io::DType type, const std::optional<onnx_io::TensorQuant>& q);
// The elements whose value differs: ((output, flat index), the step's value), in key order. (A 64-bit integer beyond
// 2^53 is found different by its bits; its value here is the nearest double.)
using Diff = std::vector<std::pair<std::pair<size_t, size_t>, double>>;
Diff Differences(const Outputs& baseline, const Outputs& step);
// "Explain": the union of the single steps' differences equals all-on's, value for value.
bool Explains(const std::vector<const Diff*>& singles, const Diff& all_on);

// The first divergent boundary of a step that moves the outputs: of the tensors both the baseline's and the step's
// saved optimized graphs hold (the fusions' boundaries), fetched as extra outputs of both sessions where that leaves
// the step's optimized graph unchanged, the first in the baseline's topological order whose values differ.
struct Divergence {
  int candidates = 0;                  // tensors both graphs hold, outputs aside
  int fetched = 0;                     // fetched without changing the step's optimized graph
  std::vector<std::string> skipped;    // fetching them changed the step's optimized graph: left out
  int sessions = 0;                    // the sessions the search took
  size_t sets = 0;                     // the input sets it looked on: the first few the step moves the outputs on
  std::string note;                    // why nothing was fetched, where so
  std::string tensor;                  // the first boundary whose values differ (an output where no other does)
  std::string producer;                // its producer's op in the baseline's graph
  bool is_output = false;
  std::optional<OutputDelta> delta;    // its difference in its own units (r for floats with a bound)
  std::vector<std::vector<std::string>> paths;  // per output it reaches: tensor, op, tensor, ..., the output
};

// What the search needs from a bisect.
struct DivergenceRequest {
  const onnx_io::ModelInfo* model = nullptr;
  std::string model_bytes;
  const onnx_io::GraphContent* graph = nullptr;       // the model's graph (for the paths)
  // The rounding-error bounds of the model's outputs and of every candidate tensor (BoundaryCandidates), over every
  // input set; a tensor not in it is judged without one.
  const std::map<std::string, OutputBound>* bounds = nullptr;
  Criteria criteria;
  std::vector<std::string> baseline_tensors, step_tensors;  // produced by the saved optimized graphs, in their order
  uint64_t step_digest = 0;
  fused::ort::SessionSpec baseline, step;              // their model is replaced by the one with extra outputs
  std::string scratch;                                 // where that model is written
  // Every input set through a session: the results ([set][output], valid until the next call) and the digest of the
  // saved optimized graph. Throws fused::ort::Refused.
  std::function<const std::vector<std::vector<onnx_io::Tensor>>&(const fused::ort::SessionSpec&, uint64_t&)> run;
  int max_sessions = 24;
};
Divergence FindDivergence(const DivergenceRequest& request);
// The tensors both saved graphs produce, the model's outputs aside, in the baseline's order: what FindDivergence may
// fetch.
std::vector<std::string> BoundaryCandidates(const onnx_io::ModelInfo& model, const std::vector<std::string>& baseline,
                                            const std::vector<std::string>& step);

struct Step {
  // baseline | completeness | all_on | one_on | leave_one_out | with_dependency (a refused one_on with what it needs)
  // | pair | blacklist
  std::string kind;
  std::string subject;               // the transformer (pair, with_dependency: "A+B"); empty for baseline, all_on, blacklist
  std::vector<std::string> disabled;  // exactly what the session disabled
  std::string level;
  bool fired = false;                 // the saved optimized model's node list differs from the baseline's
  std::map<std::string, int64_t> node_delta;
  int64_t nodes_changed = 0;          // sum of |count difference|
  std::vector<OutputDelta> deltas;
  double max_units = 0;               // the largest max_units over the outputs
  double r = 0;                       // the largest r over the outputs judged by their bound (not waived)
  std::map<std::string, uint64_t> differing_by_family;  // differing output elements per input family
  // Latency on the first input set, timed against a baseline session run for run (Runtime::TimeAlternating).
  std::optional<Perf> perf;
  std::optional<Perf> baseline_perf;  // the baseline's runs of the same rounds
  double time_saved = 0;              // 1 - median(step) / median(baseline)
  double time_saved_lo = 0, time_saved_hi = 0;  // its 95 % bootstrap interval (BootstrapMedianRatio)
  bool same_graph = false;            // the saved optimized model is the baseline's: noise by construction
  bool within_noise = true;           // the interval holds 0, or the graph is the baseline's
  std::string noise_reason;           // "interval holds 0" | "interval excludes 0" | "same graph as the baseline"
  // max_units - w * time_saved over the outputs judged by --threshold (not waived); r - w * time_saved over the
  // bounded ones. `over`: loss > threshold or that r term > 1.
  double loss = 0;
  bool over = false;
  // one_on: blacklist | keep | not_fired | refused; leave_one_out: restores | no_effect | refused | restores_build
  // (all-on is refused, this one builds); with_dependency: blacklist | keep; pair: additive | interacts |
  // interacts_blacklist | refused; blacklist: within_tolerance | over_threshold | refused
  std::string verdict;
  std::string refusal;                // ONNX Runtime's message where it refused the session (verdict "refused")
  std::string refusal_phase;          // create | run
  // A refused one_on: the smallest set of other names found that, enabled too, makes the session build (singles,
  // then pairs, within BisectOptions::dependency_budget sessions); empty where none was found.
  std::vector<std::string> dependency;
  int dependency_sessions = 0;        // the sessions the search tried
  std::string reproduction;           // the folder of its standalone reproduction, where one was written
  std::optional<Divergence> divergence;  // steps that move the outputs: where the difference starts
};

// The output a step's largest delta is in (the first output where none moved; null without outputs).
const OutputDelta* LargestDelta(const Step& s);

// ONNX's test-data check: the baseline (every transformer off) against a test set's output_K.pb, as
// numpy.testing.assert_allclose judges it in ONNX's runner: |actual - expected| <= atol + rtol * |expected|, NaN
// equal to NaN, and the same type and shape.
struct ExpectedOutput {
  std::string set;                    // the folder
  std::string output;
  uint64_t elements = 0, mismatched = 0;
  double max_abs = 0;                 // the largest |actual - expected|
  std::string problem;                // a type or shape that differs (then nothing is compared)
};
struct ExpectedCheck {
  bool checked = false;
  double rtol = 1e-3, atol = 1e-7;
  std::string tolerance_source;       // "ONNX runner default", "data.json", "--rtol/--atol"
  std::vector<ExpectedOutput> outputs;
  bool agree = true;
};

struct BisectOptions {
  std::vector<std::string> input_paths;  // files or folders; empty: generate
  int generate = 4;                      // sets per family when generating
  uint64_t seed = 1;
  IntRange int_range;                    // InputOptions::int_range
  std::map<std::string, std::vector<int64_t>> shapes;  // InputOptions::shapes
  std::map<std::string, int64_t> dim_values;           // InputOptions::dim_values (one shape of --shapes)
  // Inputs, outputs and the outputs kept for comparison together, in bytes: a model or inputs beyond it are refused
  // (InputError naming the tensor and its size) before anything that large is allocated.
  uint64_t max_bytes = kDefaultMaxBytes;
  int dependency_budget = 100;           // sessions per refused one_on step in the search for what it needs
  std::optional<double> expected_rtol, expected_atol;  // the expected-output check's; default: data.json, else ONNX's
  std::optional<double> atol, rtol;      // the waiver (Criteria): a difference within them is "waived by tolerance"
  // Judge float outputs by their rounding-error bound where they have one (false, --no-bounds: by --threshold in
  // their ulps, as fusediff did before).
  bool bounds = true;
  // Session config entries every session gets (--session-config KEY=VALUE), e.g.
  // optimization.enable_gelu_approximation=1 (GeluApproximation acts only with it).
  std::vector<std::pair<std::string, std::string>> session_config;
  // Where standalone reproductions of refused sessions go; empty: a folder fusediff-repro-XXXXXX made in the
  // temporary directory when the first one is written (and kept).
  std::string repro_dir;
  double perf_weight = 0.0;              // w
  double threshold = 0.5;                // in output units (LSB)
  int max_pairs = 10;
  int warmup = 3;
  int repeats = 15;
  std::string work_dir;                  // where the optimized models are saved
  // true: one file per session (<n>_<step>.onnx), kept for the user; false: every session saves one file name, read
  // back and removed before the next session, so a scratch folder holds at most one file. Removed, not overwritten:
  // ext4 writes a file back on close when it was truncated and rewritten (its replace-by-truncate heuristic), about
  // 0.2 ms of every session here.
  bool keep_optimized_models = true;
  const OptimizerList* optimizers = nullptr;  // default: PinnedOptimizers()
};

struct BisectResult {
  std::string model;
  std::vector<std::string> input_notes;  // how each generated integer input was ranged (InputRangeNote)
  ExpectedCheck expected;
  std::string runtime_version;
  std::string optimizer_list;          // "onnxruntime 1.30.0 (source ...)"
  std::vector<std::string> families;   // in order, with the number of sets each
  std::map<std::string, int> sets_per_family;
  std::vector<Step> steps;
  bool explained_by_singles = true;
  // The timing control: the completeness session (level all, every name disabled: the baseline's graph) timed
  // against the baseline. Its interval should hold 0; where it does not, the measurement is not to be trusted.
  bool timing_control_agrees = true;
  int pairs_run = 0;
  int pairs_skipped = 0;               // over --max-pairs
  std::vector<std::string> blacklist;
  std::string blacklist_config;        // optimization.disable_specified_optimizers=A;B
  std::map<std::string, bool> blacklist_name_effective;  // each name changes the saved optimized model
  // Why each name is on it: "moves the outputs" | "moves the outputs with its dependency" | "interacts with B" |
  // "all-on is refused with it" | "needs B, which the blacklist disables" | "refused alone, no dependency found".
  std::map<std::string, std::string> blacklist_reasons;
  std::vector<std::string> dependency_notes;  // "A needs B" for refused names the blacklist keeps enabled
  bool blacklist_within_tolerance = true;
  bool blacklist_builds = true;        // the blacklist's own session was created and ran
  std::string blacklist_refusal;
  int refused_steps = 0;
  std::string repro_dir;               // where reproductions were written ("" when none)
  double ort_seconds = 0;              // wall time in calls to the runtime, as fusediff sees them
  double inside_ort_seconds = 0;       // of which inside ONNX Runtime's own calls, timed around those calls alone
  double total_seconds = 0;            // the bisect's wall time
  // Set by the caller that started the runtime: its start (loading ONNX Runtime, creating its environment), of
  // which inside ONNX Runtime's own code. The report's overhead counts it.
  double runtime_start_seconds = 0;
  double runtime_start_inside_ort_seconds = 0;
  // Likewise its close (releasing the environment) after the bisect.
  double runtime_close_seconds = 0;
  double runtime_close_inside_ort_seconds = 0;
};

// ---- the test data's expected outputs and refused sessions -------------------------------------------------------
// The tolerances of the expected-output check: --rtol/--atol where given, else a data.json beside the model (ONNX's
// backend test loader reads "rtol" and "atol" there: onnx/backend/test/loader), else the loader's defaults 1e-3 and
// 1e-7. Throws InputError for a data.json that is not JSON or holds a tolerance that is not a non-negative number.
void ExpectedTolerances(const std::string& model_path, const BisectOptions& options, ExpectedCheck& check);
// One input set's outputs (as ONNX Runtime returned them, in the model's output order) against the set's expected
// tensors, added to `check` (nothing where the set has none).
void CheckExpected(const onnx_io::ModelInfo& model, const InputSet& set, const std::vector<onnx_io::Tensor>& outputs,
                   ExpectedCheck& check);

// `given`, created where missing, or a new folder fusediff-repro-XXXXXX in the temporary directory.
std::string ReproductionRoot(const std::string& given);
// A standalone reproduction of a session ONNX Runtime refused, in folder `dir`: model.onnx (a copy), options.txt (the
// level and the exact session config entry), repro.js (onnxruntime-node: creates the session with those options and,
// for a refusal at run, runs every input set, from inputs/; exit 1 and ONNX Runtime's message when it is refused
// again, 0 when not). Returns `dir`.
std::string WriteReproduction(const std::string& dir, const fused::ort::SessionSpec& spec, const std::string& phase,
                              const std::string& message, const std::vector<std::vector<onnx_io::Tensor>>& sets,
                              const std::string& runtime_version);

// Throws InputError for a malformed model or inputs, and for an optimizer list the model shows to be stale (the
// completeness check: level all with every listed name disabled must give level disabled's node list and outputs).
BisectResult Bisect(fused::ort::Runtime& runtime, const std::string& model_path, const BisectOptions& options);

}  // namespace fusediff::bisect
