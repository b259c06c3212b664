#pragma once
// What a run produced: per case its convention, statistics, worst samples (with replay strings) and verdict,
// plus provenance. The driver fills it; reports/ reads it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/code_errors.h"
#include "fusediff/model/error_bins.h"
#include "fusediff/model/error_stats.h"
#include "fusediff/model/gate_comparison.h"
#include "fusediff/model/known_defects.h"
#include "fusediff/model/tolerance.h"

namespace fusediff {

// cross_convention: a measurement between a fused path and a reference under different conventions
// (Comparison::cross_convention); it is reported, never judged, and never fails a run.
// known_defect: every judged sample is within tolerance and some samples are a ledger entry's known defect
// (model/known_defects.h); it does not fail a run.
// documented_behaviour: the same for a documented-behaviour entry and no known defect; it does not fail a run
// unless the tolerance says so (--strict).
// nondeterministic: the fused path gave different outputs for one draw across repetitions (--repeat); a failure
// of its own class, counted apart from value errors, whatever the comparison.
// crashed / timeout: the process running the path under test died on some draws (a signal, an exit) or gave no
// answer within the per-batch timeout (a plugin child or an isolated plugin, docs/plugins.md); those draws were not
// compared. Each fails the run, whatever the comparison.
enum class Verdict {
  pass,
  fail,
  unsupported,
  cross_convention,
  known_defect,
  nondeterministic,
  documented_behaviour,
  crashed,
  timeout
};
std::string_view to_string(Verdict v);
// Whether a case with this verdict fails the run (exit 1): fail, nondeterministic, crashed, timeout.
bool fails_run(Verdict v);

struct WorstCaseReport {
  WorstCase sample;
  std::string replay;  // format_replay(...) for this sample
};

// A ledger tally keeps its three worst explained samples: the reports show the first (the text report's --verbose
// three), and a documented behaviour on a CPU without VNNI has about 140 tallies in a default run.
inline constexpr size_t kLedgerTallyWorst = 3;

// One ledger entry within a case (model/known_defects.h). Its samples are compared and counted here, apart from
// CaseResult::stats (what the verdict judges), so the case's worst list keeps showing everything else.
struct KnownDefectTally {
  std::string id;
  LedgerKind kind = LedgerKind::known_defect;
  uint64_t draws = 0;              // draws that met the entry's conditions (library, version, implementation, rule)
  uint64_t samples = 0;            // their samples
  uint64_t predicted_samples = 0;  // of those, where the entry's model differs from the reference
  uint64_t withheld_samples = 0;   // model not_executed: of those, the samples of draws the path withheld (the library
                                   // would crash on them): explained, never compared
  CaseStats stats;                 // the samples it explains: y_fused != y_ref and y_fused == the model's y (within tolerance);
                                   // its worst keeps kLedgerTallyWorst, its by_region is counted but never written
  std::vector<WorstCaseReport> worst;
  // The model changed some samples, the library none of them that way: a fixed library (or a wrong entry).
  bool no_longer_reproduces() const { return predicted_samples > 0 && stats.overall.count() == 0; }
};

// A library-built per-code table read back before any draw (FusedPath::ReadTable) and checked against the declared
// convention's table: the input codes checked, how many differ, and the first that does.
struct TableReadback {
  uint64_t codes = 0;
  uint64_t mismatches = 0;
  int32_t first_code = 0;      // when mismatches > 0: the lowest differing input code,
  int32_t first_library = 0;   // the library's output code for it
  int32_t first_declared = 0;  // and the declared table's
  friend bool operator==(const TableReadback&, const TableReadback&) = default;
};

// Samples of draws the path lost: its process crashed on them, or gave no answer in time. Counted, never compared;
// any of them fails the case (Verdict::crashed / Verdict::timeout).
struct LostSamples {
  uint64_t samples = 0;
  uint64_t first_sample = 0;  // the lowest sample index among them
  std::string reason;         // that sample's draw's reason (the signal or the timeout, the child's last stderr)
  std::string replay;         // format_replay of that sample (finish_case_result)
  // Adds `count` samples from sample `first` on, lost for `why`.
  void add(uint64_t first, uint64_t count, const std::string& why);
  // Folds another part's (a worker's, a shard's) counts in: the lowest first sample keeps its reason.
  void merge(const LostSamples& part);
  friend bool operator==(const LostSamples&, const LostSamples&) = default;
};

// A float output against its rounding-error bound (model/pattern.h float_output; docs/summation-orders.md, "The
// float layernorm and r"): per compared sample with a finite bound B (reference::GraphElement::bound, how far two
// evaluations of the output's declared class may differ), r = |y_fused - y_ref| / B on the real values. r > 1 proves
// the fused path is not such an evaluation; r <= 1 is what any legal reordering may do. Counts add exactly and the
// largest r keeps the lowest sample on ties, so every sharding of a run gives the same.
struct BoundRatio {
  std::string unbounded_reason;  // why the bound does not cover this comparison (then every sample is unbounded)
  uint64_t samples = 0;          // samples judged by a finite bound
  uint64_t unbounded = 0;        // samples without one (the reason above, or no finite bound at that element)
  uint64_t over = 0;             // samples with r > 1
  double max_r = 0;
  uint64_t max_sample = 0;       // where max_r is (samples > 0)
  double max_delta = 0;          // |y_fused - y_ref| there
  double max_bound = 0;          // B there
  // One sample: its index, |y_fused - y_ref| (NaN where either is NaN: counted as over) and B (not finite: none).
  void add(uint64_t sample, double delta, double bound);
  void merge(const BoundRatio& part);
  friend bool operator==(const BoundRatio&, const BoundRatio&) = default;
};

struct CaseResult {
  CaseSpec spec;
  Tolerance tolerance;
  Verdict verdict = Verdict::pass;
  std::string reason;            // why fail / unsupported; empty on pass
  CaseStats stats;
  std::vector<WorstCaseReport> worst;
  std::vector<WorstCaseReport> nondeterministic;  // samples whose repetitions differ (stats.nondeterministic_worst)
  uint32_t repeat = 1;                            // repetitions of every fused draw (--repeat)
  uint64_t intermediate_codes_covered = 0;  // distinct reference u codes seen (== per_code.covered_count())
  CodeErrors per_code;                      // coverage and min/max error per intermediate code
  std::vector<int32_t> hard_codes;          // the convention's hard codes (knees, saturation edges, output ties)
  uint64_t hard_codes_covered = 0;          // of those, how many a sample landed on (from per_code)
  uint64_t reference_escalations = 0;       // codes the double filter handed to exact arithmetic / MPFR
  std::string reference_convention;         // describe() of what the reference ran
  std::string fused_convention;             // describe() of what the fused path declares
  std::string implementation;               // a library path's implementations, sorted, " | "-joined (join_implementations)
  uint64_t unsupported_samples = 0;         // samples whose draw the library rejected (counted, not compared)
  uint64_t first_unsupported_sample = 0;    // the lowest sample index among them
  std::string unsupported_sample_reason;    // the library's reason for that sample's draw
  // Samples of draws the path withheld because the library would crash on them (fused::RunInfo::withheld) that no
  // ledger entry (model not_executed) explains: they fail the case. The lowest sample index and the path's reason.
  uint64_t withheld_samples = 0;
  uint64_t first_withheld_sample = 0;
  std::string withheld_reason;
  LostSamples crashed;    // draws whose process died (Verdict::crashed)
  LostSamples timed_out;  // draws that got no answer within the per-batch timeout (Verdict::timeout)
  std::vector<KnownDefectTally> known_defects;  // the ledger entries whose conditions some draw met, by id
  // The path's own table, read back before the draws (FusedPath::ReadTable); unset where the path has none. A
  // mismatch fails the case and no draw runs.
  std::optional<TableReadback> table_readback;
  // conv2d+batchnorm+act: the judged samples' |e| against |u| and the channel gain (model/error_bins.h); else unset.
  std::optional<BatchNormErrorBins> batchnorm_bins;
  std::optional<BoundRatio> bound_ratio;  // a float output's r (model/pattern.h float_output); else unset
  bool complete = true;                     // false when the run was interrupted inside this case
  uint32_t shard_index = 0;                 // which deterministic partition of the samples this result holds
  uint32_t shard_count = 1;
  double seconds = 0;
};

// Ordered key/value pairs: a backend's provenance ("library", "version", "isa", ...), in the order it gives them.
using KeyValues = std::vector<std::pair<std::string, std::string>>;
struct BackendProvenance {
  std::string backend;  // the module's name (model/backend.h)
  KeyValues fields;
  friend bool operator==(const BackendProvenance&, const BackendProvenance&) = default;
};

struct Provenance {
  std::string tool_name = "fusediff";
  std::string tool_version;
  std::string git_commit;
  std::string compiler;
  std::string libc;
  std::string isa;
  // Each registered backend's own provenance (model/backend.h), in registration order; a backend with none (the
  // built-in kernels) is absent.
  std::vector<BackendProvenance> backends;
  std::string command_line;
  std::string created;  // ISO 8601 UTC
};

// The value of `key` in `backend`'s provenance; empty where either is absent.
std::string provenance_value(const Provenance& provenance, std::string_view backend, std::string_view key);

// What `fusediff gate` judged: the descriptor and the exact bytes of its table file.
struct GateProvenance {
  std::string descriptor_path;
  std::string table_path;
  std::string table_sha256;  // of the table file's bytes, lowercase hex
  std::string table_kind;
  std::string tolerance_source;  // "default", "FILE.json" or "--max-abs-lsb"
  std::optional<CanonicalComparison> canonical;  // the candidate against the canonical table (fusediff gate)
  std::string illegal_fusion;  // the fusion rule the descriptor breaks (model/pattern.h); empty when legal
};

// Where a run's shard came from: unsharded, --shard, Bazel's or GoogleTest's variables, a Kubernetes Indexed Job,
// a Slurm job array; "merge" for merged shards; "unrecorded" for results files written before the field existed.
inline constexpr std::string_view kShardSources[] = {"none",       "flag",  "bazel", "googletest",
                                                     "kubernetes", "slurm", "merge", "unrecorded"};

struct RunResult {
  Provenance provenance;
  std::optional<GateProvenance> gate;  // set by `fusediff gate` only
  uint64_t seed = 0;
  bool complete = true;
  uint32_t shard_index = 0;  // the deterministic partition this run holds (0/1: all of it)
  uint32_t shard_count = 1;
  std::string shard_source = "none";  // where the shard came from: one of kShardSources
  std::vector<CaseResult> cases;

