#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/model/mutants.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/driver/mutant_search.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"
#include "fusediff/tables/known_defects_file.h"
#include "isa_matrix.h"
#include "backends.h"
#include "fusediff/model/backend.h"
#include "fusediff/fused/plugin_subprocess.h"
#include "progress.h"
#include "sharding.h"

namespace fusediff::cli {

namespace {

// Set by SIGINT; the driver checks it between batches. Lock-free atomic store only: async-signal-safe.
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);
extern "C" void OnInterrupt(int) { g_stop_requested.store(true); }

// Installs the SIGINT handler for the duration of a run. SA_RESETHAND: a second Ctrl-C kills at once.
class InterruptScope {
 public:
  InterruptScope() {
    g_stop_requested.store(false);
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    installed_ = ::sigaction(SIGINT, &action, &previous_) == 0;
  }
  ~InterruptScope() {
    if (installed_) ::sigaction(SIGINT, &previous_, nullptr);
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  struct sigaction previous_ {};
  bool installed_ = false;
};

struct RunArgs {
  std::string activation, alpha, intermediate, output, requant, intermediate_rounding, output_rounding,
      zero_point_order, fused, mutant = "none", json, csv, junit, shard, shard_count, mix, threads, pattern,
      known_defects, isa, fold_precision, fold_formula, weight_quant, bn_regime, boundary_float, float_conv;
  bool exhaustive = false;
  bool no_known_defects = false;
  bool strict = false;
  bool verbose = false;
  bool all = false;
  uint64_t samples = 20000;
  uint64_t seed = 1;
  int64_t max_abs_lsb = -1;
  size_t worst = 10;
  uint32_t repeat = 0;  // 0: the path's default (driver::RunOptions::repeat)
  bool timing = false;
  bool isolate = false;       // plugin:PATH.so in a child (isolate:PATH.so)
  double plugin_timeout = 0;  // seconds per batch of a plugin child; 0: the default
};

// --isolate and --plugin-timeout: the plugin's word and the subprocess transport's deadline (docs/plugins.md).
void ApplyPluginFlags(RunArgs& a) {
  if (a.plugin_timeout > 0) {
    fused::plugin::subprocess_settings().batch_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(a.plugin_timeout * 1000));
  }
  if (!a.isolate) return;
  if (a.fused.rfind("plugin:", 0) != 0) {
    throw InputError("--isolate: runs a plugin:PATH.so[,key=value...] in a child; --fused is '" + a.fused + "'");
  }
  a.fused = "isolate:" + a.fused.substr(7);
}

// --isa: the cases of --fused's backend once per dispatch cap, each cap in its own process (a backend reads its
// cap once, at its first dispatch).
int RunIsa(const RunArgs& a, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string capped;
  for (const Backend* backend : RegisteredBackends()) {
    if (backend->dispatch().env_var.empty()) continue;
    for (const std::string& word : backend->words()) capped += (capped.empty() ? "" : " or ") + word;
  }
  CaseSpec path;
  if (!a.fused.empty()) parse_fused_path(a.fused, "--fused", path);
  const Backend* backend = a.fused.empty() ? nullptr : &BackendOf(path, "--fused");
  if (!backend || backend->dispatch().env_var.empty()) {
    throw InputError("--isa: the ISA matrix runs a backend whose dispatch can be capped: add --fused " +
                     (capped.empty() ? std::string("(none is registered)") : capped));
  }
  const std::vector<std::string> caps = ParseIsaList(a.isa, backend->dispatch());
  if (!a.csv.empty() || !a.junit.empty()) throw InputError("--isa: writes --json only (the matrix), not --csv or --junit");
  if (!a.json.empty()) CheckOutputPath(a.json, "--json");
  return RunIsaMatrix(*backend, a.fused, caps, args, a.json, out, err);
}

// The first few failed cases' worst samples, each shrunk to a minimal draw through the case's own path (a plugin's
// included), with a replay line of the shrunk draw. A few: each shrink re-runs both sides tens of times.
void PrintShrunkFailures(const RunResult& run, std::ostream& out) {
  constexpr int kMaxShrunk = 3;
  int shrunk_count = 0;
  for (const CaseResult& c : run.cases) {
    if (shrunk_count == kMaxShrunk) break;
    if (c.verdict != Verdict::fail) continue;
    const std::optional<driver::ShrunkFailure> shrunk = driver::ShrinkWorstSample(c, run.seed);
    if (!shrunk) continue;
    ++shrunk_count;
    const driver::Counterexample& x = shrunk->counterexample;
    const size_t elements = pattern_output_geometry(x.spec.pattern, x.sample.conv).elements();
    out << fmt::format("shrunk {}: {} output element{} ({}), e={:+d} (y_ref={}, y_fused={})\n  fusediff replay '{}'\n",
                       c.spec.name, elements, elements == 1 ? "" : "s", describe(x.sample.conv),
                       int64_t{x.y_fused} - x.y_reference, x.y_reference, x.y_fused, shrunk->replay);
  }
}

int DoRun(const RunArgs& a, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  driver::SuiteOptions suite;
  if (!a.activation.empty()) suite.activation = parse_activation_kind(a.activation, "--activation");
  if (!a.alpha.empty()) suite.alpha = parse_float32(a.alpha, "--alpha");
  if (!a.intermediate.empty()) suite.intermediate = a.intermediate;
  if (!a.output.empty()) suite.output = a.output;
  if (!a.requant.empty()) suite.requant = parse_requant_variant(a.requant, "--requant");
  if (!a.intermediate_rounding.empty()) {
    suite.intermediate_rounding = parse_rounding_mode(a.intermediate_rounding, "--intermediate-rounding");
  }
  if (!a.output_rounding.empty()) suite.output_rounding = parse_rounding_mode(a.output_rounding, "--output-rounding");
  if (!a.zero_point_order.empty()) {
    suite.zero_point_order = parse_zero_point_order(a.zero_point_order, "--zero-point-order");
  }
  if (!a.isa.empty()) return RunIsa(a, args, out, err);
  if (!a.fused.empty()) {
    CaseSpec path;
    parse_fused_path(a.fused, "--fused", path);
    if (path.backend == kBuiltInPath) {
      suite.table_kind = path.table_kind;
    } else {
      suite.backend = path.backend;
      suite.backend_arg = path.backend_arg;
    }
  }
  suite.mutant = parse_mutant(a.mutant, "--mutant");
  suite.samples = a.samples;
  if (!a.mix.empty()) suite.mix = parse_region_mix(a.mix, "--mix");
  suite.exhaustive = a.exhaustive;
  if (!a.pattern.empty()) suite.pattern = a.pattern;
  if (!a.fold_precision.empty()) suite.fold_precision = parse_fold_precision(a.fold_precision, "--fold-precision");
  if (!a.fold_formula.empty()) suite.fold_formula = parse_fold_formula(a.fold_formula, "--fold-formula");
  if (!a.weight_quant.empty()) suite.weight_quant = parse_weight_quant(a.weight_quant, "--weight-quant");
  if (!a.bn_regime.empty()) suite.bn_regime = parse_bn_regime(a.bn_regime, "--bn-regime");
  if (!a.boundary_float.empty()) {
    suite.boundary_float = parse_float_boundary(a.boundary_float, "--boundary-float");
    if (suite.boundary_float->format == FloatFormat::f32) {
      throw InputError("--boundary-float: f32 is what oneDNN keeps; expected f16 or bf16 (with optional rules)");
    }
  }
  if (!a.float_conv.empty()) suite.float_conv = parse_float_conv(a.float_conv, "--float-conv");
  if ((suite.fold_precision || suite.fold_formula || suite.weight_quant || suite.bn_regime) &&
      a.pattern != "conv2d+batchnorm+act") {
    throw InputError("--fold-precision, --fold-formula, --weight-quant and --bn-regime need --pattern conv2d+batchnorm+act");
  }
  if (!a.json.empty()) CheckOutputPath(a.json, "--json");
  if (!a.csv.empty()) CheckOutputPath(a.csv, "--csv");
  if (!a.junit.empty()) CheckOutputPath(a.junit, "--junit");
  const Shard shard = ResolveShard(a.shard, a.shard_count);
  if (shard.source != "none") {
    err << fmt::format("fusediff: shard {}/{} from {} ({})\n", shard.index, shard.count, shard.source, shard.origin);
  }
  const std::vector<CaseSpec> specs = driver::BuildSuite(suite);
  // The known-defect ledger: the embedded one unless told otherwise (a bad file: InputError, exit 2).
  if (a.no_known_defects && !a.known_defects.empty()) {
    throw InputError("--known-defects and --no-known-defects: expected one of them");
  }
  std::optional<KnownDefectLedger> ledger;
  if (!a.known_defects.empty()) {
    ledger = tables::ReadKnownDefects(a.known_defects);
  } else if (!a.no_known_defects) {
    ledger = BackendLedgers();
  }

  driver::RunOptions options;
  options.seed = a.seed;
  options.worst_count = a.worst;
  options.shard_index = shard.index;
  options.shard_count = shard.count;
  options.threads = ResolveThreads(a.threads, "--threads");
  if (a.max_abs_lsb >= 0) options.max_abs_lsb = a.max_abs_lsb;
  options.strict = a.strict;
  if (ledger) options.known_defects = &*ledger;
  if (a.repeat > 0) options.repeat = a.repeat;

  uint64_t expected_samples = 0;
  for (const CaseSpec& spec : specs) expected_samples += (effective_samples(spec) + shard.count - 1) / shard.count;
  ProgressBar progress(expected_samples);
  uint64_t samples_before_case = 0;
  options.progress = [&](uint64_t done_in_case) { progress.update(samples_before_case + done_in_case); };
  InterruptScope interrupt_scope;
  options.stop = &g_stop_requested;

  const auto start = std::chrono::steady_clock::now();
  RunResult run;
  run.provenance = driver::CurrentProvenance(JoinCommandLine(args));
  run.seed = a.seed;
  run.shard_index = shard.index;
  run.shard_count = shard.count;
  run.shard_source = shard.source;
  driver::ReferenceCache cache;
  run.complete = true;
  for (const CaseSpec& spec : specs) {
    if (g_stop_requested.load()) {
      run.complete = false;  // cases not started are left out of a partial result
      break;
    }
    run.cases.push_back(driver::RunCase(spec, options, cache));
    samples_before_case += compared_samples(run.cases.back());
    if (!run.cases.back().complete) run.complete = false;
  }
  const bool interrupted = g_stop_requested.load();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.update(samples_before_case);

  reports::TableOptions table{a.timing, a.verbose, a.all, {}};
  table.before_closing = fmt::format("{} samples in {:.2f} s ({:.0f} samples/s){}\n", samples_before_case, seconds,
                                     samples_before_case / std::max(seconds, 1e-9),
                                     shard.count > 1 ? fmt::format(", shard {}/{}", shard.index, shard.count) : "");
  out << reports::RenderTable(run, table);
  PrintShrunkFailures(run, out);
  if (!a.json.empty()) reports::WriteFileAtomically(a.json, reports::ResultsText(run));
  if (!a.csv.empty()) reports::WriteFileAtomically(a.csv, reports::ToCsv(run));
  if (!a.junit.empty()) reports::WriteFileAtomically(a.junit, reports::ToJUnit(run));
  if (interrupted) {
    err << "fusediff: interrupted: partial results written (\"complete\": false)\n";
    return kExitInterrupted;
  }
  return run.any_failure() ? kExitFail : kExitPass;
}

}  // namespace

