#pragma once
// `fusediff bisect`: which of ONNX Runtime's graph transformers and rewrite rules moves a model's outputs, by how
// many output steps, and what it buys in latency. Sessions: baseline (level disabled), all on, each one on alone
// (all others disabled), each left out, pairs where the singles do not explain all-on, and the blacklist re-run.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/fused/ort_runtime.h"
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
// One set of feeds for every model input, and the family that generated it ("file" for files).
struct InputSet {
  std::string family;
  std::vector<onnx_io::Tensor> feeds;
};
// normal, uniform, zero, small, large, positive, negative, aimed (QDQ inputs: quantization ties and saturation).
const std::vector<std::string>& InputFamilies();
// `per_family` sets of each family; counter-based: the same seed gives the same bytes.
std::vector<InputSet> GenerateInputs(const onnx_io::ModelInfo& model, int per_family, uint64_t seed);
// Files (.pb / .npy) or a folder of them (ONNX test-data layout: test_data_set_*/input_*.pb), bound to the model's
// inputs by tensor name (.pb) or file stem (.npy); one set per test_data_set folder. Throws InputError for a file
// that names no input, a missing input, or a type or shape that does not match.
std::vector<InputSet> ReadInputs(const onnx_io::ModelInfo& model, const std::vector<std::string>& paths);

// ---- measurements -----------------------------------------------------------------------------------------------
// The outputs of one session over every input set, per output tensor concatenated in input-set order.
struct Outputs {
  std::vector<std::vector<double>> values;  // [output][element over all sets]
  std::vector<size_t> set_elements;         // [output] elements per input set
};

struct OutputDelta {
  std::string output;
  std::string unit;         // "lsb" (a QDQ output: codes, or real values of a known scale) or "f32_ulp_of_max"
  double step = 1.0;        // one unit in the output's own values
  uint64_t elements = 0;
  uint64_t differing = 0;
  double max_units = 0;     // max |delta| / step
  double max_abs = 0;
  double max_rel = 0;       // max |delta| / max(|baseline|) over the output
  std::map<int64_t, uint64_t> histogram;  // signed delta in units (rounded), differing elements only
};

struct Perf {
  int repeats = 0;
  double median_ms = 0, q1_ms = 0, q3_ms = 0, min_ms = 0, max_ms = 0;
};
Perf Summarize(std::vector<double> ms);

// Node counts of an optimized model against the baseline's: op type -> count difference (non-zero only).
std::map<std::string, int64_t> NodeDelta(const std::map<std::string, int64_t>& baseline,
                                         const std::map<std::string, int64_t>& step);
// One comparison, output by output, of a session's outputs with the baseline's.
std::vector<OutputDelta> CompareOutputs(const onnx_io::ModelInfo& model, const Outputs& baseline, const Outputs& step);
// The elements whose value differs: ((output, flat index), the step's value), in key order.
using Diff = std::vector<std::pair<std::pair<size_t, size_t>, double>>;
Diff Differences(const Outputs& baseline, const Outputs& step);
// "Explain": the union of the single steps' differences equals all-on's, value for value.
bool Explains(const std::vector<const Diff*>& singles, const Diff& all_on);

struct Step {
  std::string kind;                  // baseline | all_on | one_on | leave_one_out | pair | blacklist | completeness
  std::string subject;               // the transformer (pair: "A+B"); empty for baseline, all_on, blacklist
  std::vector<std::string> disabled;  // exactly what the session disabled
  std::string level;
  bool fired = false;                 // the saved optimized model's node list differs from the baseline's
  std::map<std::string, int64_t> node_delta;
  int64_t nodes_changed = 0;          // sum of |count difference|
  std::vector<OutputDelta> deltas;
  double max_units = 0;               // the largest max_units over the outputs
  std::map<std::string, uint64_t> differing_by_family;  // differing output elements per input family
  std::optional<Perf> perf;
  double time_saved = 0;              // (baseline median - step median) / baseline median
  bool within_noise = true;           // |median difference| <= the two interquartile ranges together
  double loss = 0;                    // max_units - w * time_saved
  std::string verdict;                // one_on: blacklist | keep | not_fired; leave_one_out: restores | no_effect
};

struct BisectOptions {
  std::vector<std::string> input_paths;  // files or folders; empty: generate
  int generate = 4;                      // sets per family when generating
  uint64_t seed = 1;
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
  std::string runtime_version;
  std::string optimizer_list;          // "onnxruntime 1.30.0 (source ...)"
  std::vector<std::string> families;   // in order, with the number of sets each
  std::map<std::string, int> sets_per_family;
  std::vector<Step> steps;
  bool explained_by_singles = true;
  int pairs_run = 0;
  int pairs_skipped = 0;               // over --max-pairs
  std::vector<std::string> blacklist;
  std::string blacklist_config;        // optimization.disable_specified_optimizers=A;B
  std::map<std::string, bool> blacklist_name_effective;  // each name changes the saved optimized model
  bool blacklist_within_tolerance = true;
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

// Throws InputError for a malformed model or inputs, and for an optimizer list the model shows to be stale (the
// completeness check: level all with every listed name disabled must give level disabled's node list and outputs).
BisectResult Bisect(fused::ort::Runtime& runtime, const std::string& model_path, const BisectOptions& options);

}  // namespace fusediff::bisect