  bool any_failure() const;
};

// Samples compared in a case: the judged ones and those a ledger entry explains.
uint64_t compared_samples(const CaseResult& c);
// Samples the case's ledger entries of one kind explain.
uint64_t explained_samples(const CaseResult& c, LedgerKind kind);
// Samples of withheld draws (the library would crash on them) the case's ledger entries of one kind explain.
uint64_t withheld_samples(const CaseResult& c, LedgerKind kind);

// Folds `part` (another shard of the same case) into `into`: statistics, worst samples and per-code errors add
// exactly; coverage, worst replay strings and the verdict are recomputed (check_tolerance). Throws InputError
// when the two are not the same case under the same tolerance.
void merge_case_result(CaseResult& into, const CaseResult& part, uint64_t seed);
// Adds `part`'s ledger tallies into `into` by id (counts and statistics exactly), sorted by id.
void merge_known_defects(std::vector<KnownDefectTally>& into, const std::vector<KnownDefectTally>& part);
// A library's implementation names, sorted and unique, " | "-joined: the same for any sharding of a run.
std::string join_implementations(std::vector<std::string> names);

// Sets every replay line of the case's worst lists, ledger tallies and lost samples from its spec: format_replay of
// each sample under its formulation (a library path's), a nondeterministic one with the case's repetitions.
void fill_replays(CaseResult& result, uint64_t seed);
// Recomputes what follows from the statistics: coverage count, worst replay strings (fill_replays) and the verdict
// (unsupported stays unsupported; nothing compared because the library rejected every draw becomes unsupported).
void finish_case_result(CaseResult& result, uint64_t seed);

}  // namespace fusediff