Command AddRunCommand(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Run the embedded default suite (reshaped by the options) and report");
  run->add_option("--activation", a->activation, "Only this activation (snake_case, e.g. gelu_erf)");
  run->add_option("--alpha", a->alpha, "alpha of leaky_relu / elu");
  run->add_option("--intermediate", a->intermediate, "Intermediate u: TYPE[:SCALE:ZP] (int8, uint8, int16, *_narrow)");
  run->add_option("--output", a->output, "Output y: TYPE[:SCALE:ZP]");
  run->add_option("--requant", a->requant, "exact | double_rounding | single_rounding | f32_half_even | f32_zero_point_first");
  run->add_option("--intermediate-rounding", a->intermediate_rounding,
                  "half_away_from_zero | half_to_even | half_up (exact requant only)");
  run->add_option("--output-rounding", a->output_rounding, "half_away_from_zero | half_to_even | half_up");
  run->add_option("--zero-point-order", a->zero_point_order, "after_rounding | before_rounding");
  run->add_option("--fused", a->fused, "The fused path: a registered backend's word, " + KnownPathWords() +
                                           " (docs/architecture.md)");
  run->add_option("--samples", a->samples, "Samples per conv case")->check(CLI::PositiveNumber);
  run->add_option("--seed", a->seed, "Seed of the counter-based generator");
  run->add_option("--max-abs-lsb", a->max_abs_lsb, "Tolerance override: max |e| in output LSBs")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--mutant", a->mutant, "Inject a known fused-path bug: use-output-scale");
  run->add_option("--worst", a->worst, "Worst samples kept per case")->check(CLI::Range(0, 1000));
  run->add_option("--json", a->json, std::string("Write results JSON (") + reports::kResultsFormat + ")");
  run->add_option("--csv", a->csv, "Write one CSV row per case");
  run->add_option("--junit", a->junit, "Write JUnit XML (one testcase per case)");
  run->add_option("--shard", a->shard,
                  "Run deterministic partition I of N (I/N, 0-based); default: Bazel's or GoogleTest's sharding "
                  "variables, JOB_COMPLETION_INDEX (Kubernetes), SLURM_ARRAY_TASK_ID (Slurm)");
  run->add_option("--shard-count", a->shard_count,
                  "Number of shards N when the index is JOB_COMPLETION_INDEX (Kubernetes Indexed Job); else "
                  "FUSEDIFF_SHARD_COUNT");
  run->add_option("--threads", a->threads,
                  "Worker threads per case (default: every hardware thread); results are identical for any count");
  run->add_flag("--timing", a->timing, "Show per-case wall time in the table");
  run->add_option("--isa", a->isa,
                  "With --fused naming a backend whose dispatch can be capped (oneDNN's ISA): run its cases once per "
                  "cap, each in its own process with the backend's variable set, and show them side by side: all, or "
                  "a list such as AVX2,AVX512_CORE_VNNI (caps this CPU cannot run are listed as such); --json writes "
                  "the matrix (fusediff-isa-matrix/1)");
  run->add_flag("--all", a->all,
                "Print the table of every case (and the attribution tables whole) before the lines of the cases that "
                "are not a plain pass");
  run->add_flag("--verbose", a->verbose,
                "Every case's rejected samples and three worst replays per failing case and per known defect (the "
                "JSON and the report keep everything either way)");
  run->add_option("--known-defects", a->known_defects,
                  "Known-defect ledger (fusediff-known-defects/2 or /1) instead of the registered backends' "
                  "embedded ones");
  run->add_flag("--no-known-defects", a->no_known_defects,
                "No ledger: every library sample is judged (a known defect or documented behaviour fails the run)");
  run->add_flag("--strict", a->strict,
                "Documented behaviour fails its case (e.g. oneDNN's int8 arithmetic without VNNI), for users who ship "
                "on such CPUs; it is still counted and listed as such");
  run->add_option("--repeat", a->repeat,
                  "Runs of every fused draw of a library path (default 2; the built-in kernels always run once), each "
                  "over a different poison pattern: any difference fails the case as nondeterministic")
      ->check(CLI::Range(1, 64));
  run->add_option("--pattern", a->pattern,
                  "Only this fusion pattern: conv2d+act, conv2d+add+act, conv2d+act+maxpool, conv2d+act+avgpool, "
                  "fc+act, fc+fc, fc+act+fc, conv2d+batchnorm+act (fusediff patterns --list)");
  run->add_option("--fold-precision", a->fold_precision,
                  "conv2d+batchnorm+act: only this fold precision: exact | f32 | f16 | bf16");
  run->add_option("--fold-formula", a->fold_formula, "conv2d+batchnorm+act: fold formula pytorch | ort | tflite");
  run->add_option("--weight-quant", a->weight_quant,
                  "conv2d+batchnorm+act: only this folded-weight quantization: per_tensor | per_channel");
  run->add_option("--boundary-float", a->boundary_float,
                  "oneDNN cases: the graph stores the f32 intermediate as f16 | bf16[:rne|rtz][:inf|saturate]"
                  "[:keep_subnormals|flush_subnormals][:nan_payload|nan_canonical|nan_canonical_positive]");
  run->add_option("--float-conv", a->float_conv,
                  "oneDNN cases: its float convolution bf16 | f32:fpmath_bf16, with :pow2 for exact-sum draws "
                  "(power-of-two scales), into bf16 and f32 destinations, fused and unfused (docs/onednn.md)");
  run->add_option("--bn-regime", a->bn_regime,
                  "conv2d+batchnorm+act: only this BatchNorm regime: benign | tiny_variance | large_gamma | large_mean");
  run->add_option("--mix", a->mix,
                  "Regions conv draws aim at, relative weights: knee=W,saturation=W,quant_boundary=W,bulk=W "
                  "(default knee=1,saturation=1,quant_boundary=2,bulk=1; bulk=1 alone is uniform)");
  run->add_flag("--exhaustive", a->exhaustive,
                "Add a thresholds case per convention: every requantization tie +-1 for each channel multiplier");
  run->add_flag("--isolate", a->isolate,
                "Run the plugin:PATH.so of --fused in a child (fusediff plugin-host): a crash or a hang in it becomes "
                "a crashed or timeout verdict with its replay line (the path word becomes isolate:PATH.so)");
  run->add_option("--plugin-timeout", a->plugin_timeout,
                  "Seconds one batch of a plugin child may take before it is killed and its draws are timeout "
                  "(exec:, isolate:; default 60, or FUSEDIFF_PLUGIN_TIMEOUT)")
      ->check(CLI::PositiveNumber);
  return Command{run, [a](const CommandContext& ctx) {
                   ApplyPluginFlags(*a);
                   return DoRun(*a, ctx.args, ctx.out, ctx.err);
                 }};
}

}  // namespace fusediff::cli
