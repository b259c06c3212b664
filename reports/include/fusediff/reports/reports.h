#pragma once
// Writers for run results. Every file is written to a temporary name beside the target and renamed, so a
// reader never sees a half-written file.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fusediff/model/results.h"
#include "fusediff/reports/sha256.h"

namespace fusediff::reports {

// /8 writes each case's replay line (of sample 0) once and no replay line in a worst entry: the reader derives each
// from the case (model/results.h fill_replays), and a ledger tally keeps its three worst samples and no per-region
// histograms (the default run's file on a CPU without VNNI: 3.14 MB as /7).
// /7 writes the platform's backend provenance generically: platform.backends, one {"name", "provenance": [[key,
// value], ...]} per registered backend that has any (model/backend.h), where /6 and earlier had one object member
// of platform named after the backend, {key: value} (read as that backend with those pairs, in key order).
// A /7 case whose output is a float with a rounding-error bound also has bound_ratio (model/results.h BoundRatio).
// /6 writes each case's per_code texts packed (covered_bitmap and error_ranges: zlib-compressed base64 of the /5
// bitmap's hex digits and of "gap,length,min,max;" runs), adds a conv case's draws (its judged samples per draw,
// packed: model/draw_tallies.h) and an external table's fingerprint, file and SHA-256, and the gate's worse rows.
// /5 adds the verdict documented_behaviour, each case's documented_behaviours (ledger tallies of that kind, as
// known_defects), the tolerance's documented_behaviour ("fails" under --strict), and judges a ledger tally's status
// by its predicted samples (no_longer_reproduces: the model changed samples, none was explained).
// /4 adds the verdict nondeterministic and a library case's repeat, nondeterministic samples, by_implementation,
// by_formulation and paired_formulations, and the worst entries' implementation, formulation and repetitions
// (all absent for the built-in paths), and each BatchNorm case's batchnorm_error_bins; /3 the verdict known_defect
// and each case's known_defects (ledger tallies); /2 each case's pattern and fusion. /4, /3, /2 and /1 files
// (/2 and /1: conv2d+act, kept whole) are still read.
inline constexpr int kResultsVersion = 8;
inline constexpr const char* kResultsFormat = "fusediff-results/8";  // written; /1 to /8 are read

// The results as JSON (format "fusediff-results/1"); deterministic for the same seed except `created` and
// `command_line` (no timings, keys in a fixed order).
nlohmann::ordered_json ToJson(const RunResult& run);
// `derived`: with mean, std, min, max, percentiles and the exact fraction beside the count and histogram (a case's
// overall statistics); without (/6: per region, implementation, formulation), since readers recompute them.
nlohmann::ordered_json StatsToJson(const ErrorStats& stats, bool derived = true);
// JSON text as people read it: one member per line, one space of indent per level, except that any value whose
// compact text fits within `width` columns stays on one line, as does an object or array of scalars only (a
// histogram) at any length. Ends with a newline.
std::string DumpJson(const nlohmann::ordered_json& j, size_t width = 120);
// The results file's text: DumpJson(ToJson(run)).
std::string ResultsText(const RunResult& run);

// Reads results JSON back, strictly: every field the writer writes must be present with the right type; the
// statistics are rebuilt from the histograms (stored derived values are not trusted). Throws InputError
// "SOURCE: cases[3].error_lsb.histogram: expected ..." naming the file, the field and what was expected.
RunResult FromJson(const nlohmann::json& j, const std::string& source);
RunResult ReadResultsFile(const std::string& path);

// Sample-set identity: SHA-256 of what fixes the samples of a case (seed, canonical key, mutant, requested
// sample count) or of a run (seed and every case's identity, in order). Shards of one run share it; a changed
// seed, suite or sample count changes it.
std::string CaseSampleSetId(uint64_t seed, const CaseSpec& spec);
std::string SampleSetId(const RunResult& run);

// Folds shards of one run into the whole run. Each input must carry the same seed, sample set, tool version
// and shard count, and together the shard indices 0..N-1 exactly once; an unsharded input merges only with
// itself being alone. Throws InputError naming `names[i]` otherwise. With `allow_partial`, missing shards are
// accepted (a doubled one never is) and the result is marked complete = false. The result has shard 0/1 from
// source "merge".
RunResult MergeRuns(const std::vector<RunResult>& parts, const std::vector<std::string>& names,
                    bool allow_partial = false);
// The shard indices 0..N-1 (N of the first part) that no part holds, ascending.
std::vector<uint32_t> MissingShards(const std::vector<RunResult>& parts);

// JUnit XML: one <testcase classname="fusediff" name=CASE> per case; <failure> with the worst error and its
// replay line; <skipped> for unsupported cases.
std::string ToJUnit(const RunResult& run);

// Sign-off report: one self-contained HTML page (inline SVG, no scripts, no external assets) and the same
// tables as Markdown.
std::string ToHtml(const RunResult& run);
std::string ToMarkdown(const RunResult& run);

// 95% upper bound on the failure rate of a case with n independent samples and no failure ("rule of three").
inline double FailureRateUpperBound95(uint64_t n) { return n == 0 ? 1.0 : std::min(1.0, 3.0 / static_cast<double>(n)); }

// Nightly regression: BASELINE vs CURRENT, matched by case name (docs/reports.md, "Nightly regression").
//  - Same samples (same seed, definition and count, or an exhaustive sweep, whose samples are every code whatever the
//    seed): any change is real. A regression when it passes the thresholds below or a code errs more than before.
//  - Different samples: exact %, bias and the histogram's bins judged over draws (compare_stats.h), every p-value of
//    the comparison through Holm at family-wise `level`; max |e| only where the baseline's draws would have shown it.
//  - Always: a pass that becomes a fail is a regression; a cross-convention measurement moves or stays, never
//    regresses; known-defect and documented-behaviour counts are their own category (ledger).
struct CompareRules {
  int64_t max_abs_growth_lsb = 0;         // same samples: flag when max |e| grows by more than this
  double exact_fraction_drop = 0.001;     // same samples: flag when the exact fraction drops by more than this
  double abs_bias_growth_lsb = 0.01;      // same samples: flag when |bias| grows by more than this
  bool missing_case_is_regression = true;
  bool convention_change_is_regression = true;
  bool resampled_is_regression = false;   // a case whose sample set changed is judged over draws, not flagged
  double level = 0.01;                    // different samples: family-wise level (Holm)
  uint64_t min_draws = 10;                // different samples: fewer draws on a side are too few to judge
};
CompareRules ReadCompareRules(const std::string& path);  // JSON object with the fields above, all optional

struct CaseComparison {
  std::string name;
  const CaseResult* baseline = nullptr;  // null: the case is new
  const CaseResult* current = nullptr;   // null: the case disappeared
  std::string samples;                   // "same samples", "exhaustive", "different samples" ("" when unmatched)
  std::string subject;                   // what the case tests that changed: "mutant: none -> x" (or the table)
  std::vector<std::string> findings;     // regressions ("max |e| 1 -> 3 LSB ...")
  std::vector<std::string> ledger;       // known-defect and documented-behaviour changes that need a look
  std::vector<std::string> moved;        // changes that are not regressions (no verdict, improved, unjudged)
  std::vector<std::string> ledger_moved; // ledger entries met on one side's draws only (different samples)
  std::vector<std::string> notes;        // context (a new case, a resampled case, the mutant or table that changed)
  bool regression = false;
};
struct RunComparison {
  bool sample_set_changed = false;
  double level = 0.01;
  bool missing_is_regression = true;
  size_t tests = 0;        // tests over draws run (different samples)
  size_t significant = 0;  // of those, rejected by Holm
  std::vector<CaseComparison> cases;  // baseline order, then new cases in current order
  bool any_regression() const;        // a regression or a ledger change
};
RunComparison Compare(const RunResult& baseline, const RunResult& current, const CompareRules& rules);

// What the terminal shows: by default a line per case that changed (regression, ledger, moved, note), a line per
// pattern x fused path for the unchanged rest, the rule and the closing "N passed, N failed" line; `all` adds
// today's side-by-side table of every case; `only_regressions` prints the regression lines and nothing else.
enum class CompareView { summary, all, only_regressions };
std::string RenderComparison(const RunComparison& comparison, const RunResult& baseline, const RunResult& current,
                             CompareView view = CompareView::summary);

// The definition of a case as results JSON writes it (source, mix, activation, convention, pattern, fused path,
// comparison, mutant, table, requested samples): what `compare` diffs field by field.
nlohmann::ordered_json CaseDefinitionToJson(const CaseSpec& spec);

// One CSV row per case: name, verdict, samples, exact fraction, bias, std, percentiles, max |e|, convention.
std::string ToCsv(const RunResult& run);

// The terminal output of `run` and `merge`. By default: one line per case that is not a plain pass (fail, known
// defect, documented behaviour, unsupported, nondeterministic; a failing case with its first replay), one line per
// pattern x fused path summing up the rest (cross-convention measurements included), the ledger's entries, the
// library attribution in a line or two, the oneDNN dispatch line, `before_closing`, and the closing line.
// `all`: today's table of every case first, and the attribution tables whole. `verbose`: every case's rejected
// samples, three worst replays per failing case and per known defect.
struct TableOptions {
  bool timing = false;  // a time column in the full table
  bool verbose = false;
  bool all = false;
  std::string before_closing;  // e.g. the samples and time line of `run`
};
std::string RenderTable(const RunResult& run, const TableOptions& options);
// "N passed, N failed[, N known defect (not failing)][, N documented behaviour (not failing)], N unsupported[, N
// cross-convention measurements (no verdict)]; N cases, seed S".
std::string ClosingLine(const RunResult& run);

// Every stage of one replayed sample.
std::string RenderReplay(const ReplayTrace& trace);

// Text for XML attributes and content: & < > " ' as entities, newline and tab as character references, other
// control characters (which XML 1.0 forbids) as '?'. JUnit writers use it.
std::string XmlEscape(std::string_view s);
// Text for HTML content and attribute values: & < > " ' as entities.
std::string HtmlEscape(std::string_view s);

// Writes `contents` to `path` atomically (temp file + fsync + rename). Throws std::runtime_error with the
// path and errno text on failure; the target is then untouched.
void WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace fusediff::reports

namespace fusediff::reports {

// `fusediff gate`'s report: the table and its SHA-256, the tolerance and where it came from, per case the
// error distribution (histogram) and statistics, the worst codes, the codes that break the bound, the verdict
// ACCEPT / REJECT. `listed_codes` caps how many offending codes are named.
std::string RenderGate(const RunResult& run, size_t listed_codes = 32);

}  // namespace fusediff::reports

namespace fusediff::reports {

// `fusediff run --isa`: the same cases of a backend whose dispatch can be capped, one process per cap (a library
// reads its cap once per process: model/backend.h DispatchControl). One entry per cap that was asked for.
struct IsaRun {
  std::string cap;            // the value of the backend's cap variable, e.g. "AVX2"
  std::string effective_isa;  // what the library dispatched to under it ("avx2"); empty when the process gave no results
  bool available = false;     // the CPU runs this cap: the library dispatched to it, not to a lower one
  int exit_code = 0;          // the child run's exit code (0 pass, 1 fail, 2 bad input)
  RunResult run;              // its results (empty when unavailable)
};

inline constexpr const char* kIsaMatrixFormat = "fusediff-isa-matrix/1";

// Side by side: per case, exact % / max |e| / verdict under each available cap; then each cap's implementations
// and the caps this CPU cannot run.
// `backend` names the backend and `cap_variable` the environment variable its caps set.
std::string RenderIsaMatrix(const std::vector<IsaRun>& runs, std::string_view backend, std::string_view cap_variable);
// {"format": kIsaMatrixFormat, "isas": [{"cap", "effective_isa", "available", "exit_code", "results"}]}, each
// "results" the cap's whole results JSON (ToJson).
nlohmann::ordered_json IsaMatrixToJson(const std::vector<IsaRun>& runs, const Provenance& provenance);

}  // namespace fusediff::reports