namespace fusediff {

// Every stage of one sample, for `fusediff replay`.
struct ReplayTrace {
  ReplayKey key;
  std::string convention;      // describe() of the reference's convention
  std::string fused_convention;  // describe() of what the fused path declares, when it is a library's (else empty)
  std::string implementation;    // a library path's implementation(s)
  std::string implementation_of_draw;  // the implementation that ran this draw (a library path)
  std::string formulation;       // the draw's formulation (a library path that draws them)
  uint32_t repeat = 1;           // runs of the fused path on the draw
  std::vector<int32_t> y_repetitions;  // every run's output of this element, when they differ (else empty)
  bool black_box = false;        // a library path: its accumulator and intermediate are not observable
  bool f32_intermediate = false; // the reference's intermediate is f32: requant_exact is v, u is unused
  // conv source only
  uint32_t draw = 0;
  int32_t n = 0, oy = 0, ox = 0, k = 0;
  std::string conv_shape;      // e.g. "N1 H7 W5 C3 -> K4, kernel 3x2, stride 1x2, dilation 1x1, pad 0,1,1,0"
  std::string input_quant;     // "uint8:0.0123:17"
  float weight_scale = 0;
  int32_t bias = 0;
  int64_t acc_reference = 0;
  int32_t acc_fused = 0;
  std::string requant_exact;   // decimal of the value the last requant step rounds
  int32_t u_fused = 0;
  // both sources
  int32_t u = 0;               // reference intermediate code
  double v = 0;
  std::string f_exact;         // f(v), 30 significant digits
  double t = 0;
  int32_t y_reference = 0;
  int32_t y_fused = 0;
  int64_t error = 0;
  RegionSet regions = 0;
  std::vector<std::string> pattern_stages;  // a pattern's boundaries beyond the producer, one line each
};

}  // namespace fusediff
